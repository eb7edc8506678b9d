//! Jobs as producers describe them, and the answers the engine gives about them.

use crate::time::{Dur, Time};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// The longest job id.
pub const MAX_JOB_ID_LEN: usize = 128;
/// The most members of a gang.
pub const MAX_GANG: u32 = 4096;
/// The most label requirements of a job.
pub const MAX_REQUIREMENTS: usize = 32;

/// A job as submitted: what it is, who pays, what it needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// Stable id chosen by the producer; submitting the same id again is idempotent.
    pub id: String,
    /// Tenant path (`org/team`), taken from the authenticated caller, never from a payload.
    pub tenant: String,
    /// Class (band); `default` when absent.
    pub class: Option<String>,
    /// Priority inside its class (higher first).
    pub priority: i32,
    /// Demand per member over named resources; `{cpu = 1}` when empty.
    pub demand: BTreeMap<String, f64>,
    /// Labels a worker must carry (`pool` names the pool).
    pub requires: BTreeMap<String, String>,
    /// Declared run time; bounded by the class and corrected by the tenant's track record.
    pub estimate: Option<Dur>,
    /// Absolute deadline.
    pub deadline: Option<Time>,
    /// Not to start before this instant.
    pub not_before: Option<Time>,
    /// Attempts allowed (at most the class's).
    pub max_attempts: Option<u32>,
    /// Whether it may be preempted (and so may borrow reserved capacity).
    pub preemptible: bool,
    /// Whether it checkpoints: preempted work resumes rather than restarts.
    pub checkpointable: bool,
    /// Members started together (1 for an ordinary job).
    pub gang: u32,
    /// Fewest members it may start with (defaults to `gang`).
    pub gang_min: Option<u32>,
}

impl JobSpec {
    /// A plain job of `tenant` with default settings.
    pub fn new(id: impl Into<String>, tenant: impl Into<String>) -> JobSpec {
        JobSpec {
            id: id.into(),
            tenant: tenant.into(),
            class: None,
            priority: 0,
            demand: BTreeMap::new(),
            requires: BTreeMap::new(),
            estimate: None,
            deadline: None,
            not_before: None,
            max_attempts: None,
            preemptible: false,
            checkpointable: false,
            gang: 1,
            gang_min: None,
        }
    }
}

/// Where a job is in its life.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Accepted, waiting for its not-before window (or a retry backoff).
    Deferred,
    /// Waiting for capacity.
    Queued,
    /// Held by a worker under a lease.
    Running,
    /// Finished successfully.
    Succeeded,
    /// Failed for good (attempts or retry budget exhausted, or a non-retryable failure).
    Failed,
    /// Canceled.
    Canceled,
    /// Dropped because its deadline could not be met.
    Expired,
}

impl JobState {
    /// Whether the job will never run again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Canceled | JobState::Expired
        )
    }

    /// The state's name, as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Deferred => "deferred",
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Canceled => "canceled",
            JobState::Expired => "expired",
        }
    }
}

/// Why a submission was refused.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum RejectReason {
    /// The job spec is malformed; the text says how.
    Invalid(String),
    /// The class does not exist.
    UnknownClass(String),
    /// The tenant may not submit to this class.
    ClassNotPermitted(String),
    /// The deadline is earlier than the job's own estimated run time allows.
    ImpossibleDeadline,
    /// The declared estimate is above the class's maximum.
    EstimateTooLarge,
    /// The job alone exceeds the tenant's outstanding-work envelope or burst quota.
    QuotaExceeded,
    /// The tenant's outstanding work is at its envelope.
    OutstandingFull,
    /// The tenant's burst quota is spent; it refills at the tenant's rate.
    BurstExhausted,
    /// The job is predicted to finish after its deadline.
    PredictedLate,
    /// The job is predicted to wait longer than its class's maximum age.
    PredictedTooOld,
    /// Too many distinct job shapes are waiting.
    TooManyShapes,
    /// The engine holds its maximum number of jobs.
    EngineFull,
    /// The job id was used before for a different job.
    IdReused,
}

impl RejectReason {
    /// A stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            RejectReason::Invalid(_) => "invalid",
            RejectReason::UnknownClass(_) => "unknown_class",
            RejectReason::ClassNotPermitted(_) => "class_not_permitted",
            RejectReason::ImpossibleDeadline => "impossible_deadline",
            RejectReason::EstimateTooLarge => "estimate_too_large",
            RejectReason::QuotaExceeded => "quota_exceeded",
            RejectReason::OutstandingFull => "outstanding_full",
            RejectReason::BurstExhausted => "burst_exhausted",
            RejectReason::PredictedLate => "predicted_late",
            RejectReason::PredictedTooOld => "predicted_too_old",
            RejectReason::TooManyShapes => "too_many_shapes",
            RejectReason::EngineFull => "engine_full",
            RejectReason::IdReused => "id_reused",
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RejectReason::Invalid(why) => write!(f, "invalid job: {why}"),
            RejectReason::UnknownClass(c) => write!(f, "unknown class {c:?}"),
            RejectReason::ClassNotPermitted(c) => {
                write!(f, "the tenant may not submit to class {c:?}")
            }
            RejectReason::ImpossibleDeadline => write!(
                f,
                "the deadline is earlier than the job's estimated run time allows"
            ),
            RejectReason::EstimateTooLarge => {
                write!(f, "the declared estimate is above the class's maximum")
            }
            RejectReason::QuotaExceeded => write!(
                f,
                "the job alone exceeds the tenant's outstanding-work envelope or burst quota"
            ),
            RejectReason::OutstandingFull => {
                write!(f, "the tenant's outstanding work is at its envelope")
            }
            RejectReason::BurstExhausted => write!(f, "the tenant's burst quota is spent"),
            RejectReason::PredictedLate => {
                write!(f, "the job is predicted to finish after its deadline")
            }
            RejectReason::PredictedTooOld => write!(
                f,
                "the job is predicted to wait longer than its class's maximum age"
            ),
            RejectReason::TooManyShapes => write!(f, "too many distinct job shapes are waiting"),
            RejectReason::EngineFull => write!(f, "the scheduler holds its maximum number of jobs"),
            RejectReason::IdReused => write!(f, "the job id was used before for a different job"),
        }
    }
}

/// The answer to a submission.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Admission {
    /// Durably accepted: it will be scheduled.
    Accepted {
        /// Its id.
        job: String,
        /// True when the id was submitted before and this is the first answer again.
        duplicate: bool,
    },
    /// Durably accepted for a later window.
    Deferred {
        /// Its id.
        job: String,
        /// It becomes eligible at this instant.
        until: Time,
        /// True when this repeats an earlier answer.
        duplicate: bool,
    },
    /// Nothing was accepted; retry after the hint.
    RejectedRetryable {
        /// Why.
        reason: RejectReason,
        /// When retrying may succeed (bounded).
        retry_after: Dur,
    },
    /// Nothing was accepted, and retrying the same job will not help.
    RejectedFinal {
        /// Why.
        reason: RejectReason,
    },
}

impl Admission {
    /// The outcome's name as the API spells it.
    pub fn outcome(&self) -> &'static str {
        match self {
            Admission::Accepted { .. } => "accepted",
            Admission::Deferred { .. } => "deferred",
            Admission::RejectedRetryable { .. } => "rejected_retryable",
            Admission::RejectedFinal { .. } => "rejected_final",
        }
    }

    /// Whether the job was (or already had been) accepted.
    pub fn is_accepted(&self) -> bool {
        matches!(
            self,
            Admission::Accepted { .. } | Admission::Deferred { .. }
        )
    }
}

/// How an attempt ended, as the worker reports it.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Outcome {
    /// It finished its work.
    Succeeded,
    /// It failed; `retryable` says whether another attempt may succeed.
    Failed {
        /// Whether a retry may help.
        retryable: bool,
    },
    /// It stopped because it was asked to (preempt or cancel).
    Stopped,
}

/// What the worker is told in reply to a heartbeat.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum HeartbeatReply {
    /// Keep going; the lease now ends at `expires`.
    Continue {
        /// New lease expiry.
        expires: Time,
    },
    /// Stop and checkpoint: the job is being preempted.
    Preempt {
        /// The instant after which the attempt is fenced regardless.
        deadline: Time,
    },
    /// Stop: the job was canceled.
    Cancel {
        /// The instant after which the attempt is fenced regardless.
        deadline: Time,
    },
}

/// Why a lease operation was refused.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum LeaseError {
    /// No such job.
    UnknownJob,
    /// The epoch is not the job's authoritative one; nothing changed.
    StaleEpoch {
        /// The epoch presented.
        presented: u64,
        /// The job's current epoch.
        current: u64,
    },
    /// The job is not running (it finished, or was reclaimed).
    NotRunning,
}

impl fmt::Display for LeaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseError::UnknownJob => write!(f, "unknown job"),
            LeaseError::StaleEpoch { presented, current } => {
                write!(
                    f,
                    "stale epoch {presented}: the job's authoritative epoch is {current}"
                )
            }
            LeaseError::NotRunning => write!(f, "the job is not running"),
        }
    }
}

/// A lease handed to a worker: the right to run one attempt of a job (or some of a gang's
/// members) until `expires`, fenced by `epoch`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Lease {
    /// The job.
    pub job: String,
    /// The worker that holds it (shared with the engine's worker table: a grant copies no
    /// text).
    pub worker: Arc<str>,
    /// Attempt number (1 for the first).
    pub attempt: u32,
    /// Fencing epoch; every heartbeat and completion must present it.
    pub epoch: u64,
    /// Expiry unless extended by a heartbeat.
    pub expires: Time,
    /// Members of the job this worker runs (1 unless a gang).
    pub members: u32,
    /// Work already done by earlier attempts (checkpoint).
    pub progress: Dur,
}

/// A job's externally visible state.
#[derive(Clone, Debug, PartialEq)]
pub struct JobStatus {
    /// Id.
    pub job: String,
    /// Tenant.
    pub tenant: String,
    /// Class.
    pub class: String,
    /// State.
    pub state: JobState,
    /// Attempts started.
    pub attempt: u32,
    /// Authoritative epoch.
    pub epoch: u64,
    /// When it was first accepted.
    pub arrival: Time,
    /// Eligible from (deferred jobs).
    pub not_before: Option<Time>,
    /// Workers holding it (running jobs).
    pub workers: Vec<String>,
    /// Lease expiry (running jobs).
    pub expires: Option<Time>,
    /// Its effective estimate.
    pub estimate: Dur,
    /// Why it ended, for failed and expired jobs.
    pub reason: Option<String>,
    /// The policy version that dispatched its running attempt.
    pub policy_version: Option<u64>,
}
