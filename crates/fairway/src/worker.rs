//! `fairway worker`: the SDK's worker loop with a command as the handler.
//!
//! Each job runs as `sh -c CMD` in a process group of its own, with the payload on standard
//! input (a JSON string raw, other JSON as its text, nothing for no payload) and the job in
//! the environment. Exit status 0 succeeds; anything else fails, retryably. A preempt, a
//! cancel, a lost lease or the worker's own shutdown sends SIGTERM to the group, then SIGKILL
//! after the grace period; the attempt is reported as stopped (not at all when the lease was
//! lost: it is no longer this worker's).

use crate::client_cmds::{
    EXIT_BAD_INPUT, EXIT_CODES, EXIT_OK, ServerArgs, block_on, fail, parse_amount, parse_label,
};
use clap::Args;
use fairway_client::{JobContext, JobOutcome, Worker, WorkerConfig};
use serde_json::Value;
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// Options of `fairway worker`.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The pool this worker serves; the server's default pool when absent.
    #[arg(long)]
    pub pool: Option<String>,
    /// The worker's total capacity: repeat or separate with commas (`--capacity cpu=4,mem=8`).
    #[arg(long, required = true, value_name = "RES=AMOUNT", value_parser = parse_amount, value_delimiter = ',')]
    pub capacity: Vec<(String, f64)>,
    /// The worker's labels, matched against jobs' requirements.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_label, value_delimiter = ',')]
    pub labels: Vec<(String, String)>,
    /// The most jobs run at once.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_jobs: u32,
    /// The command each job runs, through `sh -c`. It gets the payload on stdin and
    /// FAIRWAY_JOB_ID, FAIRWAY_ATTEMPT, FAIRWAY_EPOCH, FAIRWAY_TENANT, FAIRWAY_CLASS and
    /// FAIRWAY_PROGRESS_MS in its environment (FAIRWAY_TOKEN is removed).
    #[arg(long, value_name = "CMD")]
    pub exec: String,
    /// Time between SIGTERM and SIGKILL when a job must stop, in milliseconds.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub grace_ms: u64,
    /// The worker's unique name; default HOSTNAME-PID.
    #[arg(long)]
    pub name: Option<String>,
    /// How long one poll may wait on the server for work, in milliseconds.
    #[arg(long, default_value_t = 20_000, value_name = "MS")]
    pub wait_ms: u64,
    /// Time between heartbeats, in milliseconds; default a third of each job's lease.
    #[arg(long, value_name = "MS")]
    pub heartbeat_ms: Option<u64>,
}

/// Runs the worker until SIGTERM or Ctrl-C, then stops its jobs (SIGTERM, grace, SIGKILL),
/// reports them stopped so they run again elsewhere at once, and exits 0.
pub fn run(args: WorkerArgs) -> ExitCode {
    if args.exec.trim().is_empty() {
        eprintln!("fairway worker: --exec needs a command");
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    let client = match args.server.client() {
        Ok(client) => client,
        Err(e) => return fail("worker", &e),
    };
    // The SDK logs heartbeat and completion trouble through `tracing`; show it on stderr.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FAIRWAY_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("fairway_client=info")),
        )
        .try_init();
    let config = WorkerConfig {
        worker: args
            .name
            .clone()
            .unwrap_or_else(fairway_client::worker::default_worker_name),
        pool: args.pool.clone(),
        capacity: args.capacity.iter().cloned().collect(),
        labels: args.labels.iter().cloned().collect(),
        max_jobs: args.max_jobs,
        wait_ms: args.wait_ms,
        heartbeat_interval: args.heartbeat_ms.map(Duration::from_millis),
    };
    eprintln!(
        "fairway worker {}: serving pool {} of {} with capacity {:?}, at most {} job(s) at once",
        config.worker,
        config.pool.as_deref().unwrap_or("(default)"),
        client.base_url(),
        config.capacity,
        config.max_jobs
    );
    let exec: Arc<str> = args.exec.into();
    let grace = Duration::from_millis(args.grace_ms);
    let result = block_on(async move {
        let worker = Worker::new(client, config);
        let shutdown = worker.shutdown_handle();
        tokio::spawn(async move {
            shutdown_signal().await;
            eprintln!("fairway worker: shutting down: stopping running jobs");
            shutdown.stop();
        });
        worker
            .run(move |job| {
                let exec = exec.clone();
                async move { run_command(&exec, job, grace).await }
            })
            .await
    });
    match result {
        Ok(()) => ExitCode::from(EXIT_OK),
        Err(e) => fail("worker", &e),
    }
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C).
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// What the command reads on stdin: a JSON string raw, other JSON as its text, nothing for
/// no payload.
fn stdin_of(payload: &Value) -> Vec<u8> {
    match payload {
        Value::Null => Vec::new(),
        Value::String(text) => text.clone().into_bytes(),
        other => other.to_string().into_bytes(),
    }
}

/// Runs one job's command to its end, or stops it when the job's stop signal is raised.
async fn run_command(exec: &str, job: JobContext, grace: Duration) -> JobOutcome {
    let tag = format!(
        "fairway worker: job {} attempt {} epoch {}",
        job.job_id, job.attempt, job.epoch
    );
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(exec)
        .env("FAIRWAY_JOB_ID", &job.job_id)
        .env("FAIRWAY_ATTEMPT", job.attempt.to_string())
        .env("FAIRWAY_EPOCH", job.epoch.to_string())
        .env("FAIRWAY_TENANT", &job.tenant)
        .env("FAIRWAY_CLASS", &job.class)
        .env("FAIRWAY_PROGRESS_MS", job.progress_ms.to_string())
        // The worker's credential is not the job's.
        .env_remove("FAIRWAY_TOKEN")
        .stdin(Stdio::piped())
        // If this task is dropped, the command does not outlive it.
        .kill_on_drop(true);
    // A group of its own: the stop reaches everything the command started, and a Ctrl-C
    // at the worker's terminal reaches the worker, which decides.
    #[cfg(unix)]
    command.process_group(0);
    let started = Instant::now();
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("{tag}: cannot start `sh -c {exec}`: {e}");
            return JobOutcome::Failed { retryable: true };
        }
    };
    let pid = child.id();
    // The payload goes in from a task of its own: a command that does not read its input
    // must not block the worker (the write then fails with a broken pipe, which is fine).
    let input = stdin_of(&job.payload);
    let writer = child.stdin.take().map(|mut stdin| {
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        })
    });
    eprintln!("{tag}: started (pid {})", pid.unwrap_or(0));
    let outcome = tokio::select! {
        status = child.wait() => match status {
            Ok(status) if status.success() => {
                eprintln!("{tag}: succeeded in {} ms", started.elapsed().as_millis());
                JobOutcome::Succeeded
            }
            Ok(status) => {
                eprintln!("{tag}: failed ({status}) in {} ms", started.elapsed().as_millis());
                JobOutcome::Failed { retryable: true }
            }
            Err(e) => {
                eprintln!("{tag}: waiting for the command failed: {e}");
                JobOutcome::Failed { retryable: true }
            }
        },
        reason = job.stop.stopped() => {
            eprintln!("{tag}: stopping ({reason:?}): SIGTERM, SIGKILL after {} ms", grace.as_millis());
            signal_group(pid, Signal::Term);
            let status = match tokio::time::timeout(grace, child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    signal_group(pid, Signal::Kill);
                    child.wait().await
                }
            };
            eprintln!("{tag}: stopped ({})", status.map_or_else(|e| e.to_string(), |s| s.to_string()));
            JobOutcome::Stopped { progress_ms: None }
        }
    };
    if let Some(writer) = writer {
        writer.abort();
    }
    outcome
}

enum Signal {
    Term,
    Kill,
}

/// Sends `signal` to the process group led by `pid` (the command's `sh`).
fn signal_group(pid: Option<u32>, signal: Signal) {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else {
        return;
    };
    #[cfg(unix)]
    {
        let signal = match signal {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        };
        // SAFETY: kill(2) takes plain integers and touches no memory of ours; a group that
        // is already gone yields ESRCH, which is the outcome we wanted.
        unsafe {
            libc::kill(-pid, signal);
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (pid, signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_go_in_raw_and_other_json_as_its_text() {
        assert_eq!(
            stdin_of(&json!("line one\nline two")),
            b"line one\nline two"
        );
        assert_eq!(stdin_of(&json!({"n": 1})), br#"{"n":1}"#);
        assert_eq!(stdin_of(&json!(42)), b"42");
        assert_eq!(stdin_of(&Value::Null), b"");
    }
}
