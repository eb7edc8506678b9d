//! A deterministic simulation of the whole server loop, after TigerBeetle's VOPR.
//!
//! One seed drives everything: the real [`Writer`] (its turns called through
//! [`Writer::step`], the same code the server's loop runs), the engine inside it, an in-memory
//! store ([`MemStore`] on a [`MemDisk`] that survives "crashes"), the clock, and the clients:
//! producers that submit (and retry when an answer is lost), workers that long-poll, heartbeat
//! on their own drifting clocks, complete, fail, die and come back, cancellations, status reads
//! and policy publishes. Faults:
//!
//! - **a commit that fails** ([`MemStore::fail_next_commit`]): every answer of the turn must be
//!   `Unavailable`, the writer must stop applying anything, and a restart must find the store
//!   exactly as it was before the turn;
//! - **a torn last commit** ([`MemStore::tear_last_record`]): the process died during the
//!   commit's flush and the disk came back without that batch, as redb's and PostgreSQL's
//!   recoveries roll back a torn transaction whole; the turn's answers are lost. Copies of the
//!   disk with the last record's bytes damaged must be refused by recovery, naming that LSN;
//! - **a crash between commit and reply**: the turn's answers are lost, and after the restart
//!   everything the turn accepted or finished must be there;
//! - **a snapshot write that fails** ([`MemStore::fail_next_snapshot`]), having reached the disk
//!   or not: the turn's answers, sent before the snapshot, stand; the writer must stop applying
//!   anything; a restart must find the state of the last commit, from the new snapshot or from
//!   the previous one and the log;
//! - **a torn snapshot** ([`MemStore::tear_last_snapshot`]): the process died during the
//!   snapshot's flush and the disk came back with the snapshot before it and the events the new
//!   one pruned. Copies of the disk with the new snapshot's bytes damaged (cut short, a bit
//!   flipped) must be refused by recovery, naming the snapshot's LSN, and the server must not
//!   start on them: there is nothing to fall back on, since a snapshot prunes the log it covers;
//! - **a clean restart**, and **clock faults**: the server's clock jumps forward (leases and
//!   deadlines expire at once), each process starts with its own skew (possibly behind the
//!   last event), and each worker heartbeats by its own clock, some too slowly to keep their
//!   leases.
//!
//! After every step the checkers run: [`Engine::audit`] is clean; the store, recovered from
//! its snapshot and the events after it, gives the live engine's durable state
//! ([`Engine::durable_view`]); every acknowledged job exists, in the state its last
//! acknowledged answer said if that was final; no job ends twice in the log; every answer a
//! client got is backed by a durable event (an acknowledged lease by its `LeaseGranted`, an
//! acknowledged completion by its `AttemptEnded`); epochs only grow; a lease carries the
//! payload its job was submitted with.
//!
//! A failing seed returns a [`Failure`] with a one-line-per-event timeline; [`run`] with the
//! same seed replays it exactly (nothing reads the OS's clock or randomness).

use crate::config::Limits;
use crate::wire::LeaseGrant;
use crate::writer::{
    Command, Completion, LeaseFailure, LeaseOutcome, Shared, StoredJob, SubmitJob, Unavailable,
    Writer, WriterSettings, default_demand, engine_config, recover,
};
use fairway_core::event::{AfterAttempt, AttemptEnd};
use fairway_core::{
    Admission, Dur, Engine, Event, HeartbeatReply, JobSpec, JobState, JobStatus, Outcome, Time,
    WorkerOffer,
};
use fairway_store::{
    Batch, CodecError, CorruptReason, EventStore, Lsn, MemDisk, MemStore, Recovered,
    SnapshotFailure, StoreError,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Steps one seed runs unless told otherwise.
pub const DEFAULT_STEPS: usize = 300;

/// The tenants and classes of both policies (each declares `t2`'s limit: a publish lowers or
/// raises it while work runs, the case of engine finding F3, fixed).
macro_rules! tenants_and_classes {
    () => {
        r#"
[[tenant]]
name = "t0"
guarantee = { cpu = 2 }

[[tenant]]
name = "t1"
weight = 2
burst = 30
rate = 5

[[class]]
name = "default"
on_deadline = "drop"

[[class]]
name = "urgent"
priority = 10
reserve = 0.25
max_age = "20s"
overload = "defer"

[[class]]
name = "batch"
max_attempts = 3
backoff = "200ms"
backoff_max = "1s"
on_deadline = "downgrade"
"#
    };
}

/// The policy the server is configured with: preemption (the `urgent` class), retries with
/// backoff (`batch`), a guarantee, a limit and a burst quota, so that every kind of event
/// occurs.
pub const POLICY_A: &str = concat!(
    r#"
[policy]
name = "fair"
preemption = true
lease = "4s"
preempt_grace = "1s"
default_estimate = "1s"

[[tenant]]
name = "t2"
limit = { cpu = 4 }
"#,
    tenants_and_classes!()
);

/// The policy a client publishes now and then (the configured one comes back at a restart).
pub const POLICY_B: &str = concat!(
    r#"
[policy]
name = "drf"
preemption = true
lease = "3s"
preempt_grace = "500ms"
backfill = "easy"

[[tenant]]
name = "t2"
limit = { cpu = 2 }
"#,
    tenants_and_classes!()
);

const TENANTS: [&str; 3] = ["t0", "t1", "t2"];
const CLASSES: [Option<&str>; 4] = [None, Some("default"), Some("urgent"), Some("batch")];
/// The simulation's epoch: 2023-11-14 in Unix nanoseconds, as the server's clock reads.
const START: Time = Time(1_700_000_000_000_000_000);

/// SplitMix64: small, fast, and the same on every machine (the simulator's generator in
/// `fairway-sim`, which the server does not depend on, with the draws this simulation needs).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `per_mille` / 1000.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }
}

/// What one seed did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// Steps run (one writer turn each, plus faults).
    pub steps: usize,
    /// Commands sent.
    pub commands: u64,
    /// Events committed (and not torn away).
    pub events: u64,
    /// Jobs acknowledged as accepted.
    pub acked_jobs: u64,
    /// Submissions sent in parts, as a large HTTP batch is (`Command::Submit`'s `more`).
    pub parted_batches: u64,
    /// Jobs seen to succeed.
    pub succeeded: u64,
    /// Leases granted to the workers.
    pub leases: u64,
    /// Of which leases of a gang's members.
    pub gang_leases: u64,
    /// Commits that failed by injection.
    pub failed_commits: u64,
    /// Last commits torn.
    pub torn: u64,
    /// Crashes between a commit and its answers.
    pub crashes: u64,
    /// Clean restarts.
    pub clean_restarts: u64,
    /// Snapshots written (each also checked refused once damaged, cut short and by a bit).
    pub snapshots: u64,
    /// Snapshot writes that failed by injection: nothing written, or written all the same.
    pub failed_snapshots: u64,
    /// Of which written all the same.
    pub failed_snapshots_written: u64,
    /// Snapshots torn by a crash during their flush (the disk came back without them).
    pub torn_snapshots: u64,
    /// Forward jumps of the server's clock.
    pub clock_jumps: u64,
    /// Workers that died holding or awaiting leases.
    pub worker_deaths: u64,
    /// Completions and heartbeats refused as stale.
    pub stale_refused: u64,
    /// Committed events by kind (attempt ends by how they ended).
    pub event_kinds: BTreeMap<String, u64>,
}

impl Report {
    /// Adds another seed's counts to these.
    pub fn add(&mut self, o: &Report) {
        self.steps += o.steps;
        self.commands += o.commands;
        self.events += o.events;
        self.acked_jobs += o.acked_jobs;
        self.parted_batches += o.parted_batches;
        self.succeeded += o.succeeded;
        self.leases += o.leases;
        self.gang_leases += o.gang_leases;
        self.failed_commits += o.failed_commits;
        self.torn += o.torn;
        self.crashes += o.crashes;
        self.clean_restarts += o.clean_restarts;
        self.snapshots += o.snapshots;
        self.failed_snapshots += o.failed_snapshots;
        self.failed_snapshots_written += o.failed_snapshots_written;
        self.torn_snapshots += o.torn_snapshots;
        self.clock_jumps += o.clock_jumps;
        self.worker_deaths += o.worker_deaths;
        self.stale_refused += o.stale_refused;
        for (kind, n) in &o.event_kinds {
            *self.event_kinds.entry(kind.clone()).or_default() += n;
        }
    }

    /// One line of figures.
    pub fn summary(&self) -> String {
        format!(
            "{} steps, {} commands ({} batches in parts), {} events, {} jobs acknowledged, {} succeeded, {} leases ({} of gangs); \
             faults: {} failed commits, {} torn commits, {} crashes before replies, {} clean \
             restarts, {} clock jumps, {} worker deaths; {} snapshots ({} failed, {} of them \
             written, {} torn); {} stale calls refused",
            self.steps,
            self.commands,
            self.parted_batches,
            self.events,
            self.acked_jobs,
            self.succeeded,
            self.leases,
            self.gang_leases,
            self.failed_commits,
            self.torn,
            self.crashes,
            self.clean_restarts,
            self.clock_jumps,
            self.worker_deaths,
            self.snapshots,
            self.failed_snapshots,
            self.failed_snapshots_written,
            self.torn_snapshots,
            self.stale_refused
        ) + &format!(
            "; events: {}",
            self.event_kinds
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// A seed that broke a checker (or panicked).
#[derive(Clone, Debug)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// The step that failed.
    pub step: usize,
    /// What broke.
    pub message: String,
    /// Every step and fault so far, one line each.
    pub timeline: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "VOPR seed {} failed at step {}:", self.seed, self.step)?;
        writeln!(f, "  {}", self.message)?;
        writeln!(f, "timeline:")?;
        for line in &self.timeline {
            writeln!(f, "  {line}")?;
        }
        write!(
            f,
            "replay: FAIRWAY_VOPR_SEED={} cargo test -p fairway-server --test vopr \
             (or: fairway vopr --seed {})",
            self.seed, self.seed
        )
    }
}

/// Runs one seed for `steps` steps.
pub fn run(seed: u64, steps: usize) -> Result<Report, Box<Failure>> {
    let mut sim = Sim::new(seed);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for _ in 0..steps {
            sim.step()?;
        }
        sim.finish()
    }));
    let message = match outcome {
        Ok(Ok(())) => {
            sim.report.steps = sim.step_no;
            sim.report.seed = seed;
            return Ok(sim.report);
        }
        Ok(Err(message)) => message,
        Err(panic) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            format!("panicked: {text}")
        }
    };
    Err(Box::new(Failure {
        seed,
        step: sim.step_no,
        message,
        timeline: std::mem::take(&mut sim.timeline),
    }))
}

/// The store the simulated server runs on: a [`MemStore`] that also keeps, beside it, every
/// event it committed (what the disk held before snapshots pruned it), for the checkers.
struct SimStore {
    inner: MemStore,
    log: Arc<Mutex<Vec<Event>>>,
    /// Snapshots taken.
    snapshots: Arc<AtomicU64>,
}

impl SimStore {
    fn log(&self) -> std::sync::MutexGuard<'_, Vec<Event>> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl EventStore for SimStore {
    fn commit(&mut self, batch: &Batch) -> Result<Lsn, StoreError> {
        let lsn = self.inner.commit(batch)?;
        self.log().extend(batch.events.iter().cloned());
        Ok(lsn)
    }
    fn put_snapshot(&mut self, lsn: Lsn, bytes: &[u8]) -> Result<(), StoreError> {
        self.inner.put_snapshot(lsn, bytes)?;
        self.snapshots.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn recover(&mut self) -> Result<Recovered, StoreError> {
        self.inner.recover()
    }
    fn payload(&self, job: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.payload(job)
    }
    fn last_lsn(&self) -> Lsn {
        self.inner.last_lsn()
    }
    fn fence(&mut self) -> Result<(), StoreError> {
        self.inner.fence()
    }
}

type Rx<T> = oneshot::Receiver<Result<T, Unavailable>>;

/// A record on the disk, named as the store's errors name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Record {
    Event(Lsn),
    Snapshot(Lsn),
}

impl std::fmt::Display for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Record::Event(lsn) => write!(f, "log record at LSN {lsn}"),
            Record::Snapshot(lsn) => write!(f, "snapshot at LSN {lsn}"),
        }
    }
}

/// A lease a worker holds.
#[derive(Clone, Debug)]
struct Held {
    epoch: u64,
    /// When the worker got it (true time), and how long its work takes.
    started: Time,
    work: Dur,
    /// When the worker last heard its lease extended (true time).
    last_hb: Time,
    lease: Dur,
    /// The server asked it to stop.
    stop: bool,
    /// A heartbeat or completion is awaiting its answer.
    busy: bool,
}

struct SimWorker {
    name: String,
    offer: WorkerOffer,
    /// How fast its clock runs against true time, in per mille: a slow clock heartbeats late.
    rate: u64,
    /// Dead until this true instant.
    down_until: Option<Time>,
    poll: Option<Rx<LeaseOutcome>>,
    held: BTreeMap<String, Held>,
    /// Leases it held once: (job, epoch), for stale calls.
    history: Vec<(String, u64)>,
}

enum Waiting {
    Submit {
        ids: Vec<String>,
        rx: Rx<Vec<Admission>>,
    },
    Complete {
        worker: usize,
        items: Vec<(String, u64, Outcome)>,
        /// Replays of a lease the worker no longer holds: must be refused (or repeat the end).
        stale: bool,
        rx: Rx<Vec<Result<JobState, LeaseFailure>>>,
    },
    Heartbeat {
        worker: usize,
        job: String,
        epoch: u64,
        rx: Rx<Result<HeartbeatReply, LeaseFailure>>,
    },
    Cancel {
        job: String,
        rx: Rx<Option<JobState>>,
    },
    Status {
        job: String,
        rx: Rx<Option<JobStatus>>,
    },
    GetPolicy {
        rx: Rx<(u64, String)>,
    },
    PutPolicy {
        rx: Rx<Result<u64, Vec<fairway_core::ConfigError>>>,
    },
}

/// What the checkers know of the log, built as it grows.
#[derive(Default)]
struct LogFacts {
    seen: usize,
    /// Terminal events per job (must stay at most one).
    ends: BTreeMap<String, u32>,
    /// Every (job, epoch) granted, and every (job, epoch) that ended.
    granted: BTreeSet<(String, u64)>,
    ended: BTreeMap<(String, u64), AttemptEnd>,
    /// The latest epoch granted per job.
    epoch: BTreeMap<String, u64>,
    succeeded: u64,
    kinds: BTreeMap<String, u64>,
}

struct Sim {
    rng: Rng,
    step_no: usize,
    timeline: Vec<String>,
    report: Report,
    settings: WriterSettings,
    disk: MemDisk,
    log: Arc<Mutex<Vec<Event>>>,
    writer: Option<Writer<SimStore>>,
    /// The writer's command channel: unused (the simulation calls `step`), kept open.
    channel: (SyncSender<Command>, Option<Receiver<Command>>),
    /// True time, and the running server's skew against it (nanoseconds, may be negative).
    time: Time,
    skew: i64,
    /// The durable state as of the last good commit: what a restart must find.
    committed_view: String,
    /// The last LSN at which the disk was replayed and found equal to `committed_view`
    /// (`None` after a restart or a snapshot may have changed the disk).
    checked_lsn: Option<(Lsn, u64)>,
    snapshots: Arc<AtomicU64>,
    facts: LogFacts,
    /// `facts` are being rebuilt after a tear: the events are in the timeline already.
    rebuilding: bool,
    /// `FAIRWAY_VOPR_TRACE` is set: the timeline is printed as it happens.
    trace: bool,
    next_job: u64,
    specs: BTreeMap<String, (JobSpec, Vec<u8>, u64)>,
    /// Jobs acknowledged as accepted, and the final state an acknowledged answer gave.
    acked: BTreeMap<String, Option<JobState>>,
    /// Submissions whose answer was lost: the producer retries them.
    retry: BTreeSet<String>,
    waiting: Vec<Waiting>,
    workers: Vec<SimWorker>,
    /// Jobs accepted by a turn whose answers were lost in a crash: they must be there after.
    must_exist: Vec<String>,
    /// The running store will fail its next snapshot write, so (until the process dies).
    snapshot_fault: Option<SnapshotFailure>,
}

/// An instant as seconds since the simulation's start.
fn ms(t: Time) -> String {
    format!("{:.3}s", (t.0 as i128 - START.0 as i128) as f64 / 1e9)
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut rng = Rng::new(seed);
        let snapshot_every_events = rng.range(24, 400);
        let limits = Limits {
            snapshot_every_events,
            // Below the live jobs of a busy run, so that the cap on the replay tail is taken.
            snapshot_max_tail_events: snapshot_every_events * 2,
            commit_batch_max: 64,
            max_parked: 16,
            ..Limits::default()
        };
        let settings = WriterSettings {
            limits,
            policy: Some(POLICY_A.to_string()),
            lease_ms: None,
            release_memory: None,
        };
        let n_workers = rng.range(2, 5) as usize;
        let workers = (0..n_workers)
            .map(|i| {
                let cpu = rng.pick(&[1.0, 2.0, 4.0]);
                SimWorker {
                    name: format!("w{i}"),
                    offer: WorkerOffer {
                        worker: format!("w{i}"),
                        pool: "default".into(),
                        capacity: BTreeMap::from([("cpu".to_string(), cpu)]),
                        labels: BTreeMap::new(),
                        max_jobs: rng.range(1, 3) as u32,
                    },
                    // Most clocks are near true time; one in five runs at a third of it.
                    rate: if rng.chance(200) {
                        rng.range(250, 400)
                    } else {
                        rng.range(900, 1100)
                    },
                    down_until: None,
                    poll: None,
                    held: BTreeMap::new(),
                    history: Vec::new(),
                }
            })
            .collect();
        let (tx, rx) = sync_channel(1);
        let mut sim = Sim {
            rng,
            step_no: 0,
            timeline: Vec::new(),
            report: Report::default(),
            settings,
            disk: MemDisk::new(),
            log: Arc::new(Mutex::new(Vec::new())),
            writer: None,
            channel: (tx, Some(rx)),
            time: START,
            skew: 0,
            committed_view: String::new(),
            checked_lsn: None,
            snapshots: Arc::new(AtomicU64::new(0)),
            facts: LogFacts::default(),
            rebuilding: false,
            trace: std::env::var_os("FAIRWAY_VOPR_TRACE").is_some(),
            next_job: 0,
            specs: BTreeMap::new(),
            acked: BTreeMap::new(),
            retry: BTreeSet::new(),
            waiting: Vec::new(),
            workers,
            must_exist: Vec::new(),
            snapshot_fault: None,
        };
        let worker_line: Vec<String> = sim
            .workers
            .iter()
            .map(|w| {
                format!(
                    "{} cpu={} max_jobs={} clock={}‰",
                    w.name, w.offer.capacity["cpu"], w.offer.max_jobs, w.rate
                )
            })
            .collect();
        sim.line(format!(
            "seed {seed}: snapshot every {} events; workers {}",
            sim.settings.limits.snapshot_every_events,
            worker_line.join(", ")
        ));
        sim.start_process()
            .unwrap_or_else(|e| panic!("the first start failed: {e}"));
        sim
    }

    fn line(&mut self, text: String) {
        if self.trace {
            eprintln!("{text}");
        }
        self.timeline.push(text);
    }

    /// The running server's clock.
    fn server_now(&self) -> Time {
        Time(self.time.0.saturating_add_signed(self.skew))
    }

    fn writer(&mut self) -> &mut Writer<SimStore> {
        self.writer.as_mut().expect("a running writer")
    }

    /// Starts a server process on the disk: recovery as `fairway serve` does it.
    fn start_process(&mut self) -> Result<(), String> {
        // The disk, recovered from its snapshot and the events after it, must hold exactly the
        // state of the last good commit (before recovery publishes the configured policy).
        if self.step_no > 0 {
            let view = replayed_view(&self.disk)?;
            if view != self.committed_view {
                return Err(diff(
                    "the store after a restart",
                    &self.committed_view,
                    &view,
                ));
            }
        }
        let now = self.server_now();
        let mut store = SimStore {
            inner: MemStore::open(self.disk.clone()),
            log: self.log.clone(),
            snapshots: self.snapshots.clone(),
        };
        let (engine, unsnapshotted) = recover(&mut store, &self.settings, now)?;
        let rx = self.channel.1.take().unwrap_or_else(|| {
            let (tx, rx) = sync_channel(1);
            self.channel.0 = tx;
            rx
        });
        let writer = Writer::new(
            engine,
            unsnapshotted,
            store,
            rx,
            Arc::new(Shared::default()),
            self.settings.clone(),
        )
        .unpaced_snapshots();
        self.writer = Some(writer);
        self.absorb_log();
        self.committed_view = self.writer().engine().durable_view();
        let lsn = self.writer().store_mut().last_lsn();
        self.line(format!(
            "       start: server clock {} (skew {:+}ms), recovered to LSN {lsn}",
            ms(now),
            self.skew / 1_000_000
        ));
        // Whatever a lost answer had accepted or finished is there.
        for job in std::mem::take(&mut self.must_exist) {
            if self.writer().engine().status(&job).is_none() {
                return Err(format!(
                    "job {job} was accepted by a committed turn whose answers were lost, and is \
                     gone after the restart"
                ));
            }
        }
        Ok(())
    }

    /// The process dies: the engine and every connection go; the disk stays.
    fn kill_process(&mut self) {
        self.writer = None;
        self.checked_lsn = None;
        for w in &mut self.waiting {
            if let Waiting::Submit { ids, .. } = w {
                self.retry.extend(ids.iter().cloned());
            }
        }
        self.waiting.clear();
        for w in &mut self.workers {
            w.poll = None;
            for h in w.held.values_mut() {
                h.busy = false;
            }
        }
        // A pending fault belongs to the process's store, and dies with it.
        self.snapshot_fault = None;
        // Each process has its own clock: up to 3 s either way of true time.
        self.skew = self.rng.range(0, 6_000) as i64 * 1_000_000 - 3_000_000_000;
    }

    fn step(&mut self) -> Result<(), String> {
        self.step_no += 1;
        // Time passes; now and then the server's clock jumps forward.
        let mut advance = Dur::from_millis(self.rng.below(300));
        let mut note = String::new();
        if self.rng.chance(15) {
            advance = Dur::from_millis(self.rng.range(3_000, 90_000));
            self.report.clock_jumps += 1;
            note = format!(" CLOCK JUMP +{}ms", advance.as_millis());
        }
        self.time = self.time.plus(advance);
        self.revive_workers();

        let fail_commit = self.rng.chance(20);
        if fail_commit {
            self.writer().store_mut().inner.fail_next_commit();
        }
        // Now and then the store will fail its next snapshot write (whenever the writer takes
        // one), having written it or not.
        let mut armed = "";
        if self.snapshot_fault.is_none() && self.rng.chance(30) {
            let how = if self.rng.chance(500) {
                armed = " FAIL-NEXT-SNAPSHOT(not written)";
                SnapshotFailure::NotWritten
            } else {
                armed = " FAIL-NEXT-SNAPSHOT(written)";
                SnapshotFailure::Written
            };
            self.writer().store_mut().inner.fail_next_snapshot(how);
            self.snapshot_fault = Some(how);
        }
        let (commands, described) = self.commands();
        self.report.commands += commands.len() as u64;
        let before_lsn = self.writer().store_mut().last_lsn();
        let snapshots_before = self.snapshots.load(Ordering::Relaxed);
        let now = self.server_now();
        let result = self.writer().step(now, commands);
        let lsn = self.writer().store_mut().last_lsn();
        let armed_snapshot = self.snapshot_fault.is_some();
        let store = &self.writer().store_mut().inner;
        let commit_failed = fail_commit && !store.commit_fault_pending();
        let snapshot_failed = armed_snapshot && !store.snapshot_fault_pending();
        let snapshotted = self.snapshots.load(Ordering::Relaxed) > snapshots_before;
        self.line(format!(
            "{:>5} t={} srv={}{note}{}{armed}: [{}] -> {}{}",
            self.step_no,
            ms(self.time),
            ms(now),
            if fail_commit { " FAIL-NEXT-COMMIT" } else { "" },
            described.join(", "),
            match &result {
                Ok(()) if lsn > before_lsn => format!("committed LSN {}..={lsn}", before_lsn + 1),
                Ok(()) => "nothing to commit".to_string(),
                Err(e) => format!("ERROR {e}"),
            },
            if snapshotted {
                format!("; snapshot at LSN {lsn}")
            } else {
                String::new()
            }
        ));

        match result {
            Err(_) if commit_failed => {
                self.report.failed_commits += 1;
                return self.after_failed_commit();
            }
            Err(_) if snapshot_failed => return self.after_failed_snapshot(),
            Err(e) => return Err(format!("a turn failed without an injected fault: {e}")),
            Ok(()) if commit_failed => {
                return Err("the writer went on after its commit failed".into());
            }
            Ok(()) if snapshot_failed => {
                return Err("the writer went on after its snapshot failed".into());
            }
            Ok(()) => {}
        }
        if fail_commit {
            // Nothing was committed (a read-only turn): the fault is still pending; the store
            // would fail the next commit. A crash clears it, as it would a real process.
            self.kill_process();
            self.line("       crash (a commit fault was pending): restart".into());
            return self.start_process();
        }

        // Crash between commit and answer, or a torn commit: the answers never reach anyone.
        let crash = self.rng.chance(15);
        let tear = !crash && lsn > before_lsn && self.rng.chance(15);
        if crash || tear {
            return self.crash_after_turn(tear, before_lsn, lsn);
        }

        self.collect()?;
        self.check()?;
        if snapshotted {
            self.report.snapshots += 1;
            self.check_damage_refused(Record::Snapshot(lsn))?;
            // The answers went out before the snapshot; the process dies during its flush.
            if self.rng.chance(250) {
                return self.tear_snapshot("after the answers");
            }
        }
        if self.rng.chance(5) {
            return self.clean_restart();
        }
        Ok(())
    }

    /// A clean stop (which snapshots, and may fail doing so), and a restart.
    fn clean_restart(&mut self) -> Result<(), String> {
        self.report.clean_restarts += 1;
        self.line("       clean stop and restart".into());
        let writer = self.writer.take().expect("a running writer");
        match writer.stop() {
            Ok(store) => {
                if self.snapshot_fault.is_some() && !store.inner.snapshot_fault_pending() {
                    return Err("a clean stop succeeded though its snapshot failed".into());
                }
            }
            Err(e) if self.snapshot_fault.is_some() => {
                self.count_failed_snapshot();
                self.line(format!("       SNAPSHOT FAILED at the clean stop: {e}"));
            }
            Err(e) => return Err(e),
        }
        // The parked long polls were answered (empty) before the snapshot.
        self.collect()?;
        self.kill_process();
        self.start_process()
    }

    fn count_failed_snapshot(&mut self) {
        self.report.failed_snapshots += 1;
        if self.snapshot_fault == Some(SnapshotFailure::Written) {
            self.report.failed_snapshots_written += 1;
        }
    }

    /// A snapshot write failed after the turn committed and answered: the answers stand (each
    /// backed by the log), the disk holds the state of that commit (from the previous snapshot
    /// and the log, or from the new snapshot), the writer applies nothing more, and a restart
    /// recovers that state.
    fn after_failed_snapshot(&mut self) -> Result<(), String> {
        self.count_failed_snapshot();
        self.collect()?;
        self.check()?;
        self.check_stopped("its snapshot failed")?;
        self.line("       SNAPSHOT FAILED: the writer stopped; restart".into());
        self.kill_process();
        self.start_process()
    }

    /// The process dies during a snapshot's flush, and the disk comes back without it: the
    /// previous snapshot and the events the new one pruned. A restart must recover the state
    /// of the last commit from them.
    fn tear_snapshot(&mut self, when: &str) -> Result<(), String> {
        if !self.writer().store_mut().inner.tear_last_snapshot() {
            return Err("the turn snapshotted, but its last write was not a snapshot".into());
        }
        self.report.torn_snapshots += 1;
        self.line(format!(
            "       TORN SNAPSHOT ({when}): the disk came back with the one before it and the log"
        ));
        self.kill_process();
        self.start_process()
    }

    /// After a failed write: the writer has stopped, and a command sent to it now is neither
    /// applied nor answered.
    fn check_stopped(&mut self, after: &str) -> Result<(), String> {
        if !self.writer().is_stopped() {
            return Err(format!("the writer did not stop after {after}"));
        }
        let (tx, rx) = oneshot::channel();
        let probe = Command::Status {
            job: "probe".into(),
            tenant: None,
            reply: tx,
        };
        let now = self.server_now();
        if self.writer().step(now, vec![probe]).is_ok() {
            return Err("a stopped writer took another turn".into());
        }
        if let Ok(Ok(_)) = { rx }.try_recv() {
            return Err("a stopped writer answered a status read".into());
        }
        Ok(())
    }

    /// A commit failed: every answer of the turn is `Unavailable`, the writer applies nothing
    /// more, and a restart finds the store as it was before the turn.
    fn after_failed_commit(&mut self) -> Result<(), String> {
        self.check_stopped("its commit failed")?;
        for w in std::mem::take(&mut self.waiting) {
            if let Some(what) = answered_ok(w) {
                return Err(format!("a turn whose commit failed answered {what}"));
            }
        }
        for i in 0..self.workers.len() {
            if let Some(mut rx) = self.workers[i].poll.take()
                && let Ok(Ok(answer)) = rx.try_recv()
            {
                return Err(format!(
                    "a turn whose commit failed answered {}'s long poll: {answer:?}",
                    self.workers[i].name
                ));
            }
        }
        self.line("       the writer stopped; restart".into());
        self.kill_process();
        self.start_process()
    }

    /// The process dies right after the turn's commit (`tear`: during its flush, and the disk
    /// comes back without the batch). No client hears an answer of the turn.
    fn crash_after_turn(&mut self, tear: bool, before_lsn: Lsn, lsn: Lsn) -> Result<(), String> {
        let mut torn_snapshot = false;
        if tear {
            self.check_damage_refused(Record::Event(lsn))?;
            if self.writer().store_mut().inner.tear_last_record() {
                self.report.torn += 1;
                self.line(format!(
                    "       TORN: the commit of LSN {}..={lsn} never reached the disk; answers lost",
                    before_lsn + 1
                ));
                self.log
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .truncate(before_lsn as usize);
                self.rebuild_facts();
                self.kill_process();
                return self.start_process();
            }
            // The turn ended with a snapshot: its batch is durable, and what the crash tears is
            // the snapshot's flush.
            torn_snapshot = true;
        } else {
            self.report.crashes += 1;
            self.line("       CRASH between commit and answers: answers lost".into());
        }
        // The turn is durable: what it accepted must exist after the restart, though nobody
        // was told.
        for w in &mut self.waiting {
            if let Waiting::Submit { rx, ids } = w
                && let Ok(Ok(admissions)) = rx.try_recv()
            {
                for (id, a) in ids.iter().zip(admissions) {
                    if a.is_accepted() {
                        self.must_exist.push(id.clone());
                    }
                }
            }
        }
        self.absorb_log();
        self.committed_view = self.writer().engine().durable_view();
        if torn_snapshot {
            return self.tear_snapshot("answers lost");
        }
        self.kill_process();
        self.start_process()
    }

    /// Recovery refuses a disk whose `record` is damaged, naming it: a frame cut short (as a
    /// torn write leaves a record in a log file) fails its length check, a flipped bit its CRC;
    /// and the server does not start on it. Checked on copies, so that the run goes on with the
    /// intact disk. There is nothing to fall back on: a snapshot's events are pruned with it.
    fn check_damage_refused(&mut self, record: Record) -> Result<(), String> {
        for cut in [true, false] {
            let copy = self.disk.deep_copy();
            let damaged = match (record, cut) {
                (Record::Event(lsn), true) => copy.tear_event_frame(lsn),
                (Record::Event(lsn), false) => copy.corrupt_event(lsn),
                (Record::Snapshot(lsn), true) => copy.tear_snapshot_frame(lsn),
                (Record::Snapshot(lsn), false) => copy.corrupt_snapshot(lsn),
            };
            if !damaged {
                if let Record::Snapshot(_) = record {
                    return Err(format!("the {record} is not on the disk"));
                }
                // Pruned by a snapshot in the same turn: nothing to damage.
                return Ok(());
            }
            let (damage, check) = if cut {
                ("cut short", "length")
            } else {
                ("with a flipped bit", "CRC")
            };
            let refused = match MemStore::open(copy.clone()).recover() {
                Err(StoreError::Corrupt {
                    lsn,
                    reason: CorruptReason::Codec(e),
                }) => Some((Record::Event(lsn), e)),
                Err(StoreError::CorruptSnapshot { lsn, reason }) => {
                    Some((Record::Snapshot(lsn), reason))
                }
                _ => None,
            };
            let by_its_check = |e: &CodecError| {
                matches!(
                    (cut, e),
                    (true, CodecError::LengthMismatch { .. })
                        | (false, CodecError::Checksum { .. })
                )
            };
            if !refused
                .as_ref()
                .is_some_and(|(at, e)| *at == record && by_its_check(e))
            {
                return Err(format!(
                    "the {record}, {damage}, was not refused by its {check} check: {refused:?}"
                ));
            }
            let mut store = MemStore::open(copy);
            match recover(&mut store, &self.settings, self.server_now()) {
                Err(e) if e.contains(&record.to_string()) => {}
                Err(e) => {
                    return Err(format!(
                        "the server refused a disk whose {record} is {damage} without naming it: {e}"
                    ));
                }
                Ok(_) => {
                    return Err(format!(
                        "the server started on a disk whose {record} is {damage}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Dead workers whose time has come start again, under the same name, sometimes with
    /// another capacity while the engine still counts their old leases (engine finding F2).
    fn revive_workers(&mut self) {
        let now = self.time;
        for i in 0..self.workers.len() {
            if self.workers[i].down_until.is_some_and(|t| t <= now) {
                self.workers[i].down_until = None;
                if self.rng.chance(300) {
                    let cpu = self.rng.pick(&[1.0, 2.0, 4.0]);
                    let w = &mut self.workers[i];
                    w.offer.capacity.insert("cpu".into(), cpu);
                    self.timeline
                        .push(format!("       {} comes back with cpu={cpu}", w.name));
                }
            }
        }
    }

    /// The turn's commands, and a word for each.
    fn commands(&mut self) -> (Vec<Command>, Vec<String>) {
        let mut commands = Vec::new();
        let mut said = Vec::new();
        // Producers: retries of lost answers first, then new work.
        if !self.retry.is_empty() && self.rng.chance(600) {
            let ids: Vec<String> = std::mem::take(&mut self.retry).into_iter().collect();
            said.push(format!("resubmit {}", ids.join(" ")));
            commands.push(self.submit(ids));
        }
        // Now and then a burst, so that work queues up (deadlines and maximum ages bite).
        let (submits, per) = if self.rng.chance(8) {
            (1, 8)
        } else {
            (self.rng.pick(&[0, 0, 0, 1, 1]), self.rng.range(1, 2))
        };
        for _ in 0..submits {
            let mut ids = Vec::new();
            for _ in 0..per {
                if !self.specs.is_empty() && self.rng.chance(80) {
                    // An old id again (the same job): the first answer comes back.
                    let k = self.rng.below(self.specs.len() as u64) as usize;
                    ids.push(self.specs.keys().nth(k).cloned().unwrap_or_default());
                } else {
                    ids.push(self.new_job());
                }
            }
            let words: Vec<String> = ids
                .iter()
                .map(|id| {
                    let (spec, _, _) = &self.specs[id];
                    format!(
                        "{id}:{}/{}",
                        spec.tenant,
                        spec.class.as_deref().unwrap_or("-")
                    )
                })
                .collect();
            said.push(format!("submit {}", words.join(" ")));
            commands.push(self.submit(ids));
        }
        if !self.specs.is_empty() && self.rng.chance(60) {
            let job = self.some_job();
            let (tx, rx) = oneshot::channel();
            said.push(format!("cancel {job}"));
            commands.push(Command::Cancel {
                job: job.clone(),
                tenant: None,
                reply: tx,
            });
            self.waiting.push(Waiting::Cancel { job, rx });
        }
        if !self.specs.is_empty() && self.rng.chance(150) {
            let job = self.some_job();
            let (tx, rx) = oneshot::channel();
            said.push(format!("status {job}"));
            let tenant = self.specs[&job].0.tenant.clone();
            commands.push(Command::Status {
                job: job.clone(),
                tenant: Some(tenant),
                reply: tx,
            });
            self.waiting.push(Waiting::Status { job, rx });
        }
        if self.rng.chance(8) {
            let text = if self.rng.chance(500) {
                POLICY_A
            } else {
                POLICY_B
            };
            let (tx, rx) = oneshot::channel();
            said.push(format!(
                "publish {}",
                if text == POLICY_A { "A" } else { "B" }
            ));
            commands.push(Command::PutPolicy {
                text: text.to_string(),
                reply: tx,
            });
            self.waiting.push(Waiting::PutPolicy { rx });
        }
        if self.rng.chance(10) {
            let (tx, rx) = oneshot::channel();
            said.push("get policy".into());
            commands.push(Command::GetPolicy { reply: tx });
            self.waiting.push(Waiting::GetPolicy { rx });
        }
        for i in 0..self.workers.len() {
            self.worker_commands(i, &mut commands, &mut said);
        }
        (commands, said)
    }

    fn new_job(&mut self) -> String {
        self.next_job += 1;
        let n = self.next_job;
        let id = format!("j{n}");
        let mut spec = JobSpec::new(id.clone(), self.rng.pick(&TENANTS));
        spec.class = self.rng.pick(&CLASSES).map(str::to_string);
        spec.priority = self.rng.below(3) as i32 - 1;
        let cpu = self.rng.pick(&[0.0, 0.5, 1.0, 1.0, 2.0]);
        if cpu > 0.0 {
            spec.demand.insert("cpu".into(), cpu);
        }
        spec.estimate = if self.rng.chance(300) {
            None
        } else {
            Some(Dur::from_millis(self.rng.range(50, 5_000)))
        };
        spec.preemptible = self.rng.chance(500);
        spec.checkpointable = self.rng.chance(250);
        if self.rng.chance(50) {
            // A gang: its members start together, on one worker or on two, under one epoch;
            // some are elastic (an elastic gang of a limited tenant was engine finding F4).
            spec.gang = 2;
            if self.rng.chance(300) {
                spec.gang_min = Some(1);
            }
        }
        if self.rng.chance(100) {
            spec.not_before = Some(
                self.server_now()
                    .plus(Dur::from_millis(self.rng.range(0, 3_000))),
            );
        }
        let deadline_ms = self.rng.chance(150).then(|| self.rng.range(1_000, 20_000));
        let blob = StoredJob::encode(&spec.demand, Some(format!("{{\"n\":{n}}}").as_bytes()));
        self.specs
            .insert(id.clone(), (spec, blob, deadline_ms.unwrap_or(0)));
        id
    }

    fn some_job(&mut self) -> String {
        let k = self.rng.below(self.specs.len() as u64) as usize;
        self.specs.keys().nth(k).cloned().unwrap_or_default()
    }

    fn submit(&mut self, ids: Vec<String>) -> Command {
        let mut jobs: Vec<SubmitJob> = ids
            .iter()
            .map(|id| {
                let (spec, blob, deadline_ms) = &self.specs[id];
                SubmitJob {
                    spec: spec.clone(),
                    deadline_ms: (*deadline_ms > 0).then_some(*deadline_ms),
                    blob: Some(blob.clone()),
                }
            })
            .collect();
        // Now and then the batch comes in parts, as a large HTTP batch does (`more`; here
        // every part is there before the turn): the answers must be the same.
        let more = (jobs.len() >= 2 && self.rng.chance(300)).then(|| {
            let (parts, more) = std::sync::mpsc::sync_channel(jobs.len());
            let cut = 1 + self.rng.below(jobs.len() as u64 - 1) as usize;
            let mut rest = jobs.split_off(cut);
            while !rest.is_empty() {
                let tail = rest.split_off(1 + self.rng.below(rest.len() as u64) as usize);
                parts.send(rest).expect("room for every part");
                rest = tail;
            }
            self.report.parted_batches += 1;
            more
        });
        let (tx, rx) = oneshot::channel();
        self.waiting.push(Waiting::Submit { ids, rx });
        Command::Submit {
            jobs,
            more,
            reply: tx,
        }
    }

    fn worker_commands(&mut self, i: usize, commands: &mut Vec<Command>, said: &mut Vec<String>) {
        if self.workers[i].down_until.is_some() {
            return;
        }
        let now = self.time;
        // Now and then a worker dies: its leases and its long poll are abandoned.
        if self.rng.chance(6) {
            let down = Dur::from_millis(self.rng.range(500, 20_000));
            let w = &mut self.workers[i];
            w.down_until = Some(now.plus(down));
            w.poll = None;
            let held: Vec<String> = std::mem::take(&mut w.held).into_keys().collect();
            said.push(format!("{} DIES holding [{}]", w.name, held.join(" ")));
            self.report.worker_deaths += 1;
            return;
        }
        // A stale call: a completion or heartbeat for a lease it no longer holds.
        if !self.workers[i].history.is_empty() && self.rng.chance(20) {
            let k = self.rng.below(self.workers[i].history.len() as u64) as usize;
            let (job, epoch) = self.workers[i].history[k].clone();
            if !self.workers[i].held.contains_key(&job) {
                let outcome = Outcome::Succeeded;
                let (tx, rx) = oneshot::channel();
                said.push(format!(
                    "{} stale-complete {job}@{epoch}",
                    self.workers[i].name
                ));
                commands.push(Command::Complete {
                    items: vec![Completion {
                        job: job.clone(),
                        epoch,
                        outcome,
                        usage: Some(Dur::from_millis(10)),
                        progress: None,
                    }],
                    reply: tx,
                });
                self.waiting.push(Waiting::Complete {
                    worker: i,
                    items: vec![(job, epoch, outcome)],
                    stale: true,
                    rx,
                });
            }
        }
        // Held leases: complete when the work is done (or when told to stop), else heartbeat
        // when the worker's clock says a third of the lease has passed.
        let rate = self.workers[i].rate;
        let jobs: Vec<String> = self.workers[i].held.keys().cloned().collect();
        let mut completions = Vec::new();
        for job in jobs {
            let h = self.workers[i].held[&job].clone();
            if h.busy {
                continue;
            }
            let ran = now.since(h.started);
            if h.stop || ran >= h.work {
                let outcome = if h.stop {
                    Outcome::Stopped
                } else {
                    match self.rng.below(20) {
                        0 => Outcome::Failed { retryable: true },
                        1 => Outcome::Failed { retryable: false },
                        _ => Outcome::Succeeded,
                    }
                };
                completions.push((job.clone(), h.epoch, outcome, ran));
            } else {
                let felt = Dur(now.since(h.last_hb).0 / 1000 * rate);
                if felt.0 * 3 >= h.lease.0 {
                    let (tx, rx) = oneshot::channel();
                    said.push(format!("{} hb {job}@{}", self.workers[i].name, h.epoch));
                    commands.push(Command::Heartbeat {
                        job: job.clone(),
                        epoch: h.epoch,
                        progress: h.stop.then_some(ran),
                        reply: tx,
                    });
                    self.waiting.push(Waiting::Heartbeat {
                        worker: i,
                        job: job.clone(),
                        epoch: h.epoch,
                        rx,
                    });
                } else {
                    continue;
                }
            }
            if let Some(h) = self.workers[i].held.get_mut(&job) {
                h.busy = true;
            }
        }
        if !completions.is_empty() {
            let (tx, rx) = oneshot::channel();
            let words: Vec<String> = completions
                .iter()
                .map(|(j, e, o, _)| format!("{j}@{e}:{o:?}"))
                .collect();
            said.push(format!(
                "{} complete {}",
                self.workers[i].name,
                words.join(" ")
            ));
            commands.push(Command::Complete {
                items: completions
                    .iter()
                    .map(|(job, epoch, outcome, ran)| Completion {
                        job: job.clone(),
                        epoch: *epoch,
                        outcome: *outcome,
                        usage: Some(*ran),
                        progress: matches!(outcome, Outcome::Stopped).then_some(*ran),
                    })
                    .collect(),
                reply: tx,
            });
            self.waiting.push(Waiting::Complete {
                worker: i,
                items: completions
                    .into_iter()
                    .map(|(j, e, o, _)| (j, e, o))
                    .collect(),
                stale: false,
                rx,
            });
        }
        // Ask for work when there is room and no request is parked.
        let w = &self.workers[i];
        if w.poll.is_none() && (w.held.len() as u32) < w.offer.max_jobs && self.rng.chance(700) {
            let wait = Dur::from_millis(self.rng.pick(&[0, 200, 1_000, 1_000, 5_000]));
            let mut offer = w.offer.clone();
            offer.max_jobs = w.offer.max_jobs - w.held.len() as u32;
            let (tx, rx) = oneshot::channel();
            said.push(format!("{} lease wait={}ms", w.name, wait.as_millis()));
            commands.push(Command::Lease {
                offer,
                wait,
                reply: tx,
            });
            self.workers[i].poll = Some(rx);
        } else if w.poll.is_some() && self.rng.chance(10) {
            // The worker gives up on its long poll (its connection closes).
            said.push(format!("{} abandons its poll", w.name));
            self.workers[i].poll = None;
        }
    }

    /// Reads every answer of the turn; all but parked long polls must have one.
    fn collect(&mut self) -> Result<(), String> {
        self.absorb_log();
        let mut answers = Vec::new();
        for w in std::mem::take(&mut self.waiting) {
            self.take_answer(w, &mut answers)?;
        }
        for i in 0..self.workers.len() {
            let Some(rx) = self.workers[i].poll.as_mut() else {
                continue;
            };
            match rx.try_recv() {
                Err(oneshot::error::TryRecvError::Empty) => {}
                Err(oneshot::error::TryRecvError::Closed) | Ok(Err(Unavailable)) => {
                    self.workers[i].poll = None;
                }
                Ok(Ok(outcome)) => {
                    self.workers[i].poll = None;
                    if let LeaseOutcome::Granted(grants) = outcome {
                        for g in grants {
                            answers.push(format!(
                                "{} got {}@{}",
                                self.workers[i].name, g.job_id, g.epoch
                            ));
                            self.granted(i, g)?;
                        }
                    }
                }
            }
        }
        if !answers.is_empty() {
            self.line(format!("       answers: {}", answers.join(", ")));
        }
        Ok(())
    }

    fn take_answer(&mut self, w: Waiting, said: &mut Vec<String>) -> Result<(), String> {
        fn get<T>(mut rx: Rx<T>, what: &str) -> Result<Option<T>, String> {
            match rx.try_recv() {
                Ok(Ok(v)) => Ok(Some(v)),
                Ok(Err(Unavailable)) | Err(oneshot::error::TryRecvError::Closed) => Ok(None),
                Err(oneshot::error::TryRecvError::Empty) => {
                    Err(format!("{what} was not answered in its turn"))
                }
            }
        }
        match w {
            Waiting::Submit { ids, rx } => {
                let Some(admissions) = get(rx, "a submission")? else {
                    self.retry.extend(ids);
                    return Ok(());
                };
                if admissions.len() != ids.len() {
                    return Err(format!(
                        "a submission of {} jobs got {} admissions: one per job, in order",
                        ids.len(),
                        admissions.len()
                    ));
                }
                for (id, a) in ids.iter().zip(admissions) {
                    said.push(format!("{id} {}", a.outcome()));
                    let duplicate = matches!(
                        a,
                        Admission::Accepted {
                            duplicate: true,
                            ..
                        } | Admission::Deferred {
                            duplicate: true,
                            ..
                        }
                    );
                    if self.acked.contains_key(id) && !(a.is_accepted() && duplicate) {
                        return Err(format!(
                            "job {id} was acknowledged before, but its resubmission was answered \
                             {a:?}: the first answer must come back"
                        ));
                    }
                    if a.is_accepted() {
                        if !self.acked.contains_key(id) {
                            self.report.acked_jobs += 1;
                        }
                        self.acked.entry(id.clone()).or_insert(None);
                    }
                }
            }
            Waiting::Complete {
                worker,
                items,
                stale,
                rx,
            } => {
                let Some(results) = get(rx, "a completion")? else {
                    for (job, _, _) in &items {
                        if let Some(h) = self.workers[worker].held.get_mut(job) {
                            h.busy = false;
                        }
                    }
                    return Ok(());
                };
                for ((job, epoch, outcome), result) in items.into_iter().zip(results) {
                    match result {
                        Ok(state) => {
                            said.push(format!("{job}@{epoch} {}", state.as_str()));
                            if !self.facts.ended.contains_key(&(job.clone(), epoch)) {
                                return Err(format!(
                                    "the completion of {job}@{epoch} ({outcome:?}) was answered \
                                     {state:?} but no AttemptEnded for that epoch is durable"
                                ));
                            }
                            if stale && !state.is_terminal() {
                                return Err(format!(
                                    "a replayed completion of {job}@{epoch} was accepted: {state:?}"
                                ));
                            }
                            if state.is_terminal() {
                                self.acked.insert(job.clone(), Some(state));
                            }
                        }
                        Err(e) => {
                            said.push(format!("{job}@{epoch} refused"));
                            self.report.stale_refused += 1;
                            if !stale
                                && matches!(e, LeaseFailure::UnknownJob)
                                && self.acked.contains_key(&job)
                            {
                                return Err(format!(
                                    "acknowledged job {job} is unknown to a completion"
                                ));
                            }
                        }
                    }
                    if !stale {
                        self.workers[worker].held.remove(&job);
                    }
                }
            }
            Waiting::Heartbeat {
                worker,
                job,
                epoch,
                rx,
            } => {
                let answer = get(rx, "a heartbeat")?;
                let now = self.time;
                let Some(h) = self.workers[worker].held.get_mut(&job) else {
                    return Ok(());
                };
                h.busy = false;
                match answer {
                    None => {}
                    Some(Ok(HeartbeatReply::Continue { .. })) => h.last_hb = now,
                    Some(Ok(HeartbeatReply::Preempt { .. } | HeartbeatReply::Cancel { .. })) => {
                        said.push(format!("{job}@{epoch} told to stop"));
                        h.stop = true;
                    }
                    Some(Err(_)) => {
                        said.push(format!("{job}@{epoch} heartbeat refused"));
                        self.report.stale_refused += 1;
                        self.workers[worker].held.remove(&job);
                    }
                }
            }
            Waiting::Cancel { job, rx } => {
                if let Some(state) = get(rx, "a cancellation")? {
                    said.push(format!("cancel {job}: {state:?}"));
                    if state.is_none() && self.acked.contains_key(&job) {
                        return Err(format!(
                            "acknowledged job {job} is unknown to a cancellation"
                        ));
                    }
                    if let Some(s) = state
                        && s.is_terminal()
                        && self.acked.contains_key(&job)
                    {
                        self.acked.insert(job, Some(s));
                    }
                }
            }
            Waiting::Status { job, rx } => {
                if let Some(None) = get(rx, "a status read")?
                    && self.acked.contains_key(&job)
                {
                    return Err(format!(
                        "acknowledged job {job} is unknown to a status read"
                    ));
                }
            }
            Waiting::GetPolicy { rx } => {
                get(rx, "a policy read")?;
            }
            Waiting::PutPolicy { rx } => {
                if let Some(Err(errors)) = get(rx, "a policy publish")? {
                    return Err(format!("a valid policy was refused: {errors:?}"));
                }
            }
        }
        Ok(())
    }

    /// A lease reached a worker: it must be durable, carry its job's payload, and be newer
    /// than any lease of the job before.
    fn granted(&mut self, worker: usize, g: LeaseGrant) -> Result<(), String> {
        self.report.leases += 1;
        let job = g.job_id.clone();
        if !self.facts.granted.contains(&(job.clone(), g.epoch)) {
            return Err(format!(
                "lease {job}@{} was answered but is not durable",
                g.epoch
            ));
        }
        if let Some((spec, _, _)) = self.specs.get(&job) {
            let n: u64 = job[1..].parse().unwrap_or(0);
            let demand = if spec.demand.is_empty() {
                default_demand()
            } else {
                spec.demand.clone()
            };
            if g.payload.get() != format!("{{\"n\":{n}}}") || g.demand != demand {
                return Err(format!(
                    "lease {job}@{} carries payload {} and demand {:?}, not the job's",
                    g.epoch, g.payload, g.demand
                ));
            }
        }
        // Only a gang's members share an epoch; no lease is granted under an epoch older than
        // one a worker holds.
        let gang = self
            .specs
            .get(&job)
            .is_some_and(|(spec, _, _)| spec.gang > 1);
        if gang {
            self.report.gang_leases += 1;
        }
        for w in &self.workers {
            if let Some(h) = w.held.get(&job)
                && (h.epoch > g.epoch || (h.epoch == g.epoch && !gang))
            {
                return Err(format!(
                    "lease {job}@{} granted to {} while {} holds epoch {}",
                    g.epoch, self.workers[worker].name, w.name, h.epoch
                ));
            }
        }
        let work = Dur::from_millis(self.rng.range(50, 4_000));
        let now = self.time;
        let w = &mut self.workers[worker];
        w.history.push((job.clone(), g.epoch));
        if w.history.len() > 16 {
            w.history.remove(0);
        }
        w.held.insert(
            job,
            Held {
                epoch: g.epoch,
                started: now,
                work,
                last_hb: now,
                lease: Dur::from_millis(g.lease_ms),
                stop: false,
                busy: false,
            },
        );
        Ok(())
    }

    /// Follows the committed log: terminal events, grants and ends.
    fn absorb_log(&mut self) {
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        let facts = &mut self.facts;
        for (i, event) in log.iter().enumerate().skip(facts.seen) {
            if !self.rebuilding {
                let line = format!("         LSN {:>5} {}", i + 1, brief(event));
                if self.trace {
                    eprintln!("{line}");
                }
                self.timeline.push(line);
            }
            let kind = match event {
                Event::AttemptEnded { end, .. } => format!("AttemptEnded({end:?})"),
                other => format!("{other:?}")
                    .split([' ', '{', '('])
                    .next()
                    .unwrap_or_default()
                    .to_string(),
            };
            *facts.kinds.entry(kind).or_default() += 1;
            match event {
                Event::LeaseGranted { job, epoch, .. } => {
                    facts.granted.insert((job.clone(), *epoch));
                    facts.epoch.insert(job.clone(), *epoch);
                }
                Event::AttemptEnded {
                    job,
                    epoch,
                    end,
                    after,
                    ..
                } => {
                    facts.ended.insert((job.clone(), *epoch), *end);
                    if let AfterAttempt::Done(state) = after {
                        *facts.ends.entry(job.clone()).or_default() += 1;
                        if *state == JobState::Succeeded {
                            facts.succeeded += 1;
                        }
                    }
                }
                Event::JobCanceled { job, .. } | Event::JobExpired { job, .. } => {
                    *facts.ends.entry(job.clone()).or_default() += 1;
                }
                _ => {}
            }
        }
        facts.seen = log.len();
    }

    fn rebuild_facts(&mut self) {
        self.facts = LogFacts::default();
        self.rebuilding = true;
        self.absorb_log();
        self.rebuilding = false;
    }

    /// The checkers, after a good turn.
    fn check(&mut self) -> Result<(), String> {
        let prev_epochs = self.facts.epoch.clone();
        self.absorb_log();
        let writer = self.writer.as_mut().expect("a running writer");
        let lsn = writer.store_mut().last_lsn();
        let logged = self.log.lock().unwrap_or_else(|e| e.into_inner()).len() as u64;
        if logged != lsn {
            return Err(format!(
                "the store's last LSN is {lsn} but {logged} events were committed"
            ));
        }
        self.report.events = lsn;
        let engine = writer.engine();
        engine.audit().map_err(|e| format!("audit: {e}"))?;
        for (job, n) in &self.facts.ends {
            if *n > 1 {
                return Err(format!("job {job} ended {n} times in the log"));
            }
        }
        for (job, epoch) in &self.facts.epoch {
            if prev_epochs.get(job).is_some_and(|e| e > epoch) {
                return Err(format!("job {job}'s epoch went back to {epoch}"));
            }
        }
        for (job, state) in &self.acked {
            let Some(status) = engine.status(job) else {
                return Err(format!("acknowledged job {job} is gone"));
            };
            if let Some(state) = state
                && status.state != *state
            {
                return Err(format!(
                    "job {job} was acknowledged {state:?} but is now {:?}",
                    status.state
                ));
            }
            let legal = match status.state {
                JobState::Running => !status.workers.is_empty() && status.expires.is_some(),
                JobState::Queued | JobState::Deferred => status.workers.is_empty(),
                _ => status.workers.is_empty(),
            };
            if !legal {
                return Err(format!("job {job} is in an illegal state: {status:?}"));
            }
        }
        let live = engine.durable_view();
        let disk_state = (lsn, self.snapshots.load(Ordering::Relaxed));
        if Some(disk_state) == self.checked_lsn {
            // Nothing was written since the last check, which found the disk equal to
            // `committed_view`: the live engine must still equal it.
            if live != self.committed_view {
                return Err(diff(
                    "a turn that committed nothing changed the durable state:",
                    &self.committed_view,
                    &live,
                ));
            }
        } else {
            let replayed = replayed_view(&self.disk)?;
            if live != replayed {
                return Err(diff("the store, recovered,", &live, &replayed));
            }
            self.checked_lsn = Some(disk_state);
            // A job's payload is on the disk while it may still run, and gone once it ended.
            let store = MemStore::open(self.disk.clone());
            for job in self.acked.keys() {
                let ended = engine.status(job).is_some_and(|s| s.state.is_terminal());
                let stored = store
                    .payload(job)
                    .map_err(|e| format!("reading {job}'s payload: {e}"))?;
                if stored.is_some() == ended {
                    return Err(format!(
                        "job {job} is {} but its payload is {}",
                        if ended { "over" } else { "live" },
                        if ended { "still stored" } else { "gone" }
                    ));
                }
            }
        }
        self.committed_view = live;
        self.report.succeeded = self.facts.succeeded;
        self.report.event_kinds = self.facts.kinds.clone();
        Ok(())
    }

    /// At the end: every acknowledged job is still there after a last restart, and the whole
    /// log replayed from the start equals the live engine.
    fn finish(&mut self) -> Result<(), String> {
        let live = self.writer().engine().durable_view();
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let replayed = Engine::replay(&log, engine_config()).durable_view();
        if live != replayed {
            return Err(diff("the whole log, replayed,", &live, &replayed));
        }
        self.line("       end: crash and a last restart".into());
        self.kill_process();
        self.start_process()?;
        self.check()
    }
}

/// An event in a few words, for the timeline.
fn brief(event: &Event) -> String {
    match event {
        Event::PolicyPublished { version, .. } => format!("PolicyPublished v{version}"),
        Event::JobAccepted {
            spec,
            deferred_until,
            ..
        } => format!(
            "JobAccepted {} {}/{}{}{}",
            spec.id,
            spec.tenant,
            spec.class.as_deref().unwrap_or("default"),
            if spec.gang > 1 { " gang" } else { "" },
            if deferred_until.is_some() {
                " deferred"
            } else {
                ""
            }
        ),
        Event::JobEligible { job, .. } => format!("JobEligible {job}"),
        Event::JobDowngraded { job, .. } => format!("JobDowngraded {job}"),
        Event::LeaseGranted {
            job,
            epoch,
            placements,
            expires,
            ..
        } => {
            let on: Vec<String> = placements
                .iter()
                .map(|p| format!("{}x{}", p.worker, p.members))
                .collect();
            format!(
                "LeaseGranted {job}@{epoch} on {} until {}",
                on.join(" "),
                ms(*expires)
            )
        }
        Event::LeaseExtended {
            job,
            epoch,
            expires,
            ..
        } => format!("LeaseExtended {job}@{epoch} until {}", ms(*expires)),
        Event::StopRequested {
            job, epoch, reason, ..
        } => format!("StopRequested {job}@{epoch} {reason:?}"),
        Event::AttemptEnded {
            job,
            epoch,
            end,
            after,
            ..
        } => format!("AttemptEnded {job}@{epoch} {end:?} then {after:?}"),
        Event::JobCanceled { job, .. } => format!("JobCanceled {job}"),
        Event::JobExpired { job, .. } => format!("JobExpired {job}"),
    }
}

/// A waiting answer that came back as a success, described; `None` when it did not.
fn answered_ok(w: Waiting) -> Option<String> {
    fn ok<T: std::fmt::Debug>(mut rx: Rx<T>) -> Option<String> {
        match rx.try_recv() {
            Ok(Ok(v)) => Some(format!("{v:?}")),
            _ => None,
        }
    }
    match w {
        Waiting::Submit { rx, .. } => ok(rx),
        Waiting::Complete { rx, .. } => ok(rx),
        Waiting::Heartbeat { rx, .. } => ok(rx),
        Waiting::Cancel { rx, .. } => ok(rx),
        Waiting::Status { rx, .. } => ok(rx),
        Waiting::GetPolicy { rx } => ok(rx).map(|_| "a policy read".into()),
        Waiting::PutPolicy { rx } => ok(rx),
    }
}

/// The durable state a restart finds on `disk`: its latest snapshot restored, and the events
/// after it applied, as [`recover`] does (without publishing the configured policy).
fn replayed_view(disk: &MemDisk) -> Result<String, String> {
    let recovered = MemStore::open(disk.clone())
        .recover()
        .map_err(|e| format!("recovering the disk: {e}"))?;
    let mut engine = match &recovered.snapshot {
        Some((lsn, bytes)) => Engine::restore(bytes, engine_config())
            .map_err(|e| format!("restoring the snapshot at LSN {lsn}: {e}"))?,
        None => Engine::for_replay(engine_config()),
    };
    for (_, event) in &recovered.events {
        engine.apply(event);
    }
    Ok(engine.durable_view())
}

/// The first lines where two durable views differ.
fn diff(what: &str, live: &str, other: &str) -> String {
    let mut out = format!("{what} differs from the live engine:");
    let (a, b): (Vec<&str>, Vec<&str>) = (live.lines().collect(), other.lines().collect());
    let mut shown = 0;
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (a.get(i).copied(), b.get(i).copied());
        if x != y {
            let _ = write!(
                out,
                "\n    live: {}\n    disk: {}",
                x.unwrap_or("-"),
                y.unwrap_or("-")
            );
            shown += 1;
            if shown == 4 {
                break;
            }
        }
    }
    out
}
