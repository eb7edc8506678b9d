//! `fairway bench e2e`, `fairway bench memory` and `fairway bench restart`: the durable server
//! measured from outside, through the Rust SDK over loopback HTTP.
//!
//! `e2e` runs the scenarios of the peer harness (`../shared/peers`: BullMQ, pg-boss, Celery)
//! against a real `fairway serve` and prints one JSON line per scenario **in the harness's
//! shape**, so that Fairway's numbers sit beside the peers':
//!
//! - `enqueue`: bulk submission (`POST /v1/jobs/batch`, 1000 jobs a call), single submissions
//!   awaited one by one, and single submissions 64 in flight, through the SDK's coalescing
//!   (`--coalesce`: concurrent `Client::submit` calls share batch requests) and again with
//!   one request per submission (`single_concurrent_uncoalesced`); no worker runs.
//! - `e2e`: workers idle on an empty queue, the producer submits N no-op jobs, time from the
//!   first submission to the last handler return; enqueue-to-start percentiles.
//! - `fair`: tenant A submits 20,000 jobs, then tenant B 200; each job sleeps 1 ms; B's wait
//!   (its submission call to its handler's start) and the rank of B's last completion.
//! - `prio`: 10,000 `high` jobs and then 100 `low` ones are queued, the workers start, and the
//!   producer keeps 5,000 to 10,000 `high` jobs queued for 10 s from the first start; counted:
//!   the `low` jobs that started inside that window. The policy is `fair` with two classes,
//!   `high` (priority 10) and `low` (priority 0), at the default band weight (1 each) unless
//!   `--prio-high-weight` / `--prio-low-weight` say otherwise.
//!
//! Every submission carries the harness's payload, `{"t": TAG, "i": INDEX, "e": ENQUEUED_MS}`,
//! so the server stores and returns a payload per job as the peers do. Timestamps are
//! milliseconds on one monotonic clock of this process: `e` just before the submission call of
//! the job's batch, `s` and `f` around the handler.
//!
//! Workers are tasks of this process, in one of two kinds (`variant` in the JSON):
//!
//! - `batched`: `--workers` tasks, each asking for up to `--batch` leases per call (capacity
//!   `cpu = --batch`), running them (no-op inline; `sleep` all at once; `spin` one after the
//!   other), and reporting them with one `POST /v1/leases/complete`: pg-boss's `batchSize`
//!   model.
//! - `sdk-worker`: `--sdk-workers` of the SDK's own [`Worker`], each running up to
//!   `--sdk-concurrency` jobs at once, with a heartbeat task per job and one
//!   `POST /v1/leases/{id}/complete` per job: BullMQ's `Worker(concurrency)` model.
//!
//! The `e2e` scenario also runs `single`: 64 single submissions in flight instead of batches,
//! and SDK workers; every job then costs one HTTP call on each side.
//!
//! Unless `--url` names a server, each scenario starts its own `fairway serve` (this very
//! executable) on a fresh temporary data directory and a free loopback port, and stops it with
//! SIGTERM afterwards. Durability is always on: nothing is answered before its group commit is
//! on disk.
//!
//! `memory` fills a fresh server with 10^6 small queued jobs and reads its resident memory from
//! `/proc`; `restart` fills one, stops it (SIGKILL, or SIGTERM for a clean stop), and times a
//! new process from its start to its first `200` on `/readyz`.
//!
//! Exit codes: 0; 1 a runtime failure (the server did not start, a request failed); 2 an
//! invalid argument.

use clap::{Args, ValueEnum};
use fairway_client::{
    AttemptOutcome, Client, CompleteRequest, Completion, JobContext, JobOutcome, JobSpec, JobState,
    Lease, LeaseRequest, Worker, WorkerConfig,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinSet;

// ---- Arguments ---------------------------------------------------------------------------------

/// The scenarios of `fairway bench e2e`, those of the peer harness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Enqueue throughput: bulk, single sequential, single concurrent; no workers.
    Enqueue,
    /// End to end: N no-op jobs from first submission to last completion.
    E2e,
    /// Noisy neighbour: A submits 20,000, then B 200; B's wait.
    Fair,
    /// Priority flood: low-priority jobs run during 10 s of high-priority work.
    Prio,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Enqueue => "enqueue",
            Scenario::E2e => "e2e",
            Scenario::Fair => "fair",
            Scenario::Prio => "prio",
        }
    }
}

/// How the jobs are submitted and worked (`variant` in the JSON).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Variant {
    /// Batch submissions; batched workers (lease many, complete many per call).
    Batched,
    /// Batch submissions; the SDK's `Worker` (one completion call per job).
    SdkWorker,
    /// Single submissions, 64 in flight; the SDK's `Worker` (e2e only).
    Single,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Batched => "batched",
            Variant::SdkWorker => "sdk-worker",
            Variant::Single => "single",
        }
    }
}

/// What a job does once started, in the `fair` and `prio` scenarios (`e2e` is always no-op).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum JobCost {
    /// Sleep `--job-cost-ms` (the harness's default).
    Sleep,
    /// Spin the CPU for `--job-cost-ms`.
    Spin,
}

/// Options of `fairway bench e2e`. Defaults are the peer harness's (its environment knobs in
/// brackets).
#[derive(Args, Debug, Clone)]
pub struct E2eArgs {
    /// Measure this server instead of starting one per scenario (it should be a dedicated,
    /// open server: the benchmark submits, leases and completes jobs, drains what `enqueue`
    /// left, and publishes its own policy for `prio`).
    #[arg(long)]
    pub url: Option<String>,
    /// Scenarios to run, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "enqueue,e2e,fair,prio"
    )]
    pub scenarios: Vec<Scenario>,
    /// Variants to run: `batched` and `sdk-worker` in e2e, fair and prio; `single` in e2e only.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "batched,sdk-worker,single"
    )]
    pub variants: Vec<Variant>,
    /// Jobs in the bulk enqueue and the end-to-end run [N].
    #[arg(long, default_value_t = 50_000)]
    pub n: usize,
    /// Jobs per bulk submission call (at most 1000) [BULK_CHUNK].
    #[arg(long, default_value_t = 1_000)]
    pub bulk_chunk: usize,
    /// Single submissions awaited one by one [SINGLE_N].
    #[arg(long, default_value_t = 5_000)]
    pub single_n: usize,
    /// Single submissions in flight at once [SINGLE_CONC].
    #[arg(long, default_value_t = 64)]
    pub single_conc: usize,
    /// Single submissions in the concurrent phase [SINGLE_CONC_N].
    #[arg(long, default_value_t = 20_000)]
    pub single_conc_n: usize,
    /// Requests that carry concurrent single submissions at once (the SDK's
    /// `ClientBuilder::coalesce`; 0: one request per submission). The enqueue scenario also
    /// measures 0 beside it, as `single_concurrent_uncoalesced`.
    #[arg(long, default_value_t = fairway_client::DEFAULT_COALESCE)]
    pub coalesce: usize,
    /// Longest a single-submission phase runs, in seconds [PHASE_CAP_S].
    #[arg(long, default_value_t = 20)]
    pub phase_cap_s: u64,
    /// Tenant A's jobs in the fairness scenario [FAIR_A].
    #[arg(long, default_value_t = 20_000)]
    pub fair_a: usize,
    /// Tenant B's jobs in the fairness scenario [FAIR_B].
    #[arg(long, default_value_t = 200)]
    pub fair_b: usize,
    /// What a job does in fair and prio [JOB_COST].
    #[arg(long, value_enum, default_value = "sleep")]
    pub job_cost: JobCost,
    /// How long it does it, in milliseconds [JOB_COST_MS].
    #[arg(long, default_value_t = 1)]
    pub job_cost_ms: u64,
    /// The priority window, in seconds [PRIO_WINDOW_S].
    #[arg(long, default_value_t = 10)]
    pub prio_window_s: u64,
    /// Low-priority jobs queued behind the high backlog [PRIO_LOW].
    #[arg(long, default_value_t = 100)]
    pub prio_low: usize,
    /// High jobs queued below which the producer tops up [PRIO_LOW_WATER].
    #[arg(long, default_value_t = 5_000)]
    pub prio_low_water: usize,
    /// High jobs queued after a top-up, and the initial backlog [PRIO_HIGH_WATER].
    #[arg(long, default_value_t = 10_000)]
    pub prio_high_water: usize,
    /// Weight of the `high` band in the prio policy (default: the policy's default weight, 1).
    #[arg(long)]
    pub prio_high_weight: Option<f64>,
    /// Weight of the `low` band in the prio policy (default: the policy's default weight, 1).
    #[arg(long)]
    pub prio_low_weight: Option<f64>,
    /// Run time each job declares (`estimate_ms`); by default jobs declare none and the policy's
    /// default estimate (1 s) applies.
    #[arg(long)]
    pub estimate_ms: Option<u64>,
    /// Batched workers (tasks).
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Leases per call, and capacity (`cpu`), of each batched worker (at most 1000).
    #[arg(long, default_value_t = 250)]
    pub batch: usize,
    /// Batched workers report a batch's completions in one call and ask for leases in
    /// another, instead of both in one call (`Client::complete_and_lease`): the way they
    /// worked before it, kept to measure the difference.
    #[arg(long)]
    pub complete_separately: bool,
    /// SDK workers.
    #[arg(long, default_value_t = 2)]
    pub sdk_workers: usize,
    /// Jobs each SDK worker runs at once.
    #[arg(long, default_value_t = 64)]
    pub sdk_concurrency: u32,
    /// Longest wait for a scenario's jobs to complete, in seconds [WAIT_LIMIT_S].
    #[arg(long, default_value_t = 100)]
    pub wait_limit_s: u64,
    /// Appended to every line's `variant` as `VARIANT+LABEL`, to tell runs with other knobs
    /// apart in one file.
    #[arg(long)]
    pub label: Option<String>,
    /// Repeat number, written as `rep` in the JSON (as the harness's BENCH_REP).
    #[arg(long)]
    pub rep: Option<u32>,
    /// Keep the temporary data directories (their paths go to stderr).
    #[arg(long)]
    pub keep_data: bool,
}

/// Options of `fairway bench memory`.
#[derive(Args, Debug, Clone)]
pub struct MemoryArgs {
    /// Jobs queued.
    #[arg(long, default_value_t = 1_000_000)]
    pub jobs: usize,
    /// Payloads to measure, comma-separated: `small` (`{"i": N}`, 8 to 14 bytes) or `none`.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "none,small")]
    pub payloads: Vec<PayloadKind>,
    /// Tenants the jobs are spread over.
    #[arg(long, default_value_t = 10)]
    pub tenants: usize,
    /// Keep the temporary data directories (their paths go to stderr).
    #[arg(long)]
    pub keep_data: bool,
}

/// Options of `fairway bench restart`.
#[derive(Args, Debug, Clone)]
pub struct RestartArgs {
    /// Jobs queued in the store when the server restarts.
    #[arg(long, default_value_t = 1_000_000)]
    pub jobs: usize,
    /// How the first server stops and snapshots, comma-separated: `snapshot` (SIGKILL, having
    /// snapshotted every `--snapshot-every` events), `no-snapshot` (SIGKILL, never
    /// snapshotted: the whole log is replayed), `clean` (SIGTERM, which snapshots on the way
    /// out).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "snapshot,no-snapshot,clean"
    )]
    pub variants: Vec<RestartKind>,
    /// `--snapshot-every-events` of the `snapshot` and `clean` variants (the server's default).
    #[arg(long, default_value_t = 50_000)]
    pub snapshot_every: u64,
    /// Payload of each job.
    #[arg(long, value_enum, default_value = "small")]
    pub payload: PayloadKind,
    /// Keep the temporary data directories (their paths go to stderr).
    #[arg(long)]
    pub keep_data: bool,
}

/// The payload of each job of `memory` and `restart`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PayloadKind {
    /// No payload: the server stores nothing beside the job's events.
    None,
    /// `{"i": N}`.
    Small,
}

impl PayloadKind {
    fn name(self) -> &'static str {
        match self {
            PayloadKind::None => "none",
            PayloadKind::Small => "small",
        }
    }
}

/// How the first server of a restart measurement ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RestartKind {
    /// Snapshots as configured, then SIGKILL: a restart restores the latest snapshot and
    /// replays the log after it.
    Snapshot,
    /// No snapshot ever (`--snapshot-every-events` 10^15), then SIGKILL: a restart replays every
    /// event.
    NoSnapshot,
    /// SIGTERM: the server snapshots on its way out; a restart replays nothing.
    Clean,
}

impl RestartKind {
    fn name(self) -> &'static str {
        match self {
            RestartKind::Snapshot => "snapshot",
            RestartKind::NoSnapshot => "no-snapshot",
            RestartKind::Clean => "clean",
        }
    }
}

/// Why a benchmark stopped early: bad input (exit 2) or a runtime failure (exit 1).
enum Failure {
    Usage(String),
    Runtime(String),
}

impl From<fairway_client::Error> for Failure {
    fn from(e: fairway_client::Error) -> Failure {
        Failure::Runtime(e.to_string())
    }
}

fn runtime_err(message: impl std::fmt::Display) -> Failure {
    Failure::Runtime(message.to_string())
}

/// Runs one of the three commands on a fresh multi-threaded runtime and maps its failure to
/// the exit code.
fn with_runtime<F>(name: &str, body: F) -> ExitCode
where
    F: std::future::Future<Output = Result<(), Failure>>,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fairway bench {name}: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(body) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(m)) => {
            eprintln!("fairway bench {name}: {m}");
            ExitCode::from(2)
        }
        Err(Failure::Runtime(m)) => {
            eprintln!("fairway bench {name}: {m}");
            ExitCode::from(1)
        }
    }
}

/// `fairway bench e2e`.
pub fn e2e(args: E2eArgs) -> ExitCode {
    with_runtime("e2e", run_e2e(args))
}

/// `fairway bench memory`.
pub fn memory(args: MemoryArgs) -> ExitCode {
    with_runtime("memory", run_memory(args))
}

/// `fairway bench restart`.
pub fn restart(args: RestartArgs) -> ExitCode {
    with_runtime("restart", run_restart(args))
}

// ---- Clock and statistics ----------------------------------------------------------------------

/// Milliseconds since this process first asked, on the monotonic clock, with sub-ms resolution.
fn now_ms() -> f64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e3
}

/// Rounded to a whole number.
fn r0(x: f64) -> f64 {
    x.round()
}

/// Rounded to one decimal.
fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Milliseconds as seconds with two decimals.
fn secs(ms: f64) -> f64 {
    (ms / 10.0).round() / 100.0
}

/// Jobs per second: `jobs` over `ms`, rounded.
fn per_s(jobs: usize, ms: f64) -> f64 {
    if ms <= 0.0 {
        0.0
    } else {
        r0(jobs as f64 / ms * 1e3)
    }
}

/// `{n, p50_ms, p99_ms, max_ms}` with nearest-rank percentiles, as the harness's
/// `latencyStats`.
fn latency_stats(mut values: Vec<f64>) -> Value {
    values.sort_by(f64::total_cmp);
    let pct = |p: f64| -> Value {
        if values.is_empty() {
            return Value::Null;
        }
        let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
        json!(r1(values[rank.clamp(1, values.len()) - 1]))
    };
    json!({
        "n": values.len(),
        "p50_ms": pct(50.0),
        "p99_ms": pct(99.0),
        "max_ms": values.last().map(|v| r1(*v)),
    })
}

/// The fields every line starts with, as the harness's `base()`.
fn base(scenario: &str, variant: Option<&str>, rep: Option<u32>) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    let ts = time::OffsetDateTime::now_utc();
    let ts = ts
        .replace_nanosecond(ts.millisecond() as u32 * 1_000_000)
        .unwrap_or(ts)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    m.insert("ts".into(), json!(ts));
    m.insert("peer".into(), json!("fairway"));
    m.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    m.insert("scenario".into(), json!(scenario));
    m.insert(
        "nproc".into(),
        json!(std::thread::available_parallelism().map_or(1, |n| n.get())),
    );
    if let Some(v) = variant {
        m.insert("variant".into(), json!(v));
    }
    if let Some(r) = rep {
        m.insert("rep".into(), json!(r));
    }
    m
}

/// A variant's name, with `+LABEL` when `--label` is given.
fn labelled(variant: Variant, args: &E2eArgs) -> String {
    match &args.label {
        Some(label) => format!("{}+{label}", variant.name()),
        None => variant.name().to_string(),
    }
}

/// Prints one result line on stdout.
fn emit(mut line: serde_json::Map<String, Value>, fields: Value) {
    if let Value::Object(more) = fields {
        line.extend(more);
    }
    println!("{}", Value::Object(line));
}

fn progress(message: impl std::fmt::Display) {
    eprintln!("fairway bench: {message}");
}

// ---- The server under test ---------------------------------------------------------------------

/// A temporary directory for one server: its data directory (`data/`), its log
/// (`server.log`) and its policy file (`policy.toml`); removed on drop unless kept.
struct DataDir {
    root: PathBuf,
    keep: bool,
}

impl DataDir {
    fn new(tag: &str, keep: bool) -> Result<DataDir, Failure> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let root = std::env::temp_dir().join(format!(
            "fairway-bench-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&root)
            .map_err(|e| runtime_err(format!("creating {}: {e}", root.display())))?;
        if keep {
            progress(format!("data, log and policy in {}", root.display()));
        }
        Ok(DataDir { root, keep })
    }

    fn data(&self) -> PathBuf {
        self.root.join("data")
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// A `fairway serve` this benchmark started (this executable), on a free loopback port.
struct Spawned {
    child: Child,
    url: String,
    /// When the process was spawned.
    spawned: Instant,
    /// Its stderr (the server's log).
    log: PathBuf,
}

impl Spawned {
    /// Starts `fairway serve --data DIR/data --listen 127.0.0.1:0 EXTRA..` with
    /// `RUST_LOG=info` and its log in `DIR/server.log`, and waits for the address it prints.
    fn start(dir: &DataDir, extra: &[String]) -> Result<Spawned, Failure> {
        let exe = std::env::current_exe()
            .map_err(|e| runtime_err(format!("finding this executable: {e}")))?;
        let data = dir.data();
        let log = dir.root.join("server.log");
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| runtime_err(format!("opening {}: {e}", log.display())))?;
        let spawned = Instant::now();
        let mut child = Command::new(exe)
            .arg("serve")
            .arg("--data")
            .arg(&data)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .spawn()
            .map_err(|e| runtime_err(format!("starting fairway serve: {e}")))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = std::sync::mpsc::channel();
        // Keep reading, so that the server never writes into a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let url = rest.split_whitespace().next().unwrap_or_default();
                    let _ = tx.send(url.to_string());
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(url) => Ok(Spawned {
                child,
                url,
                spawned,
                log,
            }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(runtime_err(format!(
                    "fairway serve did not say where it listens; its log: {}",
                    log.display()
                )))
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until `/readyz` answers 200; returns the time since the process was spawned.
    async fn ready(&mut self, limit: Duration) -> Result<Duration, Failure> {
        let client = Client::builder(&self.url)
            .timeout(Duration::from_secs(5))
            .build()?;
        loop {
            if client.ready().await.is_ok() {
                return Ok(self.spawned.elapsed());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(runtime_err(format!(
                    "fairway serve exited ({status}) before it was ready; its log: {}",
                    self.log.display()
                )));
            }
            if self.spawned.elapsed() > limit {
                return Err(runtime_err(format!(
                    "fairway serve not ready after {} s; its log: {}",
                    limit.as_secs(),
                    self.log.display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// SIGTERM, then waits (up to `limit`, then SIGKILL); returns how long it took to exit.
    fn terminate(mut self, limit: Duration) -> Duration {
        let started = Instant::now();
        // SAFETY: `kill` with a valid signal on the PID of our own unreaped child.
        unsafe {
            libc::kill(self.pid() as libc::pid_t, libc::SIGTERM);
        }
        while started.elapsed() < limit {
            if let Ok(Some(_)) = self.child.try_wait() {
                return started.elapsed();
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        progress("the server did not stop after SIGTERM; killing it");
        let _ = self.child.kill();
        let _ = self.child.wait();
        started.elapsed()
    }

    /// SIGKILL: a crash.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The server's log so far.
    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Resident memory of a process from `/proc/PID/status`, in bytes: (VmRSS, RssAnon, RssFile,
/// VmHWM).
fn rss(pid: u32) -> Result<[u64; 4], Failure> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| runtime_err(format!("reading /proc/{pid}/status: {e}")))?;
    let field = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    Ok([
        field("VmRSS:"),
        field("RssAnon:"),
        field("RssFile:"),
        field("VmHWM:"),
    ])
}

/// The server a scenario runs against: one it started (fresh, stopped afterwards), or `--url`.
struct Target {
    client: Client,
    url: String,
    spawned: Option<(Spawned, DataDir)>,
}

impl Target {
    /// A fresh server (or `--url`), running `policy` when given.
    async fn open(args: &E2eArgs, tag: &str, policy: Option<&str>) -> Result<Target, Failure> {
        match &args.url {
            Some(url) => {
                let client = Client::builder(url.clone())
                    .coalesce(args.coalesce)
                    .build()?;
                client.ready().await?;
                if let Some(text) = policy {
                    client.put_policy(text).await?;
                }
                Ok(Target {
                    client,
                    url: url.clone(),
                    spawned: None,
                })
            }
            None => {
                let dir = DataDir::new(tag, args.keep_data)?;
                let mut extra = Vec::new();
                if let Some(text) = policy {
                    let path = dir.root.join("policy.toml");
                    std::fs::write(&path, text)
                        .map_err(|e| runtime_err(format!("writing {}: {e}", path.display())))?;
                    extra.push("--policy".to_string());
                    extra.push(path.display().to_string());
                }
                let mut server = Spawned::start(&dir, &extra)?;
                server.ready(Duration::from_secs(120)).await?;
                let client = Client::builder(server.url.clone())
                    .coalesce(args.coalesce)
                    .build()?;
                Ok(Target {
                    client,
                    url: server.url.clone(),
                    spawned: Some((server, dir)),
                })
            }
        }
    }

    /// Stops a server this benchmark started; nothing for `--url`.
    fn close(self) {
        if let Some((server, dir)) = self.spawned {
            server.terminate(Duration::from_secs(60));
            drop(dir);
        }
    }
}

// ---- Jobs, records, workers --------------------------------------------------------------------

/// Which stream a job belongs to: the harness's `t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tag {
    A,
    B,
    High,
    Low,
}

impl Tag {
    fn code(self) -> &'static str {
        match self {
            Tag::A => "A",
            Tag::B => "B",
            Tag::High => "H",
            Tag::Low => "L",
        }
    }

    fn from_code(code: &str) -> Option<Tag> {
        match code {
            "A" => Some(Tag::A),
            "B" => Some(Tag::B),
            "H" => Some(Tag::High),
            "L" => Some(Tag::Low),
            _ => None,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One job as its handler saw it.
#[derive(Clone, Debug)]
struct Record {
    tag: Tag,
    /// When its submission call started (the payload's `e`).
    enqueued_ms: f64,
    /// Its handler's start and finish.
    start_ms: f64,
    finish_ms: f64,
    job_id: String,
}

/// What the workers saw, shared by all of them.
#[derive(Default)]
struct Stats {
    done: AtomicU64,
    by_tag: [AtomicU64; 4],
    /// The first handler start, as f64 bits (0: none yet).
    first_start: AtomicU64,
    /// Completions the server acknowledged with state `succeeded` (batched workers only).
    acknowledged: AtomicU64,
    /// When the last acknowledgement arrived, as f64 bits.
    last_ack_ms: AtomicU64,
    records: Mutex<Vec<Record>>,
}

impl Stats {
    fn started(&self, at: f64) {
        let _ = self.first_start.compare_exchange(
            0,
            at.to_bits(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    fn first_start_ms(&self) -> Option<f64> {
        match self.first_start.load(Ordering::Relaxed) {
            0 => None,
            bits => Some(f64::from_bits(bits)),
        }
    }

    fn finished(&self, records: Vec<Record>) {
        let n = records.len() as u64;
        for r in &records {
            self.by_tag[r.tag.index()].fetch_add(1, Ordering::Relaxed);
        }
        self.records.lock().expect("records").extend(records);
        self.done.fetch_add(n, Ordering::Relaxed);
    }

    fn acknowledged(&self, n: u64) {
        self.acknowledged.fetch_add(n, Ordering::Relaxed);
        self.last_ack_ms
            .fetch_max(now_ms().to_bits(), Ordering::Relaxed);
    }

    fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    fn tag(&self, tag: Tag) -> u64 {
        self.by_tag[tag.index()].load(Ordering::Relaxed)
    }
}

/// A job's payload as the harness sends it: `{"t": TAG, "i": INDEX, "e": ENQUEUED_MS}`.
fn payload(tag: Tag, i: usize, enqueued_ms: f64) -> Value {
    json!({"t": tag.code(), "i": i, "e": (enqueued_ms * 100.0).round() / 100.0})
}

/// What a handler needs from a payload: its tag and when it was enqueued.
fn parse_payload(payload: &Value) -> Option<(Tag, f64)> {
    let tag = Tag::from_code(payload.get("t")?.as_str()?)?;
    let e = payload.get("e")?.as_f64()?;
    Some((tag, e))
}

/// What a job does once started.
#[derive(Clone, Copy, Debug)]
enum Cost {
    Noop,
    Sleep(Duration),
    Spin(Duration),
}

impl Cost {
    fn of(args: &E2eArgs) -> Cost {
        let d = Duration::from_millis(args.job_cost_ms);
        match args.job_cost {
            JobCost::Sleep => Cost::Sleep(d),
            JobCost::Spin => Cost::Spin(d),
        }
    }

    fn describe(self) -> String {
        match self {
            Cost::Noop => "noop".into(),
            Cost::Sleep(d) => format!("sleep {}ms", d.as_millis()),
            Cost::Spin(d) => format!("spin {}ms", d.as_millis()),
        }
    }

    fn spin(d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }
}

/// A running set of workers of one kind.
struct Pool {
    stats: Arc<Stats>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<Result<(), String>>,
    config: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WorkerKind {
    Batched,
    Sdk,
}

impl Pool {
    /// Starts the workers of `kind` against `url`, running `cost` per job.
    fn start(url: &str, kind: WorkerKind, cost: Cost, args: &E2eArgs) -> Result<Pool, Failure> {
        let stats = Arc::new(Stats::default());
        let (stop, _) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let run_id = std::process::id();
        let config = match kind {
            WorkerKind::Batched => {
                for k in 0..args.workers {
                    let worker = BatchedWorker {
                        client: Client::new(url.to_string())?,
                        name: format!("bench-{run_id}-b{k}"),
                        slots: args.batch as u32,
                        cost,
                        stats: stats.clone(),
                        combined: !args.complete_separately,
                    };
                    let stop = stop.subscribe();
                    tasks.spawn(async move { worker.run(stop).await });
                }
                format!(
                    "{} batched worker tasks x (lease up to {} per call, capacity cpu={}, {}); \
                     Rust SDK over loopback HTTP; server fsyncs every group commit",
                    args.workers,
                    args.batch,
                    args.batch,
                    if args.complete_separately {
                        "one complete call per batch, then a lease call"
                    } else {
                        "one call completes a batch and leases the next, a long poll when that \
                         got none"
                    }
                )
            }
            WorkerKind::Sdk => {
                for k in 0..args.sdk_workers {
                    let config = WorkerConfig {
                        worker: format!("bench-{run_id}-s{k}"),
                        capacity: [("cpu".to_string(), f64::from(args.sdk_concurrency))].into(),
                        max_jobs: args.sdk_concurrency,
                        wait_ms: 20_000,
                        ..WorkerConfig::default()
                    };
                    let worker = Worker::new(Client::new(url.to_string())?, config);
                    let shutdown = worker.shutdown_handle();
                    let mut stop = stop.subscribe();
                    let stats = stats.clone();
                    tasks.spawn(async move {
                        tokio::spawn(async move {
                            let _ = stop.wait_for(|s| *s).await;
                            shutdown.drain();
                        });
                        worker
                            .run(move |job| sdk_handler(job, cost, stats.clone()))
                            .await
                            .map_err(|e| e.to_string())
                    });
                }
                format!(
                    "{} SDK Worker x (max_jobs={}, heartbeat task per job, one complete call \
                     per job); Rust SDK over loopback HTTP; server fsyncs every group commit",
                    args.sdk_workers, args.sdk_concurrency
                )
            }
        };
        Ok(Pool {
            stats,
            stop,
            tasks,
            config,
        })
    }

    /// Stops the workers (each finishes what it holds) and returns every record.
    async fn stop(mut self) -> (Vec<Record>, Arc<Stats>) {
        let _ = self.stop.send(true);
        let deadline = tokio::time::sleep(Duration::from_secs(30));
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                joined = self.tasks.join_next() => match joined {
                    None => break,
                    Some(Ok(Ok(()))) => {}
                    Some(Ok(Err(e))) => progress(format!("a worker stopped: {e}")),
                    Some(Err(e)) => progress(format!("a worker task failed: {e}")),
                },
                _ = &mut deadline => {
                    progress("workers did not stop within 30 s; abandoning them");
                    self.tasks.abort_all();
                    break;
                }
            }
        }
        let records = std::mem::take(&mut *self.stats.records.lock().expect("records"));
        (records, self.stats)
    }
}

/// The handler of the SDK workers: records the job and runs its cost.
async fn sdk_handler(job: JobContext, cost: Cost, stats: Arc<Stats>) -> JobOutcome {
    let start_ms = now_ms();
    stats.started(start_ms);
    match cost {
        Cost::Noop => {}
        Cost::Sleep(d) => tokio::time::sleep(d).await,
        Cost::Spin(d) => Cost::spin(d),
    }
    let finish_ms = now_ms();
    if let Some((tag, enqueued_ms)) = parse_payload(&job.payload) {
        stats.finished(vec![Record {
            tag,
            enqueued_ms,
            start_ms,
            finish_ms,
            job_id: job.job_id,
        }]);
    }
    JobOutcome::Succeeded
}

/// A worker that leases up to `slots` jobs per call, runs them, and completes them in one call,
/// which leases the next batch too (`combined`) or is followed by a lease call.
struct BatchedWorker {
    client: Client,
    name: String,
    slots: u32,
    cost: Cost,
    stats: Arc<Stats>,
    combined: bool,
}

impl BatchedWorker {
    async fn run(self, mut stop: watch::Receiver<bool>) -> Result<(), String> {
        let request = LeaseRequest {
            worker: self.name.clone(),
            pool: None,
            capacity: [("cpu".to_string(), f64::from(self.slots))].into(),
            labels: BTreeMap::new(),
            max_jobs: Some(self.slots),
            wait_ms: Some(20_000),
        };
        let mut failures = 0u32;
        // Leases in hand from the last completion call (`combined`).
        let mut next = Vec::new();
        loop {
            if *stop.borrow() {
                return Ok(());
            }
            let leases = if next.is_empty() {
                let leased = tokio::select! {
                    leased = self.client.lease(&request) => leased,
                    _ = stop.changed() => return Ok(()),
                };
                match leased {
                    Ok(leases) => leases,
                    Err(e) => {
                        failures += 1;
                        if failures > 50 {
                            return Err(format!("{}: leasing failed 50 times: {e}", self.name));
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                }
            } else {
                std::mem::take(&mut next)
            };
            if leases.is_empty() {
                continue;
            }
            let mut records = Vec::with_capacity(leases.len());
            let mut completions = Vec::with_capacity(leases.len());
            // The jobs of a batch run side by side: no-op jobs inline, sleeping jobs all at
            // once (one timer stands for all of them), spinning jobs one after the other.
            let batch_start = now_ms();
            if let Cost::Sleep(d) = self.cost {
                tokio::time::sleep(d).await;
            }
            let sleep_finish = now_ms();
            for lease in leases {
                let (start_ms, finish_ms) = match self.cost {
                    Cost::Noop => {
                        let s = now_ms();
                        (s, now_ms())
                    }
                    Cost::Sleep(_) => (batch_start, sleep_finish),
                    Cost::Spin(d) => {
                        let s = now_ms();
                        Cost::spin(d);
                        (s, now_ms())
                    }
                };
                self.stats.started(start_ms);
                if let Some((tag, enqueued_ms)) = parse_payload(&lease.payload) {
                    records.push(Record {
                        tag,
                        enqueued_ms,
                        start_ms,
                        finish_ms,
                        job_id: lease.job_id.clone(),
                    });
                }
                completions.push(Completion {
                    job_id: lease.job_id,
                    request: CompleteRequest {
                        epoch: lease.epoch,
                        outcome: AttemptOutcome::Succeeded,
                        retryable: None,
                        usage_ms: Some((finish_ms - start_ms).max(0.0) as u64),
                        progress_ms: None,
                    },
                });
            }
            self.stats.finished(records);
            next = self
                .complete(completions, self.combined.then_some(&request))
                .await?;
        }
    }

    /// Reports a batch's completions, with the next lease request when `next` is given (its
    /// leases are returned; a failed lease request returns none, and the worker long-polls),
    /// retrying transport failures a few times.
    async fn complete(
        &self,
        completions: Vec<Completion>,
        next: Option<&LeaseRequest>,
    ) -> Result<Vec<Lease>, String> {
        let mut tries = 0;
        loop {
            let answer = self
                .client
                .complete_and_lease(completions.clone(), next)
                .await
                .map(|(results, leases)| (results, leases.unwrap_or_default()));
            match answer {
                Ok((results, leases)) => {
                    let ok = results
                        .iter()
                        .filter(|r| r.state == Some(JobState::Succeeded))
                        .count();
                    self.stats.acknowledged(ok as u64);
                    return Ok(leases);
                }
                Err(e) if e.is_retryable() && tries < 5 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(format!("{}: completing a batch: {e}", self.name)),
            }
        }
    }
}

/// Waits until `done()` holds, checking every `step`, at most `limit`; whether it held.
async fn wait_for(mut done: impl FnMut() -> bool, limit: Duration, step: Duration) -> bool {
    let started = Instant::now();
    while !done() {
        if started.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(step).await;
    }
    true
}

// ---- Producers -----------------------------------------------------------------------------------

/// The producer side of a scenario: the client, the bulk call size, the declared estimate.
struct Producer<'a> {
    client: &'a Client,
    chunk: usize,
    estimate_ms: Option<u64>,
}

impl<'a> Producer<'a> {
    fn new(client: &'a Client, args: &E2eArgs) -> Producer<'a> {
        Producer {
            client,
            chunk: args.bulk_chunk,
            estimate_ms: args.estimate_ms,
        }
    }

    /// Submits `count` jobs of `tag` for `tenant` (class `class`), numbered from `offset`, in
    /// calls of `chunk`, one call after the other (the harness's `addChunked`). Every job must
    /// be accepted.
    async fn add_chunked(
        &self,
        tenant: &str,
        class: Option<&str>,
        tag: Tag,
        count: usize,
        offset: usize,
    ) -> Result<(), Failure> {
        let mut i = 0;
        while i < count {
            let n = self.chunk.min(count - i);
            add_batch(
                self.client,
                tenant,
                class,
                tag,
                offset + i,
                n,
                self.estimate_ms,
            )
            .await?;
            i += n;
        }
        Ok(())
    }
}

/// One batch submission of `n` jobs; every job must be accepted.
async fn add_batch(
    client: &Client,
    tenant: &str,
    class: Option<&str>,
    tag: Tag,
    from: usize,
    n: usize,
    estimate_ms: Option<u64>,
) -> Result<(), Failure> {
    let e = now_ms();
    let jobs: Vec<JobSpec> = (from..from + n)
        .map(|i| job(tenant, class, payload(tag, i, e), estimate_ms))
        .collect();
    let results = client.submit_batch(jobs).await?;
    if let Some(Err(refused)) = results.into_iter().find(Result::is_err) {
        return Err(runtime_err(format!(
            "a batch submission was refused: {refused}"
        )));
    }
    Ok(())
}

/// A job as the harness's producers make it: tenant, class, payload, and the declared
/// estimate when `--estimate-ms` is given.
fn job(tenant: &str, class: Option<&str>, payload: Value, estimate_ms: Option<u64>) -> JobSpec {
    let mut spec = JobSpec::new(tenant).payload(payload);
    spec.class = class.map(str::to_string);
    spec.estimate_ms = estimate_ms;
    spec
}

/// Single submissions of tag A for `tenant`, `in_flight` at a time, until `total` or `cap`;
/// returns how many were submitted and how long it took (ms).
async fn add_singles(
    client: &Client,
    tenant: &str,
    total: usize,
    in_flight: usize,
    cap: Duration,
    estimate_ms: Option<u64>,
) -> Result<(usize, f64), Failure> {
    let next = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let t0 = now_ms();
    let mut tasks = JoinSet::new();
    for _ in 0..in_flight.max(1) {
        let (client, next, failed, tenant) = (
            client.clone(),
            next.clone(),
            failed.clone(),
            tenant.to_string(),
        );
        tasks.spawn(async move {
            let mut done = 0usize;
            while started.elapsed() < cap && !failed.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                if i >= total {
                    break;
                }
                let spec = job(&tenant, None, payload(Tag::A, i, now_ms()), estimate_ms);
                if let Err(e) = client.submit(spec).await {
                    failed.store(true, Ordering::Relaxed);
                    return Err(e.to_string());
                }
                done += 1;
            }
            Ok(done)
        });
    }
    let mut submitted = 0;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(n)) => submitted += n,
            Ok(Err(e)) => return Err(runtime_err(format!("a single submission failed: {e}"))),
            Err(e) => return Err(runtime_err(format!("a producer task failed: {e}"))),
        }
    }
    Ok((submitted, now_ms() - t0))
}

/// Leases and completes everything queued (after `enqueue` on a `--url` server).
async fn drain(client: &Client) -> Result<usize, Failure> {
    let request = LeaseRequest {
        worker: format!("bench-{}-drain", std::process::id()),
        pool: None,
        capacity: [("cpu".to_string(), 1000.0)].into(),
        labels: BTreeMap::new(),
        max_jobs: Some(1000),
        wait_ms: Some(0),
    };
    let mut drained = 0;
    loop {
        let leases = client.lease(&request).await?;
        if leases.is_empty() {
            return Ok(drained);
        }
        drained += leases.len();
        let completions = leases
            .into_iter()
            .map(|l| Completion {
                job_id: l.job_id,
                request: CompleteRequest {
                    epoch: l.epoch,
                    outcome: AttemptOutcome::Succeeded,
                    retryable: None,
                    usage_ms: Some(0),
                    progress_ms: None,
                },
            })
            .collect();
        client.complete_batch(completions).await?;
    }
}

/// Reads back the state of up to 100 of the jobs, spread over the records: how many the server
/// says succeeded.
async fn verify(client: &Client, records: &[Record]) -> Value {
    let step = (records.len() / 100).max(1);
    let sample: Vec<String> = records
        .iter()
        .step_by(step)
        .take(100)
        .map(|r| r.job_id.clone())
        .collect();
    let mut succeeded = 0;
    for id in &sample {
        if let Ok(status) = client.status(id).await
            && status.state == JobState::Succeeded
        {
            succeeded += 1;
        }
    }
    json!({"sampled": sample.len(), "succeeded": succeeded})
}

// ---- Scenarios -----------------------------------------------------------------------------------

async fn run_e2e(args: E2eArgs) -> Result<(), Failure> {
    if args.bulk_chunk == 0 || args.bulk_chunk > fairway_client::MAX_BATCH {
        return Err(Failure::Usage(format!(
            "--bulk-chunk must be 1 to {}",
            fairway_client::MAX_BATCH
        )));
    }
    if args.batch == 0 || args.batch > fairway_client::MAX_BATCH {
        return Err(Failure::Usage(format!(
            "--batch must be 1 to {}",
            fairway_client::MAX_BATCH
        )));
    }
    if args.workers == 0 || args.sdk_workers == 0 || args.sdk_concurrency == 0 {
        return Err(Failure::Usage(
            "--workers, --sdk-workers and --sdk-concurrency must be at least 1".into(),
        ));
    }
    if args.prio_low_water > args.prio_high_water {
        return Err(Failure::Usage(
            "--prio-low-water must not exceed --prio-high-water".into(),
        ));
    }
    for w in [args.prio_high_weight, args.prio_low_weight]
        .into_iter()
        .flatten()
    {
        if !(w > 0.0 && w.is_finite()) {
            return Err(Failure::Usage(format!(
                "a band weight must be a positive number, not {w}"
            )));
        }
    }
    now_ms();
    for &scenario in &args.scenarios {
        match scenario {
            Scenario::Enqueue => {
                progress("enqueue");
                enqueue(&args).await?;
            }
            Scenario::E2e => {
                for &variant in &args.variants {
                    progress(format!("e2e, {}", variant.name()));
                    end_to_end(&args, variant).await?;
                }
            }
            Scenario::Fair | Scenario::Prio => {
                for &variant in &args.variants {
                    let kind = match variant {
                        Variant::Batched => WorkerKind::Batched,
                        Variant::SdkWorker => WorkerKind::Sdk,
                        Variant::Single => continue,
                    };
                    progress(format!("{}, {}", scenario.name(), variant.name()));
                    if scenario == Scenario::Fair {
                        fair(&args, variant, kind).await?;
                    } else {
                        prio(&args, variant, kind).await?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Enqueue throughput: bulk, single sequential, single concurrent; no workers.
async fn enqueue(args: &E2eArgs) -> Result<(), Failure> {
    let target = Target::open(args, "enqueue", None).await?;
    let client = &target.client;
    let t0 = now_ms();
    Producer::new(client, args)
        .add_chunked("bench-bulk", None, Tag::A, args.n, 0)
        .await?;
    let bulk_ms = now_ms() - t0;

    let cap = Duration::from_secs(args.phase_cap_s);
    let est = args.estimate_ms;
    let (seq_n, seq_ms) = add_singles(client, "bench-seq", args.single_n, 1, cap, est).await?;
    let conc = args.single_conc;
    let (conc_n, conc_ms) =
        add_singles(client, "bench-conc", args.single_conc_n, conc, cap, est).await?;
    // The same with one request per submission, the SDK's coalescing turned off.
    let alone = Client::builder(target.url.clone()).coalesce(0).build()?;
    let (alone_n, alone_ms) = add_singles(
        &alone,
        "bench-conc-alone",
        args.single_conc_n,
        conc,
        cap,
        est,
    )
    .await?;
    if target.spawned.is_none() {
        let drained = drain(client).await?;
        progress(format!("drained {drained} jobs from {}", target.url));
    }
    emit(
        base("enqueue", args.label.as_deref(), args.rep),
        json!({
            "n": args.n,
            "durability": "fdatasync per group commit (the write-ahead log beside redb)",
            "bulk": {
                "api": "Client::submit_batch (POST /v1/jobs/batch)",
                "chunk": args.bulk_chunk,
                "jobs": args.n,
                "seconds": secs(bulk_ms),
                "jobs_per_s": per_s(args.n, bulk_ms),
            },
            "single_sequential": {
                "jobs": seq_n,
                "seconds": secs(seq_ms),
                "jobs_per_s": per_s(seq_n, seq_ms),
            },
            "single_concurrent": {
                "in_flight": args.single_conc,
                "coalesce": args.coalesce,
                "jobs": conc_n,
                "seconds": secs(conc_ms),
                "jobs_per_s": per_s(conc_n, conc_ms),
            },
            "single_concurrent_uncoalesced": {
                "in_flight": args.single_conc,
                "coalesce": 0,
                "jobs": alone_n,
                "seconds": secs(alone_ms),
                "jobs_per_s": per_s(alone_n, alone_ms),
            },
        }),
    );
    target.close();
    Ok(())
}

/// End to end: workers idle, N no-op jobs submitted, first submission to last completion.
async fn end_to_end(args: &E2eArgs, variant: Variant) -> Result<(), Failure> {
    let target = Target::open(args, "e2e", None).await?;
    let kind = match variant {
        Variant::Batched => WorkerKind::Batched,
        Variant::SdkWorker | Variant::Single => WorkerKind::Sdk,
    };
    let pool = Pool::start(&target.url, kind, Cost::Noop, args)?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t0 = now_ms();
    let submitted = match variant {
        Variant::Single => {
            let cap = Duration::from_secs(args.wait_limit_s);
            let (client, conc, est) = (&target.client, args.single_conc, args.estimate_ms);
            add_singles(client, "bench-e2e", args.n, conc, cap, est)
                .await?
                .0
        }
        _ => {
            Producer::new(&target.client, args)
                .add_chunked("bench-e2e", None, Tag::A, args.n, 0)
                .await?;
            args.n
        }
    };
    let t_enq = now_ms();
    let stats = pool.stats.clone();
    let complete = wait_for(
        || stats.done() >= submitted as u64,
        Duration::from_secs(args.wait_limit_s),
        Duration::from_millis(2),
    )
    .await;
    // The batched workers' last acknowledgement follows the last handler return by one call.
    if kind == WorkerKind::Batched {
        wait_for(
            || stats.acknowledged.load(Ordering::Relaxed) >= submitted as u64,
            Duration::from_secs(10),
            Duration::from_millis(1),
        )
        .await;
    }
    let config = pool.config.clone();
    let (records, stats) = pool.stop().await;
    let t_end = records
        .iter()
        .map(|r| r.finish_ms)
        .fold(f64::NAN, f64::max)
        .max(t0);
    let latencies: Vec<f64> = records.iter().map(|r| r.start_ms - r.enqueued_ms).collect();
    let verified = verify(&target.client, &records).await;
    let mut fields = json!({
        "n": args.n,
        "config": config,
        "producer": match variant {
            Variant::Single if args.coalesce == 0 => format!(
                "{} single submissions in flight, one request each",
                args.single_conc
            ),
            Variant::Single => format!(
                "{} single submissions in flight, sharing at most {} requests at once",
                args.single_conc, args.coalesce
            ),
            _ => format!("Client::submit_batch, {} per call, one call at a time", args.bulk_chunk),
        },
        "complete": complete,
        "jobs_done": records.len(),
        "enqueue_seconds": secs(t_enq - t0),
        "e2e_seconds": secs(t_end - t0),
        "e2e_jobs_per_s": per_s(records.len(), t_end - t0),
        "enqueue_to_start": latency_stats(latencies),
        "verified": verified,
    });
    if kind == WorkerKind::Batched {
        let acked = stats.acknowledged.load(Ordering::Relaxed);
        let last_ack = f64::from_bits(stats.last_ack_ms.load(Ordering::Relaxed));
        fields["completions_acknowledged"] = json!(acked);
        fields["e2e_acknowledged_seconds"] = json!(secs(last_ack - t0));
        fields["e2e_acknowledged_jobs_per_s"] = json!(per_s(acked as usize, last_ack - t0));
    }
    emit(
        base("e2e", Some(&labelled(variant, args)), args.rep),
        fields,
    );
    target.close();
    Ok(())
}

/// Noisy neighbour: A submits `fair_a` jobs, then B `fair_b`; B's wait and completion ranks.
async fn fair(args: &E2eArgs, variant: Variant, kind: WorkerKind) -> Result<(), Failure> {
    let target = Target::open(args, "fair", None).await?;
    let pool = Pool::start(&target.url, kind, Cost::of(args), args)?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let producer = Producer::new(&target.client, args);
    let t_a = now_ms();
    producer
        .add_chunked("tenant-A", None, Tag::A, args.fair_a, 0)
        .await?;
    let t_b = now_ms();
    producer
        .add_chunked("tenant-B", None, Tag::B, args.fair_b, 0)
        .await?;
    let t_b_done = now_ms();
    let total = (args.fair_a + args.fair_b) as u64;
    let stats = pool.stats.clone();
    let complete = wait_for(
        || stats.done() >= total,
        Duration::from_secs(args.wait_limit_s),
        Duration::from_millis(5),
    )
    .await;
    let config = pool.config.clone();
    let (mut records, _) = pool.stop().await;
    records.sort_by(|x, y| x.finish_ms.total_cmp(&y.finish_ms));
    let mut b_first = None;
    let mut b_last = None;
    let mut b_done = 0;
    let mut b_waits = Vec::new();
    let mut a_last_finish = t_a;
    for (pos, r) in records.iter().enumerate() {
        if r.tag == Tag::B {
            b_done += 1;
            b_first.get_or_insert(pos + 1);
            b_last = Some(pos + 1);
            b_waits.push(r.start_ms - r.enqueued_ms);
        } else {
            a_last_finish = a_last_finish.max(r.finish_ms);
        }
    }
    let t_end = records.last().map_or(now_ms(), |r| r.finish_ms);
    emit(
        base("fair", Some(&labelled(variant, args)), args.rep),
        json!({
            "config": config,
            "fairness_feature": "the fair policy (built-in policy, equal tenant weights): \
                                 per-tenant queues ordered by weighted service",
            "job_cost": Cost::of(args).describe(),
            "tenant_a_jobs": args.fair_a,
            "tenant_b_jobs": args.fair_b,
            "complete": complete,
            "jobs_done": records.len(),
            "a_enqueue_seconds": secs(t_b - t_a),
            "b_enqueue_ms": r1(t_b_done - t_b),
            "b_wait_enqueue_to_start": latency_stats(b_waits),
            "b_done": b_done,
            "b_first_completion_position": b_first,
            "b_last_completion_position": b_last,
            "total_completions": records.len(),
            "a_drain_seconds": secs(a_last_finish - t_a),
            "total_seconds": secs(t_end - t_a),
            "jobs_per_s": per_s(records.len(), t_end - t_a),
        }),
    );
    target.close();
    Ok(())
}

/// The policy of the priority scenario: `fair` with two bands, `high` and `low`.
fn prio_policy(args: &E2eArgs) -> String {
    let weight = |w: Option<f64>| w.map(|w| format!("weight = {w}\n")).unwrap_or_default();
    format!(
        "# fairway bench e2e, scenario prio: two bands under the fair policy.\n\
         [policy]\nname = \"fair\"\n\n[[pool]]\nname = \"default\"\n\n\
         [[class]]\nname = \"high\"\npriority = 10\n{}\n\
         [[class]]\nname = \"low\"\npriority = 0\n{}",
        weight(args.prio_high_weight),
        weight(args.prio_low_weight)
    )
}

/// Priority flood: a high backlog kept between the water marks for the window; the low jobs
/// that start inside it.
async fn prio(args: &E2eArgs, variant: Variant, kind: WorkerKind) -> Result<(), Failure> {
    let policy = prio_policy(args);
    let target = Target::open(args, "prio", Some(&policy)).await?;
    let producer = Producer::new(&target.client, args);
    let tenant = "app";
    producer
        .add_chunked(tenant, Some("high"), Tag::High, args.prio_high_water, 0)
        .await?;
    let mut added_high = args.prio_high_water;
    producer
        .add_chunked(tenant, Some("low"), Tag::Low, args.prio_low, 0)
        .await?;
    let pool = Pool::start(&target.url, kind, Cost::of(args), args)?;
    let stats = pool.stats.clone();
    let t_go = now_ms();
    let window_ms = args.prio_window_s as f64 * 1e3;
    let mut min_backlog: Option<usize> = None;
    let mut topups = 0;
    let mut window_start = None;
    loop {
        let now = now_ms();
        if window_start.is_none() {
            window_start = stats.first_start_ms();
        }
        if let Some(ws) = window_start
            && now >= ws + window_ms
        {
            break;
        }
        if now - t_go > window_ms + 20_000.0 {
            break;
        }
        let backlog = added_high.saturating_sub(stats.tag(Tag::High) as usize);
        if window_start.is_some() {
            min_backlog = Some(min_backlog.map_or(backlog, |m| m.min(backlog)));
        }
        if backlog < args.prio_low_water {
            let add = args.prio_high_water - backlog;
            producer
                .add_chunked(tenant, Some("high"), Tag::High, add, added_high)
                .await?;
            added_high += add;
            topups += 1;
        } else {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let window_start = window_start.unwrap_or(t_go);
    let window_end = window_start + window_ms;
    let low_total = args.prio_low as u64;
    let drained = wait_for(
        || stats.tag(Tag::Low) >= low_total && stats.done() >= added_high as u64 + low_total,
        Duration::from_secs(30),
        Duration::from_millis(10),
    )
    .await;
    let config = pool.config.clone();
    let (mut records, _) = pool.stop().await;
    records.sort_by(|x, y| x.start_ms.total_cmp(&y.start_ms));
    let mut low_started_in_window = 0;
    let mut low_done = 0;
    let mut high_done_in_window = 0;
    let mut low_last_finish = f64::NAN;
    let mut low_offsets = Vec::new();
    for r in &records {
        if r.tag == Tag::Low {
            low_done += 1;
            low_last_finish = low_last_finish.max(r.finish_ms);
            if r.start_ms <= window_end {
                low_started_in_window += 1;
                low_offsets.push(r.start_ms - window_start);
            }
        } else if r.finish_ms <= window_end {
            high_done_in_window += 1;
        }
    }
    // The low band's share of the starts while it still had jobs waiting: from the window's
    // start to its last job's start. Its floor is its weight over the sum of both weights.
    let last_low_start = records
        .iter()
        .filter(|r| r.tag == Tag::Low)
        .map(|r| r.start_ms)
        .fold(f64::NAN, f64::max);
    let backlogged: Vec<&Record> = records
        .iter()
        .filter(|r| r.start_ms <= last_low_start)
        .collect();
    let low_share = if backlogged.is_empty() {
        Value::Null
    } else {
        let lows = backlogged.iter().filter(|r| r.tag == Tag::Low).count();
        json!((lows as f64 / backlogged.len() as f64 * 1000.0).round() / 1000.0)
    };
    let w_high = args.prio_high_weight.unwrap_or(1.0);
    let w_low = args.prio_low_weight.unwrap_or(1.0);
    low_offsets.truncate(10);
    emit(
        base("prio", Some(&labelled(variant, args)), args.rep),
        json!({
            "config": config,
            "policy": format!(
                "fair; one tenant; classes high (priority 10, weight {w_high}{}) and low \
                 (priority 0, weight {w_low}{})",
                if args.prio_high_weight.is_none() { ", the default" } else { "" },
                if args.prio_low_weight.is_none() { ", the default" } else { "" },
            ),
            "job_cost": Cost::of(args).describe(),
            "window_seconds": args.prio_window_s,
            "low_jobs": args.prio_low,
            "low_started_in_window": low_started_in_window,
            "low_start_offsets_s_first10": low_offsets.iter().map(|x| secs(*x)).collect::<Vec<_>>(),
            "high_done_in_window": high_done_in_window,
            "high_jobs_per_s_in_window": per_s(high_done_in_window, window_ms),
            "high_added_total": added_high,
            "min_high_backlog_in_window": min_backlog,
            "topups": topups,
            "drained_after_window": drained,
            "low_done_total": low_done,
            "low_all_done_seconds_after_window": if low_done == args.prio_low {
                json!(secs(low_last_finish - window_end))
            } else {
                Value::Null
            },
            "low_band_floor": (w_low / (w_low + w_high) * 1000.0).round() / 1000.0,
            "low_share_of_starts_while_low_waited": low_share,
        }),
    );
    target.close();
    Ok(())
}

// ---- Memory and restart --------------------------------------------------------------------------

/// Fills a server with `jobs` queued jobs over `tenants` tenants, 4 batch calls in flight;
/// returns the time it took (ms).
async fn fill(
    client: &Client,
    jobs: usize,
    tenants: usize,
    payload: PayloadKind,
) -> Result<f64, Failure> {
    let next = Arc::new(AtomicU64::new(0));
    let t0 = now_ms();
    let mut tasks = JoinSet::new();
    let step = fairway_client::MAX_BATCH;
    for _ in 0..4 {
        let (client, next) = (client.clone(), next.clone());
        tasks.spawn(async move {
            loop {
                let from = next.fetch_add(step as u64, Ordering::Relaxed) as usize;
                if from >= jobs {
                    return Ok::<(), String>(());
                }
                let specs: Vec<JobSpec> = (from..(from + step).min(jobs))
                    .map(|i| {
                        let spec = JobSpec::new(format!("tenant-{}", i % tenants.max(1)));
                        match payload {
                            PayloadKind::None => spec,
                            PayloadKind::Small => spec.payload(json!({ "i": i })),
                        }
                    })
                    .collect();
                let results = client
                    .submit_batch(specs)
                    .await
                    .map_err(|e| e.to_string())?;
                if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
                    return Err(format!("a job was refused: {e}"));
                }
                if from.is_multiple_of(100_000) && from > 0 {
                    progress(format!("{from} jobs queued"));
                }
            }
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined
            .map_err(|e| runtime_err(format!("a producer task failed: {e}")))?
            .map_err(|e| runtime_err(format!("filling the server: {e}")))?;
    }
    Ok(now_ms() - t0)
}

async fn run_memory(args: MemoryArgs) -> Result<(), Failure> {
    if args.jobs == 0 {
        return Err(Failure::Usage("--jobs must be at least 1".into()));
    }
    now_ms();
    for &payload in &args.payloads {
        progress(format!(
            "memory, {} jobs, payload {}",
            args.jobs,
            payload.name()
        ));
        let dir = DataDir::new("memory", args.keep_data)?;
        let mut server = Spawned::start(&dir, &[])?;
        server.ready(Duration::from_secs(120)).await?;
        let client = Client::new(server.url.clone())?;
        // A warm-up job, so that the runtime, the store and the tables exist before `before`.
        fill(&client, 1, 1, payload).await?;
        let before = rss(server.pid())?;
        let fill_ms = fill(&client, args.jobs, args.tenants, payload).await?;
        let after = rss(server.pid())?;
        // Snapshots run in the writer after commits: give a due one time to finish.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let settled = rss(server.pid())?;
        let per_job = |b: u64, a: u64| r1((a as f64 - b as f64) / args.jobs as f64);
        emit(
            base("memory", None, None),
            json!({
                "jobs": args.jobs,
                "tenants": args.tenants,
                "payload": payload.name(),
                "payload_example": match payload {
                    PayloadKind::None => Value::Null,
                    PayloadKind::Small => json!({"i": 123456}),
                },
                "fill_seconds": secs(fill_ms),
                "fill_jobs_per_s": per_s(args.jobs, fill_ms),
                "rss_bytes_before": before[0],
                "rss_bytes_after": after[0],
                "rss_bytes_settled": settled[0],
                "rss_anon_bytes_settled": settled[1],
                "rss_file_bytes_settled": settled[2],
                "rss_hwm_bytes": settled[3],
                "rss_bytes_per_job": per_job(before[0], settled[0]),
                "rss_anon_bytes_per_job": per_job(before[1], settled[1]),
            }),
        );
        server.terminate(Duration::from_secs(120));
        drop(dir);
    }
    Ok(())
}

/// The server's own account of its recovery: the `recovered` log line's fields.
fn recovered_fields(log: &str) -> Value {
    let Some(line) = log.lines().rev().find(|l| l.contains("recovered")) else {
        return Value::Null;
    };
    let field = |name: &str| -> Value {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .map(|v| {
                let v = v.trim_matches(|c: char| !c.is_ascii_alphanumeric());
                v.parse::<u64>().map_or(json!(v), |n| json!(n))
            })
            .unwrap_or(Value::Null)
    };
    json!({
        "replayed_events": field("replayed"),
        "snapshot_lsn": field("snapshot_lsn"),
        "live_jobs": field("live_jobs"),
        "recover_ms": field("elapsed_ms"),
    })
}

async fn run_restart(args: RestartArgs) -> Result<(), Failure> {
    if args.jobs == 0 {
        return Err(Failure::Usage("--jobs must be at least 1".into()));
    }
    now_ms();
    for &kind in &args.variants {
        progress(format!("restart, {} jobs, {}", args.jobs, kind.name()));
        let dir = DataDir::new("restart", args.keep_data)?;
        let every = match kind {
            RestartKind::NoSnapshot => 1_000_000_000_000_000,
            _ => args.snapshot_every,
        };
        let extra = vec!["--snapshot-every-events".to_string(), every.to_string()];
        let mut first = Spawned::start(&dir, &extra)?;
        first.ready(Duration::from_secs(120)).await?;
        let client = Client::new(first.url.clone())?;
        let fill_ms = fill(&client, args.jobs, 10, args.payload).await?;
        let store_bytes = dir_bytes(&dir.data());
        let stop_ms = match kind {
            RestartKind::Clean => first.terminate(Duration::from_secs(300)).as_secs_f64() * 1e3,
            _ => {
                first.kill();
                0.0
            }
        };
        let mut second = Spawned::start(&dir, &extra)?;
        let ready = second.ready(Duration::from_secs(600)).await?;
        let after = rss(second.pid())?;
        // What recovery freed (the decoded snapshot and log) may go back to the OS later.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let settled = rss(second.pid())?;
        let recovered = recovered_fields(&second.log_text());
        emit(
            base("restart", Some(kind.name()), None),
            json!({
                "jobs": args.jobs,
                "payload": args.payload.name(),
                "snapshot_every_events": every,
                "stopped_by": if kind == RestartKind::Clean { "SIGTERM" } else { "SIGKILL" },
                "fill_seconds": secs(fill_ms),
                "store_bytes": store_bytes,
                "stop_seconds": if kind == RestartKind::Clean { json!(secs(stop_ms)) } else { Value::Null },
                "start_to_ready_seconds": (ready.as_secs_f64() * 1000.0).round() / 1000.0,
                "recovered": recovered,
                "rss_bytes_after_restart": after[0],
                "rss_bytes_per_job_after_restart": r1(after[0] as f64 / args.jobs as f64),
                "rss_bytes_settled_after_restart": settled[0],
                "rss_bytes_per_job_settled_after_restart": r1(settled[0] as f64 / args.jobs as f64),
                "rss_hwm_bytes_after_restart": settled[3],
            }),
        );
        second.terminate(Duration::from_secs(300));
        drop(dir);
    }
    Ok(())
}

/// Bytes of the files in `dir` (not recursive: the store's files are all there).
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_like_the_harness() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = latency_stats(v);
        assert_eq!(s["n"], 100);
        assert_eq!(s["p50_ms"], 50.0);
        assert_eq!(s["p99_ms"], 99.0);
        assert_eq!(s["max_ms"], 100.0);
        let empty = latency_stats(Vec::new());
        assert_eq!(empty["p50_ms"], Value::Null);
    }

    #[test]
    fn payloads_round_trip_their_tag_and_enqueue_time() {
        let p = payload(Tag::B, 7, 1234.56);
        assert_eq!(parse_payload(&p), Some((Tag::B, 1234.56)));
        assert_eq!(parse_payload(&json!({"t": "X", "e": 1.0})), None);
    }

    #[test]
    fn the_prio_policy_declares_both_bands_and_validates() {
        let mut args = E2eArgs {
            url: None,
            scenarios: vec![],
            variants: vec![],
            n: 1,
            bulk_chunk: 1,
            single_n: 1,
            single_conc: 1,
            single_conc_n: 1,
            coalesce: 1,
            phase_cap_s: 1,
            fair_a: 1,
            fair_b: 1,
            job_cost: JobCost::Sleep,
            job_cost_ms: 1,
            prio_window_s: 1,
            prio_low: 1,
            prio_low_water: 1,
            prio_high_water: 1,
            prio_high_weight: None,
            prio_low_weight: None,
            estimate_ms: None,
            workers: 1,
            batch: 1,
            complete_separately: false,
            sdk_workers: 1,
            sdk_concurrency: 1,
            wait_limit_s: 1,
            label: None,
            rep: None,
            keep_data: false,
        };
        let policy = fairway_core::Policy::from_text(&prio_policy(&args)).unwrap();
        let names: Vec<&str> = policy.classes.iter().map(|c| c.name.as_str()).collect();
        assert!(
            names.contains(&"high") && names.contains(&"low"),
            "{names:?}"
        );
        args.prio_high_weight = Some(9.0);
        let policy = fairway_core::Policy::from_text(&prio_policy(&args)).unwrap();
        let high = policy.classes.iter().find(|c| c.name == "high").unwrap();
        let low = policy.classes.iter().find(|c| c.name == "low").unwrap();
        assert!(high.weight > low.weight);
    }

    #[test]
    fn the_recovered_log_line_is_read() {
        let log = "2026-11-30T00:00:00Z  INFO fairway_server::writer: recovered replayed=12 \
                   snapshot_lsn=40 live_jobs=1000 policy_version=1 elapsed_ms=85\n";
        let r = recovered_fields(log);
        assert_eq!(r["replayed_events"], 12);
        assert_eq!(r["live_jobs"], 1000);
        assert_eq!(r["recover_ms"], 85);
    }
}
