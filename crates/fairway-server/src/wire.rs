//! The shapes of HTTP API v1, and their conversions from and to the engine's types.
//!
//! Durations are integer milliseconds named `*_ms`; instants are RFC 3339 strings in UTC with
//! milliseconds (`2026-11-30T12:00:00.123Z`). Request bodies refuse unknown fields. Optional
//! reply fields are left out when they have no value.

use fairway_core::job::JobStatus;
use fairway_core::{Admission, RejectReason, Time};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use utoipa::ToSchema;

pub mod observe;

/// Formats an engine instant (Unix-epoch nanoseconds) as RFC 3339 in UTC with milliseconds.
///
/// Written out by hand (every lease's expiry is formatted on the store thread, and the `time`
/// crate's formatter took about 4% of that thread in a batched run): the civil date from the
/// day count is Howard Hinnant's `civil_from_days`. A `u64` of nanoseconds ends in 2554, so
/// every instant has a four-digit year. `instant_matches_the_time_crate` checks it against
/// the `time` crate's formatting.
pub fn instant(t: Time) -> String {
    let secs = t.0 / 1_000_000_000;
    let millis = (t.0 / 1_000_000) % 1_000;
    let (days, of_day) = (secs / 86_400, secs % 86_400);
    // Days since 0000-03-01, in 400-year eras of 146,097 days (1970-01-01 is day 719,468).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    let mut out = String::with_capacity(24);
    let mut digits = |value: u64, width: u32, then: char| {
        for i in (0..width).rev() {
            out.push(char::from(b'0' + (value / 10u64.pow(i) % 10) as u8));
        }
        out.push(then);
    };
    digits(year, 4, '-');
    digits(month, 2, '-');
    digits(day, 2, 'T');
    digits(of_day / 3_600, 2, ':');
    digits(of_day / 60 % 60, 2, ':');
    digits(of_day % 60, 2, '.');
    digits(millis, 3, 'Z');
    out
}

/// Parses an RFC 3339 instant into an engine instant (instants before 1970 become 1970).
pub fn parse_instant(text: &str) -> Result<Time, String> {
    let d = OffsetDateTime::parse(text, &Rfc3339).map_err(|e| {
        format!("{text:?} is not an RFC 3339 instant such as 2026-11-30T12:00:00.000Z ({e})")
    })?;
    let nanos = d.unix_timestamp_nanos().max(0);
    u64::try_from(nanos)
        .map(Time)
        .map_err(|_| format!("{text:?} is too far in the future"))
}

/// An error answer: a stable code and a message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// Stable code: `malformed_json`, `invalid`, `too_large`, `unknown_job`, `unknown_tenant`,
    /// `unauthorized`, `forbidden`, `tenant_mismatch`, `stale_epoch`, `invalid_policy`, `busy`,
    /// `not_ready`, `unavailable`, `not_found`, `method_not_allowed`.
    pub error: String,
    /// For a human; names the field at fault.
    pub message: String,
    /// The job's authoritative epoch (`stale_epoch` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_epoch: Option<u64>,
}

/// `POST /v1/jobs`: a job to submit.
#[derive(Clone, Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitBody {
    /// Stable id; submitting it again returns the first outcome. Default: a new UUID v7.
    #[serde(default)]
    pub id: Option<String>,
    /// Tenant path (`org/team`). Required without authentication; with a tenant token,
    /// absent or equal to the token's tenant.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Class (band). Default: `default`.
    #[serde(default)]
    pub class: Option<String>,
    /// Priority inside its class, higher first. Default 0.
    #[serde(default)]
    pub priority: Option<i32>,
    /// Demand per member over named resources. Default `{"cpu": 1}`.
    #[serde(default)]
    pub demand: Option<BTreeMap<String, f64>>,
    /// Labels a worker must carry.
    #[serde(default)]
    pub requires: Option<BTreeMap<String, String>>,
    /// Declared run time.
    #[serde(default)]
    pub estimate_ms: Option<u64>,
    /// Deadline, relative to the moment the server accepts the job.
    #[serde(default)]
    pub deadline_ms: Option<u64>,
    /// Not to start before this instant (RFC 3339).
    #[serde(default)]
    pub not_before: Option<String>,
    /// Attempts allowed (at most the class's).
    #[serde(default)]
    pub max_attempts: Option<u32>,
    /// Whether it may be preempted. Default false.
    #[serde(default)]
    pub preemptible: Option<bool>,
    /// Whether it checkpoints (preempted work resumes). Default false.
    #[serde(default)]
    pub checkpointable: Option<bool>,
    /// Members started together. Default 1.
    #[serde(default)]
    pub gang: Option<u32>,
    /// Fewest members it may start with. Default `gang`.
    #[serde(default)]
    pub gang_min: Option<u32>,
    /// Any JSON value, handed to the worker with the lease.
    // Kept as its JSON text, checked but not rebuilt: stored and handed on as sent.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub payload: Option<Box<RawValue>>,
}

/// The answer to one submission.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SubmitReply {
    /// `accepted`, `deferred`, `rejected_retryable` or `rejected_final`.
    pub outcome: String,
    /// The job's id (generated when the request had none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// When a deferred job becomes eligible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<String>,
    /// True when the id was submitted before and this repeats the first outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<bool>,
    /// Why it was rejected: a `RejectReason` code, or `tenant_mismatch`, `too_large`,
    /// `invalid`, `forbidden` for a refusal before the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For a human.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When to retry a `rejected_retryable` submission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// On every refusal: the same code as `reason`, so that every error body has `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SubmitReply {
    /// A refusal before the engine saw the job.
    pub fn refused(job_id: Option<String>, code: &str, message: impl Into<String>) -> Self {
        SubmitReply {
            outcome: "rejected_final".to_string(),
            job_id,
            reason: Some(code.to_string()),
            message: Some(message.into()),
            error: Some(code.to_string()),
            ..SubmitReply::default()
        }
    }

    /// A batch's job that never reached the engine (the server stopped waiting for its part
    /// of the batch): not submitted, to be sent again.
    pub fn not_applied(job_id: Option<String>) -> Self {
        SubmitReply {
            outcome: "rejected_retryable".to_string(),
            job_id,
            reason: Some("unavailable".to_string()),
            message: Some(
                "not submitted: the server did not take this part of the batch in time; \
                 submit it again"
                    .to_string(),
            ),
            retry_after_ms: Some(1_000),
            error: Some("unavailable".to_string()),
            ..SubmitReply::default()
        }
    }

    /// The engine's answer, with the HTTP status it gets.
    pub fn from_admission(admission: &Admission, job_id: &str) -> (u16, SubmitReply) {
        let id = Some(job_id.to_string());
        match admission {
            Admission::Accepted { job, duplicate } => (
                201,
                SubmitReply {
                    outcome: "accepted".into(),
                    job_id: Some(job.clone()),
                    duplicate: Some(*duplicate),
                    ..SubmitReply::default()
                },
            ),
            Admission::Deferred {
                job,
                until,
                duplicate,
            } => (
                202,
                SubmitReply {
                    outcome: "deferred".into(),
                    job_id: Some(job.clone()),
                    not_before: Some(instant(*until)),
                    duplicate: Some(*duplicate),
                    ..SubmitReply::default()
                },
            ),
            Admission::RejectedRetryable {
                reason,
                retry_after,
            } => (
                429,
                SubmitReply {
                    outcome: "rejected_retryable".into(),
                    job_id: id,
                    reason: Some(reason.code().into()),
                    message: Some(reason.to_string()),
                    retry_after_ms: Some(retry_after.0.div_ceil(1_000_000)),
                    error: Some(reason.code().into()),
                    ..SubmitReply::default()
                },
            ),
            Admission::RejectedFinal { reason } => (
                if matches!(reason, RejectReason::ClassNotPermitted(_)) {
                    403
                } else {
                    422
                },
                SubmitReply {
                    outcome: "rejected_final".into(),
                    job_id: id,
                    reason: Some(reason.code().into()),
                    message: Some(reason.to_string()),
                    error: Some(reason.code().into()),
                    ..SubmitReply::default()
                },
            ),
        }
    }
}

/// `POST /v1/jobs/batch`: several jobs.
#[derive(Clone, Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchSubmitBody {
    /// The jobs, each as for `POST /v1/jobs` (at most 1000).
    // Kept as each job's JSON text, so that each is read once, into its own shape, and a bad
    // one is refused alone.
    #[schema(value_type = Vec<SubmitBody>)]
    pub jobs: Vec<Box<serde_json::value::RawValue>>,
}

/// One job's result in a batch: the status its single submission would have had, and its reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BatchSubmitResult {
    /// The HTTP status a single `POST /v1/jobs` would have answered.
    pub status: u16,
    /// With `omit=accepted`: the job's place in the request, from 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// The reply.
    #[serde(flatten)]
    pub reply: SubmitReply,
}

/// The answer to a batch submission.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BatchSubmitReply {
    /// One per job, in order; with `omit=accepted`, all but those left out, in order, each
    /// with its `index`.
    pub results: Vec<BatchSubmitResult>,
    /// With `omit=accepted`: how many jobs were accepted as new under the ids their requests
    /// gave, their results left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted: Option<usize>,
}

/// `GET /v1/jobs/{id}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobStatusReply {
    /// Id.
    pub job_id: String,
    /// Tenant.
    pub tenant: String,
    /// Class.
    pub class: String,
    /// `queued`, `deferred`, `running`, `succeeded`, `failed`, `canceled` or `expired`.
    pub state: String,
    /// Attempts started.
    pub attempt: u32,
    /// Authoritative epoch.
    pub epoch: u64,
    /// When it was accepted.
    pub arrival: String,
    /// When a deferred job becomes eligible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<String>,
    /// Workers running it.
    pub workers: Vec<String>,
    /// When the running attempt's lease expires unless extended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<String>,
    /// Its effective estimate.
    pub estimate_ms: u64,
    /// Why it ended, for failed and expired jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The policy version that dispatched its running attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_version: Option<u64>,
}

impl From<&JobStatus> for JobStatusReply {
    fn from(s: &JobStatus) -> Self {
        JobStatusReply {
            job_id: s.job.clone(),
            tenant: s.tenant.clone(),
            class: s.class.clone(),
            state: s.state.as_str().to_string(),
            attempt: s.attempt,
            epoch: s.epoch,
            arrival: instant(s.arrival),
            not_before: s.not_before.map(instant),
            workers: s.workers.clone(),
            lease_expires_at: s.expires.map(instant),
            estimate_ms: s.estimate.as_millis(),
            reason: s.reason.clone(),
            policy_version: s.policy_version,
        }
    }
}

/// A job id and its state (`POST /v1/jobs/{id}/cancel`, `POST /v1/leases/{id}/complete`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobStateReply {
    /// Id.
    pub job_id: String,
    /// Its state after the call. A canceled running job stays `running` until its worker stops.
    pub state: String,
}

/// `POST /v1/leases`: a worker asks for work (a long poll when `wait_ms` > 0).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseBody {
    /// Unique worker name.
    pub worker: String,
    /// Its pool. Default `default`.
    #[serde(default)]
    pub pool: Option<String>,
    /// Its total capacity (the engine subtracts what it already runs), e.g. `{"cpu": 4}`.
    pub capacity: BTreeMap<String, f64>,
    /// Its labels.
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// Most leases to take now (0 to 1000). Default 1.
    #[serde(default)]
    pub max_jobs: Option<u32>,
    /// How long to wait for work (0 to 60000). Default 0: answer at once.
    #[serde(default)]
    pub wait_ms: Option<u64>,
}

/// One lease: the right to run one attempt of a job until `expires_at`, fenced by `epoch`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct LeaseGrant {
    /// The job.
    pub job_id: String,
    /// Attempt number (1 for the first).
    pub attempt: u32,
    /// Fencing epoch: every heartbeat and completion presents it.
    pub epoch: u64,
    /// Expiry unless extended by a heartbeat.
    pub expires_at: String,
    /// The lease's length: heartbeat well within it.
    pub lease_ms: u64,
    /// Members of the job this worker runs (1 unless a gang).
    pub members: u32,
    /// Work already done by earlier attempts (checkpoint).
    pub progress_ms: u64,
    /// The job's tenant.
    pub tenant: String,
    /// The job's class.
    pub class: String,
    /// Demand per member.
    pub demand: BTreeMap<String, f64>,
    /// The payload as submitted (`null` when none).
    // Its JSON text as stored: not rebuilt on the way out.
    #[schema(value_type = Object)]
    pub payload: Box<RawValue>,
}

/// The answer to `POST /v1/leases`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct LeaseReply {
    /// The leases granted (empty when the wait ended without work).
    pub leases: Vec<LeaseGrant>,
}

/// `POST /v1/leases/{job_id}/heartbeat`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatBody {
    /// The lease's epoch.
    pub epoch: u64,
    /// Work done so far, for a checkpointing job.
    #[serde(default)]
    pub progress_ms: Option<u64>,
}

/// The answer to a heartbeat.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatReplyBody {
    /// `continue`, or `preempt` / `cancel`: stop (checkpoint first on `preempt`) and complete
    /// with outcome `stopped`.
    pub action: String,
    /// For `continue`, the lease's new expiry; otherwise the instant after which the attempt is
    /// fenced whatever it does.
    pub expires_at: String,
}

/// How an attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CompleteOutcome {
    /// It did its work.
    Succeeded,
    /// It failed (`retryable` says whether another attempt may help).
    Failed,
    /// It stopped because it was asked to (preempt or cancel).
    Stopped,
}

/// `POST /v1/leases/{job_id}/complete`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteBody {
    /// The lease's epoch.
    pub epoch: u64,
    /// How the attempt ended.
    pub outcome: CompleteOutcome,
    /// For `failed`: whether a retry may help. Default true.
    #[serde(default)]
    pub retryable: Option<bool>,
    /// Run time to charge. Default: measured by the server from the lease's start.
    #[serde(default)]
    pub usage_ms: Option<u64>,
    /// Work done, for a checkpointing job that stopped.
    #[serde(default)]
    pub progress_ms: Option<u64>,
}

/// One completion in `POST /v1/leases/complete`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompletionItem {
    /// The job.
    pub job_id: String,
    /// The lease's epoch.
    pub epoch: u64,
    /// How the attempt ended.
    pub outcome: CompleteOutcome,
    /// For `failed`: whether a retry may help. Default true.
    #[serde(default)]
    pub retryable: Option<bool>,
    /// Run time to charge.
    #[serde(default)]
    pub usage_ms: Option<u64>,
    /// Work done, for a checkpointing job that stopped.
    #[serde(default)]
    pub progress_ms: Option<u64>,
}

/// `POST /v1/leases/complete`: several completions, and perhaps the worker's next lease
/// request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchCompleteBody {
    /// The completions (at most 1000).
    #[schema(value_type = Vec<CompletionItem>)]
    pub completions: Vec<Value>,
    /// The worker's next lease request, as `POST /v1/leases` takes it but without a wait
    /// (`wait_ms` absent or 0): applied right after the completions, so that the capacity
    /// they free is offered at once, and answered with them, in `leases`, with what that
    /// scheduling pass grants. One call and one commit instead of two; a worker that gets no
    /// lease this way long-polls with `POST /v1/leases`.
    #[serde(default)]
    pub next: Option<LeaseBody>,
}

/// One completion's result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CompletionResult {
    /// The job (empty when the item could not be read).
    pub job_id: String,
    /// The HTTP status a single completion would have answered.
    pub status: u16,
    /// The job's state, on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The error code, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For a human, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The job's authoritative epoch, for `stale_epoch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_epoch: Option<u64>,
}

/// The answer to a batch of completions.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct BatchCompleteReply {
    /// One per completion, in order.
    pub results: Vec<CompletionResult>,
    /// With `next`: the leases granted (empty when there was no work for the worker, or when
    /// the request failed: see `lease_error`). Absent without `next`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leases: Option<Vec<LeaseGrant>>,
    /// With `next`: why the lease request failed after the completions were applied (a
    /// `busy` server with too many parked long polls, an offer the engine refused, a server
    /// stopping). The completions' results stand; ask for leases again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_error: Option<LeaseProblem>,
}

/// Why the lease request of a `POST /v1/leases/complete` failed: what `POST /v1/leases`
/// would have answered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LeaseProblem {
    /// The HTTP status `POST /v1/leases` would have answered.
    pub status: u16,
    /// Its stable code (`busy`, `invalid`, `unavailable`, ...).
    pub error: String,
    /// For a human.
    pub message: String,
}

/// `GET /v1/policy`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PolicyReply {
    /// The version in force.
    pub version: u64,
    /// Its TOML text.
    pub policy: String,
}

/// `PUT /v1/policy` accepted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PolicyVersionReply {
    /// The new version.
    pub version: u64,
}

/// One error in a refused policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PolicyErrorItem {
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The key at fault, when known.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// `PUT /v1/policy` refused: the prior version stays.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PolicyErrorReply {
    /// `invalid_policy`.
    pub error: String,
    /// Every error, one per line.
    pub message: String,
    /// Every error found.
    pub errors: Vec<PolicyErrorItem>,
}

/// `GET /healthz`, `GET /readyz`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HealthReply {
    /// `ok`, `recovering` or `failed`.
    pub status: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::format_description;

    #[test]
    fn instants_are_rfc3339_utc_with_milliseconds() {
        let t = Time(1_764_504_000_123_456_789);
        let text = instant(t);
        assert_eq!(text, "2025-11-30T12:00:00.123Z");
        assert_eq!(
            parse_instant(&text).unwrap(),
            Time(1_764_504_000_123_000_000)
        );
        assert_eq!(
            parse_instant("2025-11-30T13:00:00.123+01:00").unwrap(),
            Time(1_764_504_000_123_000_000)
        );
        assert!(parse_instant("tomorrow").is_err());
        assert_eq!(instant(Time::ZERO), "1970-01-01T00:00:00.000Z");
    }

    /// The hand-written formatter against the `time` crate's, at the calendar's edges (leap
    /// days, century years, the last instant a `u64` holds) and at a million spread instants.
    #[test]
    fn instant_matches_the_time_crate() {
        let format = format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        );
        let oracle = |t: Time| {
            OffsetDateTime::from_unix_timestamp_nanos(i128::from(t.0))
                .unwrap()
                .format(&format)
                .unwrap()
        };
        let day = 86_400 * 1_000_000_000u64;
        let mut cases = vec![0, 1, 999_999, day - 1, day, u64::MAX, u64::MAX - day];
        for text in [
            "1972-02-29T23:59:59.999Z",
            "2000-02-29T00:00:00.000Z",
            "2000-03-01T00:00:00.000Z",
            "2100-02-28T12:00:00.500Z",
            "2100-03-01T00:00:00.000Z",
            "2399-12-31T23:59:59.999Z",
            "2400-02-29T00:00:00.001Z",
        ] {
            let t = parse_instant(text).unwrap();
            assert_eq!(instant(t), text);
            cases.extend([t.0 - 1, t.0, t.0 + 1]);
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..1_000_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push(x);
        }
        for t in cases {
            assert_eq!(instant(Time(t)), oracle(Time(t)), "at {t} ns");
        }
    }
}
