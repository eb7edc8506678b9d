//! The client commands and the SDK end to end against the real server: `fairway serve` runs
//! as a child process on a loopback port it picks (`--listen 127.0.0.1:0`) with its data in a
//! fresh directory, and the tests drive it with `fairway submit|status|cancel|policy|worker`
//! as a user would (and with the SDK's worker loop), checking JSON out, files the jobs wrote,
//! and exit codes. No mocks: what passes here is what a newcomer sees after the README's
//! quick start.

use fairway_client::{Client, JobOutcome, JobSpec, JobState, StopReason, Worker, WorkerConfig};
use serde_json::{Value, json};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Lease length of the test servers: short, so heartbeats (a third of it) come quickly and a
/// cancel reaches a running job within a second.
const LEASE_MS: u64 = 1500;

/// The policy the test servers run: the built-in one, with the lease above and retries
/// after 50 ms instead of 1 s.
const TEST_POLICY: &str = r#"[policy]
name = "fair"
lease = "1500ms"

[[pool]]
name = "default"

[[class]]
name = "default"
backoff = "50ms"
backoff_max = "100ms"
"#;

/// How long any wait for a state may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

fn fairway() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fairway"));
    // The tests say where the server is; the environment of whoever runs them must not.
    command
        .env_remove("FAIRWAY_SERVER")
        .env_remove("FAIRWAY_TOKEN");
    command
}

/// A fresh directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("fairway-cli-client-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the test directory");
    dir
}

/// A loopback port nobody listens on right now (for the absent-server case).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a free port")
        .port()
}

/// `fairway serve` on a port of its own, killed when dropped.
struct Server {
    child: Child,
    url: String,
    dir: PathBuf,
}

impl Server {
    fn start(name: &str) -> Server {
        Server::start_with(name, &[])
    }

    /// `start`, with more `fairway serve` arguments.
    fn start_with(name: &str, extra: &[&str]) -> Server {
        let dir = temp_dir(name);
        let policy = dir.join("policy.toml");
        std::fs::write(&policy, TEST_POLICY).expect("write the policy");
        let log = std::fs::File::create(dir.join("server.log")).expect("create the server log");
        // Port 0: the server binds whatever port is free and says which, so parallel tests
        // cannot race for one.
        let child = fairway()
            .args(["serve", "--data"])
            .arg(dir.join("data"))
            .args(["--listen", "127.0.0.1:0", "--policy"])
            .arg(&policy)
            .args(["--lease-ms", &LEASE_MS.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log handle"))
            .stderr(log)
            .spawn()
            .expect("start fairway serve");
        let mut server = Server {
            child,
            url: String::new(),
            dir,
        };
        server.wait_ready();
        server
    }

    /// Waits for the server to say where it listens, then for `/readyz`.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + PATIENCE;
        while self.url.is_empty() {
            let log = self.log();
            if let Some(rest) = log.split("listening on ").nth(1) {
                let url = rest.split_whitespace().next().unwrap_or_default();
                assert!(
                    url.starts_with("http://"),
                    "a URL after `listening on`:\n{log}"
                );
                self.url = url.to_string();
                break;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("fairway serve exited ({status}) before it listened:\n{log}");
            }
            assert!(
                Instant::now() < deadline,
                "fairway serve never listened:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let client = self.client();
        loop {
            if runtime().block_on(client.ready()).is_ok() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "fairway serve exited ({status}) before it was ready:\n{}",
                    self.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "fairway serve not ready in time:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    fn client(&self) -> Client {
        Client::new(&self.url).expect("a client of the test server")
    }

    /// `fairway ARGS --server URL`.
    fn run(&self, args: &[&str]) -> Output {
        fairway()
            .args(args)
            .args(["--server", &self.url])
            .output()
            .expect("run fairway")
    }

    /// A job's state, through `fairway status`.
    fn status(&self, job: &str) -> Value {
        json_of(&self.run(&["status", job]))
    }

    /// Polls `fairway status JOB` until its state is `state`; returns the last status.
    fn wait_for_state(&self, job: &str, state: &str) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let status = self.status(job);
            if status["state"] == state {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "job {job} never reached {state}; last status {status}\nserver log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `fairway worker` in the background, its stderr kept in the test directory.
    fn worker(&self, name: &str, exec: &str, extra: &[&str]) -> WorkerProcess {
        let log = self.dir.join(format!("{name}.log"));
        let child = fairway()
            .args(["worker", "--server", &self.url, "--pool", "default"])
            .args(["--capacity", "cpu=4", "--name", name, "--wait-ms", "500"])
            .args(["--exec", exec])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("create the worker log"))
            .spawn()
            .expect("start fairway worker");
        WorkerProcess { child, log }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A failed test keeps its directory (server and worker logs) for a look.
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A `fairway worker` child, killed when dropped unless stopped first.
struct WorkerProcess {
    child: Child,
    log: PathBuf,
}

impl WorkerProcess {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends SIGTERM and returns the exit code once the worker has shut down.
    fn terminate(mut self) -> i32 {
        let pid = i32::try_from(self.child.id()).expect("a pid fits an i32");
        // SAFETY: kill(2) on our own child's pid; it touches no memory.
        assert_eq!(
            unsafe { libc::kill(pid, libc::SIGTERM) },
            0,
            "signal the worker"
        );
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the worker") {
                return status.code().unwrap_or(-1);
            }
            assert!(
                Instant::now() < deadline,
                "the worker did not stop on SIGTERM:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A worker named `name` in the default pool running up to `slots` jobs over as much `cpu`,
/// its polls waiting up to `wait_ms`.
fn worker_config(name: &str, slots: u32, wait_ms: u64) -> WorkerConfig {
    WorkerConfig {
        worker: name.into(),
        pool: Some("default".into()),
        capacity: [("cpu".to_string(), f64::from(slots))].into(),
        max_jobs: slots,
        wait_ms,
        ..WorkerConfig::default()
    }
}

/// Waits for a worker's loop, told to stop, to end cleanly.
async fn ends_cleanly(running: tokio::task::JoinHandle<Result<(), fairway_client::Error>>) {
    tokio::time::timeout(PATIENCE, running)
        .await
        .expect("the worker stops")
        .unwrap()
        .expect("the worker loop ends cleanly");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "fairway failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document on stdout")
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited, not killed")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Waits until `path` exists.
fn wait_for_file(path: &Path, what: &str) {
    let deadline = Instant::now() + PATIENCE;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{what}: {} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The producer's path: submit (idempotent by id), status, then a worker runs the command
/// with the payload on stdin and the job in its environment, and the jobs succeed.
#[test]
fn submitted_jobs_run_through_the_worker_command_with_their_payloads() {
    let server = Server::start("deliver");
    let out_dir = server.dir.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();

    let first = json_of(&server.run(&[
        "submit",
        "--id",
        "job-json",
        "--tenant",
        "acme",
        "--demand",
        "cpu=1",
        r#"{"n": 1}"#,
    ]));
    assert_eq!(
        first,
        json!({"outcome": "accepted", "job_id": "job-json", "duplicate": false})
    );
    let again = json_of(&server.run(&[
        "submit",
        "--id",
        "job-json",
        "--tenant",
        "acme",
        "--demand",
        "cpu=1",
        r#"{"n": 1}"#,
    ]));
    assert_eq!(
        again,
        json!({"outcome": "accepted", "job_id": "job-json", "duplicate": true}),
        "the same id again returns the first outcome and creates nothing"
    );
    // A payload that is not JSON travels as a JSON string and reaches the command raw; one
    // from stdin (`-`) arrives the same way.
    json_of(&server.run(&[
        "submit",
        "--id",
        "job-text",
        "--tenant",
        "acme",
        "plain text",
    ]));
    let mut piped = fairway()
        .args([
            "submit",
            "--id",
            "job-stdin",
            "--tenant",
            "acme",
            "--server",
            &server.url,
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut piped.stdin.take().unwrap(), b"[1, 2, 3]").unwrap();
    let piped = piped.wait_with_output().unwrap();
    assert_eq!(json_of(&piped)["job_id"], "job-stdin");

    let status = server.status("job-json");
    assert_eq!(status["state"], "queued");
    assert_eq!(status["tenant"], "acme");
    assert_eq!(status["class"], "default");

    let exec = format!(
        r#"cat > {out}/"$FAIRWAY_JOB_ID".payload; echo "$FAIRWAY_ATTEMPT $FAIRWAY_EPOCH $FAIRWAY_TENANT $FAIRWAY_CLASS" > {out}/"$FAIRWAY_JOB_ID".env"#,
        out = out_dir.display()
    );
    let worker = server.worker("w-deliver", &exec, &["--max-jobs", "2"]);
    let mut epochs = Vec::new();
    for job in ["job-json", "job-text", "job-stdin"] {
        let done = server.wait_for_state(job, "succeeded");
        assert_eq!(done["attempt"], 1, "{job}: one attempt");
        epochs.push(done["epoch"].as_u64().expect("an epoch"));
    }
    let read = |name: &str| std::fs::read_to_string(out_dir.join(name)).unwrap();
    assert_eq!(
        read("job-json.payload"),
        r#"{"n":1}"#,
        "other JSON arrives as its text"
    );
    assert_eq!(
        read("job-text.payload"),
        "plain text",
        "a JSON string arrives raw"
    );
    assert_eq!(read("job-stdin.payload"), "[1,2,3]");
    assert_eq!(
        read("job-json.env"),
        format!("1 {} acme default\n", epochs[0])
    );
    assert_eq!(worker.terminate(), 0, "SIGTERM stops the worker cleanly");
}

/// A command that exits non-zero fails its attempt retryably; after `--max-attempts` the
/// job has failed for good.
#[test]
fn a_failing_command_fails_the_job_after_its_attempts() {
    let server = Server::start("failing");
    json_of(&server.run(&[
        "submit",
        "--id",
        "doomed",
        "--tenant",
        "acme",
        "--max-attempts",
        "2",
        "x",
    ]));
    let worker = server.worker("w-failing", "exit 3", &[]);
    let failed = server.wait_for_state("doomed", "failed");
    assert_eq!(failed["attempt"], 2, "both attempts ran: {failed}");
    let log = worker.log();
    assert!(
        log.contains("failed (exit status: 3)"),
        "the worker says why:\n{log}"
    );
    assert_eq!(worker.terminate(), 0);
}

/// `fairway cancel` on a queued job ends it at once; on a running one it reaches the command
/// as SIGTERM through the next heartbeat. Unknown jobs exit 5.
#[test]
fn cancel_ends_queued_jobs_and_stops_running_commands() {
    let server = Server::start("cancel");
    let out = server.run(&["status", "no-such-job"]);
    assert_eq!(code(&out), 5, "status of an unknown job: {}", stderr(&out));
    assert_eq!(code(&server.run(&["cancel", "no-such-job"])), 5);

    json_of(&server.run(&["submit", "--id", "queued", "--tenant", "acme"]));
    let canceled = json_of(&server.run(&["cancel", "queued"]));
    assert_eq!(canceled, json!({"job_id": "queued", "state": "canceled"}));
    assert_eq!(server.status("queued")["state"], "canceled");

    let started = server.dir.join("started");
    let termed = server.dir.join("termed");
    // `sleep & wait` lets the shell run its TERM trap at once.
    let exec = format!(
        "trap 'echo term > {termed}; exit 143' TERM; echo go > {started}; sleep 60 & wait",
        termed = termed.display(),
        started = started.display()
    );
    json_of(&server.run(&["submit", "--id", "long", "--tenant", "acme"]));
    let worker = server.worker("w-cancel", &exec, &["--grace-ms", "5000"]);
    wait_for_file(&started, "the long job's command started");
    assert_eq!(server.status("long")["state"], "running");
    let out = server.run(&["cancel", "long"]);
    assert_eq!(code(&out), 0, "cancel a running job: {}", stderr(&out));
    server.wait_for_state("long", "canceled");
    wait_for_file(&termed, "the command got SIGTERM");
    assert!(
        worker.log().contains("stopping (Cancel)"),
        "{}",
        worker.log()
    );
    assert_eq!(worker.terminate(), 0);
}

/// `fairway policy check` needs no server: 0 for a valid file, 1 with every error located
/// as FILE:LINE: key `k`: message, 2 for a file that cannot be read.
#[test]
fn policy_check_accepts_a_good_file_and_locates_the_errors_of_a_bad_one() {
    let dir = temp_dir("policy-check");
    let good = dir.join("good.toml");
    std::fs::write(&good, TEST_POLICY).unwrap();
    let out = fairway()
        .args(["policy", "check"])
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("valid"));

    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "# two mistakes\n[policy]\nname = \"fair\"\n\n[[pool]]\nname = \"default\"\n\n\
         [[tenant]]\nname = \"acme\"\nweight = -1\n\n[[class]]\nname = \"default\"\nreserve = 2\n",
    )
    .unwrap();
    let out = fairway()
        .args(["policy", "check"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(code(&out), 1);
    let errors = stderr(&out);
    let file = bad.display();
    assert!(
        errors.contains(&format!("{file}:10: key `weight`: ")),
        "{errors}"
    );
    assert!(
        errors.contains(&format!("{file}:14: key `reserve`: ")),
        "{errors}"
    );

    let unknown_key = dir.join("typo.toml");
    std::fs::write(
        &unknown_key,
        "[policy]\nname = \"fair\"\nbakfill = \"easy\"\n",
    )
    .unwrap();
    let out = fairway()
        .args(["policy", "check"])
        .arg(&unknown_key)
        .output()
        .unwrap();
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains(&format!("{}:3: key `bakfill`: ", unknown_key.display())),
        "{}",
        stderr(&out)
    );

    let out = fairway()
        .args(["policy", "check"])
        .arg(dir.join("missing.toml"))
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The documented exit codes of `submit` and `policy put`, and the policy round trip.
#[test]
fn exit_codes_for_refusals_bad_input_and_an_absent_server() {
    let server = Server::start("codes");
    let out = server.run(&["submit", "--tenant", "acme", "--class", "no-such-class"]);
    assert_eq!(
        code(&out),
        4,
        "an unknown class is refused for good: {}",
        stderr(&out)
    );
    let refusal: Value = serde_json::from_slice(&out.stdout).expect("the refusal as JSON");
    assert_eq!(refusal["outcome"], "rejected_final");

    let out = server.run(&["submit", "--tenant", "acme", "--demand", "cpu=lots"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("lots"), "the message names the input");

    let nobody = format!("http://127.0.0.1:{}", free_port());
    let out = fairway()
        .args(["submit", "--tenant", "acme", "--server", &nobody])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "no server: a runtime failure");

    let got = server.run(&["policy", "get"]);
    assert_eq!(code(&got), 0, "{}", stderr(&got));
    assert!(String::from_utf8_lossy(&got.stdout).contains("[[pool]]"));
    let bad = server.dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[policy]\nname = \"fair\"\n\n[[tenant]]\nname = \"a\"\nweight = 0\n",
    )
    .unwrap();
    let out = server.run(&["policy", "put", bad.to_str().unwrap()]);
    assert_eq!(
        code(&out),
        2,
        "a refused policy is bad input: {}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains(&format!("{}:6: key `weight`", bad.display())),
        "{}",
        stderr(&out)
    );
    let good = server.dir.join("good.toml");
    std::fs::write(
        &good,
        TEST_POLICY.replace("backoff = \"50ms\"", "backoff = \"60ms\""),
    )
    .unwrap();
    let before = json_of(&server.run(&["policy", "get", "--json"]))["version"]
        .as_u64()
        .unwrap();
    let put = json_of(&server.run(&["policy", "put", good.to_str().unwrap()]));
    assert!(
        put["version"].as_u64().unwrap() > before,
        "a new version: {put}"
    );
}

/// The SDK's worker loop hands the handler its job (id, payload, tenant, class, demand),
/// turns a cancel into the handler's stop signal, and reports the attempt as stopped: the job
/// ends canceled.
#[test]
fn the_sdk_worker_loop_surfaces_a_cancel_as_the_stop_signal() {
    let server = Server::start("sdk-cancel");
    let client = server.client();
    runtime().block_on(async move {
        let submitted = client
            .submit(JobSpec::new("acme").payload(json!({"work": "forever"})))
            .await
            .expect("submit");
        let job_id = submitted.job_id().to_string();
        let (started_tx, mut started_rx) = tokio::sync::mpsc::channel(1);
        let (stopped_tx, mut stopped_rx) = tokio::sync::mpsc::channel(1);
        let worker = Worker::new(client.clone(), worker_config("sdk-worker", 2, 500));
        let shutdown = worker.shutdown_handle();
        let running = tokio::spawn(worker.run(move |job| {
            let started_tx = started_tx.clone();
            let stopped_tx = stopped_tx.clone();
            async move {
                let _ = started_tx
                    .send((
                        job.job_id.clone(),
                        job.payload.clone(),
                        job.tenant.clone(),
                        job.class.clone(),
                        job.demand.clone(),
                    ))
                    .await;
                let reason = job.stop.stopped().await;
                let _ = stopped_tx.send(reason).await;
                JobOutcome::Stopped { progress_ms: None }
            }
        }));

        let (leased, payload, tenant, class, demand) =
            tokio::time::timeout(PATIENCE, started_rx.recv())
                .await
                .expect("the job starts")
                .unwrap();
        assert_eq!(leased, job_id);
        // The lease's fields reach the handler (moved from the lease, not copied).
        assert_eq!(payload, json!({"work": "forever"}));
        assert_eq!((tenant.as_str(), class.as_str()), ("acme", "default"));
        assert!(demand.contains_key("cpu"), "{demand:?}");
        assert_eq!(
            client.status(&job_id).await.unwrap().state,
            JobState::Running
        );

        client.cancel(&job_id).await.expect("cancel");
        let reason = tokio::time::timeout(PATIENCE, stopped_rx.recv())
            .await
            .expect("the handler sees the stop within the patience")
            .unwrap();
        assert_eq!(reason, StopReason::Cancel);
        let deadline = Instant::now() + PATIENCE;
        loop {
            let state = client.status(&job_id).await.unwrap().state;
            if state == JobState::Canceled {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the job never ended canceled: {state:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        shutdown.drain();
        ends_cleanly(running).await;
    });
}

/// A batch submission returns one result per job, in order, each as a single submission
/// would have returned it; ids are generated for jobs without one. The server leaves the new
/// jobs' results out of its reply (`omit=accepted`) and the SDK puts them back in their places
/// between the ones it lists (a refusal, a duplicate).
#[test]
fn the_sdk_batch_submit_answers_each_job_in_order() {
    let server = Server::start("sdk-batch");
    let client = server.client();
    runtime().block_on(async move {
        let results = client
            .submit_batch(vec![
                JobSpec::new("acme").id("b1"),
                JobSpec::new("acme").class("no-such-class"),
                JobSpec::new("acme"),
                JobSpec::new("acme").id("b1"),
                JobSpec::new("acme").id("b4"),
            ])
            .await
            .expect("the batch request");
        assert_eq!(results.len(), 5);
        assert_eq!(results[0].as_ref().unwrap().job_id(), "b1");
        assert!(!results[0].as_ref().unwrap().duplicate());
        assert_eq!(results[3].as_ref().unwrap().job_id(), "b1");
        assert!(results[3].as_ref().unwrap().duplicate());
        assert_eq!(results[4].as_ref().unwrap().job_id(), "b4");
        assert!(!results[4].as_ref().unwrap().duplicate());
        assert!(matches!(
            &results[1],
            Err(fairway_client::Error::Rejected {
                retryable: false,
                ..
            })
        ));
        let generated = results[2].as_ref().unwrap().job_id().to_string();
        assert_eq!(
            client.status(&generated).await.unwrap().state,
            JobState::Queued
        );
        // Resubmitting b1 creates nothing.
        let again = client.submit(JobSpec::new("acme").id("b1")).await.unwrap();
        assert!(again.duplicate());
    });
}

/// `complete_and_lease` reports a batch and gets the next one in one call: the capacity the
/// completions free is leased at once; with no work it answers at once (the request's wait is
/// not sent) with none; a lease request the server refuses after the completions comes back as
/// the inner error, the completions' results standing.
#[test]
fn the_sdk_completes_a_batch_and_leases_the_next_in_one_call() {
    use fairway_client::{AttemptOutcome, CompleteRequest, Completion, Error, Lease, LeaseRequest};
    let server = Server::start("sdk-complete-next");
    let client = server.client();
    runtime().block_on(async move {
        for i in 0..3 {
            client
                .submit(JobSpec::new("acme").id(format!("c{i}")))
                .await
                .expect("submit");
        }
        let request = LeaseRequest {
            worker: "w1".into(),
            pool: None,
            capacity: [("cpu".to_string(), 2.0)].into(),
            labels: Default::default(),
            max_jobs: Some(2),
            wait_ms: Some(20_000),
        };
        let done = |leases: &[Lease]| -> Vec<Completion> {
            leases
                .iter()
                .map(|l| Completion {
                    job_id: l.job_id.clone(),
                    request: CompleteRequest {
                        epoch: l.epoch,
                        outcome: AttemptOutcome::Succeeded,
                        retryable: None,
                        usage_ms: None,
                        progress_ms: None,
                    },
                })
                .collect()
        };
        let first = client.lease(&request).await.expect("lease");
        assert_eq!(first.len(), 2);
        let (results, next) = client
            .complete_and_lease(done(&first), Some(&request))
            .await
            .expect("the call");
        assert!(results.iter().all(|r| r.state == Some(JobState::Succeeded)));
        let next = next.expect("leases");
        assert_eq!(next.len(), 1, "the one job left");
        assert!(!first.iter().any(|l| l.job_id == next[0].job_id));

        let started = Instant::now();
        let (results, none) = client
            .complete_and_lease(done(&next), Some(&request))
            .await
            .expect("the call");
        assert_eq!(results[0].state, Some(JobState::Succeeded));
        assert_eq!(none.expect("an answer"), Vec::<Lease>::new());
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no long poll inside a completion call"
        );

        client
            .submit(JobSpec::new("acme").id("c3"))
            .await
            .expect("submit");
        let held = client.lease(&request).await.expect("lease");
        let refused = LeaseRequest {
            capacity: Default::default(),
            ..request.clone()
        };
        let (results, leases) = client
            .complete_and_lease(done(&held), Some(&refused))
            .await
            .expect("the call");
        assert_eq!(results[0].state, Some(JobState::Succeeded));
        match leases {
            Err(Error::Http { status, code, .. }) => {
                assert_eq!((status, code.as_str()), (422, "invalid"))
            }
            other => panic!("expected the lease request's refusal, got {other:?}"),
        }
        assert_eq!(
            client.status("c3").await.unwrap().state,
            JobState::Succeeded
        );
    });
}

/// A loopback proxy in front of `target` (`host:port`) that counts, in what clients send, the
/// long polls (`POST /v1/leases`) and the completion calls that carry a lease request
/// (`"next"`). Returns its base URL and the two counters.
async fn counting_proxy(target: String) -> (String, Arc<AtomicU32>, Arc<AtomicU32>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let polls = Arc::new(AtomicU32::new(0));
    let nexts = Arc::new(AtomicU32::new(0));
    let (p, n) = (polls.clone(), nexts.clone());
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = tokio::net::TcpStream::connect(&target).await.unwrap();
            let (mut client_rx, mut client_tx) = client.into_split();
            let (mut server_rx, mut server_tx) = server.into_split();
            let (p, n) = (p.clone(), n.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(read) = client_rx.read(&mut buf).await {
                    if read == 0 || server_tx.write_all(&buf[..read]).await.is_err() {
                        break;
                    }
                    // Requests are small, and each is written at once: counting per read is
                    // enough for a test.
                    let text = String::from_utf8_lossy(&buf[..read]);
                    let count = |what: &str| text.matches(what).count() as u32;
                    p.fetch_add(count("POST /v1/leases HTTP/1.1"), Ordering::SeqCst);
                    n.fetch_add(count("\"next\":"), Ordering::SeqCst);
                }
            });
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut server_rx, &mut client_tx).await;
            });
        }
    });
    (url, polls, nexts)
}

/// A busy SDK worker gets its next jobs with its completions: with every slot taken it makes
/// no long poll, and the completion calls carry the lease requests. 40 jobs of 20 ms through
/// 4 slots took at least 10 long polls before (one per freed slot or more); now the first
/// poll, the last ones (for an empty queue), and completion calls. Its capacity would take 16
/// jobs: no more than its 4 slots run at once all the same.
#[test]
fn a_busy_sdk_worker_leases_with_its_completions() {
    let server = Server::start("sdk-next");
    runtime().block_on(async move {
        let target = server.url.trim_start_matches("http://").to_string();
        let (url, polls, nexts) = counting_proxy(target).await;
        let client = Client::new(&url).expect("a client of the proxy");
        let jobs: Vec<JobSpec> = (0..40)
            .map(|i| JobSpec::new("acme").id(format!("k{i}")))
            .collect();
        for r in client.submit_batch(jobs).await.expect("submit") {
            r.expect("accepted");
        }
        let config = WorkerConfig {
            capacity: [("cpu".to_string(), 16.0)].into(),
            ..worker_config("busy", 4, 20_000)
        };
        let worker = Worker::new(client.clone(), config);
        let shutdown = worker.shutdown_handle();
        let ran = Arc::new(AtomicU32::new(0));
        // Handlers running now, and the most at once.
        let (now, most) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let (counted, at_once, peak) = (ran.clone(), now.clone(), most.clone());
        let running = tokio::spawn(worker.run(move |_| {
            let (counted, at_once, peak) = (counted.clone(), at_once.clone(), peak.clone());
            async move {
                peak.fetch_max(at_once.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                at_once.fetch_sub(1, Ordering::SeqCst);
                counted.fetch_add(1, Ordering::SeqCst);
                JobOutcome::Succeeded
            }
        }));
        let deadline = Instant::now() + PATIENCE;
        let mut done = 0;
        while done < 40 {
            assert!(Instant::now() < deadline, "{done} of 40 succeeded in time");
            tokio::time::sleep(Duration::from_millis(50)).await;
            done = 0;
            for i in 0..40 {
                let state = client.status(&format!("k{i}")).await.unwrap().state;
                done += (state == JobState::Succeeded) as usize;
            }
        }
        shutdown.drain();
        ends_cleanly(running).await;
        assert_eq!(ran.load(Ordering::SeqCst), 40, "each job ran once");
        assert!(
            most.load(Ordering::SeqCst) <= 4,
            "{} at once",
            most.load(Ordering::SeqCst)
        );
        let (polls, nexts) = (polls.load(Ordering::SeqCst), nexts.load(Ordering::SeqCst));
        assert!(
            polls < 10,
            "{polls} long polls, {nexts} completion calls with a lease request"
        );
        assert!(
            nexts >= 9,
            "{polls} long polls, {nexts} completion calls with a lease request"
        );
    });
}

/// The server's count of writer commands so far (`fairway_group_commit_commands_sum`): one
/// per submission request, whether it holds one job or a batch.
async fn writer_commands(url: &str) -> f64 {
    let text = reqwest::get(format!("{url}/metrics"))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("the metrics text");
    text.lines()
        .find_map(|l| l.strip_prefix("fairway_group_commit_commands_sum "))
        .and_then(|v| v.trim().parse().ok())
        .expect("fairway_group_commit_commands_sum in /metrics")
}

/// Concurrent `submit` calls share batch requests, and each caller still gets its own job's
/// answer as a submission alone would have had it: accepted, refused (an unknown class), or a
/// duplicate of an id submitted before. With coalescing off, every call is a request.
#[test]
fn concurrent_sdk_submits_share_requests_and_each_gets_its_own_answer() {
    let server = Server::start("sdk-coalesce");
    let url = server.url.clone();
    runtime().block_on(async move {
        let plain = Client::builder(&url).coalesce(0).build().unwrap();
        plain
            .submit(JobSpec::new("acme").id("seen-before"))
            .await
            .unwrap();
        let before = writer_commands(&url).await;
        let client = Client::builder(&url).coalesce(2).build().unwrap();
        let n = 300;
        let calls = (0..n).map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                let spec = match i % 3 {
                    0 => JobSpec::new("acme").id(format!("c{i}")),
                    1 => JobSpec::new("acme")
                        .id(format!("c{i}"))
                        .class("no-such-class"),
                    _ if i == 2 => JobSpec::new("acme").id("seen-before"),
                    _ => JobSpec::new("acme"),
                };
                (i, client.submit(spec).await)
            })
        });
        let results = futures_of(calls).await;
        for (i, result) in results {
            match i % 3 {
                0 => {
                    let submitted = result.unwrap_or_else(|e| panic!("job c{i}: {e}"));
                    assert_eq!(submitted.job_id(), format!("c{i}"));
                    assert!(!submitted.duplicate());
                }
                1 => assert!(
                    matches!(
                        &result,
                        Err(fairway_client::Error::Rejected { retryable: false, reason, .. })
                            if reason == "unknown_class"
                    ),
                    "job c{i}: {result:?}"
                ),
                _ if i == 2 => assert!(result.unwrap().duplicate(), "the id was taken before"),
                _ => {
                    let id = result.unwrap().job_id().to_string();
                    assert_eq!(client.status(&id).await.unwrap().state, JobState::Queued);
                }
            }
        }
        let coalesced = writer_commands(&url).await - before;
        assert!(
            coalesced < n as f64 / 2.0,
            "{n} concurrent submissions took {coalesced} requests"
        );

        let before = writer_commands(&url).await;
        let calls = (0..50).map(|i| {
            let plain = plain.clone();
            tokio::spawn(async move { (i, plain.submit(JobSpec::new("acme")).await) })
        });
        for (_, result) in futures_of(calls).await {
            result.unwrap();
        }
        assert_eq!(
            writer_commands(&url).await - before,
            50.0,
            "one request per call"
        );
    });
}

/// A server whose request body limit is below what the SDK puts in one coalesced request
/// answers it `413`; each job is then sent alone, and each caller gets its own job's answer,
/// as without coalescing.
#[test]
fn coalesced_submits_over_a_servers_body_limit_are_sent_alone() {
    let server = Server::start_with(
        "sdk-coalesce-413",
        &["--max-payload-bytes", "2000", "--max-body-bytes", "70000"],
    );
    let url = server.url.clone();
    runtime().block_on(async move {
        let client = Client::builder(&url).coalesce(1).build().unwrap();
        let calls = (0..200).map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                let spec = JobSpec::new("acme")
                    .id(format!("big{i}"))
                    .payload(json!({"pad": "x".repeat(1500)}));
                client.submit(spec).await
            })
        });
        for (i, result) in futures_of(calls).await.into_iter().enumerate() {
            let submitted = result.unwrap_or_else(|e| panic!("job big{i}: {e}"));
            assert_eq!(submitted.job_id(), format!("big{i}"));
        }
    });
}

/// Awaits spawned tasks in order.
async fn futures_of<T: Send + 'static>(
    tasks: impl Iterator<Item = tokio::task::JoinHandle<T>>,
) -> Vec<T> {
    let mut out = Vec::new();
    for task in tasks.collect::<Vec<_>>() {
        out.push(task.await.expect("the task"));
    }
    out
}

/// An attempt whose lease ran out is no longer the worker's: when its heartbeat is refused
/// (stale epoch), the handler sees `Lost`, and nothing it reports changes the job.
#[test]
fn the_sdk_worker_loop_stops_an_attempt_whose_lease_was_lost() {
    let server = Server::start("sdk-lost");
    let client = server.client();
    runtime().block_on(async move {
        let job_id = client
            .submit(JobSpec::new("acme").id("lost"))
            .await
            .expect("submit")
            .job_id()
            .to_string();
        let (stopped_tx, mut stopped_rx) = tokio::sync::mpsc::channel(1);
        let attempts = Arc::new(AtomicU32::new(0));
        let config = WorkerConfig {
            // Heartbeats twice as far apart as the lease is long: the lease expires first.
            heartbeat_interval: Some(Duration::from_millis(2 * LEASE_MS)),
            ..worker_config("slow-heart", 1, 500)
        };
        let worker = Worker::new(client.clone(), config);
        let shutdown = worker.shutdown_handle();
        // The handler holds its slot until the test has shut the worker down, so that the
        // worker cannot lease the job's next attempt.
        let release = Arc::new(tokio::sync::Notify::new());
        let seen = attempts.clone();
        let hold = release.clone();
        let running = tokio::spawn(worker.run(move |job| {
            let stopped_tx = stopped_tx.clone();
            let hold = hold.clone();
            seen.fetch_add(1, Ordering::SeqCst);
            async move {
                let reason = job.stop.stopped().await;
                let _ = stopped_tx.send((job.epoch, reason)).await;
                hold.notified().await;
                // Claims success; the loop must not report it for an attempt it lost.
                JobOutcome::Succeeded
            }
        }));
        let (epoch, reason) = tokio::time::timeout(PATIENCE, stopped_rx.recv())
            .await
            .expect("the handler is stopped")
            .unwrap();
        assert_eq!(reason, StopReason::Lost);
        shutdown.drain();
        release.notify_one();
        ends_cleanly(running).await;
        // The expired attempt was reclaimed: the job waits for its next attempt, and the
        // handler's claimed success was not reported.
        let status = client.status(&job_id).await.unwrap();
        assert!(
            matches!(status.state, JobState::Queued | JobState::Deferred),
            "the lost attempt's outcome is not reported: {status:?}"
        );
        assert_eq!(status.epoch, epoch, "no other attempt started: {status:?}");
        assert_eq!(attempts.load(Ordering::SeqCst), 1);
    });
}
