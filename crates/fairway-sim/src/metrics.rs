//! What a simulation measured, and its JSON and text reports (the JSON shape is a contract,
//! see DESIGN.md "Scenario files").

use crate::report::{Timeline, WaitSample};
use crate::scenario::{Scenario, SimPool};
use fairway_core::event::AttemptEnd;
use fairway_core::{Admission, Dur, Engine, JobState, LeaseError, Time};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug, Default)]
struct TenantMetrics {
    submitted: u64,
    accepted: u64,
    deferred: u64,
    rejected: u64,
    rejected_retryable: u64,
    rejected_final: u64,
    completed: u64,
    failed: u64,
    expired: u64,
    canceled: u64,
    attempts: u64,
    retries: u64,
    preempted: u64,
    waits: Vec<f64>,
    first_start: Option<Time>,
    last_finish: Option<Time>,
    service_rate: f64,
    service_since: Time,
    service: f64,
    waiting: u64,
    backlog_since: Time,
    backlogged: f64,
    reasons: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Default)]
struct ClassMetrics {
    submitted: u64,
    accepted: u64,
    deferred: u64,
    rejected_retryable: u64,
    rejected_final: u64,
    completed: u64,
    waits: Vec<f64>,
    deadline_misses: u64,
    retries: u64,
    preempted: u64,
    reasons: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Default)]
struct JobTrack {
    tenant: usize,
    class: usize,
    arrival: Time,
    /// The job's actual service time (for its bounded slowdown).
    run: Dur,
    deadline: Option<Time>,
    first_start: Option<Time>,
    waiting: bool,
    progress: Dur,
    /// Per running attempt: its service rate and the resources it holds.
    rate: f64,
    held: Vec<(String, f64)>,
    closed: bool,
    accepted: bool,
}

#[derive(Clone, Debug)]
struct AttemptRecord {
    job: usize,
    attempt: u32,
    start: Time,
    end: Option<Time>,
    outcome: Option<&'static str>,
    workers: Vec<String>,
}

/// Everything a run measured.
#[derive(Clone, Debug)]
pub struct Metrics {
    policy: String,
    backfill: String,
    tenant_names: Vec<String>,
    tenants: Vec<TenantMetrics>,
    class_names: Vec<String>,
    classes: Vec<ClassMetrics>,
    jobs: Vec<JobTrack>,
    job_ids: Vec<String>,
    window: (Time, Option<Time>),
    now: Time,
    /// Resources held now, and their time integrals (resource-seconds) in the window.
    used: BTreeMap<String, f64>,
    used_integral: BTreeMap<String, f64>,
    /// Time integral of the most-used resource's fraction (the dominant utilization).
    utilization: f64,
    utilization_since: Time,
    total_capacity: BTreeMap<String, f64>,
    pool_capacity: Vec<BTreeMap<String, f64>>,
    demands: Vec<BTreeMap<String, f64>>,
    counts: BTreeMap<&'static str, u64>,
    stale: u64,
    workers_lost: u64,
    closed_jobs: u64,
    events: bool,
    attempts: Vec<AttemptRecord>,
    open_attempt: BTreeMap<usize, usize>,
    probes: Vec<Value>,
    end: Time,
    specs: Vec<fairway_core::config::TenantSpec>,
    engine_stats: Option<fairway_core::EngineStats>,
    unplaceable: u64,
    seed: u64,
    /// Service, backlog and use per time bucket over the whole run, for the report's plots
    /// (bounded: at most `report::MAX_BUCKETS` buckets).
    timeline: Timeline,
}

fn overlap(a: Time, b: Time, window: (Time, Time)) -> f64 {
    let lo = a.max(window.0);
    let hi = b.min(window.1);
    if hi > lo {
        hi.since(lo).as_secs_f64()
    } else {
        0.0
    }
}

fn round6(x: f64) -> f64 {
    if x.is_finite() {
        (x * 1e6).round() / 1e6
    } else {
        0.0
    }
}

/// The dominant share of `demand` (times `members`) of a `capacity`.
fn dominant(demand: &BTreeMap<String, f64>, members: f64, capacity: &BTreeMap<String, f64>) -> f64 {
    let demand = if demand.is_empty() {
        vec![("cpu", 1.0)]
    } else {
        demand.iter().map(|(k, v)| (k.as_str(), *v)).collect()
    };
    demand
        .into_iter()
        .map(|(r, a)| match capacity.get(r) {
            Some(c) if *c > 0.0 => a * members / c,
            _ => 0.0,
        })
        .fold(0.0, f64::max)
}

impl Metrics {
    /// Empty metrics for a scenario.
    pub fn new(sc: &Scenario, events: bool) -> Metrics {
        let mut tenant_names: BTreeSet<String> =
            sc.tenants.iter().map(|t| t.name.clone()).collect();
        tenant_names.extend(sc.jobs.iter().map(|j| j.tenant.clone()));
        let tenant_names: Vec<String> = tenant_names.into_iter().collect();
        let tenant_index: BTreeMap<String, usize> = tenant_names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        let class_names: Vec<String> = sc.policy.classes.iter().map(|c| c.name.clone()).collect();
        let mut total_capacity = BTreeMap::new();
        let mut pool_capacity = Vec::new();
        for p in &sc.pools {
            let mut cap = BTreeMap::new();
            for (r, a) in &p.capacity {
                *total_capacity.entry(r.clone()).or_insert(0.0) += a * p.workers as f64;
                cap.insert(r.clone(), a * p.workers as f64);
            }
            pool_capacity.push(cap);
        }
        let jobs = sc
            .jobs
            .iter()
            .map(|j| JobTrack {
                tenant: tenant_index[&j.tenant],
                class: class_names.iter().position(|c| *c == j.class).unwrap_or(0),
                arrival: j.at,
                run: j.duration,
                deadline: j.deadline,
                ..JobTrack::default()
            })
            .collect();
        Metrics {
            // Sized for the run's stop time, or its last arrival (jobs sorted by arrival).
            timeline: Timeline::new(
                tenant_names.len(),
                sc.until.or_else(|| sc.jobs.last().map(|j| j.at)),
            ),
            policy: sc.policy.name.to_string(),
            backfill: sc.policy.backfill.as_str().to_string(),
            tenants: vec![TenantMetrics::default(); tenant_names.len()],
            tenant_names,
            classes: vec![ClassMetrics::default(); class_names.len()],
            class_names,
            jobs,
            job_ids: sc.jobs.iter().map(|j| j.id.clone()).collect(),
            window: sc.measure,
            now: Time::ZERO,
            used: BTreeMap::new(),
            used_integral: BTreeMap::new(),
            utilization: 0.0,
            utilization_since: Time::ZERO,
            total_capacity,
            pool_capacity,
            demands: sc.jobs.iter().map(|j| j.demand.clone()).collect(),
            counts: BTreeMap::new(),
            stale: 0,
            workers_lost: 0,
            closed_jobs: 0,
            events,
            attempts: Vec::new(),
            open_attempt: BTreeMap::new(),
            probes: Vec::new(),
            end: Time::ZERO,
            specs: sc.tenants.clone(),
            engine_stats: None,
            unplaceable: 0,
            seed: sc.seed,
        }
    }

    fn window_end(&self) -> Time {
        self.window.1.unwrap_or(Time::MAX)
    }

    fn bump(&mut self, key: &'static str) {
        *self.counts.entry(key).or_insert(0) += 1;
    }

    /// Jobs that reached an end (finished or refused), for progress reports.
    pub fn closed_jobs(&self) -> u64 {
        self.closed_jobs
    }

    /// The tenants, in the order of the timeline's per-tenant series.
    pub fn tenant_names(&self) -> &[String] {
        &self.tenant_names
    }

    /// Service, backlog and use per time bucket, for the report's plots.
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// Each tenant's waits, and how many of its accepted jobs never started.
    pub fn waits_by_tenant(&self) -> Vec<WaitSample<'_>> {
        let mut unstarted = vec![0; self.tenants.len()];
        for j in self
            .jobs
            .iter()
            .filter(|j| j.accepted && j.first_start.is_none())
        {
            unstarted[j.tenant] += 1;
        }
        (self.tenant_names.iter().zip(&self.tenants).zip(unstarted))
            .map(|((name, t), unstarted)| WaitSample {
                name,
                waits_s: &t.waits,
                unstarted,
            })
            .collect()
    }

    /// Each class's waits, and how many of its accepted jobs never started.
    pub fn waits_by_class(&self) -> Vec<WaitSample<'_>> {
        let mut unstarted = vec![0; self.classes.len()];
        for j in self
            .jobs
            .iter()
            .filter(|j| j.accepted && j.first_start.is_none())
        {
            unstarted[j.class] += 1;
        }
        (self.class_names.iter().zip(&self.classes).zip(unstarted))
            .map(|((name, c), unstarted)| WaitSample {
                name,
                waits_s: &c.waits,
                unstarted,
            })
            .collect()
    }

    /// The clock moved to `t`.
    pub fn advance(&mut self, t: Time) {
        self.now = t;
    }

    /// A submission's answer.
    pub fn admission(&mut self, j: usize, a: &Admission) {
        let (t, c) = (self.jobs[j].tenant, self.jobs[j].class);
        self.bump("submitted");
        self.tenants[t].submitted += 1;
        self.classes[c].submitted += 1;
        match a {
            Admission::Accepted { .. } => {}
            Admission::Deferred { .. } => {}
            Admission::RejectedRetryable { reason, .. } => {
                self.bump("rejected_retryable");
                self.tenants[t].rejected += 1;
                self.tenants[t].rejected_retryable += 1;
                self.classes[c].rejected_retryable += 1;
                *self.tenants[t]
                    .reasons
                    .entry(reason.code().to_string())
                    .or_insert(0) += 1;
                *self.classes[c]
                    .reasons
                    .entry(reason.code().to_string())
                    .or_insert(0) += 1;
            }
            Admission::RejectedFinal { reason } => {
                self.bump("rejected_final");
                self.tenants[t].rejected += 1;
                self.tenants[t].rejected_final += 1;
                self.classes[c].rejected_final += 1;
                *self.tenants[t]
                    .reasons
                    .entry(reason.code().to_string())
                    .or_insert(0) += 1;
                *self.classes[c]
                    .reasons
                    .entry(reason.code().to_string())
                    .or_insert(0) += 1;
            }
        }
    }

    /// A refused job is done with.
    pub fn close_rejected(&mut self) {
        self.closed_jobs += 1;
    }

    fn set_waiting(&mut self, j: usize, waiting: bool) {
        if self.jobs[j].waiting == waiting {
            return;
        }
        self.jobs[j].waiting = waiting;
        let window = (self.window.0, self.window_end());
        let now = self.now;
        let tenant = self.jobs[j].tenant;
        let t = &mut self.tenants[tenant];
        if t.waiting > 0 {
            t.backlogged += overlap(t.backlog_since, now, window);
            self.timeline.add_backlog(tenant, t.backlog_since, now);
        }
        t.backlog_since = now;
        if waiting {
            t.waiting += 1;
        } else {
            t.waiting -= 1;
        }
    }

    /// The engine accepted job `j` (queued, or deferred).
    pub fn accepted(&mut self, j: usize, deferred: bool) {
        let (t, c) = (self.jobs[j].tenant, self.jobs[j].class);
        self.jobs[j].accepted = true;
        if deferred {
            self.bump("deferred");
            self.tenants[t].deferred += 1;
            self.classes[c].deferred += 1;
        } else {
            self.bump("accepted");
            self.set_waiting(j, true);
        }
        self.tenants[t].accepted += 1;
        self.classes[c].accepted += 1;
    }

    /// A deferred job became eligible.
    pub fn eligible(&mut self, j: usize) {
        self.set_waiting(j, true);
    }

    /// A waiting job left its queue without running.
    pub fn left_queue(&mut self, j: usize) {
        self.set_waiting(j, false);
    }

    /// When job `j` (an index into the scenario's jobs) first started, if it did.
    pub fn first_start(&self, j: usize) -> Option<Time> {
        self.jobs[j].first_start
    }

    /// The work done by earlier attempts of job `j`.
    pub fn progress_of(&self, j: usize) -> Dur {
        self.jobs[j].progress
    }

    /// Records a checkpoint.
    pub fn set_progress(&mut self, j: usize, p: Dur) {
        self.jobs[j].progress = p;
    }

    /// Integrates resource use up to now.
    fn integrate_use(&mut self, now: Time) {
        let window = (self.window.0, self.window_end());
        let dt = overlap(self.utilization_since, now, window);
        let mut dominant: f64 = 0.0;
        for (r, u) in &self.used {
            if dt > 0.0 {
                *self.used_integral.entry(r.clone()).or_insert(0.0) += u * dt;
            }
            if let Some(c) = self.total_capacity.get(r).filter(|c| **c > 0.0) {
                dominant = dominant.max(u / c);
            }
        }
        self.utilization += dominant.min(1.0) * dt;
        // The timeline covers the whole run, not only the measurement window.
        self.timeline
            .add_busy(dominant.min(1.0), self.utilization_since, now);
        self.utilization_since = now;
    }

    fn set_running(&mut self, j: usize, rate: f64, held: Vec<(String, f64)>) {
        let window = (self.window.0, self.window_end());
        let now = self.now;
        let old = self.jobs[j].rate;
        let tenant = self.jobs[j].tenant;
        let t = &mut self.tenants[tenant];
        t.service += t.service_rate * overlap(t.service_since, now, window);
        self.timeline
            .add_service(tenant, t.service_rate, t.service_since, now);
        t.service_since = now;
        t.service_rate += rate - old;
        self.integrate_use(now);
        for (r, a) in std::mem::take(&mut self.jobs[j].held) {
            *self.used.entry(r).or_insert(0.0) -= a;
        }
        for (r, a) in &held {
            *self.used.entry(r.clone()).or_insert(0.0) += a;
        }
        self.jobs[j].rate = rate;
        self.jobs[j].held = held;
    }

    /// An attempt started.
    #[allow(clippy::too_many_arguments)]
    pub fn started(
        &mut self,
        j: usize,
        at: Time,
        attempt: u32,
        workers: &[String],
        members: u32,
        pools: &[SimPool],
        pool_of: &[usize],
    ) {
        self.now = at;
        self.set_waiting(j, false);
        let (t, c) = (self.jobs[j].tenant, self.jobs[j].class);
        if self.jobs[j].first_start.is_none() {
            self.jobs[j].first_start = Some(at);
            let wait = at.since(self.jobs[j].arrival).as_secs_f64();
            self.tenants[t].waits.push(wait);
            self.classes[c].waits.push(wait);
            self.tenants[t].first_start.get_or_insert(at);
        }
        self.tenants[t].attempts += 1;
        let pool = pool_of.first().copied().unwrap_or(0);
        let _ = pools;
        let service = dominant(&self.demands[j], members as f64, &self.pool_capacity[pool]);
        let demand = if self.demands[j].is_empty() {
            vec![("cpu".to_string(), members as f64)]
        } else {
            self.demands[j]
                .iter()
                .map(|(r, a)| (r.clone(), a * members as f64))
                .collect()
        };
        self.set_running(j, service, demand);
        if self.events {
            self.open_attempt.insert(j, self.attempts.len());
            self.attempts.push(AttemptRecord {
                job: j,
                attempt,
                start: at,
                end: None,
                outcome: None,
                workers: workers.to_vec(),
            });
        }
    }

    /// An attempt ended.
    pub fn ended(&mut self, j: usize, at: Time, end: AttemptEnd, _attempt: u32) {
        self.now = at;
        self.set_running(j, 0.0, Vec::new());
        let (t, c) = (self.jobs[j].tenant, self.jobs[j].class);
        let outcome = match end {
            AttemptEnd::Succeeded => "succeeded",
            AttemptEnd::Failed { .. } => "failed",
            AttemptEnd::Expired => "expired",
            AttemptEnd::Preempted => {
                self.bump("preemptions");
                self.tenants[t].preempted += 1;
                self.classes[c].preempted += 1;
                "preempted"
            }
            AttemptEnd::Canceled => "canceled",
        };
        if let Some(i) = self.open_attempt.remove(&j) {
            self.attempts[i].end = Some(at);
            self.attempts[i].outcome = Some(outcome);
        }
    }

    /// A job went back to wait after an attempt.
    pub fn requeued(&mut self, j: usize, deferred: bool) {
        let (t, c) = (self.jobs[j].tenant, self.jobs[j].class);
        self.bump("retries");
        self.tenants[t].retries += 1;
        self.classes[c].retries += 1;
        if !deferred {
            self.set_waiting(j, true);
        }
    }

    /// A job reached a terminal state.
    pub fn closed(&mut self, j: usize, at: Time, state: JobState) {
        self.now = at;
        self.set_waiting(j, false);
        self.jobs[j].closed = true;
        self.closed_jobs += 1;
        let (t, c) = (self.jobs[j].tenant, self.jobs[j].class);
        let late = self.jobs[j].deadline.is_some_and(|d| at > d);
        match state {
            JobState::Succeeded => {
                self.bump("completed");
                self.tenants[t].completed += 1;
                self.classes[c].completed += 1;
                if late {
                    self.classes[c].deadline_misses += 1;
                }
                self.tenants[t].last_finish =
                    Some(self.tenants[t].last_finish.map_or(at, |x| x.max(at)));
            }
            JobState::Failed => {
                self.bump("failed");
                self.tenants[t].failed += 1;
            }
            JobState::Canceled => {
                self.bump("canceled");
                self.tenants[t].canceled += 1;
            }
            JobState::Expired => {
                self.bump("expired");
                self.tenants[t].expired += 1;
                self.classes[c].deadline_misses += 1;
            }
            _ => {}
        }
    }

    /// A report the engine refused (stale epoch).
    pub fn stale_completion(&mut self, _e: &LeaseError) {
        self.stale += 1;
    }

    /// A worker was lost.
    pub fn worker_lost(&mut self) {
        self.workers_lost += 1;
    }

    /// A snapshot at a probe.
    pub fn probe(&mut self, at: Time, engine: &Engine) {
        let mut running = Map::new();
        let mut queued = Map::new();
        let mut usage = Map::new();
        for s in engine.tenant_snapshots() {
            running.insert(s.name.clone(), json!(s.running));
            queued.insert(s.name.clone(), json!(s.queued));
            let u: Map<String, Value> = s
                .usage
                .iter()
                .map(|(k, v)| (k.clone(), json!(round6(*v))))
                .collect();
            usage.insert(s.name, Value::Object(u));
        }
        self.probes.push(json!({
            "at": round6(at.as_secs_f64()),
            "running": running,
            "queued": queued,
            "usage": usage,
        }));
    }

    /// Closes the books at `end`.
    pub fn finish(&mut self, end: Time, engine: &mut Engine) {
        self.end = end;
        self.now = end;
        let window = (self.window.0, self.window_end().min(end));
        for (i, t) in self.tenants.iter_mut().enumerate() {
            t.service += t.service_rate * overlap(t.service_since, end, window);
            self.timeline
                .add_service(i, t.service_rate, t.service_since, end);
            t.service_since = end;
            if t.waiting > 0 {
                t.backlogged += overlap(t.backlog_since, end, window);
                self.timeline.add_backlog(i, t.backlog_since, end);
                t.backlog_since = end;
            }
        }
        self.integrate_use(end);
        self.timeline.close(end);
        self.engine_stats = Some(engine.stats().clone());
        self.unplaceable = 0;
        for (j, track) in self.jobs.iter().enumerate() {
            if track.accepted && !track.closed && track.first_start.is_none() {
                let id = &self.job_ids[j];
                if engine.is_unplaceable(id) {
                    self.unplaceable += 1;
                }
            }
        }
    }

    fn window_secs(&self) -> f64 {
        let end = self.window.1.unwrap_or(self.end).min(self.end);
        end.since(self.window.0).as_secs_f64()
    }

    /// Each tenant's entitled share among the tenants backlogged through the window:
    /// hierarchical weighted water-filling with guarantees as floors and limits as caps, over
    /// the service the other tenants did not use.
    fn entitlements(&self, shares: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
        let window = self.window_secs();
        let backlogged: BTreeSet<String> = self
            .tenant_names
            .iter()
            .enumerate()
            .filter(|(i, _)| window > 0.0 && self.tenants[*i].backlogged >= 0.9 * window)
            .map(|(_, n)| n.clone())
            .collect();
        self.entitled_among(shares, &backlogged)
    }

    /// Each `backlogged` tenant's entitled share, given every tenant's share of the service
    /// delivered: what the other tenants did not use, water-filled down the tenant tree (used
    /// for the whole window here, and for each time bucket by the report).
    pub(crate) fn entitled_among(
        &self,
        shares: &BTreeMap<String, f64>,
        backlogged: &BTreeSet<String>,
    ) -> BTreeMap<String, f64> {
        let others: f64 = shares
            .iter()
            .filter(|(n, _)| !backlogged.contains(*n))
            .map(|(_, s)| s)
            .sum();
        let available = (1.0 - others).max(0.0);
        let spec = |name: &str| self.specs.iter().find(|s| s.name == name);
        let weight = |name: &str| spec(name).and_then(|s| s.weight).unwrap_or(1.0);
        let floor = |name: &str| {
            spec(name)
                .filter(|s| !s.guarantee.is_empty())
                .map(|s| dominant(&s.guarantee, 1.0, &self.total_capacity))
                .unwrap_or(0.0)
        };
        let cap = |name: &str| {
            spec(name)
                .filter(|s| !s.limit.is_empty())
                .map(|s| dominant(&s.limit, 1.0, &self.total_capacity))
                .unwrap_or(1.0)
        };
        // Active nodes: backlogged tenants and their ancestors.
        let mut active: BTreeSet<String> = BTreeSet::new();
        for b in backlogged {
            let mut cur = Some(b.as_str());
            while let Some(c) = cur {
                active.insert(c.to_string());
                cur = c.rfind('/').map(|i| &c[..i]);
            }
        }
        let mut out = BTreeMap::new();
        let roots: Vec<String> = active
            .iter()
            .filter(|n| !n.contains('/'))
            .cloned()
            .collect();
        let mut stack = vec![(roots, available)];
        while let Some((children, amount)) = stack.pop() {
            let alloc = water_fill(
                &children
                    .iter()
                    .map(|c| (weight(c), floor(c), cap(c)))
                    .collect::<Vec<_>>(),
                amount,
            );
            for (c, a) in children.iter().zip(alloc) {
                let grandchildren: Vec<String> = active
                    .iter()
                    .filter(|n| n.rfind('/').is_some_and(|i| &n[..i] == c.as_str()))
                    .cloned()
                    .collect();
                if backlogged.contains(c) && grandchildren.is_empty() {
                    out.insert(c.clone(), a);
                } else if !grandchildren.is_empty() {
                    stack.push((grandchildren, a));
                }
            }
        }
        out
    }

    fn tenant_shares(&self) -> BTreeMap<String, f64> {
        let total: f64 = self.tenants.iter().map(|t| t.service).sum();
        self.tenant_names
            .iter()
            .zip(&self.tenants)
            .map(|(n, t)| (n.clone(), if total > 0.0 { t.service / total } else { 0.0 }))
            .collect()
    }

    /// The JSON document of DESIGN.md ("Scenario files").
    pub fn to_json(&self) -> Value {
        let shares = self.tenant_shares();
        let entitled = self.entitlements(&shares);
        let mut tenants = Map::new();
        for (i, name) in self.tenant_names.iter().enumerate() {
            let t = &self.tenants[i];
            tenants.insert(
                name.clone(),
                json!({
                    "submitted": t.submitted,
                    "accepted": t.accepted,
                    "deferred": t.deferred,
                    "rejected": t.rejected,
                    "rejected_retryable": t.rejected_retryable,
                    "rejected_final": t.rejected_final,
                    "rejection_reasons": t.reasons,
                    "completed": t.completed,
                    "failed": t.failed,
                    "expired": t.expired,
                    "canceled": t.canceled,
                    "attempts": t.attempts,
                    "retries": t.retries,
                    "preempted": t.preempted,
                    "service_share": round6(shares[name]),
                    "entitlement": entitled.get(name).map(|e| round6(*e)),
                    "backlogged_s": round6(t.backlogged),
                    "wait_s": percentiles(&t.waits),
                    "first_start_s": t.first_start.map(|x| round6(x.as_secs_f64())),
                    "last_finish_s": t.last_finish.map(|x| round6(x.as_secs_f64())),
                }),
            );
        }
        let mut classes = Map::new();
        for (i, name) in self.class_names.iter().enumerate() {
            let c = &self.classes[i];
            if c.submitted == 0 && name != "default" {
                continue;
            }
            classes.insert(
                name.clone(),
                json!({
                    "submitted": c.submitted,
                    "accepted": c.accepted,
                    "deferred": c.deferred,
                    "rejected_retryable": c.rejected_retryable,
                    "rejected_final": c.rejected_final,
                    "rejection_reasons": c.reasons,
                    "completed": c.completed,
                    "retries": c.retries,
                    "preempted": c.preempted,
                    "wait_s": percentiles(&c.waits),
                    "deadline_misses": c.deadline_misses,
                }),
            );
        }
        let (jain, max_err) = fairness(&shares, &entitled);
        // Over every job that started: wait from arrival to first start, and bounded slowdown
        // against its actual service time (threshold 10 s, as on traces).
        let (waits, slowdowns): (Vec<f64>, Vec<f64>) = self
            .jobs
            .iter()
            .filter_map(|j| {
                let wait = j.first_start?.since(j.arrival).as_secs_f64();
                let bsld = crate::trace_metrics::bounded_slowdown_s(wait, j.run.as_secs_f64());
                Some((wait, bsld))
            })
            .unzip();
        let count = |k: &str| self.counts.get(k).copied().unwrap_or(0);
        let window = self.window_secs();
        let stats = self.engine_stats.clone().unwrap_or_default();
        let mut doc = json!({
            "policy": self.policy,
            "backfill": self.backfill,
            "seed": self.seed,
            "sim_seconds": round6(self.end.as_secs_f64()),
            "measure_s": [round6(self.window.0.as_secs_f64()), round6(self.window.1.unwrap_or(self.end).min(self.end).as_secs_f64())],
            "jobs": {
                "submitted": count("submitted"),
                "accepted": count("accepted"),
                "deferred": count("deferred"),
                "rejected_retryable": count("rejected_retryable"),
                "rejected_final": count("rejected_final"),
                "completed": count("completed"),
                "failed": count("failed"),
                "canceled": count("canceled"),
                "expired": count("expired"),
                "unplaceable": self.unplaceable,
                "retries": count("retries"),
                "preemptions": count("preemptions"),
                "stale_completions": self.stale,
            },
            "tenants": tenants,
            "classes": classes,
            "fairness": { "jain": jain.map(round6), "max_share_error": max_err.map(round6), "backlogged_tenants": entitled.len() },
            "utilization": round6(if window > 0.0 { self.utilization / window } else { 0.0 }),
            "utilization_by_resource": self.total_capacity.iter().map(|(r, c)| {
                let used = self.used_integral.get(r).copied().unwrap_or(0.0);
                (r.clone(), json!(round6(if window > 0.0 && *c > 0.0 { used / (c * window) } else { 0.0 })))
            }).collect::<Map<String, Value>>(),
            "wait_s": percentiles(&waits),
            "bounded_slowdown": percentiles(&slowdowns),
            "probes": self.probes,
            "engine": {
                "dispatches": stats.dispatches,
                "backfills": stats.backfills,
                "preemptions": stats.preemptions,
                "lease_expiries": stats.lease_expiries,
                "stale_epochs": stats.stale_epochs,
                "passes": stats.passes,
                "workers_lost": self.workers_lost,
            },
        });
        if self.events {
            let attempts: Vec<Value> = self
                .attempts
                .iter()
                .map(|a| {
                    let j = &self.jobs[a.job];
                    json!({
                        "job": self.job_ids[a.job],
                        "tenant": self.tenant_names[j.tenant],
                        "class": self.class_names[j.class],
                        "attempt": a.attempt,
                        "arrival": round6(j.arrival.as_secs_f64()),
                        "start": round6(a.start.as_secs_f64()),
                        "end": a.end.map(|e| round6(e.as_secs_f64())),
                        "outcome": a.outcome.unwrap_or("running"),
                        "workers": a.workers,
                    })
                })
                .collect();
            doc["attempts"] = Value::Array(attempts);
        }
        doc
    }

    /// The readable report.
    pub fn to_text(&self) -> String {
        let doc = self.to_json();
        let mut out = String::new();
        let j = &doc["jobs"];
        let n = |v: &Value| v.as_u64().unwrap_or(0);
        out.push_str(&format!(
            "policy {} (backfill {}), {:.3} simulated seconds, utilization {:.1}%\n",
            self.policy,
            self.backfill,
            self.end.as_secs_f64(),
            doc["utilization"].as_f64().unwrap_or(0.0) * 100.0
        ));
        out.push_str(&format!(
            "jobs: {} submitted, {} accepted, {} deferred, {} rejected (retryable {}, final {}), {} completed, {} failed, {} expired, {} unplaceable, {} retries, {} preemptions\n",
            n(&j["submitted"]), n(&j["accepted"]), n(&j["deferred"]),
            n(&j["rejected_retryable"]) + n(&j["rejected_final"]),
            n(&j["rejected_retryable"]), n(&j["rejected_final"]), n(&j["completed"]), n(&j["failed"]), n(&j["expired"]), n(&j["unplaceable"]), n(&j["retries"]), n(&j["preemptions"])
        ));
        let f = &doc["fairness"];
        out.push_str(&format!(
            "fairness: Jain {} over {} backlogged tenants, largest share error {}\n\n",
            fmt_opt(&f["jain"]),
            n(&f["backlogged_tenants"]),
            fmt_opt(&f["max_share_error"])
        ));
        out.push_str(&format!(
            "{:<20} {:>9} {:>9} {:>9} {:>8} {:>8} {:>10} {:>10} {:>10}\n",
            "tenant",
            "submitted",
            "completed",
            "rejected",
            "share",
            "entitled",
            "wait p50 s",
            "wait p99 s",
            "wait max s"
        ));
        for (name, t) in doc["tenants"].as_object().expect("object") {
            out.push_str(&format!(
                "{:<20} {:>9} {:>9} {:>9} {:>8.4} {:>8} {:>10} {:>10} {:>10}\n",
                name,
                n(&t["submitted"]),
                n(&t["completed"]),
                n(&t["rejected"]),
                t["service_share"].as_f64().unwrap_or(0.0),
                t["entitlement"]
                    .as_f64()
                    .map(|e| format!("{e:.4}"))
                    .unwrap_or_else(|| "-".into()),
                fmt_opt(&t["wait_s"]["p50"]),
                fmt_opt(&t["wait_s"]["p99"]),
                fmt_opt(&t["wait_s"]["max"]),
            ));
        }
        out.push('\n');
        out.push_str(&format!(
            "{:<20} {:>9} {:>9} {:>10} {:>10} {:>10}\n",
            "class", "completed", "misses", "wait p50 s", "wait p99 s", "wait max s"
        ));
        for (name, c) in doc["classes"].as_object().expect("object") {
            out.push_str(&format!(
                "{:<20} {:>9} {:>9} {:>10} {:>10} {:>10}\n",
                name,
                n(&c["completed"]),
                n(&c["deadline_misses"]),
                fmt_opt(&c["wait_s"]["p50"]),
                fmt_opt(&c["wait_s"]["p99"]),
                fmt_opt(&c["wait_s"]["max"]),
            ));
        }
        out
    }
}

fn fmt_opt(v: &Value) -> String {
    match v.as_f64() {
        Some(x) => format!("{x:.3}"),
        None => "-".to_string(),
    }
}

/// p50, p99 and max of a sample (nearest rank), in the JSON shape.
fn percentiles(values: &[f64]) -> Value {
    if values.is_empty() {
        return json!({ "p50": null, "p99": null, "max": null, "mean": null });
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    json!({ "p50": round6(rank(0.5)), "p99": round6(rank(0.99)), "max": round6(*v.last().expect("non-empty")), "mean": round6(mean) })
}

/// Jain's index of share/entitlement over entitled tenants, and the largest |share - entitlement|.
fn fairness(
    shares: &BTreeMap<String, f64>,
    entitled: &BTreeMap<String, f64>,
) -> (Option<f64>, Option<f64>) {
    let xs: Vec<f64> = entitled
        .iter()
        .filter(|(_, e)| **e > 0.0)
        .map(|(n, e)| shares.get(n).copied().unwrap_or(0.0) / e)
        .collect();
    if xs.is_empty() {
        return (None, None);
    }
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    let jain = if sq > 0.0 {
        sum * sum / (xs.len() as f64 * sq)
    } else {
        0.0
    };
    let max_err = entitled
        .iter()
        .map(|(n, e)| (shares.get(n).copied().unwrap_or(0.0) - e).abs())
        .fold(0.0, f64::max);
    (Some(jain), Some(max_err))
}

/// Weighted water-filling: split `amount` by weight, each between its floor and cap.
pub(crate) fn water_fill(nodes: &[(f64, f64, f64)], amount: f64) -> Vec<f64> {
    let n = nodes.len();
    let mut alloc = vec![0.0; n];
    let mut fixed = vec![false; n];
    let mut left = amount;
    // Floors first (scaled down if they exceed the amount).
    let floors: f64 = nodes.iter().map(|x| x.1.min(x.2)).sum();
    let scale = if floors > amount && floors > 0.0 {
        amount / floors
    } else {
        1.0
    };
    for (i, x) in nodes.iter().enumerate() {
        alloc[i] = x.1.min(x.2) * scale;
        left -= alloc[i];
    }
    for _ in 0..=n {
        let weight: f64 = nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| !fixed[*i])
            .map(|(_, x)| x.0)
            .sum();
        if weight <= 0.0 || left <= 1e-15 {
            break;
        }
        let mut changed = false;
        let per = left / weight;
        let mut spent = 0.0;
        for (i, x) in nodes.iter().enumerate() {
            if fixed[i] {
                continue;
            }
            let room = x.2 - alloc[i];
            let give = per * x.0;
            if give >= room {
                alloc[i] += room.max(0.0);
                spent += room.max(0.0);
                fixed[i] = true;
                changed = true;
            }
        }
        if !changed {
            for (i, x) in nodes.iter().enumerate() {
                if !fixed[i] {
                    alloc[i] += per * x.0;
                }
            }
            break;
        }
        left -= spent;
    }
    alloc
}
