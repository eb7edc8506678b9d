//! The request and reply bodies of the HTTP API v1, field for field.
//!
//! These mirror the contract in DESIGN.md "HTTP API": durations are integers named `*_ms`,
//! instants are RFC 3339 strings (here [`OffsetDateTime`]). Requests leave out the fields that
//! are not set, so the server applies its defaults. Replies ignore fields this SDK does not
//! know, so a newer server that adds fields does not break an older client.
//!
//! The SDK keeps its own copies of these shapes instead of depending on the server crate: a
//! client speaks only the wire protocol, and this module is where that protocol is written down
//! on the client's side.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use time::OffsetDateTime;

/// The most jobs one `POST /v1/jobs/batch` may carry.
pub const MAX_BATCH: usize = 1000;

/// A job as a producer submits it: the body of `POST /v1/jobs`.
///
/// Every field is optional on the wire; [`JobSpec::new`] and the builder methods set the ones
/// a producer usually needs. [`Client::submit`](crate::Client::submit) fills in `id` with a
/// UUID v7 when it is absent, so that a retried submission is recognised as the same job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// Stable id chosen by the producer; the same id again returns the first outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Tenant that pays; with a tenant token the server takes it from the token instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Class (priority band); the server uses `default` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Priority inside the class (higher first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Demand per member over named resources (`cpu`, `mem`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<BTreeMap<String, f64>>,
    /// Labels a worker must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires: Option<BTreeMap<String, String>>,
    /// Declared run time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_ms: Option<u64>,
    /// Deadline, relative to arrival.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// Not to start before this instant.
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub not_before: Option<OffsetDateTime>,
    /// Attempts allowed (at most the class's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Whether the job may be preempted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptible: Option<bool>,
    /// Whether the job checkpoints, so that preempted work resumes rather than restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpointable: Option<bool>,
    /// Members started together (a gang); 1 for an ordinary job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<u32>,
    /// Fewest members a gang may start with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang_min: Option<u32>,
    /// Anything the job's code needs, handed to the worker with the lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
}

impl JobSpec {
    /// A job of `tenant` with the server's defaults for everything else.
    pub fn new(tenant: impl Into<String>) -> JobSpec {
        JobSpec {
            tenant: Some(tenant.into()),
            ..JobSpec::default()
        }
    }

    /// Sets the job id (otherwise [`Client::submit`](crate::Client::submit) generates one).
    pub fn id(mut self, id: impl Into<String>) -> JobSpec {
        self.id = Some(id.into());
        self
    }

    /// Sets the class.
    pub fn class(mut self, class: impl Into<String>) -> JobSpec {
        self.class = Some(class.into());
        self
    }

    /// Adds `amount` of resource `resource` to the demand.
    pub fn demand(mut self, resource: impl Into<String>, amount: f64) -> JobSpec {
        self.demand
            .get_or_insert_with(BTreeMap::new)
            .insert(resource.into(), amount);
        self
    }

    /// Adds a label requirement.
    pub fn requires(mut self, key: impl Into<String>, value: impl Into<String>) -> JobSpec {
        self.requires
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }

    /// Sets the payload.
    pub fn payload(mut self, payload: Value) -> JobSpec {
        self.payload = Some(payload);
        self
    }
}

/// The reply to one submission: `POST /v1/jobs`, or one item of a batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SubmitReply {
    /// 201: queued.
    Accepted {
        /// The job's id.
        job_id: String,
        /// Whether this id had been submitted before (nothing new was created).
        #[serde(default)]
        duplicate: bool,
    },
    /// 202: accepted, but not eligible before `not_before`.
    Deferred {
        /// The job's id.
        job_id: String,
        /// When it becomes eligible.
        #[serde(with = "time::serde::rfc3339")]
        not_before: OffsetDateTime,
        /// Whether this id had been submitted before.
        #[serde(default)]
        duplicate: bool,
    },
    /// 429: refused for now; the same submission may succeed after `retry_after_ms`.
    RejectedRetryable {
        /// A stable code (for example `over_quota`).
        reason: String,
        /// A human explanation.
        #[serde(default)]
        message: String,
        /// How long to wait before trying again.
        #[serde(default)]
        retry_after_ms: u64,
    },
    /// 403 or 422: refused for good; the same submission will be refused again.
    RejectedFinal {
        /// A stable code (for example `unknown_class`).
        reason: String,
        /// A human explanation.
        #[serde(default)]
        message: String,
    },
}

/// The body of `POST /v1/jobs/batch`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchSubmitRequest {
    /// At most [`MAX_BATCH`] jobs.
    pub jobs: Vec<JobSpec>,
}

/// The reply to `POST /v1/jobs/batch`: one result per job, in order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchSubmitReply {
    /// One per submitted job, in the order submitted; when the request asked to leave out
    /// the jobs accepted as new (`omit=accepted`, as the SDK does), only the others, in order,
    /// each with its `index`.
    pub results: Vec<BatchResult>,
    /// With `omit=accepted`: how many results were left out, each job accepted as new under
    /// the id its request gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted: Option<usize>,
}

/// One job's result in a batch: the status a single submission would have had, and its body.
///
/// Read in one pass through [`BatchResultFields`] (a reply of 1,000 results decoded as a
/// flattened untagged enum of a tagged enum was buffered three times over: a third of a bulk
/// producer's time).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "BatchResultFields")]
pub struct BatchResult {
    /// The HTTP status the same job would have got alone (201, 202, 429, 403, 422, ...).
    pub status: u16,
    /// The job's place in the request, from 0, when some results were left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// The reply a single submission would have had.
    #[serde(flatten)]
    pub body: BatchItem,
}

/// Every field a batch result may have, as sent: what [`BatchResult`] is read from.
#[derive(Deserialize)]
struct BatchResultFields {
    status: u16,
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    job_id: Option<String>,
    #[serde(default)]
    duplicate: Option<bool>,
    #[serde(default)]
    not_before: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    retry_after_ms: Option<u64>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    current_epoch: Option<u64>,
    #[serde(default)]
    errors: Vec<PolicyError>,
}

impl TryFrom<BatchResultFields> for BatchResult {
    type Error = String;

    /// An outcome with the fields it needs is a reply; otherwise a result with an `error`
    /// code is an error body (as an untagged reading would decide).
    fn try_from(f: BatchResultFields) -> Result<BatchResult, String> {
        let message = f.message.unwrap_or_default();
        let duplicate = f.duplicate.unwrap_or(false);
        let not_before = f.not_before.as_deref().and_then(|t| {
            OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
        });
        let body = match (f.outcome.as_deref(), f.job_id, f.reason, not_before) {
            (Some("accepted"), Some(job_id), _, _) => {
                BatchItem::Reply(SubmitReply::Accepted { job_id, duplicate })
            }
            (Some("deferred"), Some(job_id), _, Some(not_before)) => {
                BatchItem::Reply(SubmitReply::Deferred {
                    job_id,
                    not_before,
                    duplicate,
                })
            }
            (Some("rejected_retryable"), _, Some(reason), _) => {
                BatchItem::Reply(SubmitReply::RejectedRetryable {
                    reason,
                    message,
                    retry_after_ms: f.retry_after_ms.unwrap_or(0),
                })
            }
            (Some("rejected_final"), _, Some(reason), _) => {
                BatchItem::Reply(SubmitReply::RejectedFinal { reason, message })
            }
            _ => match f.error {
                Some(error) => BatchItem::Error(ErrorBody {
                    error,
                    message,
                    current_epoch: f.current_epoch,
                    errors: f.errors,
                }),
                None => {
                    return Err(format!(
                        "a batch result (status {}) with neither a known outcome and its fields nor an error code",
                        f.status
                    ));
                }
            },
        };
        Ok(BatchResult {
            status: f.status,
            index: f.index,
            body,
        })
    }
}

/// The body of one batch result: an admission outcome, or an error (a malformed job).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BatchItem {
    /// Accepted, deferred or rejected.
    Reply(SubmitReply),
    /// The job could not be considered at all (for example, a malformed field).
    Error(ErrorBody),
}

/// Where a job is in its life.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Accepted, waiting for its not-before instant (or a retry backoff).
    Deferred,
    /// Waiting for capacity.
    Queued,
    /// Held by a worker under a lease.
    Running,
    /// Finished successfully.
    Succeeded,
    /// Failed for good.
    Failed,
    /// Canceled.
    Canceled,
    /// Dropped because its deadline could not be met.
    Expired,
    /// A state this SDK does not know (a newer server).
    #[serde(untagged)]
    Other(String),
}

impl JobState {
    /// Whether the job will never run again.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Canceled | JobState::Expired
        )
    }
}

/// The reply to `GET /v1/jobs/{id}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobStatus {
    /// The job's id.
    pub job_id: String,
    /// Who pays for it.
    pub tenant: String,
    /// Its class.
    pub class: String,
    /// Its state.
    pub state: JobState,
    /// Attempts started so far.
    pub attempt: u32,
    /// The authoritative epoch.
    pub epoch: u64,
    /// When it was first accepted.
    #[serde(with = "time::serde::rfc3339")]
    pub arrival: OffsetDateTime,
    /// When a deferred job becomes eligible.
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub not_before: Option<OffsetDateTime>,
    /// The workers holding it (running jobs).
    #[serde(default)]
    pub workers: Vec<String>,
    /// When the running attempt's lease ends unless extended.
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub lease_expires_at: Option<OffsetDateTime>,
    /// Its effective estimate.
    pub estimate_ms: u64,
    /// Why it ended, for failed and expired jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The policy version that dispatched its running attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_version: Option<u64>,
}

/// The reply to `POST /v1/jobs/{id}/cancel` and to a completion: a job and its state after.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobStateReply {
    /// The job's id.
    pub job_id: String,
    /// Its state after the call.
    pub state: JobState,
}

/// The body of `POST /v1/leases`: a worker asks for work (and so tells the server it is alive).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LeaseRequest {
    /// The worker's unique name.
    pub worker: String,
    /// Its pool; the server's default pool when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Its total capacity (the server subtracts what the worker already runs).
    pub capacity: BTreeMap<String, f64>,
    /// Its labels, matched against jobs' requirements.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The most leases to grant in this call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_jobs: Option<u32>,
    /// How long the server may hold the call open waiting for work (long poll).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// The reply to `POST /v1/leases`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LeaseReply {
    /// The leases granted; empty when the wait ran out.
    pub leases: Vec<Lease>,
}

/// The right to run one attempt of a job until `expires_at`, fenced by `epoch`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lease {
    /// The job.
    pub job_id: String,
    /// Attempt number (1 for the first).
    pub attempt: u32,
    /// Fencing epoch: every heartbeat and completion presents it.
    pub epoch: u64,
    /// When the lease ends unless a heartbeat extends it.
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
    /// The lease's length; heartbeats should come well within it.
    pub lease_ms: u64,
    /// Members of the job this worker runs (1 unless a gang).
    #[serde(default = "one")]
    pub members: u32,
    /// Work already done by earlier attempts (checkpoint).
    #[serde(default)]
    pub progress_ms: u64,
    /// Who pays for the job.
    pub tenant: String,
    /// Its class.
    pub class: String,
    /// Its demand per member.
    #[serde(default)]
    pub demand: BTreeMap<String, f64>,
    /// The payload the producer submitted (`null` when none).
    #[serde(default)]
    pub payload: Value,
}

fn one() -> u32 {
    1
}

/// The body of `POST /v1/leases/{job_id}/heartbeat`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatRequest {
    /// The lease's epoch.
    pub epoch: u64,
    /// Work done so far, for checkpointable jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_ms: Option<u64>,
}

/// What a heartbeat tells the worker to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Keep going; the lease was extended.
    Continue,
    /// Stop (and checkpoint): the scheduler preempts this attempt.
    Preempt,
    /// Stop: the job was canceled.
    Cancel,
}

/// The reply to a heartbeat.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatReply {
    /// What to do.
    pub action: Action,
    /// `continue`: the new lease expiry; `preempt`/`cancel`: the instant after which the
    /// attempt is fenced regardless.
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
}

/// How an attempt ended, as the worker reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// It did its work.
    Succeeded,
    /// It failed; `retryable` says whether another attempt may succeed.
    Failed,
    /// It stopped because it was asked to (preempt, cancel, worker shutdown).
    Stopped,
}

/// The body of `POST /v1/leases/{job_id}/complete`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompleteRequest {
    /// The lease's epoch.
    pub epoch: u64,
    /// How the attempt ended.
    pub outcome: AttemptOutcome,
    /// For `failed`: whether another attempt may succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// Run time to charge (the server measures it when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_ms: Option<u64>,
    /// Work done, for checkpointable jobs that stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_ms: Option<u64>,
}

/// One completion of `POST /v1/leases/complete`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The job.
    pub job_id: String,
    /// The same fields as a single completion.
    #[serde(flatten)]
    pub request: CompleteRequest,
}

/// The body of `POST /v1/leases/complete`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchCompleteRequest {
    /// The completions, applied in order.
    pub completions: Vec<Completion>,
    /// The worker's next lease request, applied right after the completions and answered
    /// with them (see [`Client::complete_and_lease`](crate::Client::complete_and_lease)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<LeaseRequest>,
}

/// The reply to `POST /v1/leases/complete`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchCompleteReply {
    /// One per completion, in order.
    pub results: Vec<CompletionResult>,
    /// With `next`: the leases granted. Absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leases: Option<Vec<Lease>>,
    /// With `next`: why the lease request failed after the completions were applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_error: Option<LeaseProblem>,
}

/// Why the lease request inside a `POST /v1/leases/complete` failed: what `POST /v1/leases`
/// would have answered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LeaseProblem {
    /// The HTTP status `POST /v1/leases` would have answered.
    pub status: u16,
    /// Its stable code (`busy`, `invalid`, `unavailable`, ...).
    pub error: String,
    /// For a human.
    pub message: String,
}

/// One completion's result in a batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompletionResult {
    /// The job.
    pub job_id: String,
    /// The HTTP status the same completion would have got alone (200, 404, 409, ...).
    pub status: u16,
    /// The job's state after, when the completion was applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<JobState>,
    /// The error code, when it was refused (`stale_epoch`, `unknown_job`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The error's human message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `stale_epoch`: the job's authoritative epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_epoch: Option<u64>,
}

/// The reply to `GET /v1/policy`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyReply {
    /// The policy's version (raised by every accepted `PUT`).
    pub version: u64,
    /// The policy in force: its TOML text.
    pub policy: String,
}

/// The reply to a successful `PUT /v1/policy`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyVersion {
    /// The version now in force.
    pub version: u64,
}

/// One error in a policy file, as `PUT /v1/policy` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyError {
    /// 1-based line, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// The offending key, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// The body of every error reply: a stable code and a human message, plus what some codes add.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// A stable code (`malformed_json`, `unknown_job`, `stale_epoch`, `invalid_policy`, ...).
    pub error: String,
    /// A human explanation.
    #[serde(default)]
    pub message: String,
    /// `stale_epoch`: the job's authoritative epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_epoch: Option<u64>,
    /// `invalid_policy`: every error found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<PolicyError>,
}

/// Who leads (`GET /v1/leader`), as the replica that answered sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderInfo {
    /// The leader's advertised URL; absent while no replica leads.
    #[serde(default)]
    pub leader: Option<String>,
    /// The leader's term: it rises with every change of leader (0 on an embedded store).
    pub term: u64,
    /// The answering replica's advertised URL.
    #[serde(rename = "self")]
    pub self_url: String,
    /// Whether the answering replica is the leader.
    pub is_leader: bool,
    /// `standalone` (embedded store), `leader` or `follower`.
    #[serde(default)]
    pub role: String,
}

#[cfg(test)]
mod tests {
    //! Each reply is decoded from the literal JSON of the contract, and each request encodes to
    //! it: these pin the wire format, so a rename on either side shows up here.
    use super::*;
    use serde_json::json;
    use time::macros::datetime;

    fn decode<T: serde::de::DeserializeOwned>(value: Value) -> T {
        serde_json::from_value(value).expect("the contract's JSON decodes")
    }

    #[test]
    fn a_minimal_job_sends_only_what_is_set() {
        let spec = JobSpec::new("acme").id("j1");
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            json!({"id": "j1", "tenant": "acme"})
        );
    }

    #[test]
    fn a_full_job_encodes_every_field_of_the_contract() {
        let spec = JobSpec {
            id: Some("j1".into()),
            tenant: Some("acme".into()),
            class: Some("batch".into()),
            priority: Some(5),
            demand: Some(BTreeMap::from([("cpu".into(), 2.0), ("mem".into(), 0.5)])),
            requires: Some(BTreeMap::from([("region".into(), "eu".into())])),
            estimate_ms: Some(1500),
            deadline_ms: Some(60_000),
            not_before: Some(datetime!(2030-01-02 03:04:05 UTC)),
            max_attempts: Some(3),
            preemptible: Some(true),
            checkpointable: Some(false),
            gang: Some(4),
            gang_min: Some(2),
            payload: Some(json!({"n": 1})),
        };
        let wire = json!({
            "id": "j1", "tenant": "acme", "class": "batch", "priority": 5,
            "demand": {"cpu": 2.0, "mem": 0.5}, "requires": {"region": "eu"},
            "estimate_ms": 1500, "deadline_ms": 60000, "not_before": "2030-01-02T03:04:05Z",
            "max_attempts": 3, "preemptible": true, "checkpointable": false,
            "gang": 4, "gang_min": 2, "payload": {"n": 1}
        });
        assert_eq!(serde_json::to_value(&spec).unwrap(), wire);
        assert_eq!(decode::<JobSpec>(wire), spec);
    }

    #[test]
    fn submit_replies_decode_by_outcome() {
        assert_eq!(
            decode::<SubmitReply>(
                json!({"outcome": "accepted", "job_id": "j1", "duplicate": false})
            ),
            SubmitReply::Accepted {
                job_id: "j1".into(),
                duplicate: false
            }
        );
        assert_eq!(
            decode::<SubmitReply>(json!({
                "outcome": "deferred", "job_id": "j2",
                "not_before": "2030-01-02T03:04:05.250Z", "duplicate": true
            })),
            SubmitReply::Deferred {
                job_id: "j2".into(),
                not_before: datetime!(2030-01-02 03:04:05.25 UTC),
                duplicate: true
            }
        );
        assert_eq!(
            decode::<SubmitReply>(json!({
                "outcome": "rejected_retryable", "reason": "over_quota",
                "message": "tenant acme is over its burst quota", "retry_after_ms": 1200
            })),
            SubmitReply::RejectedRetryable {
                reason: "over_quota".into(),
                message: "tenant acme is over its burst quota".into(),
                retry_after_ms: 1200
            }
        );
        assert_eq!(
            decode::<SubmitReply>(json!({
                "outcome": "rejected_final", "reason": "unknown_class", "message": "no class x"
            })),
            SubmitReply::RejectedFinal {
                reason: "unknown_class".into(),
                message: "no class x".into()
            }
        );
    }

    #[test]
    fn batch_results_carry_a_status_and_either_an_outcome_or_an_error() {
        let reply: BatchSubmitReply = decode(json!({"results": [
            {"status": 201, "outcome": "accepted", "job_id": "a", "duplicate": false},
            {"status": 422, "outcome": "rejected_final", "reason": "invalid", "message": "m"},
            {"status": 400, "error": "malformed_json", "message": "expected a number"}
        ]}));
        assert_eq!(reply.results.len(), 3);
        assert_eq!(reply.results[0].status, 201);
        assert!(matches!(
            &reply.results[0].body,
            BatchItem::Reply(SubmitReply::Accepted { job_id, .. }) if job_id == "a"
        ));
        assert!(matches!(
            &reply.results[1].body,
            BatchItem::Reply(SubmitReply::RejectedFinal { reason, .. }) if reason == "invalid"
        ));
        assert!(matches!(
            &reply.results[2].body,
            BatchItem::Error(ErrorBody { error, .. }) if error == "malformed_json"
        ));
        // And back: the status sits beside the flattened body.
        assert_eq!(
            serde_json::to_value(&reply.results[0]).unwrap(),
            json!({"status": 201, "outcome": "accepted", "job_id": "a", "duplicate": false})
        );
    }

    #[test]
    fn batch_results_decode_every_outcome_and_refuse_one_with_neither() {
        let reply: BatchSubmitReply = decode(json!({"results": [
            {"status": 202, "outcome": "deferred", "job_id": "d",
             "not_before": "2030-01-02T03:04:05Z", "duplicate": true},
            {"status": 429, "outcome": "rejected_retryable", "job_id": "r", "reason": "busy",
             "message": "the queue is full", "retry_after_ms": 1000, "error": "busy"},
            {"status": 503, "outcome": "a_newer_outcome", "error": "unavailable", "message": "m"},
            {"status": 409, "error": "stale_epoch", "message": "m", "current_epoch": 4}
        ]}));
        let bodies: Vec<&BatchItem> = reply.results.iter().map(|r| &r.body).collect();
        assert_eq!(
            bodies[0],
            &BatchItem::Reply(SubmitReply::Deferred {
                job_id: "d".into(),
                not_before: datetime!(2030-01-02 03:04:05 UTC),
                duplicate: true
            })
        );
        assert_eq!(
            bodies[1],
            &BatchItem::Reply(SubmitReply::RejectedRetryable {
                reason: "busy".into(),
                message: "the queue is full".into(),
                retry_after_ms: 1000
            })
        );
        assert!(matches!(bodies[2], BatchItem::Error(e) if e.error == "unavailable"));
        assert!(matches!(bodies[3], BatchItem::Error(e) if e.current_epoch == Some(4)));
        for bad in [
            json!({"status": 201, "outcome": "accepted"}),
            json!({"status": 202, "outcome": "deferred", "job_id": "d", "not_before": "soon"}),
            json!({"outcome": "accepted", "job_id": "a"}),
        ] {
            let read = serde_json::from_value::<BatchResult>(bad.clone());
            assert!(read.is_err(), "{bad} read as {read:?}");
        }
    }

    #[test]
    fn job_status_decodes_with_and_without_optional_fields() {
        let running: JobStatus = decode(json!({
            "job_id": "j1", "tenant": "acme", "class": "default", "state": "running",
            "attempt": 2, "epoch": 7, "arrival": "2030-01-02T03:04:05Z",
            "workers": ["w1"], "lease_expires_at": "2030-01-02T03:05:05Z",
            "estimate_ms": 1000, "policy_version": 3
        }));
        assert_eq!(running.state, JobState::Running);
        assert_eq!((running.attempt, running.epoch), (2, 7));
        assert_eq!(running.workers, vec!["w1".to_string()]);
        assert_eq!(
            running.lease_expires_at,
            Some(datetime!(2030-01-02 03:05:05 UTC))
        );
        assert_eq!(running.policy_version, Some(3));

        let failed: JobStatus = decode(json!({
            "job_id": "j1", "tenant": "acme", "class": "default", "state": "failed",
            "attempt": 3, "epoch": 9, "arrival": "2030-01-02T03:04:05Z", "workers": [],
            "estimate_ms": 1000, "reason": "attempts exhausted", "not_before": null
        }));
        assert_eq!(failed.state, JobState::Failed);
        assert!(failed.state.is_terminal());
        assert_eq!(failed.reason.as_deref(), Some("attempts exhausted"));
        assert_eq!(failed.lease_expires_at, None);
    }

    #[test]
    fn every_state_of_the_contract_decodes_and_an_unknown_one_is_kept() {
        for (text, state) in [
            ("queued", JobState::Queued),
            ("deferred", JobState::Deferred),
            ("running", JobState::Running),
            ("succeeded", JobState::Succeeded),
            ("failed", JobState::Failed),
            ("canceled", JobState::Canceled),
            ("expired", JobState::Expired),
            ("paused", JobState::Other("paused".into())),
        ] {
            assert_eq!(decode::<JobState>(json!(text)), state);
            assert_eq!(serde_json::to_value(&state).unwrap(), json!(text));
        }
    }

    #[test]
    fn a_lease_request_and_reply_match_the_contract() {
        let request = LeaseRequest {
            worker: "w1".into(),
            pool: Some("gpu".into()),
            capacity: BTreeMap::from([("cpu".into(), 4.0)]),
            labels: BTreeMap::from([("region".into(), "eu".into())]),
            max_jobs: Some(2),
            wait_ms: Some(20_000),
        };
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            json!({"worker": "w1", "pool": "gpu", "capacity": {"cpu": 4.0},
                   "labels": {"region": "eu"}, "max_jobs": 2, "wait_ms": 20000})
        );
        let reply: LeaseReply = decode(json!({"leases": [{
            "job_id": "j1", "attempt": 1, "epoch": 4, "expires_at": "2030-01-02T03:04:35Z",
            "lease_ms": 30000, "members": 1, "progress_ms": 0, "tenant": "acme",
            "class": "default", "demand": {"cpu": 1.0}, "payload": "hello"
        }]}));
        let lease = &reply.leases[0];
        assert_eq!((lease.attempt, lease.epoch, lease.lease_ms), (1, 4, 30_000));
        assert_eq!(lease.expires_at, datetime!(2030-01-02 03:04:35 UTC));
        assert_eq!(lease.payload, json!("hello"));
        assert_eq!(lease.demand["cpu"], 1.0);
    }

    #[test]
    fn heartbeats_and_completions_match_the_contract() {
        assert_eq!(
            serde_json::to_value(HeartbeatRequest {
                epoch: 4,
                progress_ms: None
            })
            .unwrap(),
            json!({"epoch": 4})
        );
        for (text, action) in [
            ("continue", Action::Continue),
            ("preempt", Action::Preempt),
            ("cancel", Action::Cancel),
        ] {
            let reply: HeartbeatReply =
                decode(json!({"action": text, "expires_at": "2030-01-02T03:04:35Z"}));
            assert_eq!(reply.action, action);
        }
        assert_eq!(
            serde_json::to_value(CompleteRequest {
                epoch: 4,
                outcome: AttemptOutcome::Failed,
                retryable: Some(true),
                usage_ms: Some(120),
                progress_ms: None,
            })
            .unwrap(),
            json!({"epoch": 4, "outcome": "failed", "retryable": true, "usage_ms": 120})
        );
        let batch = BatchCompleteRequest {
            completions: vec![Completion {
                job_id: "j1".into(),
                request: CompleteRequest {
                    epoch: 4,
                    outcome: AttemptOutcome::Stopped,
                    retryable: None,
                    usage_ms: None,
                    progress_ms: Some(500),
                },
            }],
            next: None,
        };
        assert_eq!(
            serde_json::to_value(&batch).unwrap(),
            json!({"completions": [
                {"job_id": "j1", "epoch": 4, "outcome": "stopped", "progress_ms": 500}
            ]})
        );
        let reply: BatchCompleteReply = decode(json!({"results": [
            {"job_id": "j1", "status": 200, "state": "succeeded"},
            {"job_id": "j2", "status": 409, "error": "stale_epoch"}
        ]}));
        assert_eq!(reply.results[0].state, Some(JobState::Succeeded));
        assert_eq!(reply.results[1].error.as_deref(), Some("stale_epoch"));
    }

    #[test]
    fn error_bodies_carry_their_extras() {
        let stale: ErrorBody = decode(json!({
            "error": "stale_epoch", "message": "epoch 3 is stale", "current_epoch": 4
        }));
        assert_eq!(stale.current_epoch, Some(4));
        let policy: ErrorBody = decode(json!({
            "error": "invalid_policy", "message": "2 errors",
            "errors": [{"line": 3, "key": "weight", "message": "must be positive"},
                       {"line": null, "key": null, "message": "no pool"}]
        }));
        assert_eq!(
            policy.errors,
            vec![
                PolicyError {
                    line: Some(3),
                    key: Some("weight".into()),
                    message: "must be positive".into()
                },
                PolicyError {
                    line: None,
                    key: None,
                    message: "no pool".into()
                }
            ]
        );
        let policy: PolicyReply = decode(json!({"version": 2, "policy": "[policy]\n"}));
        assert_eq!(policy.version, 2);
    }
}
