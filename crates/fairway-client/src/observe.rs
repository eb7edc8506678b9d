//! The replies of the observability routes, field for field: why a job waits
//! (`GET /v1/jobs/{id}/explain`), a tenant's report (`GET /v1/tenants/{id}`), decision records
//! (`GET /v1/decisions`) and the overview behind `fairway top` (`GET /v1/overview`).
//!
//! Worker-seconds are decimal numbers named `*_ws`; shares and entitlements are fractions of
//! all live capacity. Fields this SDK does not know are ignored, and fields a server leaves out
//! take their defaults, so servers and clients of different versions still understand each
//! other.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use time::OffsetDateTime;

/// One reason a job is not running.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WaitReason {
    /// Stable code: `deferred`, `no_workers`, `unplaceable`, `behind_in_queue`,
    /// `tenant_at_limit`, `reserve_held`, `waiting_for_capacity`, `behind_tenants`.
    pub code: String,
    /// The reason as a sentence.
    pub message: String,
    /// `deferred`: eligible from this instant (RFC 3339).
    pub until: Option<String>,
    /// The pool concerned.
    pub pool: Option<String>,
    /// The tenant at its limit.
    pub tenant: Option<String>,
    /// `unplaceable`: per pool, which requirement fails.
    pub mismatches: Vec<String>,
    /// `behind_in_queue`: jobs of its own queue ahead of it.
    pub ahead: Option<u64>,
    /// `behind_in_queue`: the job at the head of its queue.
    pub head: Option<String>,
    /// `behind_tenants`: the tenants that come first, with their balances.
    pub tenants_ahead: Vec<Balance>,
}

/// A queue and its balance under the policy (smaller comes first).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Balance {
    /// The tenant (`another tenant` when the caller may not see it).
    pub tenant: String,
    /// Its balance.
    pub balance: f64,
    /// Whether it was within its guarantee.
    pub within_guarantee: Option<bool>,
}

/// One dispatch decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Its number: the engine's count of leases granted so far, this one included. Kept
    /// across server restarts, so [`DecisionFilter::after`] pages across them.
    pub seq: u64,
    /// When it was taken.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// The policy version that decided.
    #[serde(default)]
    pub policy_version: u64,
    /// The job started.
    pub job_id: String,
    /// Its tenant.
    pub tenant: String,
    /// Its class.
    pub class: String,
    /// The attempt's epoch.
    #[serde(default)]
    pub epoch: u64,
    /// The estimate charged.
    #[serde(default)]
    pub estimate_ms: u64,
    /// Workers it was placed on.
    #[serde(default)]
    pub workers: Vec<String>,
    /// The leading queues when it was chosen.
    #[serde(default)]
    pub candidates: Vec<Balance>,
    /// Whether it started as backfill behind a reservation.
    #[serde(default)]
    pub backfilled: bool,
    /// Whether it borrowed capacity reserved for a higher band.
    #[serde(default)]
    pub borrowed: bool,
    /// How long the job had waited in its queue this time.
    #[serde(default)]
    pub waited_ms: u64,
    /// Why it was chosen.
    #[serde(default)]
    pub reason: String,
}

/// The reply to `GET /v1/jobs/{id}/explain`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// The job.
    pub job_id: String,
    /// Its tenant.
    pub tenant: String,
    /// Its class.
    pub class: String,
    /// Its state.
    pub state: String,
    /// The explanation in one sentence.
    pub summary: String,
    /// Why it waits: one reason per kind of worker that could run it.
    #[serde(default)]
    pub reasons: Vec<WaitReason>,
    /// Workers running it.
    #[serde(default)]
    pub workers: Vec<String>,
    /// For a job that ended: how, and why.
    #[serde(default)]
    pub ended: Option<String>,
    /// The unit of the balances shown.
    #[serde(default)]
    pub balance_unit: String,
    /// The policy version in force.
    #[serde(default)]
    pub policy_version: u64,
    /// The decisions that started its attempts.
    #[serde(default)]
    pub decisions: Vec<Decision>,
}

/// Jobs waiting in one class.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Backlog {
    /// Jobs waiting.
    pub queued: u64,
    /// Age of the oldest of them.
    pub oldest_age_ms: u64,
}

/// A tenant's books, in worker-seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Ledger {
    /// Charged for finished attempts.
    pub charged_ws: f64,
    /// Estimated cost of running attempts.
    pub in_flight_ws: f64,
    /// Spent on attempts that failed or expired.
    pub failed_ws: f64,
    /// Spent on attempts that were preempted.
    pub preempted_ws: f64,
    /// Spent on attempts that were canceled.
    pub canceled_ws: f64,
    /// Spent on retries.
    pub retried_ws: f64,
    /// Actual run time above the estimates.
    pub debt_ws: f64,
    /// Attempts finished.
    pub attempts: u64,
}

/// The reply to `GET /v1/tenants/{id}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TenantReport {
    /// Its path name.
    pub tenant: String,
    /// Whether the policy declares it.
    pub declared: bool,
    /// Its weight.
    pub weight: f64,
    /// Its guarantee per resource.
    pub guarantee: BTreeMap<String, f64>,
    /// Its limit per resource.
    pub limit: BTreeMap<String, f64>,
    /// Resources held by its running attempts.
    pub usage: BTreeMap<String, f64>,
    /// Dominant share of all live capacity.
    pub dominant_share: f64,
    /// Its weight's fraction among its active siblings.
    pub entitlement: f64,
    /// Its balance under the policy.
    pub balance: f64,
    /// The unit of `balance`.
    pub balance_unit: String,
    /// Per class: jobs waiting and the oldest one's age.
    pub backlog: BTreeMap<String, Backlog>,
    /// Jobs running.
    pub running: u64,
    /// Outstanding accepted work.
    pub outstanding_ws: f64,
    /// Its books.
    pub ledger: Ledger,
    /// Jobs accepted.
    pub accepted: u64,
    /// Jobs accepted for later.
    pub deferred: u64,
}

/// The reply to `GET /v1/decisions`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecisionPage {
    /// Matching records, oldest first.
    pub decisions: Vec<Decision>,
    /// When more matched than the limit: the `after` of the next page.
    #[serde(default)]
    pub next_after: Option<u64>,
    /// The oldest `seq` still in the server's ring (one more than the newest when it is empty):
    /// a cursor below it has missed records.
    #[serde(default)]
    pub oldest_seq: u64,
}

/// A filter for [`Client::decisions`](crate::Client::decisions).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecisionFilter {
    /// Only this job's.
    pub job: Option<String>,
    /// Only those at or after this instant (pages forward).
    pub since: Option<OffsetDateTime>,
    /// Only those after this `seq` (pages forward).
    pub after: Option<u64>,
    /// At most this many (1 to 1000; the server's default is 100).
    pub limit: Option<usize>,
}

/// A tenant in the overview.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TenantView {
    /// Its path name.
    pub name: String,
    /// Its weight.
    pub weight: f64,
    /// Dominant share of all live capacity.
    pub dominant_share: f64,
    /// Per pool where it holds resources: its dominant share of that pool's live capacity.
    pub dominant_share_by_pool: BTreeMap<String, f64>,
    /// The share its weight earns among active tenants.
    pub entitlement: f64,
    /// `dominant_share - entitlement`.
    pub over: f64,
    /// Jobs waiting.
    pub queued: u64,
    /// Jobs running.
    pub running: u64,
    /// Age of its oldest waiting job.
    pub oldest_age_ms: Option<u64>,
    /// Per class, jobs waiting.
    pub backlog: BTreeMap<String, Backlog>,
    /// Its balance.
    pub balance: f64,
    /// Its debt.
    pub debt_ws: f64,
    /// Work charged to it.
    pub charged_ws: f64,
}

/// A class (band) in the overview.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClassView {
    /// Its name.
    pub name: String,
    /// Its priority.
    pub priority: i32,
    /// Fraction of each pool held for it.
    pub reserve: f64,
    /// Jobs waiting (`None`: not computed).
    pub queued: Option<u64>,
    /// Age of the oldest waiting job, seconds.
    pub oldest_age_s: Option<f64>,
    /// Per pool with live workers: its waiting jobs that some live worker of the pool could
    /// run (a job that fits several pools counts in each).
    pub queued_by_pool: BTreeMap<String, Backlog>,
    /// Waiting jobs that no live worker can run.
    pub unplaceable: u64,
    /// Predicted wait of a default-demand job, seconds (`None`: no capacity).
    pub predicted_start_s: Option<f64>,
    /// Deadline misses.
    pub deadline_misses: u64,
    /// Work charged for its finished attempts.
    pub charged_ws: f64,
    /// Its debt.
    pub debt_ws: f64,
}

/// A worker in the overview.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkerView {
    /// Its name.
    pub name: String,
    /// Its pool.
    pub pool: String,
    /// Its capacity.
    pub capacity: BTreeMap<String, f64>,
    /// Leases it holds.
    pub leases: u64,
    /// Some of those jobs.
    pub jobs: Vec<String>,
    /// Time since it was last heard from (a lease request or a heartbeat).
    pub last_poll_ms: u64,
    /// Capacity not held by its attempts (resources with none free are left out).
    pub free: BTreeMap<String, f64>,
    /// Whether it is live (heard from within the worker silence limit). A worker that is not
    /// is listed while it holds leases, for instance ones recovered after a restart.
    pub live: bool,
    /// Whether it waits for work now.
    pub polling: bool,
}

/// A class's reserve in one pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReserveView {
    /// The class.
    pub class: String,
    /// Capacity held for it.
    pub reserved: BTreeMap<String, f64>,
    /// Capacity its running attempts hold in the pool.
    pub used: BTreeMap<String, f64>,
    /// Reserved and not used: what lower bands may not take, except by borrowing it.
    pub held: BTreeMap<String, f64>,
    /// `used / reserved` by the dominant resource.
    pub occupancy: f64,
}

/// A pool in the overview.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PoolView {
    /// Its name.
    pub name: String,
    /// Live workers.
    pub workers: u32,
    /// Capacity of the live workers.
    pub capacity: BTreeMap<String, f64>,
    /// Held by running attempts.
    pub used: BTreeMap<String, f64>,
    /// Its name as a metrics label (`undeclared` for a pool the policy does not declare).
    pub label: String,
    /// Held by running attempts, per class.
    pub class_used: BTreeMap<String, BTreeMap<String, f64>>,
    /// Reserves of the classes that have one.
    pub reserves: Vec<ReserveView>,
    /// Held now by attempts that borrowed capacity reserved for a higher band.
    pub borrowed: BTreeMap<String, f64>,
}

/// Admission outcomes in one 10-second interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IntervalView {
    /// Start of the interval (RFC 3339).
    pub start: String,
    /// Accepted.
    pub accepted: u64,
    /// Deferred.
    pub deferred: u64,
    /// Refused for now.
    pub rejected_retryable: u64,
    /// Refused for good.
    pub rejected_final: u64,
    /// Dropped at their deadline.
    pub expired: u64,
    /// Attempts that ended.
    pub finished: u64,
}

/// The reply to `GET /v1/overview`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Overview {
    /// Increases with every fresh observation.
    pub generation: u64,
    /// The engine's clock when it was made (RFC 3339).
    pub at: String,
    /// The policy version in force.
    pub policy_version: u64,
    /// The ordering policy.
    pub policy: String,
    /// The unit of tenants' balances.
    pub balance_unit: String,
    /// Jobs deferred, queued or running.
    pub live_jobs: u64,
    /// Jobs waiting.
    pub queued_jobs: u64,
    /// Whether every tenant with jobs was examined.
    pub complete: bool,
    /// Tenants with jobs.
    pub tenants_with_jobs: u64,
    /// Tenants with jobs above their entitlement.
    pub tenants_over: u64,
    /// Tenants with jobs, furthest above their entitlement first (at most 200).
    pub tenants: Vec<TenantView>,
    /// Classes.
    pub classes: Vec<ClassView>,
    /// Pools with live workers.
    pub pools: Vec<PoolView>,
    /// Workers the engine knows (live, or holding leases), by name (at most 200).
    pub workers: Vec<WorkerView>,
    /// How many workers there are.
    pub workers_total: u64,
    /// The most recent decisions, newest first.
    pub decisions: Vec<Decision>,
    /// Admission outcomes per 10-second interval, oldest first.
    pub admissions: Vec<IntervalView>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields the census brought (per-pool backlog, unplaceable jobs, reserves held,
    /// borrowing, worker state, waited time) are read under the server's names, and a reply of
    /// an older server without them still parses, with defaults.
    #[test]
    fn overview_reads_the_census_fields_and_older_replies() {
        let reply = r#"{
          "generation": 7, "complete": true,
          "tenants": [{"name": "acme", "dominant_share": 0.5,
                       "dominant_share_by_pool": {"cpu": 1.0}}],
          "classes": [{"name": "batch", "queued": 6, "unplaceable": 1,
                       "queued_by_pool": {"cpu": {"queued": 4, "oldest_age_ms": 20},
                                          "gpu": {"queued": 5, "oldest_age_ms": 30}}}],
          "pools": [{"name": "cpu", "label": "cpu", "workers": 1, "borrowed": {"cpu": 1.0},
                     "reserves": [{"class": "urgent", "reserved": {"cpu": 1.0},
                                   "used": {}, "held": {"cpu": 1.0}, "occupancy": 0.0}]}],
          "workers": [{"name": "w1", "pool": "cpu", "leases": 2, "live": false,
                       "polling": false, "free": {"cpu": 2.0}}],
          "decisions": [{"seq": 3, "at": "2026-11-30T12:00:00Z", "job_id": "j2",
                         "tenant": "acme", "class": "batch", "borrowed": true,
                         "waited_ms": 1500}]
        }"#;
        let o: Overview = serde_json::from_str(reply).unwrap();
        assert_eq!(o.tenants[0].dominant_share_by_pool["cpu"], 1.0);
        let batch = &o.classes[0];
        assert_eq!(
            (batch.unplaceable, batch.queued_by_pool["gpu"].queued),
            (1, 5)
        );
        let cpu = &o.pools[0];
        assert_eq!(cpu.borrowed["cpu"], 1.0);
        assert_eq!(cpu.reserves[0].held["cpu"], 1.0);
        let w1 = &o.workers[0];
        assert_eq!((w1.live, w1.free["cpu"], w1.leases), (false, 2.0, 2));
        assert_eq!((o.decisions[0].seq, o.decisions[0].waited_ms), (3, 1500));

        let older = r#"{"generation": 1, "classes": [{"name": "batch", "queued": null}],
                        "workers": [{"name": "w1", "last_poll_ms": 10}],
                        "decisions": [{"seq": 1, "at": "2026-11-30T12:00:00Z",
                                       "job_id": "j0", "tenant": "a", "class": "batch"}]}"#;
        let o: Overview = serde_json::from_str(older).unwrap();
        assert_eq!(o.classes[0].unplaceable, 0);
        assert!(o.classes[0].queued_by_pool.is_empty());
        assert!(!o.workers[0].live);
        assert_eq!(o.decisions[0].waited_ms, 0);
    }
}
