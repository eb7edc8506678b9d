//! The client side of the binary: what `submit`, `status`, `cancel`, `policy` and `worker`
//! share (server options, exit codes, `KEY=VALUE` parsing), and the producer commands
//! `submit`, `status` and `cancel`. Each is a thin layer over `fairway_client`: parse the
//! arguments, make one SDK call, print the reply as JSON, map the outcome to an exit code.

use clap::Args;
use fairway_client::{Client, Error, JobSpec, RetryPolicy, SubmitReply};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::future::Future;
use std::io::Read;
use std::process::ExitCode;
use std::time::Duration;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Success (`submit`: the job was accepted or deferred).
pub const EXIT_OK: u8 = 0;
/// A runtime failure: the server could not be reached, or answered with an error.
pub const EXIT_RUNTIME: u8 = 1;
/// Bad input: an invalid argument, an unreadable file, a request the server found malformed.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Rejected, retryable: admission refused for now, or the server is busy (429).
pub const EXIT_REJECTED_RETRYABLE: u8 = 3;
/// Rejected for good: admission refused (403/422), or the caller is not authorized (401).
pub const EXIT_REJECTED_FINAL: u8 = 4;
/// Not found: no such job (404).
pub const EXIT_NOT_FOUND: u8 = 5;

/// The exit codes of the client commands, shown under each one's `--help`.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  success (submit: accepted or deferred)
  1  runtime or connection failure
  2  bad input or usage
  3  rejected, retryable (429: over quota, busy; the same command may succeed later)
  4  rejected for good (403/422 admission refusal, 401 unauthorized)
  5  not found (no such job)";

/// Where the server is and how to authenticate.
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// The server's base URL; or the URLs of several replicas, separated by commas (calls
    /// follow the leader and fail over between them).
    #[arg(
        long,
        env = "FAIRWAY_SERVER",
        default_value = "http://127.0.0.1:7700",
        value_name = "URL"
    )]
    pub server: String,
    /// Bearer token: a tenant's (submit), a worker's (worker) or the admin's (policy put).
    #[arg(
        long,
        env = "FAIRWAY_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// The longest a request may take, in milliseconds (a worker's long poll adds its wait).
    #[arg(long, default_value_t = 30_000, value_name = "MS")]
    pub timeout_ms: u64,
}

impl ServerArgs {
    /// The SDK client these options describe.
    pub fn client(&self) -> Result<Client, Error> {
        let mut builder =
            Client::builder(&self.server).timeout(Duration::from_millis(self.timeout_ms));
        if let Some(token) = &self.token {
            builder = builder.token(token);
        }
        builder.build()
    }
}

/// Runs `future` to completion on a runtime of its own. One thread is enough: the client
/// commands wait on the network, and the worker's jobs run as separate processes.
pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime starts")
        .block_on(future)
}

/// The exit code for a failed call.
pub fn exit_code(error: &Error) -> u8 {
    match error {
        Error::Rejected {
            retryable: true, ..
        } => EXIT_REJECTED_RETRYABLE,
        Error::Rejected {
            retryable: false, ..
        } => EXIT_REJECTED_FINAL,
        Error::NotFound { .. } => EXIT_NOT_FOUND,
        Error::InvalidPolicy { .. } | Error::Invalid(_) => EXIT_BAD_INPUT,
        Error::Http { status, .. } => match status {
            400 | 413 | 422 => EXIT_BAD_INPUT,
            401 | 403 => EXIT_REJECTED_FINAL,
            429 => EXIT_REJECTED_RETRYABLE,
            _ => EXIT_RUNTIME,
        },
        Error::StaleEpoch { .. } | Error::Transport(_) | Error::Protocol { .. } => EXIT_RUNTIME,
    }
}

/// Reports a failed call of command `command` on stderr and returns its exit code.
pub fn fail(command: &str, error: &Error) -> ExitCode {
    eprintln!("fairway {command}: {error}");
    ExitCode::from(exit_code(error))
}

/// Prints `value` as pretty JSON on stdout.
pub fn print_json<T: Serialize>(value: &T) {
    let text = serde_json::to_string_pretty(value).expect("replies serialize");
    print_out(&format!("{text}\n"));
}

/// Writes `text` to stdout. A reader that went away (`| head`) is not an error of ours: the
/// output is dropped instead of panicking as `print!` would.
pub fn print_out(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// Parses `RESOURCE=AMOUNT` (`cpu=2`, `mem=0.5`).
pub fn parse_amount(text: &str) -> Result<(String, f64), String> {
    let (key, value) = split_pair(text, "RESOURCE=AMOUNT")?;
    let amount: f64 = value
        .parse()
        .map_err(|_| format!("`{value}` in `{text}` is not a number"))?;
    if !amount.is_finite() || amount < 0.0 {
        return Err(format!("`{text}`: the amount must be a finite number >= 0"));
    }
    Ok((key, amount))
}

/// Parses `KEY=VALUE` (`region=eu`).
pub fn parse_label(text: &str) -> Result<(String, String), String> {
    let (key, value) = split_pair(text, "KEY=VALUE")?;
    Ok((key, value.to_string()))
}

fn split_pair<'a>(text: &'a str, form: &str) -> Result<(String, &'a str), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_string(), value)),
        _ => Err(format!("`{text}` is not of the form {form}")),
    }
}

/// Parses an RFC 3339 instant (`2030-01-02T03:04:05Z`).
fn parse_instant(text: &str) -> Result<OffsetDateTime, String> {
    OffsetDateTime::parse(text, &Rfc3339).map_err(|e| {
        format!("`{text}` is not an RFC 3339 instant such as 2030-01-02T03:04:05Z ({e})")
    })
}

/// Collects repeated `KEY=VALUE` options into a map; `None` when there were none.
fn map_of<V: Clone>(pairs: &[(String, V)]) -> Option<BTreeMap<String, V>> {
    (!pairs.is_empty()).then(|| pairs.iter().cloned().collect())
}

/// Options of `fairway submit`.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The job's id; submitting the same id again creates nothing and prints the first
    /// outcome. Default: a fresh UUID v7.
    #[arg(long)]
    pub id: Option<String>,
    /// The tenant that pays (with a tenant token, the server takes it from the token).
    #[arg(long)]
    pub tenant: Option<String>,
    /// The class (priority band); the server's `default` when absent.
    #[arg(long)]
    pub class: Option<String>,
    /// Priority inside the class (higher first).
    #[arg(long, allow_negative_numbers = true)]
    pub priority: Option<i32>,
    /// Demand per member: repeat or separate with commas (`--demand cpu=2,mem=4`).
    #[arg(long, value_name = "RES=AMOUNT", value_parser = parse_amount, value_delimiter = ',')]
    pub demand: Vec<(String, f64)>,
    /// A label a worker must carry: repeat or separate with commas.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_label, value_delimiter = ',')]
    pub requires: Vec<(String, String)>,
    /// Declared run time, in milliseconds.
    #[arg(long, value_name = "MS")]
    pub estimate_ms: Option<u64>,
    /// Deadline, in milliseconds after arrival.
    #[arg(long, value_name = "MS")]
    pub deadline_ms: Option<u64>,
    /// Not to start before this RFC 3339 instant.
    #[arg(long, value_name = "RFC3339", value_parser = parse_instant)]
    pub not_before: Option<OffsetDateTime>,
    /// Attempts allowed (at most the class's).
    #[arg(long, value_name = "N")]
    pub max_attempts: Option<u32>,
    /// The job may be preempted.
    #[arg(long)]
    pub preemptible: bool,
    /// The job checkpoints: preempted work resumes rather than restarts.
    #[arg(long)]
    pub checkpointable: bool,
    /// Members started together (a gang).
    #[arg(long, value_name = "N")]
    pub gang: Option<u32>,
    /// Fewest members the gang may start with.
    #[arg(long, value_name = "N")]
    pub gang_min: Option<u32>,
    /// Tries in all: connection failures, 429s and 503s are retried with the same id, which
    /// is safe because submission is idempotent by id.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub tries: u32,
    /// The payload: JSON is sent as JSON, anything else as a JSON string; `-` reads it from
    /// standard input. No payload: none is sent.
    pub payload: Option<String>,
}

impl SubmitArgs {
    /// The job these options describe; `stdin` supplies the payload for `-`.
    fn spec(&self, stdin: impl FnOnce() -> std::io::Result<String>) -> Result<JobSpec, String> {
        let payload = match self.payload.as_deref() {
            None => None,
            Some("-") => {
                Some(payload_of(&stdin().map_err(|e| {
                    format!("reading the payload from stdin: {e}")
                })?))
            }
            Some(text) => Some(payload_of(text)),
        };
        Ok(JobSpec {
            id: self.id.clone(),
            tenant: self.tenant.clone(),
            class: self.class.clone(),
            priority: self.priority,
            demand: map_of(&self.demand),
            requires: map_of(&self.requires),
            estimate_ms: self.estimate_ms,
            deadline_ms: self.deadline_ms,
            not_before: self.not_before,
            max_attempts: self.max_attempts,
            preemptible: self.preemptible.then_some(true),
            checkpointable: self.checkpointable.then_some(true),
            gang: self.gang,
            gang_min: self.gang_min,
            payload,
        })
    }
}

/// A payload as typed: JSON when it parses as JSON, otherwise the text as a JSON string.
pub fn payload_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// `fairway submit`: prints the outcome as JSON (rejections too), exits 0, 3 or 4.
pub fn submit(args: SubmitArgs) -> ExitCode {
    let spec = match args.spec(|| {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map(|_| text)
    }) {
        Ok(spec) => spec,
        Err(message) => {
            eprintln!("fairway submit: {message}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let client = match args.server.client() {
        Ok(client) => client,
        Err(e) => return fail("submit", &e),
    };
    let retry = RetryPolicy {
        max_attempts: args.tries.max(1),
        ..RetryPolicy::default()
    };
    match block_on(client.submit_with_retry(spec, &retry)) {
        Ok(submitted) => {
            print_json(&SubmitReply::from(submitted));
            ExitCode::from(EXIT_OK)
        }
        Err(e) => {
            // A refusal is an outcome too: print it as the server sent it, for scripts.
            match &e {
                Error::Rejected {
                    retryable: true,
                    reason,
                    message,
                    retry_after,
                } => print_json(&SubmitReply::RejectedRetryable {
                    reason: reason.clone(),
                    message: message.clone(),
                    retry_after_ms: retry_after.map_or(0, |d| d.as_millis() as u64),
                }),
                Error::Rejected {
                    retryable: false,
                    reason,
                    message,
                    ..
                } => print_json(&SubmitReply::RejectedFinal {
                    reason: reason.clone(),
                    message: message.clone(),
                }),
                _ => {}
            }
            fail("submit", &e)
        }
    }
}

/// Options of `fairway status`.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct StatusArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The job's id.
    pub job: String,
}

/// `fairway status JOB`: prints the job's state as JSON; exit 5 for an unknown job.
pub fn status(args: StatusArgs) -> ExitCode {
    let client = match args.server.client() {
        Ok(client) => client,
        Err(e) => return fail("status", &e),
    };
    match block_on(client.status(&args.job)) {
        Ok(status) => {
            print_json(&status);
            ExitCode::from(EXIT_OK)
        }
        Err(e) => fail("status", &e),
    }
}

/// Options of `fairway cancel`.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct CancelArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The job's id.
    pub job: String,
}

/// `fairway cancel JOB`: prints `{job_id, state}`; a running attempt is told to stop at its
/// next heartbeat. Exit 5 for an unknown job.
pub fn cancel(args: CancelArgs) -> ExitCode {
    let client = match args.server.client() {
        Ok(client) => client,
        Err(e) => return fail("cancel", &e),
    };
    match block_on(client.cancel(&args.job)) {
        Ok(reply) => {
            print_json(&reply);
            ExitCode::from(EXIT_OK)
        }
        Err(e) => fail("cancel", &e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::json;

    #[derive(Parser)]
    struct Submit {
        #[command(flatten)]
        args: SubmitArgs,
    }

    fn spec_of(argv: &[&str], stdin: &str) -> JobSpec {
        let parsed = Submit::try_parse_from(std::iter::once("submit").chain(argv.iter().copied()))
            .expect("arguments parse");
        parsed
            .args
            .spec(|| Ok(stdin.to_string()))
            .expect("a valid spec")
    }

    #[test]
    fn every_flag_lands_in_its_field() {
        let spec = spec_of(
            &[
                "--id",
                "j1",
                "--tenant",
                "acme",
                "--class",
                "batch",
                "--priority",
                "-3",
                "--demand",
                "cpu=2",
                "--demand",
                "mem=4,gpu=0.5",
                "--requires",
                "region=eu",
                "--estimate-ms",
                "1500",
                "--deadline-ms",
                "60000",
                "--not-before",
                "2030-01-02T03:04:05Z",
                "--max-attempts",
                "3",
                "--preemptible",
                "--checkpointable",
                "--gang",
                "4",
                "--gang-min",
                "2",
                r#"{"n": 1}"#,
            ],
            "",
        );
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            json!({
                "id": "j1", "tenant": "acme", "class": "batch", "priority": -3,
                "demand": {"cpu": 2.0, "mem": 4.0, "gpu": 0.5}, "requires": {"region": "eu"},
                "estimate_ms": 1500, "deadline_ms": 60000, "not_before": "2030-01-02T03:04:05Z",
                "max_attempts": 3, "preemptible": true, "checkpointable": true,
                "gang": 4, "gang_min": 2, "payload": {"n": 1}
            })
        );
    }

    #[test]
    fn a_payload_is_json_when_it_parses_and_a_string_otherwise() {
        assert_eq!(
            spec_of(&["--tenant", "a", "[1, 2]"], "").payload,
            Some(json!([1, 2]))
        );
        assert_eq!(
            spec_of(&["--tenant", "a", "hello world"], "").payload,
            Some(json!("hello world"))
        );
        assert_eq!(
            spec_of(&["--tenant", "a", "-"], "{\"from\": \"stdin\"}\n").payload,
            Some(json!({"from": "stdin"}))
        );
        assert_eq!(
            spec_of(&["--tenant", "a", "-"], "plain text\n").payload,
            Some(json!("plain text\n"))
        );
        assert_eq!(spec_of(&["--tenant", "a"], "").payload, None);
    }

    #[test]
    fn malformed_pairs_are_refused_with_the_input_named() {
        assert!(parse_amount("cpu").unwrap_err().contains("`cpu`"));
        assert!(parse_amount("cpu=lots").unwrap_err().contains("`lots`"));
        assert!(parse_amount("cpu=-1").is_err());
        assert!(parse_amount("=1").is_err());
        assert_eq!(parse_label("a=b=c").unwrap(), ("a".into(), "b=c".into()));
        assert!(
            Submit::try_parse_from(["submit", "--not-before", "tomorrow"]).is_err(),
            "a malformed instant is a usage error"
        );
    }

    #[test]
    fn errors_map_to_the_documented_exit_codes() {
        let http = |status| Error::Http {
            status,
            code: String::new(),
            message: String::new(),
        };
        let rejected = |retryable| Error::Rejected {
            retryable,
            reason: "r".into(),
            message: String::new(),
            retry_after: None,
        };
        assert_eq!(exit_code(&rejected(true)), 3);
        assert_eq!(exit_code(&rejected(false)), 4);
        assert_eq!(
            exit_code(&Error::NotFound {
                message: String::new()
            }),
            5
        );
        assert_eq!(exit_code(&http(422)), 2);
        assert_eq!(exit_code(&http(401)), 4);
        assert_eq!(exit_code(&http(503)), 1);
        assert_eq!(exit_code(&Error::Invalid("url".into())), 2);
    }
}
