//! The writer loop: the one thread that owns the engine, and the store thread beside it.
//!
//! Each turn of the loop is one **group commit**:
//!
//! 1. block for the first command, at most until the engine's next timer
//!    ([`Engine::poll_timeout`]) or the earliest long-poll deadline (and at most a second, to
//!    notice a shutdown);
//! 2. take up to [`Limits::commit_batch_max`] more commands without waiting;
//! 3. apply them to the engine in arrival order, then `tick` (timers) and `schedule` (leases for
//!    waiting workers, delivered to their parked long polls);
//! 4. drain the engine's events and **seal** the turn: the events, the payloads of the jobs
//!    accepted in the turn and the deletion of those of jobs that ended, and every answer;
//! 5. the store side commits the sealed turn in **one** `EventStore::commit`;
//! 6. only then does it answer every command of the turn, and the long polls that got leases
//!    or whose wait ended (their jobs' payloads read in one call).
//!
//! **Pipelined.** In [`Writer::run`] steps 5 and 6 run on a thread of their own (the store
//! side, [`Committer`]) while the engine side (`Turns`) applies the next turn: the fsync of
//! turn N overlaps the engine's work on turn N+1. Turns are committed and answered in order,
//! and every turn, a read-only one included, is answered only after its own commit (or, with
//! nothing to commit, its term check), which follows the commits of all the turns before it.
//! So no answer ever shows state that a crash could take back. At most [`PIPELINE_TURNS`]
//! sealed turns wait for the store; the turns waiting when a commit starts go into that commit
//! together. [`Writer::step`], which the deterministic simulation drives, runs the same two
//! sides one after the other on the caller's thread.
//!
//! If a commit fails, the engine is ahead of the disk: that turn and every later one get
//! `503 unavailable`, the parked long polls too, the server is marked not ready, and the loop
//! stops with an error so that the process exits and a restart recovers from what is durable.
//!
//! After enough events (see [`Limits::snapshot_every_events`], and never more than
//! [`Limits::snapshot_max_tail_events`]) and on a clean stop, the writer snapshots the engine
//! as of a turn's last event, once that turn is on its way to the store side (its commit and
//! answers do not wait for the encoding), and the store side stores it after that turn's
//! commit and prunes the events it covers; [`recover`] restores the latest snapshot and
//! replays only what follows it.
//!
//! A long poll (`POST /v1/leases` with `wait_ms` > 0) registers its worker with
//! [`Engine::worker_ready`] and is **parked** here: leases a later pass grants to that worker
//! are delivered to the parked request after the commit that makes them durable. When its wait
//! ends the worker is withdrawn ([`Engine::worker_withdraw`]) and the request gets an empty
//! list. A worker is withdrawn as soon as its request is answered, so the engine never grants
//! leases to a worker nobody is waiting for.

use crate::config::{Limits, effective_policy};
use crate::observe::{Observer, Query};
use crate::spin::recv_spinning;
use crate::wire::LeaseGrant;
use fairway_core::event::AfterAttempt;
use fairway_core::job::JobStatus;
use fairway_core::time::Dur;
use fairway_core::{
    Admission, ConfigError, Engine, EngineConfig, Event, HeartbeatReply, JobSpec, JobState, Lease,
    LeaseError, Outcome, Policy, SnapshotPieces, Time, WorkerOffer,
};
use fairway_store::{Batch, EventStore, Lsn, SnapshotSource};
use serde_json::value::RawValue;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{
    Receiver, RecvTimeoutError, SendError, SyncSender, TryRecvError, sync_channel,
};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::oneshot;
use tracing::{debug, error, info, warn};

/// The writer could not make a turn durable (or has stopped): the request's outcome is unknown
/// to the caller, who may retry (submissions are idempotent by job id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unavailable;

/// Where the writer sends one command's answer, after the commit.
pub type Reply<T> = oneshot::Sender<Result<T, Unavailable>>;

/// A job to submit, as the HTTP side prepared it.
#[derive(Clone, Debug)]
pub struct SubmitJob {
    /// The job (its deadline is set from `deadline_ms` when the writer applies it).
    pub spec: JobSpec,
    /// Deadline relative to the moment of acceptance.
    pub deadline_ms: Option<u64>,
    /// What to store with the job: see [`StoredJob`]. `None` when the job has the default
    /// demand and no payload.
    pub blob: Option<Vec<u8>>,
}

/// One completion.
#[derive(Clone, Debug)]
pub struct Completion {
    /// The job.
    pub job: String,
    /// The lease's epoch.
    pub epoch: u64,
    /// How the attempt ended.
    pub outcome: Outcome,
    /// Run time to charge.
    pub usage: Option<Dur>,
    /// Work done (checkpoint).
    pub progress: Option<Dur>,
}

/// Why a heartbeat or completion was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseFailure {
    /// No such job.
    UnknownJob,
    /// The epoch is not the job's authoritative one, or the attempt is over: nothing changed.
    Stale {
        /// The job's authoritative epoch.
        current: u64,
        /// For a human.
        message: String,
    },
}

/// The answer to a lease request.
#[derive(Debug)]
pub enum LeaseOutcome {
    /// The leases granted (possibly none).
    Granted(Vec<LeaseGrant>),
    /// Too many long polls are parked.
    Busy,
    /// The engine refused the worker's offer (a bad name or capacity).
    Invalid(String),
}

/// A command for the writer loop. Every command carries where to send its answer.
pub enum Command {
    /// Submit jobs; one admission per job, in order.
    Submit {
        /// The jobs.
        jobs: Vec<SubmitJob>,
        /// The rest of a large batch, in parts, while the HTTP side still reads them: the
        /// writer applies `jobs` and then each part as it comes, in the same turn (one group
        /// commit), until the sender is dropped. A part that has not come within
        /// [`BATCH_PART_WAIT`] ends the batch there; the jobs not applied get no admission.
        more: Option<Receiver<Vec<SubmitJob>>>,
        /// Answers: one per job applied, in order.
        reply: Reply<Vec<Admission>>,
    },
    /// A job's status; `None` when unknown or (with `tenant`) another tenant's.
    Status {
        /// The job.
        job: String,
        /// Only this tenant's jobs are visible.
        tenant: Option<String>,
        /// Answer.
        reply: Reply<Option<JobStatus>>,
    },
    /// Cancel a job; `None` when unknown or another tenant's.
    Cancel {
        /// The job.
        job: String,
        /// Only this tenant's jobs may be canceled.
        tenant: Option<String>,
        /// Answer: the state after the call.
        reply: Reply<Option<JobState>>,
    },
    /// A worker asks for leases, waiting up to `wait`.
    Lease {
        /// The worker's offer.
        offer: WorkerOffer,
        /// How long to park the request.
        wait: Dur,
        /// Answer.
        reply: Reply<LeaseOutcome>,
    },
    /// A heartbeat.
    Heartbeat {
        /// The job.
        job: String,
        /// The lease's epoch.
        epoch: u64,
        /// Work done so far.
        progress: Option<Dur>,
        /// Answer.
        reply: Reply<Result<HeartbeatReply, LeaseFailure>>,
    },
    /// Completions; one result each, in order.
    Complete {
        /// The completions.
        items: Vec<Completion>,
        /// Answers: the job's state after each.
        reply: Reply<Vec<Result<JobState, LeaseFailure>>>,
    },
    /// The policy in force: (version, text).
    GetPolicy {
        /// Answer.
        reply: Reply<(u64, String)>,
    },
    /// Publish a policy.
    PutPolicy {
        /// TOML text.
        text: String,
        /// Answer: the new version, or every error (the prior version stays).
        reply: Reply<Result<u64, Vec<ConfigError>>>,
    },
    /// An observability query: explanations, tenant reports, decisions, the overview.
    Observe(Query),
    /// Nothing: wakes the loop (to notice a shutdown).
    Wake,
}

impl Command {
    /// The command's name, for the `fairway_engine_call_seconds` metric.
    fn kind(&self) -> &'static str {
        match self {
            Command::Submit { .. } => "submit",
            Command::Status { .. } => "status",
            Command::Cancel { .. } => "cancel",
            Command::Lease { .. } => "lease",
            Command::Heartbeat { .. } => "heartbeat",
            Command::Complete { .. } => "complete",
            Command::GetPolicy { .. } | Command::PutPolicy { .. } => "policy",
            Command::Observe(_) => "observe",
            Command::Wake => "wake",
        }
    }
}

/// State shared between the writer and the HTTP side.
#[derive(Debug, Default)]
pub struct Shared {
    /// Recovered, and the store is writable.
    pub ready: AtomicBool,
    /// A shutdown was asked for: the writer finishes its turn and stops.
    pub shutdown: AtomicBool,
    /// The writer stopped on an error (recovery or a commit failed).
    pub failed: AtomicBool,
    /// Set by the election ([`crate::leader`]): this replica lost its term. The writer answers
    /// 503 to everyone waiting and stops after its turn; nothing more is acknowledged.
    pub deposed: AtomicBool,
    /// Who leads, as this replica knows it (`GET /v1/leader`, redirects, readiness).
    pub leader: crate::leader::LeaderView,
    /// Group commits made.
    pub commits: AtomicU64,
    /// Events committed.
    pub events: AtomicU64,
    /// Commands applied.
    pub commands: AtomicU64,
    /// How long the store side took to store the latest snapshot, in microseconds, from the
    /// call that handed it over to the moment its bytes were freed (a store that writes it
    /// while commits go on frees them once written): the engine side paces the next one by it
    /// as well as by its own encoding.
    pub snapshot_store_us: AtomicU64,
    /// The Prometheus metrics the writer counts (`GET /metrics`).
    pub metrics: crate::metrics::Metrics,
}

/// What the server stores with a job, as JSON: its demand (for the lease) and its payload.
/// The store keeps it as opaque bytes; it is deleted when the job ends.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct StoredJob {
    /// Demand per member.
    #[serde(default)]
    pub demand: BTreeMap<String, f64>,
    /// The payload as submitted, as its JSON text (`null` when none).
    #[serde(default = "null_payload")]
    pub payload: Box<RawValue>,
}

/// The JSON text `null`: the payload of a job submitted without one.
pub fn null_payload() -> Box<RawValue> {
    RawValue::from_string("null".to_string()).expect("null is JSON")
}

impl StoredJob {
    /// The stored bytes for a job: `payload_json` is the payload's JSON text.
    pub fn encode(demand: &BTreeMap<String, f64>, payload_json: Option<&[u8]>) -> Vec<u8> {
        let demand = serde_json::to_vec(demand).unwrap_or_else(|_| b"{}".to_vec());
        let payload = payload_json.unwrap_or(b"null");
        let mut out = Vec::with_capacity(demand.len() + payload.len() + 24);
        out.extend_from_slice(b"{\"demand\":");
        out.extend_from_slice(&demand);
        out.extend_from_slice(b",\"payload\":");
        out.extend_from_slice(payload);
        out.push(b'}');
        out
    }
}

/// The demand of a job that declares none (the engine's default).
pub fn default_demand() -> BTreeMap<String, f64> {
    BTreeMap::from([("cpu".to_string(), 1.0)])
}

/// How the writer runs.
#[derive(Clone, Debug)]
pub struct WriterSettings {
    /// The limits.
    pub limits: Limits,
    /// The policy to run (`None`: the persisted one, or the built-in one when fresh).
    pub policy: Option<String>,
    /// Lease override in milliseconds.
    pub lease_ms: Option<u64>,
    /// Called after recovery, after each snapshot and when the writer goes idle; see
    /// [`crate::ServerConfig::release_memory`].
    pub release_memory: Option<fn()>,
}

/// The engine's limits as the server runs it.
pub fn engine_config() -> EngineConfig {
    EngineConfig {
        // Longer than the longest long poll, so a parked worker is never forgotten mid-wait.
        worker_ttl: Dur::from_secs(90),
        // Explanations and `GET /v1/decisions` read the engine's decision records.
        decision_ring: crate::observe::DECISION_RING,
        ..EngineConfig::default()
    }
}

/// The wall clock as engine time (Unix-epoch nanoseconds), never going backwards.
struct Clock {
    last: Time,
}

impl Clock {
    fn now(&mut self) -> Time {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        self.observe(Time(wall))
    }

    /// A reading of some clock, made monotonic: the loop's turns never go back in time.
    fn observe(&mut self, reading: Time) -> Time {
        self.last = self.last.max(reading);
        self.last
    }
}

/// A parked lease request.
struct Waiter {
    reply: Reply<LeaseOutcome>,
    deadline: Time,
    granted: Vec<Lease>,
}

/// A lease on its way to its worker: the lease, its job's tenant and class.
type Delivery = (Lease, String, String);

/// An answer to send once the turn is durable.
enum Pending {
    Ready(Box<dyn FnOnce(bool) + Send>),
    /// A long poll's leases; their jobs' payloads are read after the commit.
    Leases(Reply<LeaseOutcome>, Vec<Delivery>),
}

fn ready<T: Send + 'static>(reply: Reply<T>, value: T) -> Pending {
    Pending::Ready(Box::new(move |ok| {
        let _ = reply.send(if ok { Ok(value) } else { Err(Unavailable) });
    }))
}

#[derive(Default)]
struct Outbox {
    replies: Vec<Pending>,
    puts: Vec<(String, Vec<u8>)>,
    /// Observability queries, answered after the turn's scheduling pass, so that they see
    /// the engine at the turn's `now` and after its commands.
    queries: Vec<Query>,
}

/// How many applied turns may wait for the store beyond the one it is committing. While they
/// wait the engine side goes on with the next turn; when they are this many it waits too, so
/// the engine is never more than this many turns (each bounded by
/// [`Limits::commit_batch_max`] commands) ahead of the disk.
pub const PIPELINE_TURNS: usize = 2;

/// How long the writer waits for the next part of a large batch ([`Command::Submit`]'s
/// `more`) while the HTTP side reads it. Reading a part takes well under a millisecond, so a
/// wait this long means the reading thread is starved of CPU (a busy two-core machine
/// preempts a runnable thread for a few scheduler periods, tens of milliseconds); every other
/// command waits meanwhile, so a part later than this ends the batch: its jobs and the rest
/// get no admission and are answered `503`, not submitted.
pub const BATCH_PART_WAIT: Duration = Duration::from_millis(500);

/// How often an idle store side checks whether a staged snapshot's file is written, to put it
/// in force ([`EventStore::settle_snapshot`]).
const SETTLE_POLL: Duration = Duration::from_millis(5);

/// How long the writer waits with no command before it hands free memory back.
const IDLE_RELEASE: Duration = Duration::from_millis(500);

/// A turn applied to the engine, waiting to be made durable and answered: what the engine
/// side hands the store side, in turn order.
struct Sealed {
    batch: Batch,
    replies: Vec<Pending>,
    commands: usize,
    /// The lease length in force, for the grants' `lease_ms`.
    lease_ms: u64,
    /// When the turn's scheduling pass started, and the leases it granted
    /// (`fairway_dispatch_seconds`).
    pass_started: Instant,
    granted: usize,
    /// A snapshot of the engine as of the last event before it, stored after that event's
    /// commit. A turn that carries one carries nothing else ([`Turns::snapshot_turn`]).
    snapshot: Option<Snapshot>,
}

/// The engine's state after the event at `lsn`, encoded.
struct Snapshot {
    lsn: Lsn,
    /// The engine's bytes, most of them shared with it (the finished jobs' full chunks).
    bytes: SnapshotPieces,
    live_jobs: usize,
    /// How long encoding it took (on the engine side).
    encoded_in: Duration,
}

/// The writer loop. See the module documentation.
pub struct Writer<S: EventStore> {
    turns: Turns,
    committer: Committer,
    store: S,
    rx: Receiver<Command>,
}

/// The engine side of the writer: applies a turn's commands, ticks, schedules and seals the
/// turn into a [`Sealed`] for the store side. It keeps the parked long polls.
struct Turns {
    engine: Engine,
    shared: Arc<Shared>,
    settings: WriterSettings,
    clock: Clock,
    waiters: BTreeMap<String, Waiter>,
    deadlines: BTreeSet<(Time, String)>,
    /// The LSN of the engine's state: its last event sealed (committed, or on its way).
    lsn: Lsn,
    events_since_snapshot: u64,
    /// When the last snapshot's encoding ended, and how long the encoding took. The next one
    /// waits ten times as long as the last took, encoding and storing
    /// ([`Shared::snapshot_store_us`]) together.
    last_snapshot: (Instant, Duration),
    last_sweep: Instant,
    /// When the last command arrived, if any came since memory was last handed back
    /// ([`Turns::release_when_idle`]).
    busy_since: Option<Instant>,
    /// Whether a snapshot also waits ten times as long as the last one took (always, but in a
    /// deterministic simulation, where only the event count may decide).
    paced_snapshots: bool,
    /// A turn failed (its commit, a term check or a snapshot): the engine may be ahead of the
    /// store, so the writer applies nothing more; only a restart goes on.
    stopped: bool,
    /// Counts what happens for the metrics, and answers observability queries.
    observer: Observer,
}

/// The store side of the writer: makes sealed turns durable in their order and only then
/// answers them. After a failure it answers nothing but `Unavailable`.
struct Committer {
    shared: Arc<Shared>,
    /// [`WriterSettings::release_memory`], called once a stored snapshot's bytes are freed.
    release_memory: Option<fn()>,
    /// How long it polls for the next sealed turn before sleeping ([`Limits::idle_spin_us`]).
    spin: Duration,
    /// Why the store side stopped (a failed commit, term check or snapshot, or deposed).
    failed: Option<String>,
    /// A snapshot was staged and may not be in force yet ([`EventStore::stage_snapshot`]).
    staged: bool,
}

/// Rebuilds the engine from the store: the latest snapshot plus the events after it, or a new
/// engine on a fresh store. Then publishes the configured policy if it differs from the one in
/// force. Everything this writes is committed before it returns. Also returns how many
/// committed events the latest snapshot does not cover.
pub fn recover<S: EventStore>(
    store: &mut S,
    settings: &WriterSettings,
    now: Time,
) -> Result<(Engine, u64), String> {
    let started = Instant::now();
    let recovered = store
        .recover()
        .map_err(|e| format!("recovering the store: {e}"))?;
    let config = engine_config();
    let fresh = recovered.snapshot.is_none() && recovered.events.is_empty();
    let mut engine = if fresh {
        let base = settings
            .policy
            .clone()
            .unwrap_or_else(|| fairway_core::policy::BUILT_IN_POLICY.to_string());
        let text = effective_policy(&base, settings.lease_ms).map_err(policy_errors)?;
        let policy = Policy::from_text(&text).map_err(policy_errors)?;
        Engine::new(now, policy, config)
    } else {
        let mut engine = match &recovered.snapshot {
            Some((lsn, bytes)) => {
                // The jobs the tail will add, so the id index is sized for them up front.
                let accepted = recovered
                    .events
                    .iter()
                    .filter(|(_, e)| matches!(e, Event::JobAccepted { .. }))
                    .count();
                Engine::restore_with_room(bytes, config, accepted)
                    .map_err(|e| format!("restoring the snapshot at LSN {lsn}: {e}"))?
            }
            None => Engine::for_replay(config),
        };
        for (_, event) in &recovered.events {
            engine.apply(event);
        }
        let base = settings
            .policy
            .clone()
            .unwrap_or_else(|| engine.policy().source.clone());
        let text = effective_policy(&base, settings.lease_ms).map_err(policy_errors)?;
        if text != engine.policy().source {
            engine.publish(now, &text).map_err(policy_errors)?;
        }
        engine
    };
    let events = engine.drain_events();
    if !events.is_empty() {
        store
            .commit(&Batch::of_events(events))
            .map_err(|e| format!("committing the policy at start: {e}"))?;
    }
    info!(
        replayed = recovered.events.len(),
        snapshot_lsn = recovered.snapshot.as_ref().map(|s| s.0),
        live_jobs = engine.live_jobs(),
        policy_version = engine.policy_version(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "recovered"
    );
    let snapshot_lsn = recovered.snapshot.as_ref().map(|s| s.0).unwrap_or(0);
    let unsnapshotted = store.last_lsn().saturating_sub(snapshot_lsn);
    // The decoded snapshot and log are garbage from here on.
    drop(recovered);
    if let Some(hook) = settings.release_memory {
        hook();
    }
    Ok((engine, unsnapshotted))
}

fn policy_errors(errors: Vec<ConfigError>) -> String {
    let lines: Vec<String> = errors.iter().map(|e| format!("policy: {e}")).collect();
    lines.join("\n")
}

/// How the engine side's loop ended.
enum Ended {
    /// A shutdown was asked for, or the command channel closed.
    Shutdown,
    /// The store side stopped on an error (it says which, when joined).
    StoreStopped,
    /// Another replica took the term.
    Deposed,
}

impl<S: EventStore> Writer<S> {
    /// A writer over a recovered engine; `events_since_snapshot` counts the committed events
    /// its latest snapshot does not cover.
    pub fn new(
        engine: Engine,
        events_since_snapshot: u64,
        store: S,
        rx: Receiver<Command>,
        shared: Arc<Shared>,
        settings: WriterSettings,
    ) -> Writer<S> {
        let release_memory = settings.release_memory;
        let spin = settings.limits.idle_spin();
        Writer {
            turns: Turns {
                engine,
                shared: shared.clone(),
                settings,
                clock: Clock { last: Time::ZERO },
                waiters: BTreeMap::new(),
                deadlines: BTreeSet::new(),
                lsn: store.last_lsn(),
                events_since_snapshot,
                last_snapshot: (Instant::now(), Duration::ZERO),
                last_sweep: Instant::now(),
                busy_since: None,
                paced_snapshots: true,
                stopped: false,
                observer: Observer::new(),
            },
            committer: Committer {
                shared,
                release_memory,
                spin,
                failed: None,
                staged: false,
            },
            store,
            rx,
        }
    }

    /// One turn at `now`, driven from outside instead of by [`Writer::run`]: the commands
    /// are applied, the turn is committed and answered exactly as the loop does (the loop calls
    /// the same code with the wall clock, with the commit on a thread of its own while the
    /// next turn is applied). `now` is made monotonic as the loop's clock is. For the
    /// deterministic simulation (`crate::vopr`), which plays the clock and the clients.
    ///
    /// After a turn failed, nothing is applied any more: the commands are dropped unanswered
    /// (their callers see the writer gone) and the error is returned again.
    pub fn step(&mut self, now: Time, commands: Vec<Command>) -> Result<(), String> {
        if self.turns.stopped {
            drop(commands);
            return Err("the writer stopped after a failed turn".into());
        }
        let now = self.turns.clock.observe(now);
        let sealed = self.turns.seal(now, commands);
        let mut result = self.committer.commit(&mut self.store, vec![sealed]);
        if result.is_ok()
            && let Some(snapshot) = self.turns.snapshot_turn()
        {
            result = self.committer.commit(&mut self.store, vec![snapshot]);
        }
        if result.is_err() {
            self.turns.fail();
        }
        result
    }

    /// Snapshots pace on the event count alone, not on how long the last one took, so that a
    /// driven writer ([`Writer::step`]) snapshots at the same turns on every run.
    pub fn unpaced_snapshots(mut self) -> Writer<S> {
        self.turns.paced_snapshots = false;
        self
    }

    /// A clean stop, as [`Writer::run`] ends on a shutdown: the parked long polls get empty
    /// lists and the engine is snapshotted. Returns the store.
    pub fn stop(mut self) -> Result<S, String> {
        if self.turns.stopped {
            return Err("the writer stopped after a failed turn".into());
        }
        self.finish()?;
        Ok(self.store)
    }

    /// The engine, for checks.
    pub fn engine(&self) -> &Engine {
        &self.turns.engine
    }

    /// The store, for checks and for injecting faults.
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Whether a turn failed and the writer stopped (see [`Writer::step`]).
    pub fn is_stopped(&self) -> bool {
        self.turns.stopped
    }

    /// Runs turns until a shutdown is asked for (then finishes the turns, answers the parked
    /// long polls and returns `Ok`) or a commit fails (then answers 503 to everyone waiting
    /// and returns the error).
    pub fn run(self) -> Result<(), String> {
        self.run_keeping_channel().0
    }

    /// [`Writer::run`], handing back the command channel: a replica that loses its term keeps
    /// its HTTP side and gives the channel to the writer of its next term.
    pub fn run_keeping_channel(mut self) -> (Result<(), String>, Receiver<Command>) {
        let result = self.run_turns();
        (result, self.rx)
    }

    /// The pipelined loop: the store side runs on a thread of its own, committing turn N
    /// while the engine side applies turn N+1. Each turn is answered by the store side after
    /// its own commit, which follows every earlier turn's; so a read is answered only once
    /// everything it could show is durable.
    fn run_turns(&mut self) -> Result<(), String> {
        let Writer {
            turns,
            committer,
            store,
            rx,
        } = self;
        let (ended, stored) = std::thread::scope(|scope| {
            let (to_store, sealed) = sync_channel::<Sealed>(PIPELINE_TURNS);
            let store_side = std::thread::Builder::new()
                .name("fairway-store".into())
                .spawn_scoped(scope, move || committer.run(store, sealed));
            let store_side = match store_side {
                Ok(handle) => handle,
                Err(e) => {
                    return (
                        Ended::StoreStopped,
                        Err(format!("starting the store thread: {e}")),
                    );
                }
            };
            let ended = turns.run(rx, &to_store, &store_side);
            // The store side commits and answers what it was given, then stops.
            drop(to_store);
            let stored = store_side
                .join()
                .unwrap_or_else(|_| Err("the store thread panicked".into()));
            (ended, stored)
        });
        match (ended, stored) {
            (Ended::Shutdown, Ok(())) => self.finish(),
            (Ended::Deposed, _) => {
                warn!("deposed: answering 503 to everyone waiting and stopping");
                self.turns.fail();
                Err("deposed: another replica took over the leader term".into())
            }
            (_, Err(e)) => {
                self.turns.fail();
                Err(e)
            }
            (Ended::StoreStopped, Ok(())) => {
                self.turns.fail();
                Err("the store thread stopped".into())
            }
        }
    }

    /// Clean stop: the parked long polls get empty lists, and the engine is snapshotted.
    fn finish(&mut self) -> Result<(), String> {
        self.turns.release_waiters();
        if self.turns.lsn > 0 && self.turns.events_since_snapshot > 0 {
            let snapshot = self.turns.take_snapshot();
            let result = self
                .committer
                .snapshot(&mut self.store, snapshot)
                .and_then(|()| {
                    // In force before the store is handed back, so that the next start
                    // replays nothing.
                    self.store.settle_snapshot(true).map(drop).map_err(|e| {
                        error!(error = %e, "snapshot failed: stopping");
                        format!("the last snapshot failed: {e}")
                    })
                });
            if result.is_err() {
                self.turns.fail();
                return result;
            }
        }
        info!(
            commits = self.turns.shared.commits.load(Ordering::Relaxed),
            events = self.turns.shared.events.load(Ordering::Relaxed),
            last_lsn = self.store.last_lsn(),
            "writer stopped"
        );
        Ok(())
    }
}

impl Turns {
    /// Takes turns until a shutdown, a failure of the store side, or a deposition, handing
    /// each sealed turn to the store side (waiting when [`PIPELINE_TURNS`] are queued).
    fn run<T>(
        &mut self,
        rx: &Receiver<Command>,
        to_store: &SyncSender<Sealed>,
        store_side: &std::thread::ScopedJoinHandle<'_, T>,
    ) -> Ended {
        let max = self.settings.limits.commit_batch_max.max(1);
        let spin = self.settings.limits.idle_spin();
        loop {
            let mut commands = Vec::new();
            let mut closed = false;
            let now = self.clock.now();
            match recv_spinning(rx, spin, self.next_wakeup(now)) {
                Ok(c) => commands.push(c),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => closed = true,
            }
            while commands.len() < max {
                match rx.try_recv() {
                    Ok(c) => commands.push(c),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        closed = true;
                        break;
                    }
                }
            }
            if store_side.is_finished() {
                // A commit failed: apply nothing more. The commands are dropped unanswered.
                return Ended::StoreStopped;
            }
            self.release_when_idle(!commands.is_empty());
            let now = self.clock.now();
            let sealed = self.seal(now, commands);
            if let Err(SendError(sealed)) = to_store.send(sealed) {
                Committer::refuse(sealed);
                return Ended::StoreStopped;
            }
            // Taken once the turn is on its way, so its commit does not wait for the encoding.
            if let Some(snapshot) = self.snapshot_turn()
                && to_store.send(snapshot).is_err()
            {
                return Ended::StoreStopped;
            }
            if self.shared.deposed.load(Ordering::Acquire) {
                // Another replica leads: whatever this one still holds is not to be answered.
                return Ended::Deposed;
            }
            if closed || self.shared.shutdown.load(Ordering::Acquire) {
                return Ended::Shutdown;
            }
        }
    }

    /// Hands free memory back ([`WriterSettings::release_memory`]) once no command has come
    /// for [`IDLE_RELEASE`] after some did. The allocator keeps what a burst freed (grown
    /// tables' old blocks, batches' buffers) until this thread allocates again, which an idle
    /// server does not: a server just filled with 10^6 jobs held about 23 B per job more than
    /// one whose allocator returned memory at once. Called from this thread, so that its own
    /// heap, where the engine's memory is, is the one collected.
    fn release_when_idle(&mut self, commands: bool) {
        if commands {
            self.busy_since = Some(Instant::now());
            return;
        }
        let Some(release) = self.settings.release_memory else {
            return;
        };
        if self.busy_since.is_some_and(|t| t.elapsed() >= IDLE_RELEASE) {
            self.busy_since = None;
            release();
        }
    }

    /// How long to wait for a command: until the next timer or long-poll deadline, at most a
    /// second, at least a millisecond.
    fn next_wakeup(&self, now: Time) -> Duration {
        let mut next = now.plus(Dur::from_secs(1));
        if let Some(t) = self.engine.poll_timeout() {
            next = next.min(t);
        }
        if let Some((t, _)) = self.deadlines.first() {
            next = next.min(*t);
        }
        Duration::from_nanos(next.since(now).0).max(Duration::from_millis(1))
    }

    /// One turn at `now`: apply, tick, schedule; then its events, payloads and answers,
    /// sealed for the store side.
    fn seal(&mut self, now: Time, commands: Vec<Command>) -> Sealed {
        let mut out = Outbox::default();
        let n = commands.len();
        let metrics = &self.shared.metrics;
        let taken = commands
            .iter()
            .filter(|c| !matches!(c, Command::Wake))
            .count();
        metrics.writer_queue_depth.dec_by(taken as i64);
        for c in commands {
            let (kind, started) = (c.kind(), Instant::now());
            self.apply(now, c, &mut out);
            self.observer
                .timed(&self.shared.metrics, kind, started.elapsed());
        }
        let started = Instant::now();
        self.engine.tick(now);
        self.observer
            .timed(&self.shared.metrics, "tick", started.elapsed());
        self.sweep_abandoned();
        let pass_started = Instant::now();
        let leases = self.engine.schedule(now);
        self.observer
            .timed(&self.shared.metrics, "schedule", pass_started.elapsed());
        let granted = leases.len();
        self.deliver(now, leases, &mut out);
        for query in std::mem::take(&mut out.queries) {
            let send = self
                .observer
                .answer(&self.shared.metrics, &mut self.engine, now, query);
            out.replies.push(Pending::Ready(send));
        }
        // Stop requests reach workers through their heartbeats; nothing pushes them.
        let _ = self.engine.poll_stops();
        let events = self.engine.drain_events();
        self.observer
            .count_events(&self.shared.metrics, &self.engine, &events);
        let delete_payloads: Vec<String> = events.iter().filter_map(ended_job).collect();
        let batch = Batch {
            events,
            put_payloads: std::mem::take(&mut out.puts),
            delete_payloads,
        };
        let events = batch.events.len() as u64;
        self.lsn += events;
        self.events_since_snapshot += events;
        Sealed {
            batch,
            replies: out.replies,
            commands: n,
            lease_ms: self.engine.policy().lease.as_millis(),
            pass_started,
            granted,
            snapshot: None,
        }
    }

    /// A turn holding only a snapshot of the engine as it is now, if one is due. It is taken
    /// after the turn it follows was handed to the store side, so that turn's commit and
    /// answers do not wait for the encoding (84 ms at 50,000 queued jobs); the store side
    /// stores it after that commit, as it comes next in order.
    fn snapshot_turn(&mut self) -> Option<Sealed> {
        self.snapshot_due().then(|| Sealed {
            batch: Batch::default(),
            replies: Vec::new(),
            commands: 0,
            lease_ms: self.engine.policy().lease.as_millis(),
            pass_started: Instant::now(),
            granted: 0,
            snapshot: Some(self.take_snapshot()),
        })
    }

    /// Submits `jobs` to the engine in order, their admissions appended to `admissions`; the
    /// payloads of the new ones wait in `out` for the commit.
    fn submit(
        &mut self,
        now: Time,
        jobs: Vec<SubmitJob>,
        admissions: &mut Vec<Admission>,
        out: &mut Outbox,
    ) {
        admissions.reserve(jobs.len());
        for job in jobs {
            let mut spec = job.spec;
            if let Some(ms) = job.deadline_ms {
                spec.deadline = Some(now.plus(Dur::from_millis(ms)));
            }
            let id = spec.id.clone();
            let class = spec.class.clone();
            let admission = self.engine.submit(now, spec);
            self.observer.admitted(
                &self.shared.metrics,
                &self.engine,
                now,
                class.as_deref(),
                &admission,
            );
            let new = matches!(
                admission,
                Admission::Accepted {
                    duplicate: false,
                    ..
                } | Admission::Deferred {
                    duplicate: false,
                    ..
                }
            );
            if new && let Some(blob) = job.blob {
                out.puts.push((id, blob));
            }
            admissions.push(admission);
        }
    }

    /// Applies one command to the engine; its answer waits in `out` for the commit.
    fn apply(&mut self, now: Time, command: Command, out: &mut Outbox) {
        match command {
            Command::Submit { jobs, more, reply } => {
                let mut admissions = Vec::new();
                self.submit(now, jobs, &mut admissions, out);
                if let Some(more) = more {
                    let spin = self.settings.limits.idle_spin();
                    loop {
                        match recv_spinning(&more, spin, BATCH_PART_WAIT) {
                            Ok(part) => self.submit(now, part, &mut admissions, out),
                            Err(RecvTimeoutError::Disconnected) => break,
                            Err(RecvTimeoutError::Timeout) => {
                                warn!(
                                    applied = admissions.len(),
                                    "a large batch's next part did not come within {} ms; its \
                                     jobs not applied are answered 503",
                                    BATCH_PART_WAIT.as_millis()
                                );
                                self.shared.metrics.batch_parts_late.inc();
                                break;
                            }
                        }
                    }
                }
                out.replies.push(ready(reply, admissions));
            }
            Command::Status { job, tenant, reply } => {
                let status = self.visible(&job, tenant.as_deref());
                out.replies.push(ready(reply, status));
            }
            Command::Cancel { job, tenant, reply } => {
                let visible = self
                    .engine
                    .job_labels(&job)
                    .is_some_and(|(owner, _)| tenant.as_deref().is_none_or(|t| owner == t));
                let state = if visible {
                    self.engine.cancel(now, &job).ok()
                } else {
                    None
                };
                out.replies.push(ready(reply, state));
            }
            Command::Lease { offer, wait, reply } => self.lease(now, offer, wait, reply, out),
            Command::Heartbeat {
                job,
                epoch,
                progress,
                reply,
            } => {
                let result = self.engine.heartbeat(now, &job, epoch, progress);
                if let Err(e) = &result {
                    self.observer.refused(&self.shared.metrics, "heartbeat", e);
                }
                let result = result.map_err(|e| self.failure(&job, e));
                out.replies.push(ready(reply, result));
            }
            Command::Complete { items, reply } => {
                let mut results = Vec::with_capacity(items.len());
                for c in items {
                    let result = self
                        .engine
                        .finish(now, &c.job, c.epoch, c.outcome, c.usage, c.progress)
                        .or_else(|e| {
                            let answer = self.repeated_completion(&c, e.clone());
                            if answer.is_err() {
                                self.observer.refused(&self.shared.metrics, "complete", &e);
                            }
                            answer
                        });
                    results.push(result);
                }
                out.replies.push(ready(reply, results));
            }
            Command::GetPolicy { reply } => {
                let answer = (
                    self.engine.policy_version(),
                    self.engine.policy().source.clone(),
                );
                out.replies.push(ready(reply, answer));
            }
            Command::PutPolicy { text, reply } => {
                let result = effective_policy(&text, self.settings.lease_ms)
                    .and_then(|effective| self.engine.publish(now, &effective));
                if let Ok(version) = result {
                    info!(version, "policy published");
                }
                out.replies.push(ready(reply, result));
            }
            Command::Observe(query) => out.queries.push(query),
            Command::Wake => {}
        }
    }

    /// Job `id`'s status if the caller (restricted to `tenant`) may see it.
    fn visible(&self, id: &str, tenant: Option<&str>) -> Option<JobStatus> {
        self.engine
            .status(id)
            .filter(|s| tenant.is_none_or(|t| s.tenant == t))
    }

    /// Maps an engine refusal to what the API says.
    fn failure(&self, job: &str, e: LeaseError) -> LeaseFailure {
        match e {
            LeaseError::UnknownJob => LeaseFailure::UnknownJob,
            LeaseError::StaleEpoch { .. } => LeaseFailure::Stale {
                current: self.engine.status(job).map(|s| s.epoch).unwrap_or(0),
                message: e.to_string(),
            },
            LeaseError::NotRunning => {
                let current = self.engine.status(job).map(|s| s.epoch).unwrap_or(0);
                LeaseFailure::Stale {
                    current,
                    message: format!(
                        "the attempt with epoch {current} is no longer running (its lease \
                         expired or it already ended)"
                    ),
                }
            }
        }
    }

    /// A completion for an attempt that already ended: repeating the completion of the
    /// attempt that ended the job answers the job's final state (a worker retrying after a lost
    /// answer); anything else is stale and changes nothing.
    fn repeated_completion(&self, c: &Completion, e: LeaseError) -> Result<JobState, LeaseFailure> {
        if e == LeaseError::NotRunning
            && let Some(s) = self.engine.status(&c.job)
            && s.state.is_terminal()
            && s.epoch == c.epoch
        {
            return Ok(s.state);
        }
        Err(self.failure(&c.job, e))
    }

    /// Registers a lease request: the worker waits for work until leases reach it or `wait`
    /// ends.
    fn lease(
        &mut self,
        now: Time,
        offer: WorkerOffer,
        wait: Dur,
        reply: Reply<LeaseOutcome>,
        out: &mut Outbox,
    ) {
        // One request per worker: a new one answers the old one (empty) and takes its place.
        if let Some(old) = self.remove_waiter(&offer.worker) {
            out.replies
                .push(ready(old.reply, LeaseOutcome::Granted(Vec::new())));
        }
        if wait > Dur::ZERO && self.waiters.len() >= self.settings.limits.max_parked {
            out.replies.push(ready(reply, LeaseOutcome::Busy));
            return;
        }
        if let Err(why) = self.engine.worker_ready(now, &offer) {
            out.replies.push(ready(reply, LeaseOutcome::Invalid(why)));
            return;
        }
        if offer.max_jobs == 0 {
            out.replies
                .push(ready(reply, LeaseOutcome::Granted(Vec::new())));
            return;
        }
        let deadline = now.plus(wait);
        self.deadlines.insert((deadline, offer.worker.clone()));
        self.waiters.insert(
            offer.worker,
            Waiter {
                reply,
                deadline,
                granted: Vec::new(),
            },
        );
    }

    fn remove_waiter(&mut self, worker: &str) -> Option<Waiter> {
        let w = self.waiters.remove(worker)?;
        self.deadlines.remove(&(w.deadline, worker.to_string()));
        Some(w)
    }

    /// Forgets parked requests whose caller went away, so that no lease is granted to a worker
    /// nobody is waiting for. It is a scan: every turn while few requests are parked, every
    /// 50 ms beyond that.
    fn sweep_abandoned(&mut self) {
        if self.waiters.is_empty()
            || (self.waiters.len() > 1024 && self.last_sweep.elapsed() < Duration::from_millis(50))
        {
            return;
        }
        self.last_sweep = Instant::now();
        let gone: Vec<String> = self
            .waiters
            .iter()
            .filter(|(_, w)| w.reply.is_closed())
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            self.remove_waiter(&name);
            self.engine.worker_withdraw(&name);
        }
    }

    /// Hands the pass's leases to the parked requests of their workers, and answers the
    /// requests that got leases or whose wait ended; their workers stop waiting.
    fn deliver(&mut self, now: Time, leases: Vec<Lease>, out: &mut Outbox) {
        let mut served = BTreeSet::new();
        for lease in leases {
            match self.waiters.get_mut(&*lease.worker) {
                Some(w) => {
                    served.insert(lease.worker.to_string());
                    w.granted.push(lease);
                }
                None => {
                    // Durable but undeliverable: the lease expires and the job is reclaimed.
                    warn!(job = %lease.job, worker = %lease.worker, "lease for a worker with no request");
                }
            }
        }
        while let Some((t, _)) = self.deadlines.first() {
            if *t > now {
                break;
            }
            if let Some((_, name)) = self.deadlines.pop_first() {
                served.insert(name);
            }
        }
        for name in served {
            let Some(w) = self.remove_waiter(&name) else {
                continue;
            };
            self.engine.worker_withdraw(&name);
            let granted = w
                .granted
                .into_iter()
                .map(|lease| {
                    let (tenant, class) = self.engine.job_labels(&lease.job).unwrap_or_default();
                    (lease, tenant.to_string(), class.to_string())
                })
                .collect();
            out.replies.push(Pending::Leases(w.reply, granted));
        }
    }

    /// The turn could not be made durable: the parked long polls get 503, and nothing more
    /// is applied.
    fn fail(&mut self) {
        self.stopped = true;
        self.shared.ready.store(false, Ordering::Release);
        self.shared.failed.store(true, Ordering::Release);
        for (_, w) in std::mem::take(&mut self.waiters) {
            let _ = w.reply.send(Err(Unavailable));
        }
        self.deadlines.clear();
    }

    /// Clean stop: the parked long polls get empty lists (which show nothing of the state).
    fn release_waiters(&mut self) {
        self.shared.ready.store(false, Ordering::Release);
        for (name, w) in std::mem::take(&mut self.waiters) {
            self.engine.worker_withdraw(&name);
            let _ = w.reply.send(Ok(LeaseOutcome::Granted(Vec::new())));
        }
        self.deadlines.clear();
    }

    /// Whether a snapshot is due: at least [`Limits::snapshot_every_events`] events, and at
    /// least as many as there are live jobs, since the last one, and at least ten times as long
    /// as the last one took. A snapshot's cost grows with the state (finished jobs remembered
    /// for idempotency included), so this keeps snapshots to about a tenth of the writer's time
    /// at most, however large the state. But once [`Limits::snapshot_max_tail_events`] have
    /// followed the last one, a snapshot is due whatever the state and the pacing: a restart
    /// after a crash never replays more than about that many events.
    fn snapshot_due(&self) -> bool {
        let limits = &self.settings.limits;
        if self.events_since_snapshot >= limits.snapshot_max_tail_events.max(1) {
            return true;
        }
        let every = limits
            .snapshot_every_events
            .max(self.engine.live_jobs() as u64);
        let (ended, encoding) = self.last_snapshot;
        // Storing counts as much as encoding: the store side stores a snapshot between two
        // commits, so every turn waits behind it. A snapshot holds the finished jobs too (up
        // to `finished_retention`), so a server that has run many jobs takes longer each time.
        let storing = Duration::from_micros(self.shared.snapshot_store_us.load(Ordering::Relaxed));
        self.events_since_snapshot >= every
            && (!self.paced_snapshots || ended.elapsed() >= (encoding + storing).saturating_mul(10))
    }

    /// Encodes the engine as of its last sealed event (it holds exactly the state after it),
    /// for the store side to store after that event's commit. The finished jobs' records,
    /// on a busy server most of the bytes, are shared with the engine, not copied here.
    fn take_snapshot(&mut self) -> Snapshot {
        let started = Instant::now();
        let bytes = self.engine.snapshot_pieces();
        let encoded_in = started.elapsed();
        self.events_since_snapshot = 0;
        self.last_snapshot = (Instant::now(), encoded_in);
        Snapshot {
            lsn: self.lsn,
            bytes,
            live_jobs: self.engine.live_jobs(),
            encoded_in,
        }
    }
}

impl Committer {
    /// The store side's loop: each sealed turn, in order, committed and answered. The turns
    /// already waiting when a commit starts go into it too (one fsync for all), up to one
    /// that carries a snapshot (stored right after its own commit). Ends when the engine side
    /// hangs up, or at the first failure (then every turn still waiting is refused).
    fn run<S: EventStore>(
        &mut self,
        store: &mut S,
        sealed: Receiver<Sealed>,
    ) -> Result<(), String> {
        loop {
            let idle = if self.staged {
                SETTLE_POLL
            } else {
                Duration::MAX
            };
            let first = match recv_spinning(&sealed, self.spin, idle) {
                Ok(first) => first,
                Err(RecvTimeoutError::Timeout) => {
                    // Idle with a staged snapshot: in force once written, so that a restart
                    // of a server that has gone quiet does not replay what it covers.
                    self.staged = match store.settle_snapshot(false) {
                        Ok(staged) => staged,
                        Err(e) => {
                            error!(error = %e, "snapshot failed: stopping");
                            let why = self.fail(Vec::new(), format!("snapshot failed: {e}"));
                            sealed.try_iter().for_each(Committer::refuse);
                            return Err(why);
                        }
                    };
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            };
            let mut group = vec![first];
            while group.len() <= PIPELINE_TURNS
                && group.last().is_some_and(|t| t.snapshot.is_none())
            {
                match sealed.try_recv() {
                    Ok(next) => group.push(next),
                    Err(_) => break,
                }
            }
            if let Err(e) = self.commit(store, group) {
                sealed.try_iter().for_each(Committer::refuse);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Makes `group` (consecutive turns) durable in one commit, then answers its turns in
    /// order, then stores the last turn's snapshot, if it carries one. A group with nothing
    /// to commit but answers to send checks the store's term first ([`EventStore::fence`]),
    /// so that a deposed leader answers nothing.
    fn commit<S: EventStore>(
        &mut self,
        store: &mut S,
        mut group: Vec<Sealed>,
    ) -> Result<(), String> {
        if let Some(why) = &self.failed {
            let why = why.clone();
            group.into_iter().for_each(Committer::refuse);
            return Err(why);
        }
        if self.shared.deposed.load(Ordering::Acquire) {
            return Err(self.fail(
                group,
                "deposed: another replica took over the leader term".into(),
            ));
        }
        let mut batch = Batch::default();
        for turn in &mut group {
            batch.append(std::mem::take(&mut turn.batch));
        }
        if !batch.is_empty() {
            let started = Instant::now();
            match store.commit(&batch) {
                Ok(lsn) => {
                    let metrics = &self.shared.metrics;
                    let took = started.elapsed();
                    let commands: usize = group.iter().map(|t| t.commands).sum();
                    let events = batch.events.len() as u64;
                    metrics.commit_seconds.observe(took.as_secs_f64());
                    metrics.commit_commands.observe(commands as f64);
                    metrics.commit_events.observe(events as f64);
                    self.shared.commits.fetch_add(1, Ordering::Relaxed);
                    self.shared.events.fetch_add(events, Ordering::Relaxed);
                    debug!(
                        turns = group.len(),
                        commands,
                        events,
                        payloads = batch.put_payloads.len(),
                        lsn,
                        flush_us = took.as_micros() as u64,
                        "group commit"
                    );
                }
                Err(e) => {
                    error!(error = %e, "group commit failed: answering 503 and stopping");
                    return Err(self.fail(group, format!("group commit failed: {e}")));
                }
            }
        } else if group.iter().any(|t| !t.replies.is_empty())
            && let Err(e) = store.fence()
        {
            // Nothing to commit, but answers to send (reads, refusals): a replica fenced by a
            // leader term checks that it still leads first, so a deposed one answers nothing.
            error!(error = %e, "term check failed: answering 503 and stopping");
            return Err(self.fail(group, format!("term check failed: {e}")));
        }
        let snapshot = group.last_mut().and_then(|t| t.snapshot.take());
        self.answer(store, group);
        match snapshot {
            Some(snapshot) => self.snapshot(store, snapshot),
            None => Ok(()),
        }
    }

    /// Sends the answers of durable turns: every acknowledgement first, as it needs nothing
    /// more (a producer's next batch waits for it), then the leases, whose jobs' payloads are
    /// read in one call to the store and parsed into grants.
    fn answer<S: EventStore>(&self, store: &S, group: Vec<Sealed>) {
        let mut leases = Vec::new();
        let mut dispatched = Vec::with_capacity(group.len());
        for turn in group {
            for pending in turn.replies {
                match pending {
                    Pending::Ready(send) => send(true),
                    Pending::Leases(reply, granted) => leases.push((reply, granted, turn.lease_ms)),
                }
            }
            self.shared
                .commands
                .fetch_add(turn.commands as u64, Ordering::Relaxed);
            dispatched.push((turn.pass_started, turn.granted));
        }
        Committer::grant_leases(store, leases);
        for (pass_started, granted) in dispatched {
            let took = pass_started.elapsed().as_secs_f64();
            for _ in 0..granted {
                self.shared.metrics.dispatch_seconds.observe(took);
            }
        }
    }

    /// Answers long polls with their leases, each job's demand and payload read from the
    /// store (all in one call; none when no lease was granted).
    fn grant_leases<S: EventStore>(
        store: &S,
        leases: Vec<(Reply<LeaseOutcome>, Vec<Delivery>, u64)>,
    ) {
        let jobs: Vec<&str> = leases
            .iter()
            .flat_map(|(_, granted, _)| granted)
            .map(|(lease, _, _)| lease.job.as_str())
            .collect();
        let payloads = if jobs.is_empty() {
            Ok(Vec::new())
        } else {
            store.payloads(&jobs)
        };
        let mut payloads = match payloads {
            Ok(found) => Some(found.into_iter()),
            Err(e) => {
                // The leases are durable; unanswered, they expire and are reclaimed.
                error!(error = %e, "reading the leased jobs' payloads");
                None
            }
        };
        for (reply, granted, lease_ms) in leases {
            let answer = match payloads.as_mut() {
                Some(found) => granted
                    .into_iter()
                    .map(|delivery| grant(delivery, lease_ms, found.next().flatten()))
                    .collect::<Result<Vec<LeaseGrant>, String>>()
                    .map(LeaseOutcome::Granted)
                    .map_err(|e| {
                        error!(error = %e, "reading a leased job's payload");
                        Unavailable
                    }),
                None => Err(Unavailable),
            };
            let _ = reply.send(answer);
        }
    }

    /// Stores a snapshot (the store prunes the events it covers). A failed snapshot poisons
    /// the store: the writer stops.
    fn snapshot<S: EventStore>(&mut self, store: &mut S, snapshot: Snapshot) -> Result<(), String> {
        let started = Instant::now();
        let Snapshot {
            lsn,
            bytes,
            live_jobs,
            encoded_in,
        } = snapshot;
        let len = bytes.len();
        let metrics = &self.shared.metrics;
        metrics
            .snapshot_encode_seconds
            .observe(encoded_in.as_secs_f64());
        metrics.snapshot_bytes.set(len as i64);
        // The store may write it while the next turns commit (`stage_snapshot`); the time
        // logged is what the commits waited for. The bytes (the engine's whole state,
        // encoded) are garbage once stored: as they are freed, the time the store took is
        // noted for the pacing, and the release hook runs.
        let bytes = Box::new(FreedBytes {
            bytes,
            release: self.release_memory,
            handed: started,
            shared: Arc::clone(&self.shared),
        });
        match store.stage_snapshot(lsn, bytes) {
            Ok(()) => {
                self.staged = true;
                let stored_in = started.elapsed();
                info!(
                    lsn,
                    bytes = len,
                    live_jobs,
                    encode_ms = encoded_in.as_millis() as u64,
                    store_ms = stored_in.as_millis() as u64,
                    "snapshot"
                );
                Ok(())
            }
            Err(e) => {
                error!(error = %e, "snapshot failed: stopping");
                Err(self.fail(Vec::new(), format!("snapshot at LSN {lsn} failed: {e}")))
            }
        }
    }

    /// Stops the store side: `group` and every later turn are answered `Unavailable`, and the
    /// server is marked failed. Returns `why`.
    fn fail(&mut self, group: Vec<Sealed>, why: String) -> String {
        self.failed = Some(why.clone());
        self.shared.ready.store(false, Ordering::Release);
        self.shared.failed.store(true, Ordering::Release);
        group.into_iter().for_each(Committer::refuse);
        why
    }

    /// Answers every caller of a turn that will not be made durable with `Unavailable`.
    fn refuse(turn: Sealed) {
        for pending in turn.replies {
            match pending {
                Pending::Ready(send) => send(false),
                Pending::Leases(reply, _) => {
                    let _ = reply.send(Err(Unavailable));
                }
            }
        }
    }
}

/// A snapshot's bytes, freed on whichever thread the store drops them: the time since they
/// were handed to the store becomes [`Shared::snapshot_store_us`], and the release hook
/// ([`WriterSettings::release_memory`]) runs right after.
struct FreedBytes {
    bytes: SnapshotPieces,
    release: Option<fn()>,
    handed: Instant,
    shared: Arc<Shared>,
}

impl SnapshotSource for FreedBytes {
    fn pieces(&self) -> Vec<&[u8]> {
        self.bytes.slices().collect()
    }
}

impl Drop for FreedBytes {
    fn drop(&mut self) {
        drop(std::mem::take(&mut self.bytes));
        let stored_in = self.handed.elapsed();
        self.shared
            .snapshot_store_us
            .store(stored_in.as_micros() as u64, Ordering::Relaxed);
        self.shared
            .metrics
            .snapshot_store_seconds
            .observe(stored_in.as_secs_f64());
        if let Some(release) = self.release {
            release();
        }
    }
}

/// A lease as the worker gets it, with its job's stored demand and payload.
fn grant(
    (lease, tenant, class): Delivery,
    lease_ms: u64,
    stored: Option<Vec<u8>>,
) -> Result<LeaseGrant, String> {
    let (demand, payload) = match stored {
        Some(bytes) => {
            let s: StoredJob = serde_json::from_slice(&bytes)
                .map_err(|e| format!("job {}: stored payload: {e}", lease.job))?;
            let demand = if s.demand.is_empty() {
                default_demand()
            } else {
                s.demand
            };
            (demand, s.payload)
        }
        None => (default_demand(), null_payload()),
    };
    Ok(LeaseGrant {
        job_id: lease.job,
        attempt: lease.attempt,
        epoch: lease.epoch,
        expires_at: crate::wire::instant(lease.expires),
        lease_ms,
        members: lease.members,
        progress_ms: lease.progress.as_millis(),
        tenant,
        class,
        demand,
        payload,
    })
}

/// The job whose payload an event makes useless (it ended).
fn ended_job(event: &Event) -> Option<String> {
    match event {
        Event::AttemptEnded {
            job,
            after: AfterAttempt::Done(_),
            ..
        }
        | Event::JobCanceled { job, .. }
        | Event::JobExpired { job, .. } => Some(job.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairway_store::MemStore;
    use std::sync::mpsc::sync_channel;

    fn settings() -> WriterSettings {
        WriterSettings {
            limits: Limits::default(),
            policy: None,
            lease_ms: None,
            release_memory: None,
        }
    }

    fn offer(worker: &str) -> WorkerOffer {
        WorkerOffer {
            worker: worker.into(),
            pool: "default".into(),
            capacity: BTreeMap::from([("cpu".to_string(), 4.0)]),
            labels: BTreeMap::new(),
            max_jobs: 1,
        }
    }

    /// A recovered engine on a fresh `MemStore` (and its disk), a command channel, and the
    /// shared state, marked ready: what every writer of these tests starts from.
    struct Fresh {
        engine: Engine,
        unsnapshotted: u64,
        store: MemStore,
        disk: fairway_store::MemDisk,
        tx: std::sync::mpsc::SyncSender<Command>,
        rx: Receiver<Command>,
        shared: Arc<Shared>,
    }

    // Proves: the after-recovery hook runs once per recovery, fresh store or not, and only
    // when one is set.
    #[test]
    fn recovery_calls_its_hook_once() {
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        fn hook() {
            CALLS.fetch_add(1, Ordering::SeqCst);
        }
        let hooked = WriterSettings {
            release_memory: Some(hook),
            ..settings()
        };
        let mut store = MemStore::new();
        recover(&mut store, &settings(), Time::from_millis(1_000)).unwrap();
        assert_eq!(CALLS.load(Ordering::SeqCst), 0);
        recover(&mut store, &hooked, Time::from_millis(2_000)).unwrap();
        let disk = store.disk();
        let mut reopened = MemStore::open(disk);
        recover(&mut reopened, &hooked, Time::from_millis(3_000)).unwrap();
        assert_eq!(CALLS.load(Ordering::SeqCst), 2);
    }

    fn fresh() -> Fresh {
        let mut store = MemStore::new();
        let disk = store.disk();
        let (engine, unsnapshotted) =
            recover(&mut store, &settings(), Time::from_millis(1_000)).unwrap();
        let (tx, rx) = sync_channel(16);
        let shared = Arc::new(Shared::default());
        shared.ready.store(true, Ordering::Release);
        Fresh {
            engine,
            unsnapshotted,
            store,
            disk,
            tx,
            rx,
            shared,
        }
    }

    impl Fresh {
        /// The writer, on the store as `wrap` makes it of the `MemStore`.
        fn writer<S: EventStore>(self, wrap: impl FnOnce(MemStore) -> S) -> Writer<S> {
            let store = wrap(self.store);
            Writer::new(
                self.engine,
                self.unsnapshotted,
                store,
                self.rx,
                self.shared,
                settings(),
            )
        }
    }

    /// A writer (not yet running) on a fresh `MemStore` whose first turn will be a long poll of
    /// worker `w1` and the submission of job `j` with payload `42`; with `fail`, that turn's
    /// commit fails.
    struct LeaseAndSubmit {
        writer: Writer<MemStore>,
        shared: Arc<Shared>,
        disk: fairway_store::MemDisk,
        lease_rx: oneshot::Receiver<Result<LeaseOutcome, Unavailable>>,
        submit_rx: oneshot::Receiver<Result<Vec<Admission>, Unavailable>>,
    }

    fn lease_and_submit(fail: bool) -> LeaseAndSubmit {
        let mut fresh = fresh();
        if fail {
            fresh.store.fail_next_commit();
        }
        let (tx, shared, disk) = (fresh.tx.clone(), fresh.shared.clone(), fresh.disk.clone());
        let lease_rx = send(&tx, |reply| Command::Lease {
            offer: offer("w1"),
            wait: Dur::from_secs(10),
            reply,
        });
        let submit_rx = send(&tx, |reply| Command::Submit {
            jobs: vec![SubmitJob {
                spec: JobSpec::new("j", "acme"),
                deadline_ms: None,
                blob: Some(StoredJob::encode(&default_demand(), Some(b"42"))),
            }],
            more: None,
            reply,
        });
        let writer = fresh.writer(|store| store);
        LeaseAndSubmit {
            writer,
            shared,
            disk,
            lease_rx,
            submit_rx,
        }
    }

    /// A turn whose commit fails acknowledges nothing: the submission and the long poll that
    /// got its lease both get `Unavailable`, the writer stops with an error and marks the
    /// server failed, and after a restart none of the turn is there.
    #[test]
    fn a_failed_commit_acknowledges_nothing_and_stops_the_writer() {
        let turn = lease_and_submit(true);
        let (shared, disk) = (turn.shared.clone(), turn.disk.clone());
        let result = turn.writer.run();
        assert!(result.is_err(), "{result:?}");
        assert_eq!(turn.submit_rx.blocking_recv().unwrap(), Err(Unavailable));
        assert!(matches!(
            turn.lease_rx.blocking_recv().unwrap(),
            Err(Unavailable)
        ));
        assert!(shared.failed.load(Ordering::Acquire));
        assert!(!shared.ready.load(Ordering::Acquire));

        let mut store = MemStore::open(disk);
        let (engine, _) = recover(&mut store, &settings(), Time::from_millis(2_000)).unwrap();
        assert!(engine.status("j").is_none());
        assert_eq!(store.payload("j").unwrap(), None);
    }

    /// After a failed turn the writer takes no other: a later status read (a turn with nothing
    /// to commit, which `MemStore` would let through its term check although it is poisoned)
    /// is neither applied nor answered, because the engine may be ahead of the store.
    #[test]
    fn a_failed_turn_stops_the_writer_for_good() {
        let mut fresh = fresh();
        fresh.store.fail_next_commit();
        let mut writer = fresh.writer(|store| store);
        let (submit_tx, submit_rx) = oneshot::channel();
        let submit = Command::Submit {
            jobs: vec![SubmitJob {
                spec: JobSpec::new("j", "acme"),
                deadline_ms: None,
                blob: None,
            }],
            more: None,
            reply: submit_tx,
        };
        assert!(writer.step(Time::from_millis(2_000), vec![submit]).is_err());
        assert_eq!(submit_rx.blocking_recv().unwrap(), Err(Unavailable));
        assert!(writer.is_stopped());
        let (status_tx, status_rx) = oneshot::channel();
        let status = Command::Status {
            job: "j".into(),
            tenant: None,
            reply: status_tx,
        };
        assert!(writer.step(Time::from_millis(3_000), vec![status]).is_err());
        assert!(
            status_rx.blocking_recv().is_err(),
            "a stopped writer answered"
        );
        assert!(writer.stop().is_err());
    }

    /// A store whose leader term was taken by another replica, as `PgStore` behaves then:
    /// every write and every term check is refused with `Deposed`; reads still work.
    struct DeposedStore(MemStore);

    fn deposed() -> fairway_store::StoreError {
        fairway_store::StoreError::Deposed {
            term: 1,
            message: "another replica took the term".into(),
        }
    }

    impl EventStore for DeposedStore {
        fn commit(&mut self, batch: &Batch) -> Result<u64, fairway_store::StoreError> {
            if batch.is_empty() {
                return Ok(self.0.last_lsn());
            }
            Err(deposed())
        }
        fn put_snapshot(&mut self, _: u64, _: &[u8]) -> Result<(), fairway_store::StoreError> {
            Err(deposed())
        }
        fn recover(&mut self) -> Result<fairway_store::Recovered, fairway_store::StoreError> {
            self.0.recover()
        }
        fn payload(&self, job: &str) -> Result<Option<Vec<u8>>, fairway_store::StoreError> {
            self.0.payload(job)
        }
        fn last_lsn(&self) -> u64 {
            self.0.last_lsn()
        }
        fn fence(&mut self) -> Result<(), fairway_store::StoreError> {
            Err(deposed())
        }
    }

    /// A deposed leader answers no read either: a turn with nothing to commit (a status and a
    /// policy read) checks the term before answering, and when the check is refused every
    /// caller gets `Unavailable` and the writer stops, marked failed.
    #[test]
    fn a_deposed_store_answers_no_read() {
        let fresh = fresh();
        let shared = fresh.shared.clone();
        let status_rx = status(&fresh.tx, "j");
        let policy_rx = send(&fresh.tx, |reply| Command::GetPolicy { reply });
        let result = fresh.writer(DeposedStore).run();
        assert!(result.is_err(), "{result:?}");
        assert_eq!(status_rx.blocking_recv().unwrap(), Err(Unavailable));
        assert!(matches!(
            policy_rx.blocking_recv().unwrap(),
            Err(Unavailable)
        ));
        assert!(shared.failed.load(Ordering::Acquire));
    }

    /// The election's `deposed` flag stops a writer between turns: a parked long poll gets
    /// `Unavailable`, not an empty list (which would be an answer), and the writer hands the
    /// command channel back for the replica's next term.
    #[test]
    fn the_deposed_flag_stops_the_writer_and_returns_the_channel() {
        let fresh = fresh();
        let tx = fresh.tx.clone();
        let lease_rx = send(&tx, |reply| Command::Lease {
            offer: offer("w1"),
            wait: Dur::from_secs(30),
            reply,
        });
        fresh.shared.deposed.store(true, Ordering::Release);
        let writer = fresh.writer(|store| store);
        let (result, rx) = writer.run_keeping_channel();
        assert!(result.is_err(), "{result:?}");
        assert!(matches!(
            lease_rx.blocking_recv().unwrap(),
            Err(Unavailable)
        ));
        tx.send(Command::Wake).unwrap();
        assert!(
            matches!(rx.try_recv(), Ok(Command::Wake)),
            "the channel came back"
        );
    }

    /// A writer over `fresh`, its snapshots paced by their duration as a server's are.
    fn paced_writer(fresh: Fresh, settings: WriterSettings) -> Writer<MemStore> {
        Writer::new(
            fresh.engine,
            fresh.unsnapshotted,
            fresh.store,
            fresh.rx,
            fresh.shared,
            settings,
        )
    }

    /// A writer over `fresh` whose snapshots are due by event counts alone.
    fn unpaced_writer(fresh: Fresh, settings: WriterSettings) -> Writer<MemStore> {
        paced_writer(fresh, settings).unpaced_snapshots()
    }

    /// The LSN of the latest snapshot on `disk`, as a restart would find it.
    fn latest_snapshot_lsn(disk: &fairway_store::MemDisk) -> Option<Lsn> {
        MemStore::open(disk.clone())
            .recover()
            .unwrap()
            .snapshot
            .map(|s| s.0)
    }

    /// Jobs `j{from}` .. `j{from + n - 1}` for tenant `acme`.
    fn jobs(from: usize, n: usize) -> Vec<SubmitJob> {
        (from..from + n)
            .map(|i| SubmitJob {
                spec: JobSpec::new(format!("j{i}"), "acme"),
                deadline_ms: None,
                blob: None,
            })
            .collect()
    }

    /// One submission of jobs `j{from}` .. `j{from + n - 1}` for tenant `acme`.
    fn submit_many(from: usize, n: usize) -> Command {
        let (reply, _rx) = oneshot::channel();
        let jobs = jobs(from, n);
        Command::Submit {
            jobs,
            more: None,
            reply,
        }
    }

    // Proves: the release hook runs after a stored snapshot, and not on turns that store none.
    #[test]
    fn a_stored_snapshot_calls_the_release_hook() {
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        fn hook() {
            CALLS.fetch_add(1, Ordering::SeqCst);
        }
        let mut settings = settings();
        settings.limits.snapshot_every_events = 10;
        settings.release_memory = Some(hook);
        let fresh = fresh();
        let mut writer = unpaced_writer(fresh, settings);
        writer
            .step(Time::from_millis(2_000), vec![submit_many(0, 3)])
            .unwrap();
        assert_eq!(CALLS.load(Ordering::SeqCst), 0, "3 events: no snapshot");
        writer
            .step(Time::from_millis(3_000), vec![submit_many(3, 20)])
            .unwrap();
        assert_eq!(CALLS.load(Ordering::SeqCst), 1, "a snapshot, then the hook");
    }

    // Proves: the release hook runs once a burst of commands has been followed by half a
    // second without any, once per burst, and not while commands keep coming.
    #[test]
    fn an_idle_writer_calls_the_release_hook_once_per_burst() {
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        fn hook() {
            CALLS.fetch_add(1, Ordering::SeqCst);
        }
        let mut settings = settings();
        settings.release_memory = Some(hook);
        let mut writer = unpaced_writer(fresh(), settings);
        let turns = &mut writer.turns;
        turns.release_when_idle(false);
        assert_eq!(
            CALLS.load(Ordering::SeqCst),
            0,
            "nothing came: nothing to hand back"
        );
        turns.release_when_idle(true);
        turns.release_when_idle(false);
        assert_eq!(CALLS.load(Ordering::SeqCst), 0, "not idle long enough yet");
        turns.busy_since = Some(Instant::now() - IDLE_RELEASE);
        turns.release_when_idle(false);
        assert_eq!(CALLS.load(Ordering::SeqCst), 1, "idle after a burst");
        turns.release_when_idle(false);
        assert_eq!(CALLS.load(Ordering::SeqCst), 1, "once per burst");
        turns.release_when_idle(true);
        turns.busy_since = Some(Instant::now() - IDLE_RELEASE);
        turns.release_when_idle(false);
        assert_eq!(CALLS.load(Ordering::SeqCst), 2, "the next burst");
    }

    // Proves: a paced writer waits ten times as long as the last snapshot took to store, not
    // only to encode, before the next (storing pauses the commits; with many finished jobs
    // remembered it can take much longer than the encoding).
    #[test]
    fn the_next_snapshot_waits_for_the_last_ones_storing_too() {
        let fresh = fresh();
        let disk = fresh.disk.clone();
        let shared = Arc::clone(&fresh.shared);
        let mut settings = settings();
        settings.limits.snapshot_every_events = 10;
        settings.limits.snapshot_max_tail_events = 1_000_000;
        let mut writer = paced_writer(fresh, settings);
        let snapshot_lsn = || latest_snapshot_lsn(&disk);
        writer
            .step(Time::from_millis(2_000), vec![submit_many(0, 20)])
            .unwrap();
        let first = snapshot_lsn().expect("20 events: a snapshot");
        // As if storing that snapshot had taken an hour: none for the next ten.
        shared
            .snapshot_store_us
            .store(3_600_000_000, Ordering::Relaxed);
        // Long enough for ten times the encoding of this small engine to pass.
        std::thread::sleep(Duration::from_millis(100));
        // Canceling ends jobs: events, and fewer live jobs than events since the snapshot.
        let cancel = |from: usize, n: usize| -> Vec<Command> {
            (from..from + n)
                .map(|i| Command::Cancel {
                    job: format!("j{i}"),
                    tenant: None,
                    reply: oneshot::channel().0,
                })
                .collect()
        };
        writer
            .step(Time::from_millis(3_000), cancel(0, 15))
            .unwrap();
        assert!(writer.store_mut().last_lsn() >= first + 15);
        assert_eq!(snapshot_lsn(), Some(first), "paced by the storing");
        // Stored in no time: the next is due once ten times the encoding has passed.
        shared.snapshot_store_us.store(0, Ordering::Relaxed);
        let mut next = 20;
        while snapshot_lsn() == Some(first) && next < 20 + 200 {
            std::thread::sleep(Duration::from_millis(10));
            let mut turn = vec![submit_many(next, 1)];
            turn.extend(cancel(next, 1));
            writer.step(Time::from_millis(4_000), turn).unwrap();
            next += 1;
        }
        assert!(
            snapshot_lsn() > Some(first),
            "a snapshot once the pause was over"
        );
    }

    /// The replay tail is bounded: with many live jobs the pacing rule alone (as many events as
    /// live jobs) would let the tail grow with the state, but once
    /// `snapshot_max_tail_events` events follow the last snapshot, the turn that passes them
    /// snapshots, so a restart replays no more than that (plus one turn).
    #[test]
    fn the_replay_tail_is_capped_whatever_the_state() {
        let fresh = fresh();
        let disk = fresh.disk.clone();
        let mut settings = settings();
        settings.limits.snapshot_every_events = 10;
        settings.limits.snapshot_max_tail_events = 25;
        let mut writer = unpaced_writer(fresh, settings);
        let snapshot_lsn = || latest_snapshot_lsn(&disk);
        writer
            .step(Time::from_millis(2_000), vec![submit_many(0, 100)])
            .unwrap();
        let first = snapshot_lsn().expect("100 events, as many as the live jobs: a snapshot");
        // 30 more events: fewer than the 130 live jobs, more than the cap.
        writer
            .step(Time::from_millis(3_000), vec![submit_many(100, 30)])
            .unwrap();
        let last = writer.store_mut().last_lsn();
        assert_eq!(last, first + 30);
        assert_eq!(snapshot_lsn(), Some(last), "the cap took a snapshot");
        // 20 more: under the cap and under the live jobs: none.
        writer
            .step(Time::from_millis(4_000), vec![submit_many(130, 20)])
            .unwrap();
        assert_eq!(snapshot_lsn(), Some(last));
    }

    /// A store whose commits wait at a gate: each commit with anything in it says so on
    /// `entered`, then waits for the test's word on `gate` (`true`: commit; `false`: fail, as
    /// a failed fsync would, poisoning the store).
    struct GatedStore {
        inner: MemStore,
        entered: std::sync::mpsc::SyncSender<()>,
        gate: std::sync::mpsc::Receiver<bool>,
    }

    impl EventStore for GatedStore {
        fn commit(&mut self, batch: &Batch) -> Result<u64, fairway_store::StoreError> {
            if !batch.is_empty() {
                let _ = self.entered.send(());
                if !self.gate.recv().unwrap_or(false) {
                    self.inner.fail_next_commit();
                }
            }
            self.inner.commit(batch)
        }
        fn put_snapshot(
            &mut self,
            lsn: u64,
            bytes: &[u8],
        ) -> Result<(), fairway_store::StoreError> {
            self.inner.put_snapshot(lsn, bytes)
        }
        fn recover(&mut self) -> Result<fairway_store::Recovered, fairway_store::StoreError> {
            self.inner.recover()
        }
        fn payload(&self, job: &str) -> Result<Option<Vec<u8>>, fairway_store::StoreError> {
            self.inner.payload(job)
        }
        fn last_lsn(&self) -> u64 {
            self.inner.last_lsn()
        }
    }

    /// A writer running on its own thread over a [`GatedStore`]: its command channel, the
    /// shared state, the gate's two ends, the running thread, and the store's disk.
    struct Gated {
        tx: std::sync::mpsc::SyncSender<Command>,
        shared: Arc<Shared>,
        entered: Receiver<()>,
        gate: std::sync::mpsc::SyncSender<bool>,
        running: std::thread::JoinHandle<Result<(), String>>,
        disk: fairway_store::MemDisk,
    }

    fn gated_writer() -> Gated {
        let fresh = fresh();
        let (tx, shared, disk) = (fresh.tx.clone(), fresh.shared.clone(), fresh.disk.clone());
        let (entered_tx, entered) = sync_channel(16);
        let (gate, gate_rx) = sync_channel(16);
        let writer = fresh.writer(|inner| GatedStore {
            inner,
            entered: entered_tx,
            gate: gate_rx,
        });
        let running = std::thread::spawn(move || writer.run());
        Gated {
            tx,
            shared,
            entered,
            gate,
            running,
            disk,
        }
    }

    /// Sends the command `make` builds around a new reply channel; returns the channel.
    fn send<T>(
        tx: &std::sync::mpsc::SyncSender<Command>,
        make: impl FnOnce(Reply<T>) -> Command,
    ) -> oneshot::Receiver<Result<T, Unavailable>> {
        let (reply, rx) = oneshot::channel();
        tx.send(make(reply)).unwrap();
        rx
    }

    fn submit(
        tx: &std::sync::mpsc::SyncSender<Command>,
        job: &str,
    ) -> oneshot::Receiver<Result<Vec<Admission>, Unavailable>> {
        send(tx, |reply| Command::Submit {
            jobs: vec![SubmitJob {
                spec: JobSpec::new(job, "acme"),
                deadline_ms: None,
                blob: None,
            }],
            more: None,
            reply,
        })
    }

    fn status(
        tx: &std::sync::mpsc::SyncSender<Command>,
        job: &str,
    ) -> oneshot::Receiver<Result<Option<JobStatus>, Unavailable>> {
        send(tx, |reply| Command::Status {
            job: job.into(),
            tenant: None,
            reply,
        })
    }

    /// Waits until the engine side has taken `n` commands into its turns (it counts them off
    /// the queue-depth gauge, which these tests never raise), and a little longer, for their
    /// turns to be sealed and handed on.
    fn await_taken(shared: &Shared, n: i64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while shared.metrics.writer_queue_depth.get() > -n {
            assert!(
                Instant::now() < deadline,
                "the writer did not take the commands"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    /// With the commit of turn 1 (a submission) still running on the store thread, the
    /// engine side applies turn 2, a status read of that job, which sees it queued; the read
    /// must not be answered while the commit that holds the job is not durable. Once the
    /// commit is let through, both are answered, the read with what it saw.
    #[test]
    fn a_pipelined_read_waits_for_the_commit_it_could_show() {
        let w = gated_writer();
        let submitted = submit(&w.tx, "j");
        w.entered.recv().unwrap();
        let mut read = status(&w.tx, "j");
        await_taken(&w.shared, 2);
        assert!(
            matches!(read.try_recv(), Err(oneshot::error::TryRecvError::Empty)),
            "a read was answered before the commit it shows was durable"
        );
        w.gate.send(true).unwrap();
        let admissions = submitted.blocking_recv().unwrap().unwrap();
        assert!(admissions[0].is_accepted(), "{admissions:?}");
        let seen = read.blocking_recv().unwrap().unwrap();
        assert_eq!(seen.map(|s| s.state), Some(JobState::Queued));
        w.shared.shutdown.store(true, Ordering::Release);
        // Wakes a waiting writer; one that saw the flag on its own has hung up already.
        let _ = w.tx.send(Command::Wake);
        w.running.join().unwrap().unwrap();
    }

    /// Turn 1's commit (a submission) fails while turn 2, a read of turn 1's job, waits
    /// behind it, applied: neither is answered but `Unavailable` (the read has nothing to
    /// commit, and a poisoned `MemStore` would let its term check through), the writer stops
    /// with the error, and a restart does not find the job.
    #[test]
    fn a_failed_commit_in_the_pipeline_answers_no_later_turn() {
        let w = gated_writer();
        let first = submit(&w.tx, "j1");
        w.entered.recv().unwrap();
        let read = status(&w.tx, "j1");
        await_taken(&w.shared, 2);
        // Fail turn 1's commit, and any other the store side would wrongly go on to try. Once
        // the first has failed, the writer may stop and drop the store, the gate's receiver
        // with it, before the test sends the next: those sends may find no one.
        w.gate.send(false).unwrap();
        for _ in 0..2 {
            let _ = w.gate.send(false);
        }
        assert_eq!(first.blocking_recv().unwrap(), Err(Unavailable));
        assert_eq!(read.blocking_recv().unwrap(), Err(Unavailable));
        let result = w.running.join().unwrap();
        assert!(result.is_err(), "{result:?}");
        assert!(w.shared.failed.load(Ordering::Acquire));
        assert!(!w.shared.ready.load(Ordering::Acquire));
        let mut store = MemStore::open(w.disk);
        let (engine, _) = recover(&mut store, &settings(), Time::from_millis(2_000)).unwrap();
        assert!(engine.status("j1").is_none());
    }

    /// Whether `admissions` accept jobs `j0`, `j1`, ... in order, as new.
    fn accepted_in_order(admissions: &[Admission]) -> bool {
        admissions.iter().enumerate().all(|(i, a)| {
            matches!(a, Admission::Accepted { job, duplicate: false } if *job == format!("j{i}"))
        })
    }

    /// A batch sent in parts (`more`) is applied part after part as they come, in one turn:
    /// the store commits it once, after the last part, and it is answered once, every job in
    /// order; a restart finds them all.
    #[test]
    fn a_batch_in_parts_is_one_commit() {
        let w = gated_writer();
        let (more_tx, more_rx) = sync_channel(4);
        let answer = send(&w.tx, |reply| Command::Submit {
            jobs: jobs(0, 3),
            more: Some(more_rx),
            reply,
        });
        more_tx.send(jobs(3, 3)).unwrap();
        more_tx.send(jobs(6, 2)).unwrap();
        drop(more_tx);
        w.entered.recv().unwrap();
        w.gate.send(true).unwrap();
        let admissions = answer.blocking_recv().unwrap().unwrap();
        assert_eq!(admissions.len(), 8, "{admissions:?}");
        assert!(accepted_in_order(&admissions), "{admissions:?}");
        assert_eq!(w.shared.metrics.batch_parts_late.get(), 0);
        assert!(
            w.entered.recv_timeout(Duration::from_millis(200)).is_err(),
            "the batch took a second commit"
        );
        // Shutting down commits nothing more, so the gate is not opened again: the writer may
        // already have dropped the store, and the gate's receiver with it.
        w.shared.shutdown.store(true, Ordering::Release);
        // Wakes a waiting writer; one that saw the flag on its own has hung up already.
        let _ = w.tx.send(Command::Wake);
        w.running.join().unwrap().unwrap();
        let mut store = MemStore::open(w.disk);
        let (engine, _) = recover(&mut store, &settings(), Time::from_millis(2_000)).unwrap();
        for i in 0..8 {
            let state = engine.status(&format!("j{i}")).map(|s| s.state);
            assert_eq!(state, Some(JobState::Queued), "j{i}");
        }
    }

    /// A part that has not come within `BATCH_PART_WAIT` ends the batch: the jobs applied so
    /// far are committed and answered, the late batch is counted, the channel is closed to a
    /// later part, and its jobs are never applied.
    #[test]
    fn a_late_part_ends_the_batch() {
        let fresh = fresh();
        let shared = fresh.shared.clone();
        let mut writer = fresh.writer(|store| store);
        let (more_tx, more_rx) = sync_channel(4);
        more_tx.send(jobs(2, 2)).unwrap();
        let (reply, answer) = oneshot::channel();
        let submit = Command::Submit {
            jobs: jobs(0, 2),
            more: Some(more_rx),
            reply,
        };
        let started = Instant::now();
        writer.step(Time::from_millis(2_000), vec![submit]).unwrap();
        assert!(started.elapsed() >= BATCH_PART_WAIT);
        assert_eq!(shared.metrics.batch_parts_late.get(), 1);
        let admissions = answer.blocking_recv().unwrap().unwrap();
        assert_eq!(admissions.len(), 4, "{admissions:?}");
        assert!(accepted_in_order(&admissions), "{admissions:?}");
        assert!(
            more_tx.try_send(jobs(4, 1)).is_err(),
            "a late part was taken"
        );
        let (reply, seen) = oneshot::channel();
        let status = Command::Status {
            job: "j4".into(),
            tenant: None,
            reply,
        };
        writer.step(Time::from_millis(3_000), vec![status]).unwrap();
        assert_eq!(seen.blocking_recv().unwrap().unwrap(), None);
    }

    /// The same turn with a working store answers after the commit: the submission is
    /// accepted, the parked long poll gets the lease with the job's payload, and both are
    /// durable.
    #[test]
    fn a_turn_answers_after_its_commit() {
        let turn = lease_and_submit(false);
        let (shared, disk) = (turn.shared.clone(), turn.disk.clone());
        shared.shutdown.store(true, Ordering::Release);
        turn.writer.run().unwrap();
        let admissions = turn.submit_rx.blocking_recv().unwrap().unwrap();
        assert!(admissions[0].is_accepted(), "{admissions:?}");
        let Ok(LeaseOutcome::Granted(leases)) = turn.lease_rx.blocking_recv().unwrap() else {
            panic!("no lease");
        };
        assert_eq!(leases.len(), 1);
        assert_eq!(leases[0].payload.get(), "42");

        let mut store = MemStore::open(disk);
        let (engine, _) = recover(&mut store, &settings(), Time::from_millis(2_000)).unwrap();
        assert_eq!(engine.status("j").map(|s| s.state), Some(JobState::Running));
    }
}
