//! The events the engine emits: the durable record of every state change.
//!
//! Decisions are taken once, by the live engine; an event records the decision's result, and
//! [`crate::Engine::apply`] replays it without deciding anything again. So replaying the events
//! of a run rebuilds the durable state exactly, whatever workers happened to be alive when it
//! runs. Events hold names (job ids, tenant paths, worker names), never internal indices.
//!
//! These types are persisted by the store (which frames and versions them): never reorder their
//! fields or variants; evolve by adding variants at the end.

use crate::job::JobSpec;
use crate::time::{Dur, Time};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Where the members of an attempt run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// Worker name (shared with the engine's worker table: a grant copies no text).
    pub worker: Arc<str>,
    /// Pool of that worker.
    pub pool: Arc<str>,
    /// Members on that worker.
    pub members: u32,
}

/// Why a running attempt was asked to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StopReason {
    /// Preempted to restore a reserve or a guarantee.
    Preempt,
    /// The job was canceled.
    Cancel,
}

/// How an attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AttemptEnd {
    /// The worker reported success.
    Succeeded,
    /// The worker reported failure.
    Failed {
        /// Whether it may be retried.
        retryable: bool,
    },
    /// The lease expired without a heartbeat: the attempt was reclaimed.
    Expired,
    /// It stopped after a preemption request (or was fenced at the grace deadline).
    Preempted,
    /// It stopped after a cancellation (or was fenced at the grace deadline).
    Canceled,
}

/// What happens to the job after an attempt ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AfterAttempt {
    /// The job is finished, in the given terminal state name.
    Done(crate::job::JobState),
    /// The job waits again: eligible at `not_before` (now when `None`), ordered by `seq`.
    Requeue {
        /// Retry backoff.
        not_before: Option<Time>,
        /// Position in its queue.
        seq: u64,
        /// Whether this re-entry spends retry budget.
        retry: bool,
    },
}

/// One durable state change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// A policy version was published.
    PolicyPublished {
        /// When.
        at: Time,
        /// Its version number.
        version: u64,
        /// Its source text.
        source: String,
    },
    /// A job was accepted (queued, or deferred until its not-before window).
    JobAccepted {
        /// When.
        at: Time,
        /// Its position in arrival order.
        seq: u64,
        /// The job as submitted.
        spec: JobSpec,
        /// The effective estimate admission settled on.
        estimate: Dur,
        /// Eligible from, if deferred.
        deferred_until: Option<Time>,
        /// WFQ virtual finish tag (zero under other policies).
        wfq_tag: u128,
        /// Estimated cost (cost units), counted in the tenant's outstanding work.
        cost: u128,
    },
    /// A deferred job became eligible.
    JobEligible {
        /// When.
        at: Time,
        /// Job id.
        job: String,
    },
    /// A job's deadline can no longer be met and its class downgrades it.
    JobDowngraded {
        /// When.
        at: Time,
        /// Job id.
        job: String,
    },
    /// A job got a lease: an attempt started.
    LeaseGranted {
        /// When.
        at: Time,
        /// Job id.
        job: String,
        /// Attempt number.
        attempt: u32,
        /// Fencing epoch.
        epoch: u64,
        /// Lease expiry.
        expires: Time,
        /// Where its members run.
        placements: Vec<Placement>,
        /// The share increments charged at each level of the job's path, top first (ppb).
        charges: Vec<u64>,
        /// The estimate charged.
        estimate: Dur,
        /// The policy version that decided it.
        policy_version: u64,
        /// Whether it borrowed capacity reserved for a higher band.
        borrowed: bool,
        /// DRR state of the job's queue after the dispatch: (round, deficit, position).
        drr: Option<(u128, i128, u64)>,
        /// The attempt's dominant share of one worker, times its members (ppb): cost per ns.
        worker_share: u64,
    },
    /// A heartbeat extended a lease.
    LeaseExtended {
        /// When.
        at: Time,
        /// Job id.
        job: String,
        /// The epoch of the lease.
        epoch: u64,
        /// New expiry.
        expires: Time,
        /// Work done so far, as the worker checkpointed it.
        progress: Option<Dur>,
    },
    /// A running attempt was asked to stop; for a preemption the job's epoch is raised now.
    StopRequested {
        /// When.
        at: Time,
        /// Job id.
        job: String,
        /// The attempt's epoch.
        epoch: u64,
        /// Why.
        reason: StopReason,
        /// Fenced at this instant if it has not stopped.
        deadline: Time,
    },
    /// An attempt ended.
    AttemptEnded {
        /// When.
        at: Time,
        /// Job id.
        job: String,
        /// The attempt's epoch.
        epoch: u64,
        /// How.
        end: AttemptEnd,
        /// Run time to charge (actual usage).
        usage: Dur,
        /// Work done, for a checkpointable job that stopped.
        progress: Option<Dur>,
        /// What happens next.
        after: AfterAttempt,
    },
    /// A job that was not running was canceled.
    JobCanceled {
        /// When.
        at: Time,
        /// Job id.
        job: String,
    },
    /// A waiting job was dropped because its deadline can no longer be met.
    JobExpired {
        /// When.
        at: Time,
        /// Job id.
        job: String,
    },
}

impl Event {
    /// When it happened.
    pub fn at(&self) -> Time {
        match self {
            Event::PolicyPublished { at, .. }
            | Event::JobAccepted { at, .. }
            | Event::JobEligible { at, .. }
            | Event::JobDowngraded { at, .. }
            | Event::LeaseGranted { at, .. }
            | Event::LeaseExtended { at, .. }
            | Event::StopRequested { at, .. }
            | Event::AttemptEnded { at, .. }
            | Event::JobCanceled { at, .. }
            | Event::JobExpired { at, .. } => *at,
        }
    }
}
