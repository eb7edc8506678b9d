//! The shapes of the observability routes: explanations, tenant reports, decision records and
//! the overview behind `fairway top` and the dashboard.
//!
//! Worker-seconds are decimal numbers named `*_ws`; shares and entitlements are fractions of
//! all live capacity (0 to 1); ages are integer milliseconds (`*_ms`), as elsewhere in the API.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// One reason a job is not running.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WaitReasonBody {
    /// Stable code: `deferred`, `no_workers`, `unplaceable`, `behind_in_queue`,
    /// `tenant_at_limit`, `reserve_held`, `waiting_for_capacity`, `behind_tenants`.
    pub code: String,
    /// The reason as a sentence.
    pub message: String,
    /// `deferred`: eligible from this instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// `reserve_held`, `waiting_for_capacity`: the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// `tenant_at_limit`: the tenant (or ancestor) at its limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// `unplaceable`: per pool, which requirement fails.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mismatches: Vec<String>,
    /// `behind_in_queue`: jobs of its own queue ahead of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ahead: Option<u64>,
    /// `behind_in_queue`: the job at the head of its queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// `behind_tenants`: the tenants that come first, with their balances (at most 5).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants_ahead: Vec<BalanceBody>,
}

/// A queue (a tenant, or a tenant's band) and its balance under the policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BalanceBody {
    /// The tenant; `another tenant` when the caller may not see it.
    pub tenant: String,
    /// Its balance in the policy's unit (see `balance_unit`): smaller comes first.
    pub balance: f64,
    /// Whether it was within its guarantee (decision records under `fair`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_guarantee: Option<bool>,
}

/// `GET /v1/jobs/{id}/explain`: why a job is (not) running.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ExplainReply {
    /// Id.
    pub job_id: String,
    /// Tenant.
    pub tenant: String,
    /// Class.
    pub class: String,
    /// Its state.
    pub state: String,
    /// The explanation in one sentence.
    pub summary: String,
    /// Why it waits: one reason per kind of worker that could run it, repeats removed (empty
    /// unless queued or deferred).
    pub reasons: Vec<WaitReasonBody>,
    /// Workers running it.
    pub workers: Vec<String>,
    /// For a job that ended: how, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// The unit of the balances shown.
    pub balance_unit: String,
    /// The policy version in force.
    pub policy_version: u64,
    /// The decisions that started its attempts, still in the engine's ring (newest last, at
    /// most 10).
    pub decisions: Vec<DecisionBody>,
}

/// One dispatch decision, as recorded when it was taken.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DecisionBody {
    /// Its number: the engine's count of leases granted so far, this one included. Unique and
    /// increasing, and kept across restarts (it is durable), so `after` pages across them.
    pub seq: u64,
    /// When.
    pub at: String,
    /// The policy version that decided.
    pub policy_version: u64,
    /// The job started.
    pub job_id: String,
    /// Its tenant.
    pub tenant: String,
    /// Its class.
    pub class: String,
    /// The attempt's epoch.
    pub epoch: u64,
    /// The estimate charged.
    pub estimate_ms: u64,
    /// Workers it was placed on.
    pub workers: Vec<String>,
    /// The leading queues at the top of the tree when it was chosen (at most 4), the chosen
    /// one included.
    pub candidates: Vec<BalanceBody>,
    /// Whether it started as backfill behind a reservation.
    pub backfilled: bool,
    /// Whether it borrowed capacity reserved for a higher band.
    pub borrowed: bool,
    /// How long the job had waited in its queue this time (since it last entered it).
    pub waited_ms: u64,
    /// Why it was chosen, as a sentence.
    pub reason: String,
}

/// `GET /v1/decisions`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DecisionsReply {
    /// Matching records, oldest first.
    pub decisions: Vec<DecisionBody>,
    /// When more records matched than `limit`: pass this as `after` for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<u64>,
    /// The oldest `seq` still in the engine's ring: older records were dropped. With the ring
    /// empty (no lease granted since the process started), one more than the newest `seq`.
    pub oldest_seq: u64,
}

/// Queued jobs of one class.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BacklogBody {
    /// Jobs waiting (exact).
    pub queued: u64,
    /// Age of the oldest of them.
    pub oldest_age_ms: u64,
}

/// A tenant's books, in worker-seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LedgerBody {
    /// Charged for finished attempts (actual usage), all outcomes.
    pub charged_ws: f64,
    /// Estimated cost of running attempts.
    pub in_flight_ws: f64,
    /// Part of `charged_ws` spent on attempts that failed or expired.
    pub failed_ws: f64,
    /// Part spent on attempts that were preempted.
    pub preempted_ws: f64,
    /// Part spent on attempts that were canceled.
    pub canceled_ws: f64,
    /// Part spent on retries.
    pub retried_ws: f64,
    /// Debt: actual run time above the estimates, summed.
    pub debt_ws: f64,
    /// Attempts finished (any outcome).
    pub attempts: u64,
}

/// `GET /v1/tenants/{id}`: what a tenant has, is owed and owes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TenantReply {
    /// Its path name.
    pub tenant: String,
    /// Whether the policy declares it.
    pub declared: bool,
    /// Its weight.
    pub weight: f64,
    /// Its guarantee per resource.
    pub guarantee: BTreeMap<String, f64>,
    /// Its limit per resource (empty: none).
    pub limit: BTreeMap<String, f64>,
    /// Resources held by its running attempts (and its descendants').
    pub usage: BTreeMap<String, f64>,
    /// Dominant share of its usage, of all live capacity: 1 when it holds resources that no
    /// live worker offers (leases recovered after a restart, before their workers return).
    pub dominant_share: f64,
    /// Its weight's fraction among its active siblings: what it is entitled to beyond
    /// guarantees (for a nested tenant, a fraction of its parent's).
    pub entitlement: f64,
    /// Its balance under the policy (see `balance_unit`).
    pub balance: f64,
    /// The unit of `balance`.
    pub balance_unit: String,
    /// Per class: jobs waiting and the oldest one's age (own jobs; exact).
    pub backlog: BTreeMap<String, BacklogBody>,
    /// Jobs running.
    pub running: u64,
    /// Outstanding accepted work, worker-seconds.
    pub outstanding_ws: f64,
    /// Its books.
    pub ledger: LedgerBody,
    /// Jobs accepted (queued at once) since it was first seen.
    pub accepted: u64,
    /// Jobs accepted for later (deferred).
    pub deferred: u64,
}

/// A tenant in the overview.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TenantView {
    /// Its path name.
    pub name: String,
    /// Its weight.
    pub weight: f64,
    /// Dominant share of all live capacity held by it (descendants included): 1 when it holds
    /// resources that no live worker offers (leases recovered after a restart).
    pub dominant_share: f64,
    /// Per pool where it holds resources: the dominant share of that pool's live capacity
    /// held by it (descendants included), 1 likewise.
    pub dominant_share_by_pool: BTreeMap<String, f64>,
    /// Share of all live capacity its weight earns among the active tenants (the product of
    /// the fractions down its path).
    pub entitlement: f64,
    /// `dominant_share - entitlement`: positive when it holds more than its share.
    pub over: f64,
    /// Jobs waiting (own).
    pub queued: u64,
    /// Jobs running (own).
    pub running: u64,
    /// Age of its oldest waiting job.
    pub oldest_age_ms: Option<u64>,
    /// Per class, jobs waiting.
    pub backlog: BTreeMap<String, BacklogBody>,
    /// Its balance under the policy.
    pub balance: f64,
    /// Its debt (underestimation), worker-seconds.
    pub debt_ws: f64,
    /// Work charged to it so far, worker-seconds.
    pub charged_ws: f64,
}

/// A class (band) in the overview.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClassView {
    /// Its name.
    pub name: String,
    /// Its priority.
    pub priority: i32,
    /// Fraction of each pool held for it.
    pub reserve: f64,
    /// Jobs waiting. Always a number since observations count every job (it was `null` when an
    /// observation was cut short; it stays nullable so that older clients still read it).
    pub queued: Option<u64>,
    /// Age of the oldest waiting job, seconds: `null` when none waits.
    pub oldest_age_s: Option<f64>,
    /// Per pool with live workers, its waiting jobs that some live worker of the pool could run
    /// (a job that fits several pools counts in each; pools with none are left out).
    pub queued_by_pool: BTreeMap<String, BacklogBody>,
    /// Waiting jobs that no live worker can run.
    pub unplaceable: u64,
    /// What admission predicts as the wait of a default-demand job of this class, seconds:
    /// `null` when no live worker could run it.
    pub predicted_start_s: Option<f64>,
    /// Deadline misses so far.
    pub deadline_misses: u64,
    /// Work charged for its finished attempts, worker-seconds.
    pub charged_ws: f64,
    /// Its debt (actual above estimates), worker-seconds.
    pub debt_ws: f64,
}

/// A class's reserve in one pool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReserveView {
    /// The class.
    pub class: String,
    /// Capacity held for it (its reserve fraction of the pool's live capacity).
    pub reserved: BTreeMap<String, f64>,
    /// Capacity its running attempts hold in the pool.
    pub used: BTreeMap<String, f64>,
    /// Reserved and not used: what lower bands may not take, except by borrowing it.
    pub held: BTreeMap<String, f64>,
    /// `used / reserved` by the dominant resource.
    pub occupancy: f64,
}

/// A pool in the overview.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PoolView {
    /// Its name.
    pub name: String,
    /// Its name as a metrics label: the name when the policy declares it, else `undeclared`.
    pub label: String,
    /// Live workers.
    pub workers: u32,
    /// Capacity of the live workers.
    pub capacity: BTreeMap<String, f64>,
    /// Held by running attempts.
    pub used: BTreeMap<String, f64>,
    /// Held by running attempts, per class.
    pub class_used: BTreeMap<String, BTreeMap<String, f64>>,
    /// Reserves of the classes that have one.
    pub reserves: Vec<ReserveView>,
    /// Held now by attempts that borrowed capacity reserved for a higher band.
    pub borrowed: BTreeMap<String, f64>,
}

/// A worker the engine knows (live, or holding leases), and the leases it holds. Correct after
/// a restart: a worker holding a recovered lease is listed before it asks for work again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WorkerView {
    /// Its name.
    pub name: String,
    /// Its pool.
    pub pool: String,
    /// Its capacity, as it last offered it (empty until it asks for work after a restart).
    pub capacity: BTreeMap<String, f64>,
    /// Leases it holds (running attempts placed on it).
    pub leases: u64,
    /// Some of those jobs (at most 8).
    pub jobs: Vec<String>,
    /// Time since it was last heard from: a lease request or a heartbeat (after a restart,
    /// at the latest the recovery).
    pub last_poll_ms: u64,
    /// Capacity not held by its attempts (resources with none free are left out).
    pub free: BTreeMap<String, f64>,
    /// Whether it is live: heard from within the worker silence limit (90 s). A worker that is
    /// not live is listed while it holds leases.
    pub live: bool,
    /// Whether it waits for work now (a parked lease request).
    pub polling: bool,
}

/// Admission outcomes in one interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct IntervalView {
    /// Start of the interval.
    pub start: String,
    /// Accepted (queued at once).
    pub accepted: u64,
    /// Accepted for later.
    pub deferred: u64,
    /// Refused for now.
    pub rejected_retryable: u64,
    /// Refused for good.
    pub rejected_final: u64,
    /// Dropped at their deadline.
    pub expired: u64,
    /// Attempts that ended (any outcome).
    pub finished: u64,
}

/// Engine counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EngineCounters {
    /// Leases granted.
    pub dispatches: u64,
    /// Preemptions requested.
    pub preemptions: u64,
    /// Leases that expired.
    pub lease_expiries: u64,
    /// Heartbeats and completions refused for a stale epoch.
    pub stale_epochs: u64,
    /// Jobs dropped at their deadline.
    pub expired: u64,
    /// Scheduling passes.
    pub passes: u64,
}

/// `GET /v1/overview`: the whole picture, for `fairway top` and the dashboard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OverviewReply {
    /// Increases with every fresh observation (observations are paced; see `docs/api.md`).
    pub generation: u64,
    /// The engine's clock when it was made.
    pub at: String,
    /// What it cost the writer, milliseconds.
    pub observe_ms: f64,
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
    /// Whether every tenant with jobs was examined. Always `true`: an observation counts every
    /// class, tenant and pool in one pass (the field stays for the clients that read it).
    pub complete: bool,
    /// Tenants with jobs.
    pub tenants_with_jobs: u64,
    /// Tenants with jobs above their entitlement (all of them, listed or not).
    pub tenants_over: u64,
    /// Sum over the tenants with jobs of their dominant share above entitlement.
    pub share_above_entitlement_sum: f64,
    /// Tenants with jobs, furthest above their entitlement first (at most 200; the rest are
    /// counted in `tenants_with_jobs`).
    pub tenants: Vec<TenantView>,
    /// Classes, in the policy's order.
    pub classes: Vec<ClassView>,
    /// Pools with live workers.
    pub pools: Vec<PoolView>,
    /// Workers the engine knows (live, or holding leases), by name (at most 200).
    pub workers: Vec<WorkerView>,
    /// How many such workers there are.
    pub workers_total: u64,
    /// The most recent decisions, newest first (at most 20).
    pub decisions: Vec<DecisionBody>,
    /// Admission outcomes per 10-second interval, oldest first (the last 10 minutes).
    pub admissions: Vec<IntervalView>,
    /// Engine counters.
    pub engine: EngineCounters,
}
