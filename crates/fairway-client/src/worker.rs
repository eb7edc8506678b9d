//! The worker loop: lease jobs, run them, heartbeat in the background, complete.
//!
//! ```text
//!  poll (POST /v1/leases, long poll, max_jobs = free slots)
//!    └─ per lease, a task:  handler(JobContext) ──────────────┐
//!                           heartbeat every interval          │ returns JobOutcome
//!                             continue → lease extended       │
//!                             preempt / cancel → stop signal  │
//!                             409 stale / 404 → stop, lost    │
//!                           complete(epoch, outcome) <────────┘  (not when lost)
//! ```
//!
//! Completions go through one reporter task per worker, which sends what is waiting in one
//! `POST /v1/leases/complete` as soon as the call before it has returned: a lone completion
//! is sent at once, and jobs that end while a report is in flight share the next call. A job's
//! slot is freed once its outcome is recorded (or given up on).
//!
//! While the loop has no poll out (every slot taken), the reporter's call also asks for the
//! next leases, as many as the jobs it reports (`next`, [`Client::complete_and_lease`]): a
//! busy worker then makes one call, and waits for one commit, per round of jobs instead of
//! two. The reporter hands those leases to the loop before it frees the slots of the jobs it
//! reported, so the loop starts them before it would poll. One lease request of the worker is
//! out at a time, the loop's poll or the reporter's (a flag each takes before asking): two
//! would answer each other empty on the server, and the loop's count of free slots would miss
//! the leases of the other.
//!
//! Bounds: at most `max_jobs` jobs run at once and the loop asks for no more leases than it
//! has free slots, so nothing queues inside the worker; each job holds one task for its
//! handler and one future for its heartbeats, and at most `max_jobs` completions wait for the
//! reporter.

use crate::client::Client;
use crate::error::Error;
use crate::types::{
    Action, AttemptOutcome, CompleteRequest, Completion, Lease, LeaseRequest, MAX_BATCH,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};

/// The shortest heartbeat interval the loop uses, whatever the lease.
const HEARTBEAT_MIN: Duration = Duration::from_millis(50);
/// Tries to report one completion before giving up on it (the lease then expires on the
/// server, which retries the job).
const COMPLETE_TRIES: u32 = 5;
/// The longest wait between two polls after failed ones.
const POLL_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// How a [`Worker`] presents itself and how much it runs.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerConfig {
    /// The worker's unique name; default `HOSTNAME-PID`.
    pub worker: String,
    /// Its pool; the server's default pool when `None`.
    pub pool: Option<String>,
    /// Its total capacity over named resources (`cpu`, `mem`, ...).
    pub capacity: BTreeMap<String, f64>,
    /// Its labels, matched against jobs' requirements.
    pub labels: BTreeMap<String, String>,
    /// The most jobs it runs at once (at least 1; default 1).
    pub max_jobs: u32,
    /// How long one poll may wait for work on the server (default 20 s).
    pub wait_ms: u64,
    /// Time between heartbeats of a running job; default a third of the job's lease, so
    /// that two heartbeats in a row may fail before the lease runs out.
    pub heartbeat_interval: Option<Duration>,
}

impl Default for WorkerConfig {
    fn default() -> WorkerConfig {
        WorkerConfig {
            worker: default_worker_name(),
            pool: None,
            capacity: BTreeMap::new(),
            labels: BTreeMap::new(),
            max_jobs: 1,
            wait_ms: 20_000,
            heartbeat_interval: None,
        }
    }
}

/// `HOSTNAME-PID`: unique among the workers of one machine, readable in the server's views.
pub fn default_worker_name() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".to_string());
    format!("{host}-{}", std::process::id())
}

/// Why a running job is asked to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The scheduler preempts the attempt: stop (checkpointable jobs report their progress),
    /// and the job runs again later.
    Preempt,
    /// The job was canceled.
    Cancel,
    /// The worker is shutting down ([`ShutdownHandle::stop`]).
    Shutdown,
    /// The attempt is no longer this worker's: a heartbeat got `stale_epoch` or
    /// `unknown_job`, or no heartbeat got through before the lease ran out. Its completion
    /// will not be reported; another attempt may already be running elsewhere.
    Lost,
}

/// A job's stop signal: resolves when the job should stop, and says why.
///
/// Clone it into any task of the job that must notice a stop.
#[derive(Clone, Debug)]
pub struct StopSignal(watch::Receiver<Option<StopReason>>);

impl StopSignal {
    /// A signal and the sender that raises it (for tests of handlers, and for drivers).
    pub fn new() -> (watch::Sender<Option<StopReason>>, StopSignal) {
        let (tx, rx) = watch::channel(None);
        (tx, StopSignal(rx))
    }

    /// Why the job was asked to stop, if it was.
    pub fn reason(&self) -> Option<StopReason> {
        *self.0.borrow()
    }

    /// Whether the job was asked to stop.
    pub fn is_stopped(&self) -> bool {
        self.reason().is_some()
    }

    /// Waits until the job is asked to stop. If the attempt is over (its sender is gone)
    /// without a stop, resolves with [`StopReason::Lost`]: nothing of it is ours any more.
    pub async fn stopped(&self) -> StopReason {
        let mut rx = self.0.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(reason) => reason.expect("waited for Some"),
            Err(_) => self.reason().unwrap_or(StopReason::Lost),
        }
    }
}

/// What a handler learns about the job it runs.
#[derive(Debug)]
pub struct JobContext {
    /// The job.
    pub job_id: String,
    /// Attempt number (1 for the first).
    pub attempt: u32,
    /// The lease's epoch.
    pub epoch: u64,
    /// Who pays for it.
    pub tenant: String,
    /// Its class.
    pub class: String,
    /// The producer's payload (`null` when none).
    pub payload: Value,
    /// Work done by earlier attempts (checkpointable jobs resume from here).
    pub progress_ms: u64,
    /// Members of the job this worker runs (1 unless a gang).
    pub members: u32,
    /// Demand per member.
    pub demand: BTreeMap<String, f64>,
    /// Raised on preempt, cancel, worker shutdown, or loss of the lease.
    pub stop: StopSignal,
    progress: Arc<AtomicU64>,
}

impl JobContext {
    /// Records the work done so far (a checkpoint); the next heartbeat reports it.
    pub fn set_progress_ms(&self, progress_ms: u64) {
        self.progress.store(progress_ms, Ordering::Relaxed);
    }
}

/// How a job's attempt ended, as its handler reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobOutcome {
    /// The work is done.
    Succeeded,
    /// The work failed; `retryable` says whether another attempt may succeed.
    Failed {
        /// Whether a retry may help.
        retryable: bool,
    },
    /// The handler stopped because it was asked to, with the work done so far when the job
    /// checkpoints.
    Stopped {
        /// Work done (checkpointable jobs resume from it).
        progress_ms: Option<u64>,
    },
}

/// Ask a running [`Worker`] to shut down.
#[derive(Clone, Debug)]
pub struct ShutdownHandle(Arc<watch::Sender<Shutdown>>);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Shutdown {
    Running,
    /// Stop polling; let running jobs finish.
    Drain,
    /// Stop polling; stop running jobs.
    Stop,
}

impl ShutdownHandle {
    /// Stop asking for work and let running jobs finish; [`Worker::run`] returns when the
    /// last one has completed.
    pub fn drain(&self) {
        self.0.send_if_modified(|s| raise(s, Shutdown::Drain));
    }

    /// Stop asking for work and raise every running job's stop signal with
    /// [`StopReason::Shutdown`]; their outcomes are still reported, so the server can retry
    /// them without waiting for their leases to expire.
    pub fn stop(&self) {
        self.0.send_if_modified(|s| raise(s, Shutdown::Stop));
    }
}

/// Raises the shutdown mode, never lowers it (a `drain` after a `stop` changes nothing).
fn raise(state: &mut Shutdown, to: Shutdown) -> bool {
    if to > *state {
        *state = to;
        true
    } else {
        false
    }
}

/// A worker: leases jobs from a server and runs each through a handler.
pub struct Worker {
    client: Client,
    config: WorkerConfig,
    shutdown: Arc<watch::Sender<Shutdown>>,
}

impl Worker {
    /// A worker of `client`'s server.
    pub fn new(client: Client, config: WorkerConfig) -> Worker {
        let (shutdown, _) = watch::channel(Shutdown::Running);
        Worker {
            client,
            config,
            shutdown: Arc::new(shutdown),
        }
    }

    /// A handle that shuts this worker down gracefully, from any task.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle(self.shutdown.clone())
    }

    /// Runs jobs until shut down through a [`ShutdownHandle`].
    ///
    /// Polls for leases while it has free slots, runs up to `max_jobs` handlers at once, each
    /// in its own task, heartbeats each running job, turns `preempt` and `cancel` replies
    /// into its stop signal, and completes each attempt with its epoch. A handler that panics
    /// counts as a retryable failure. Transport failures, 429s and 5xxs while polling are
    /// retried with backoff; any other refusal of a poll (401, 403, 422: the worker's
    /// configuration is wrong) ends the loop with that error, after the running jobs finish.
    pub async fn run<H, F>(self, handler: H) -> Result<(), Error>
    where
        H: Fn(JobContext) -> F + Send + Sync + 'static,
        F: Future<Output = JobOutcome> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let max_jobs = self.config.max_jobs.max(1);
        let mut shutdown = self.shutdown.subscribe();
        let mut jobs: JoinSet<()> = JoinSet::new();
        let (report, reports) = mpsc::channel(max_jobs as usize);
        // Leases the reporter got with its completions, for the loop to start. Bounded by the
        // server: it grants a worker no more than its capacity holds, these included, and
        // each call asks for no more than the slots its completions free.
        let (handed, mut leased) = mpsc::unbounded_channel();
        // Held by whoever has a lease request out: the loop's poll or the reporter's call.
        let asking = Arc::new(AtomicBool::new(false));
        let reporter = tokio::spawn(report_completions(
            self.client.clone(),
            reports,
            Reporting {
                next: self.lease_request(max_jobs),
                asking: asking.clone(),
                shutdown: self.shutdown.subscribe(),
                handed,
            },
        ));
        let start = |jobs: &mut JoinSet<()>, leases: Vec<Lease>| {
            for lease in leases {
                tracing::debug!(job_id = %lease.job_id, attempt = lease.attempt, epoch = lease.epoch, "leased");
                jobs.spawn(run_job(
                    self.client.clone(),
                    lease,
                    handler.clone(),
                    self.config.heartbeat_interval,
                    self.shutdown.subscribe(),
                    report.clone(),
                ));
            }
        };
        let mut backoff = Duration::ZERO;
        let mut fatal = None;
        loop {
            while jobs.try_join_next().is_some() {}
            while let Ok(leases) = leased.try_recv() {
                start(&mut jobs, leases);
            }
            if *shutdown.borrow() != Shutdown::Running {
                break;
            }
            let free = max_jobs.saturating_sub(jobs.len() as u32);
            if free == 0 {
                // Full: wait for a slot, or for the leases the reporter got with the
                // completions that free slots. Heartbeats keep the worker known to the server.
                tokio::select! {
                    _ = jobs.join_next() => {}
                    Some(leases) = leased.recv() => start(&mut jobs, leases),
                    _ = shutdown.changed() => {}
                }
                continue;
            }
            // While the loop sleeps, leases the reporter got are started at once, not when the
            // sleep ends.
            if !backoff.is_zero() {
                let sleep = tokio::time::sleep(backoff);
                tokio::pin!(sleep);
                loop {
                    tokio::select! {
                        _ = &mut sleep => break,
                        Some(leases) = leased.recv() => start(&mut jobs, leases),
                        _ = shutdown.changed() => break,
                    }
                }
                if *shutdown.borrow() != Shutdown::Running {
                    continue;
                }
            }
            if asking
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
            {
                // The reporter's lease request is out: its leases (or its word that it got
                // none) come through the channel, then the free slots are counted again.
                tokio::select! {
                    Some(leases) = leased.recv() => start(&mut jobs, leases),
                    _ = jobs.join_next(), if !jobs.is_empty() => {}
                    _ = shutdown.changed() => {}
                }
                continue;
            }
            let request = self.lease_request(free);
            // A shutdown abandons the poll in flight; a lease granted in that instant is
            // never started and expires on the server, which then retries the job.
            // The reporter asks for no lease while this poll is out (the flag is the loop's).
            let polled = tokio::select! {
                polled = self.client.lease(&request) => polled,
                _ = shutdown.changed() => Ok(Vec::new()),
            };
            asking.store(false, Ordering::SeqCst);
            match polled {
                Ok(leases) => {
                    backoff = Duration::ZERO;
                    start(&mut jobs, leases);
                }
                Err(e)
                    if e.is_retryable()
                        || matches!(&e, Error::Http { status, .. } if *status >= 500) =>
                {
                    backoff = (backoff * 2)
                        .max(Duration::from_millis(250))
                        .max(e.retry_after().unwrap_or_default())
                        .min(POLL_BACKOFF_MAX);
                    tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "poll for leases failed");
                }
                Err(e) => {
                    tracing::error!(error = %e, "poll for leases refused; stopping the worker");
                    fatal = Some(e);
                    break;
                }
            }
        }
        // Shut down: the stop mode has reached every job through its own receiver; wait for
        // each to report. Leases the reporter got before it saw the shutdown are started too
        // (they see the stop mode at once): left alone they would wait out their lease.
        loop {
            tokio::select! {
                joined = jobs.join_next() => if joined.is_none() {
                    match leased.try_recv() {
                        Ok(leases) => start(&mut jobs, leases),
                        Err(_) => break,
                    }
                },
                Some(leases) = leased.recv() => start(&mut jobs, leases),
            }
        }
        drop(report);
        let _ = reporter.await;
        match fatal {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Worker {
    /// The worker's lease request for up to `max_jobs` jobs.
    fn lease_request(&self, max_jobs: u32) -> LeaseRequest {
        LeaseRequest {
            worker: self.config.worker.clone(),
            pool: self.config.pool.clone(),
            capacity: self.config.capacity.clone(),
            labels: self.config.labels.clone(),
            max_jobs: Some(max_jobs),
            wait_ms: Some(self.config.wait_ms),
        }
    }
}

/// Runs one leased attempt to its end: the handler in its own task, heartbeats beside it,
/// then the completion.
async fn run_job<H, F>(
    client: Client,
    mut lease: Lease,
    handler: Arc<H>,
    heartbeat_interval: Option<Duration>,
    shutdown: watch::Receiver<Shutdown>,
    report: mpsc::Sender<Report>,
) where
    H: Fn(JobContext) -> F + Send + Sync + 'static,
    F: Future<Output = JobOutcome> + Send + 'static,
{
    let (stop_tx, stop) = StopSignal::new();
    let progress = Arc::new(AtomicU64::new(lease.progress_ms));
    // What only the handler reads is moved to it, not copied: a payload can be large.
    let context = JobContext {
        job_id: lease.job_id.clone(),
        attempt: lease.attempt,
        epoch: lease.epoch,
        tenant: std::mem::take(&mut lease.tenant),
        class: std::mem::take(&mut lease.class),
        payload: lease.payload.take(),
        progress_ms: lease.progress_ms,
        members: lease.members,
        demand: std::mem::take(&mut lease.demand),
        stop,
        progress: progress.clone(),
    };
    let started = Instant::now();
    // Its own task, so that a panicking handler is a failed attempt, not a dead worker.
    let mut task = tokio::spawn(handler(context));
    let heartbeats = heartbeat(
        &client,
        &lease,
        heartbeat_interval,
        &stop_tx,
        &progress,
        shutdown,
    );
    tokio::pin!(heartbeats);
    let mut lost = false;
    let joined = loop {
        tokio::select! {
            joined = &mut task => break joined,
            () = &mut heartbeats, if !lost => lost = true,
        }
    };
    let usage_ms = started.elapsed().as_millis() as u64;
    let outcome = joined.unwrap_or_else(|e| {
        tracing::error!(job_id = %lease.job_id, error = %e, "the job's handler panicked");
        JobOutcome::Failed { retryable: true }
    });
    if lost {
        tracing::info!(job_id = %lease.job_id, epoch = lease.epoch, ?outcome, "attempt lost; its outcome is not reported");
        return;
    }
    let completion = Completion {
        job_id: lease.job_id.clone(),
        request: complete_request(&lease, outcome, usage_ms),
    };
    let (recorded, wait) = oneshot::channel();
    // The slot stays taken until the reporter is done with this outcome.
    if report.send((completion, recorded)).await.is_ok() {
        let _ = wait.await;
    }
}

/// Heartbeats the attempt until it is lost (then returns, having raised the stop signal);
/// raises the stop signal on `preempt`, `cancel` or a worker stop, and keeps heartbeating
/// after that until the handler returns (the server fences the attempt at its deadline).
async fn heartbeat(
    client: &Client,
    lease: &Lease,
    interval: Option<Duration>,
    stop: &watch::Sender<Option<StopReason>>,
    progress: &AtomicU64,
    mut shutdown: watch::Receiver<Shutdown>,
) {
    let lease_length = Duration::from_millis(lease.lease_ms);
    let every = interval.unwrap_or(lease_length / 3).max(HEARTBEAT_MIN);
    let mut ticks = tokio::time::interval_at(Instant::now() + every, every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The lease as this worker knows it: extended by each `continue`, measured on the local
    // clock so that clock skew with the server does not matter.
    let mut valid_until = Instant::now() + lease_length;
    let raise = |reason: StopReason| {
        stop.send_if_modified(|current| {
            let first = current.is_none();
            if first {
                *current = Some(reason);
            }
            first
        });
    };
    // A job leased as the worker was told to stop starts stopped.
    let mut shutdown_seen = *shutdown.borrow_and_update() == Shutdown::Stop;
    if shutdown_seen {
        raise(StopReason::Shutdown);
    }
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            changed = shutdown.changed(), if !shutdown_seen => {
                match changed {
                    // The worker is gone; nothing more will come.
                    Err(_) => shutdown_seen = true,
                    Ok(()) => {
                        if *shutdown.borrow_and_update() == Shutdown::Stop {
                            shutdown_seen = true;
                            raise(StopReason::Shutdown);
                        }
                    }
                }
                continue;
            }
        }
        let sent_at = Instant::now();
        let progress_ms = Some(progress.load(Ordering::Relaxed)).filter(|p| *p > 0);
        // A heartbeat that hangs must not outlive the lease it is meant to extend.
        let timeout = valid_until.saturating_duration_since(sent_at).max(every);
        let reply = tokio::time::timeout(
            timeout,
            client.heartbeat(&lease.job_id, lease.epoch, progress_ms),
        )
        .await;
        match reply {
            Ok(Ok(reply)) => match reply.action {
                Action::Continue => valid_until = sent_at + lease_length,
                Action::Preempt => raise(StopReason::Preempt),
                Action::Cancel => raise(StopReason::Cancel),
            },
            Ok(Err(e @ (Error::StaleEpoch { .. } | Error::NotFound { .. })))
            | Ok(Err(e @ Error::Http { status: 409, .. })) => {
                tracing::info!(job_id = %lease.job_id, epoch = lease.epoch, error = %e, "the attempt is no longer ours");
                raise(StopReason::Lost);
                return;
            }
            Ok(Err(e)) => {
                tracing::warn!(job_id = %lease.job_id, error = %e, "heartbeat failed");
            }
            Err(_) => tracing::warn!(job_id = %lease.job_id, "heartbeat timed out"),
        }
        if Instant::now() >= valid_until {
            tracing::warn!(job_id = %lease.job_id, epoch = lease.epoch, "no heartbeat got through before the lease ran out");
            raise(StopReason::Lost);
            return;
        }
    }
}

/// A completion for the reporter, and where to say that it is done with it.
type Report = (Completion, oneshot::Sender<()>);

/// The body of an attempt's completion.
fn complete_request(lease: &Lease, outcome: JobOutcome, usage_ms: u64) -> CompleteRequest {
    let (outcome, retryable, progress_ms) = match outcome {
        JobOutcome::Succeeded => (AttemptOutcome::Succeeded, None, None),
        JobOutcome::Failed { retryable } => (AttemptOutcome::Failed, Some(retryable), None),
        JobOutcome::Stopped { progress_ms } => (AttemptOutcome::Stopped, None, progress_ms),
    };
    CompleteRequest {
        epoch: lease.epoch,
        outcome,
        retryable,
        usage_ms: Some(usage_ms),
        progress_ms,
    }
}

/// What the reporter needs to ask for leases with its completions.
struct Reporting {
    /// The worker's lease request (`max_jobs` is set per call).
    next: LeaseRequest,
    /// Held by whoever has a lease request out; while the loop holds it (a poll), the
    /// reporter only completes.
    asking: Arc<AtomicBool>,
    /// Once the worker stops running new jobs, the reporter only completes.
    shutdown: watch::Receiver<Shutdown>,
    /// Where the leases it gets go, to the loop.
    handed: mpsc::UnboundedSender<Vec<Lease>>,
}

/// The reporter: sends the completions waiting in `reports` (at most [`MAX_BATCH`] a call) as
/// soon as the previous call has returned, until every sender is gone; with them, a request
/// for as many leases while the loop has no poll out and the worker runs.
async fn report_completions(
    client: Client,
    mut reports: mpsc::Receiver<Report>,
    reporting: Reporting,
) {
    let mut batch = Vec::new();
    while let Some(first) = reports.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match reports.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let lease = *reporting.shutdown.borrow() == Shutdown::Running
            && reporting
                .asking
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok();
        let next = lease.then(|| LeaseRequest {
            max_jobs: Some(batch.len() as u32),
            ..reporting.next.clone()
        });
        let leases = complete_batch(&client, &batch, next.as_ref()).await;
        if lease {
            reporting.asking.store(false, Ordering::SeqCst);
            // Sent even when empty, to wake a loop waiting to poll; and before the reported
            // jobs' slots are freed, so that the loop counts these leases when it counts them.
            let _ = reporting.handed.send(leases);
        }
        // Dropping each sender tells its job that the reporter is done with it.
        batch.clear();
    }
}

/// Reports one batch of outcomes, with the lease request `next` if given (the leases it got
/// are returned), retrying transport failures, 429s and 503s a few times (a completion
/// repeated with the epoch that ended the job is answered with its state, so a retry after a
/// lost answer is safe). An outcome that is not recorded is logged; the server then retries
/// the job when its lease expires. A lease request that fails is logged and gets nothing: the
/// loop polls.
async fn complete_batch(
    client: &Client,
    batch: &[Report],
    next: Option<&LeaseRequest>,
) -> Vec<Lease> {
    let completions: Vec<Completion> = batch.iter().map(|(c, _)| c.clone()).collect();
    let mut wait = Duration::from_millis(100);
    for attempt in 1..=COMPLETE_TRIES {
        let answer = client
            .complete_and_lease(completions.clone(), next)
            .await
            .map(|(results, leases)| {
                let leases = leases.unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "the lease request sent with completions failed");
                    Vec::new()
                });
                (results, leases)
            });
        match answer {
            Ok((results, leases)) => {
                for (result, (c, _)) in results.iter().zip(batch.iter()) {
                    if result.status == 200 {
                        tracing::debug!(job_id = %c.job_id, outcome = ?c.request.outcome, state = ?result.state, "completed");
                    } else {
                        // A stale epoch here can also mean an earlier try landed and its reply
                        // was lost.
                        tracing::warn!(job_id = %c.job_id, epoch = c.request.epoch, status = result.status, error = result.error.as_deref().unwrap_or_default(), "completion not recorded");
                    }
                }
                return leases;
            }
            Err(e) if e.is_retryable() && attempt < COMPLETE_TRIES => {
                tracing::warn!(jobs = batch.len(), error = %e, "reporting completions failed; retrying");
                tokio::time::sleep(wait.max(e.retry_after().unwrap_or_default())).await;
                wait *= 2;
            }
            Err(e) => {
                for (c, _) in batch.iter() {
                    tracing::warn!(job_id = %c.job_id, epoch = c.request.epoch, error = %e, "completion not recorded");
                }
                return Vec::new();
            }
        }
    }
    // Not reached: the last try returns.
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stop_signal_reports_the_first_reason_only() {
        let (tx, stop) = StopSignal::new();
        assert_eq!(stop.reason(), None);
        let waiter = tokio::spawn({
            let stop = stop.clone();
            async move { stop.stopped().await }
        });
        tx.send_replace(Some(StopReason::Cancel));
        assert_eq!(waiter.await.unwrap(), StopReason::Cancel);
        assert!(stop.is_stopped());
    }

    #[tokio::test]
    async fn a_stop_signal_whose_attempt_ended_resolves_as_lost() {
        let (tx, stop) = StopSignal::new();
        drop(tx);
        assert_eq!(stop.stopped().await, StopReason::Lost);
    }

    #[test]
    fn shutdown_only_escalates() {
        let mut state = Shutdown::Running;
        assert!(raise(&mut state, Shutdown::Stop));
        assert!(!raise(&mut state, Shutdown::Drain));
        assert_eq!(state, Shutdown::Stop);
    }

    #[test]
    fn the_default_worker_name_ends_with_the_pid() {
        let name = WorkerConfig::default().worker;
        assert!(
            name.ends_with(&format!("-{}", std::process::id())),
            "{name}"
        );
    }
}
