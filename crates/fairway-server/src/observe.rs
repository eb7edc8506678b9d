//! What the writer sees, kept for operators: it counts the engine's events and the commands'
//! outcomes into [`Metrics`], keeps a ring of decision records, the workers it has heard from,
//! admission outcomes per interval, and answers the observability queries ([`Query`]):
//! explanations, tenant reports, decision records and the overview.
//!
//! Everything here runs in the writer thread, which owns the engine, and everything is
//! bounded: [`DECISION_RING`] records, [`MAX_WORKERS`] workers, [`MAX_TRACKED_ATTEMPTS`]
//! running attempts, [`TIMELINE_INTERVALS`] intervals, and an observation of the engine costs
//! at most about [`OBSERVE_VISIT_BUDGET`] job visits and is made at most once per
//! [`MIN_OBSERVE_INTERVAL`] (and no sooner than 20 times its own cost after the last one), so
//! that dashboards and scrapers cannot take the writer's time from the work.
//!
//! **Nothing here decides.** Per-tenant and per-class figures come from the engine's own
//! reports ([`Engine::tenant_report`], [`Engine::explain`], [`Engine::predict`], ...). What
//! the engine does not expose cheaply is left out rather than estimated: when the tenants with
//! jobs are too many to examine within the budget, per-class backlog and age are reported as
//! unknown (`complete: false`).

use crate::metrics::{
    AdmissionLabels, CallLabels, ClassLabels, ClassOutcomeLabels, EndedLabels, LeaseLabels,
    Metrics, RefusalLabels,
};
use crate::wire::instant;
use crate::wire::observe::*;
use crate::writer::{Reply, Unavailable};
use fairway_core::event::{AfterAttempt, AttemptEnd, StopReason};
use fairway_core::{
    Admission, DecisionRecord, Engine, EngineStats, Event, JobSpec, LeaseError, PolicyName, Time,
    WaitReason, WorkerOffer,
};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Decision records kept by the server (and by the engine: see `engine_config`).
pub const DECISION_RING: usize = 4096;
/// Workers remembered; beyond, the one heard from least recently is forgotten.
pub const MAX_WORKERS: usize = 10_000;
/// Running attempts followed for estimate errors and stop times; beyond, new ones are not.
pub const MAX_TRACKED_ATTEMPTS: usize = 1_000_000;
/// Admission intervals kept, of [`TIMELINE_INTERVAL`] each.
pub const TIMELINE_INTERVALS: usize = 60;
/// The length of one admission interval.
pub const TIMELINE_INTERVAL: Duration = Duration::from_secs(10);
/// Job visits one observation may spend on tenant reports (each scans the job table).
pub const OBSERVE_VISIT_BUDGET: u64 = 20_000_000;
/// Tenants examined in one observation, at most.
pub const MAX_TENANTS_EXAMINED: usize = 200;
/// Observations are made at most this often.
pub const MIN_OBSERVE_INTERVAL: Duration = Duration::from_secs(1);
/// Most decision records one `GET /v1/decisions` returns.
pub const MAX_DECISIONS_PAGE: usize = 1000;
/// A worker not heard from for this long, and holding no lease, is no longer shown (the
/// engine forgets it after the same time).
const WORKER_SHOWN_FOR: Duration = Duration::from_secs(90);
/// Rows in the overview's worker list.
const MAX_WORKERS_SHOWN: usize = 200;
/// Decisions in the overview.
const OVERVIEW_DECISIONS: usize = 20;

/// What a tenant-scoped caller may not see of other tenants.
const ANOTHER_TENANT: &str = "another tenant";

/// A query for the writer; answered after the turn's commit, like every read.
pub enum Query {
    /// `GET /v1/jobs/{id}/explain`; `None` when unknown or outside `scope`.
    Explain {
        /// The job.
        job: String,
        /// Only this tenant's (and its descendants') jobs are visible.
        scope: Option<String>,
        /// Answer.
        reply: Reply<Option<ExplainReply>>,
    },
    /// `GET /v1/tenants/{id}`; `None` for an unknown tenant.
    Tenant {
        /// The tenant.
        name: String,
        /// Answer.
        reply: Reply<Option<TenantReply>>,
    },
    /// `GET /v1/decisions`.
    Decisions {
        /// The filter.
        query: DecisionQuery,
        /// Only this tenant's (and its descendants') decisions are visible.
        scope: Option<String>,
        /// Answer.
        reply: Reply<DecisionsReply>,
    },
    /// The overview (a fresh observation, or the latest if one was made very recently).
    Overview {
        /// Answer.
        reply: Reply<Arc<Observation>>,
    },
}

/// A filter of decision records.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DecisionQuery {
    /// Only this job's.
    pub job: Option<String>,
    /// Only those taken at or after this instant.
    pub since: Option<Time>,
    /// Only those after this `seq`.
    pub after: Option<u64>,
    /// At most this many (1 to [`MAX_DECISIONS_PAGE`]).
    pub limit: usize,
}

/// One observation of the engine: the overview, and when it was made.
#[derive(Debug)]
pub struct Observation {
    /// When it was made.
    pub computed_at: Instant,
    /// What it saw.
    pub view: OverviewReply,
    /// The engine's counters.
    pub stats: EngineStats,
}

/// A decision record with the server's additions.
#[derive(Clone, Debug)]
struct Decision {
    seq: u64,
    record: DecisionRecord,
    borrowed: bool,
    reason: String,
}

/// A worker the server heard from.
#[derive(Clone, Debug)]
struct WorkerSeen {
    pool: String,
    capacity: BTreeMap<String, f64>,
    last_poll: Instant,
    /// Jobs it runs (running attempts placed on it).
    jobs: Vec<String>,
}

/// A running attempt, followed from its lease to its end.
#[derive(Clone, Debug)]
struct Attempt {
    class: String,
    estimate_s: f64,
    workers: Vec<String>,
    stop_requested: Option<Time>,
}

/// Outcomes in one interval (index = start / interval).
#[derive(Clone, Copy, Debug, Default)]
struct Interval {
    index: u64,
    accepted: u64,
    deferred: u64,
    rejected_retryable: u64,
    rejected_final: u64,
    expired: u64,
    finished: u64,
}

/// The writer's observer. See the module documentation.
pub struct Observer {
    decisions: VecDeque<Decision>,
    next_seq: u64,
    workers: BTreeMap<String, WorkerSeen>,
    attempts: HashMap<String, Attempt>,
    timeline: VecDeque<Interval>,
    latest: Option<(Duration, Arc<Observation>)>,
    generation: u64,
}

impl Default for Observer {
    fn default() -> Self {
        Observer::new()
    }
}

/// An answer to send once the turn is durable (`true`), or `503` (`false`).
pub type Deferred = Box<dyn FnOnce(bool) + Send>;

fn deferred<T: Send + 'static>(reply: Reply<T>, value: T) -> Deferred {
    Box::new(move |ok| {
        let _ = reply.send(if ok { Ok(value) } else { Err(Unavailable) });
    })
}

/// Whether tenant `name` is `scope` or one of its descendants.
pub fn in_scope(scope: &str, name: &str) -> bool {
    name == scope
        || name
            .strip_prefix(scope)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn ws(cost: u128) -> f64 {
    cost as f64 / fairway_core::policy::COST_PER_WORKER_SECOND as f64
}

/// The class label for a class name: the name when the policy declares it (so label values
/// stay bounded by the policy), else `unknown`.
fn class_label(engine: &Engine, class: Option<&str>) -> String {
    let name = class.unwrap_or(fairway_core::policy::DEFAULT_CLASS);
    if engine.policy().classes.iter().any(|c| c.name == name) {
        name.to_string()
    } else {
        "unknown".to_string()
    }
}

impl Observer {
    /// An observer with nothing seen yet.
    pub fn new() -> Observer {
        Observer {
            decisions: VecDeque::new(),
            next_seq: 1,
            workers: BTreeMap::new(),
            attempts: HashMap::new(),
            timeline: VecDeque::new(),
            latest: None,
            generation: 0,
        }
    }

    fn interval(&mut self, now: Time) -> &mut Interval {
        let index = now.0 / TIMELINE_INTERVAL.as_nanos() as u64;
        if self.timeline.back().is_none_or(|i| i.index < index) {
            self.timeline.push_back(Interval {
                index,
                ..Interval::default()
            });
            while self.timeline.len() > TIMELINE_INTERVALS {
                self.timeline.pop_front();
            }
        }
        self.timeline.back_mut().expect("just pushed")
    }

    /// Counts one admission (the engine's answer to a submission of `class`).
    pub fn admitted(
        &mut self,
        metrics: &Metrics,
        engine: &Engine,
        now: Time,
        class: Option<&str>,
        admission: &Admission,
    ) {
        let (outcome, reason, duplicate) = match admission {
            Admission::Accepted { duplicate, .. } => ("accepted", "none", *duplicate),
            Admission::Deferred { duplicate, .. } => ("deferred", "none", *duplicate),
            Admission::RejectedRetryable { reason, .. } => {
                ("rejected_retryable", reason.code(), false)
            }
            Admission::RejectedFinal { reason } => ("rejected_final", reason.code(), false),
        };
        if duplicate {
            metrics.duplicates.inc();
            return;
        }
        metrics
            .admissions
            .get_or_create(&AdmissionLabels {
                class: class_label(engine, class),
                outcome,
                reason,
            })
            .inc();
        let interval = self.interval(now);
        match outcome {
            "accepted" => interval.accepted += 1,
            "deferred" => interval.deferred += 1,
            "rejected_retryable" => interval.rejected_retryable += 1,
            _ => interval.rejected_final += 1,
        }
    }

    /// Counts a refused heartbeat or completion.
    pub fn refused(&self, metrics: &Metrics, call: &'static str, error: &LeaseError) {
        let reason = match error {
            LeaseError::UnknownJob => "unknown_job",
            LeaseError::StaleEpoch { .. } => "stale_epoch",
            LeaseError::NotRunning => "not_running",
        };
        metrics
            .refusals
            .get_or_create(&RefusalLabels { call, reason })
            .inc();
    }

    /// Notes a worker's lease request.
    pub fn polled(&mut self, offer: &WorkerOffer) {
        if !self.workers.contains_key(&offer.worker) && self.workers.len() >= MAX_WORKERS {
            let oldest = self
                .workers
                .iter()
                .filter(|(_, w)| w.jobs.is_empty())
                .min_by_key(|(_, w)| w.last_poll)
                .or_else(|| self.workers.iter().min_by_key(|(_, w)| w.last_poll))
                .map(|(name, _)| name.clone());
            if let Some(name) = oldest {
                self.workers.remove(&name);
            }
        }
        let w = self
            .workers
            .entry(offer.worker.clone())
            .or_insert_with(|| WorkerSeen {
                pool: offer.pool.clone(),
                capacity: BTreeMap::new(),
                last_poll: Instant::now(),
                jobs: Vec::new(),
            });
        w.pool = offer.pool.clone();
        w.capacity = offer.capacity.clone();
        w.last_poll = Instant::now();
    }

    /// Times one engine call.
    pub fn timed(metrics: &Metrics, call: &'static str, took: Duration) {
        metrics
            .engine_call_seconds
            .get_or_create(&CallLabels { call })
            .observe(took.as_secs_f64());
    }

    /// Counts a committed turn: its size and duration, and its events.
    pub fn committed(
        &mut self,
        metrics: &Metrics,
        engine: &Engine,
        commands: usize,
        events: &[Event],
        took: Duration,
    ) {
        metrics.commit_seconds.observe(took.as_secs_f64());
        metrics.commit_commands.observe(commands as f64);
        metrics.commit_events.observe(events.len() as f64);
        self.count_events(metrics, engine, events);
    }

    /// Counts the events of a turn and takes its decision records from the engine.
    fn count_events(&mut self, metrics: &Metrics, engine: &Engine, events: &[Event]) {
        let mut granted: Vec<(&str, bool)> = Vec::new();
        for event in events {
            match event {
                Event::JobAccepted {
                    at,
                    spec,
                    cost,
                    deferred_until,
                    ..
                } => {
                    let outcome = if deferred_until.is_some() {
                        "deferred"
                    } else {
                        "accepted"
                    };
                    metrics
                        .admitted_work
                        .get_or_create(&ClassOutcomeLabels {
                            class: class_label(engine, spec.class.as_deref()),
                            outcome,
                        })
                        .inc_by(ws(*cost));
                    let _ = at;
                }
                Event::LeaseGranted {
                    job,
                    placements,
                    estimate,
                    borrowed,
                    ..
                } => {
                    granted.push((job, *borrowed));
                    let class = self.class_of(engine, job);
                    metrics
                        .leases
                        .get_or_create(&LeaseLabels {
                            class: class.clone(),
                            borrowed: if *borrowed { "true" } else { "false" },
                        })
                        .inc();
                    let workers: Vec<String> =
                        placements.iter().map(|p| p.worker.clone()).collect();
                    for w in &workers {
                        if let Some(seen) = self.workers.get_mut(w)
                            && seen.jobs.len() < 10_000
                        {
                            seen.jobs.push(job.clone());
                        }
                    }
                    if self.attempts.len() < MAX_TRACKED_ATTEMPTS || self.attempts.contains_key(job)
                    {
                        self.attempts.insert(
                            job.clone(),
                            Attempt {
                                class,
                                estimate_s: estimate.as_secs_f64(),
                                workers,
                                stop_requested: None,
                            },
                        );
                    }
                }
                Event::StopRequested {
                    at, job, reason, ..
                } => {
                    if *reason == StopReason::Preempt {
                        let class = self.class_of(engine, job);
                        metrics
                            .preemptions
                            .get_or_create(&ClassLabels { class })
                            .inc();
                    }
                    if let Some(a) = self.attempts.get_mut(job) {
                        a.stop_requested = Some(*at);
                    }
                }
                Event::AttemptEnded {
                    at,
                    job,
                    end,
                    usage,
                    progress,
                    after,
                    ..
                } => {
                    let attempt = self.attempts.remove(job);
                    if let Some(a) = &attempt {
                        for w in &a.workers {
                            if let Some(seen) = self.workers.get_mut(w) {
                                seen.jobs.retain(|j| j != job);
                            }
                        }
                        if let Some(requested) = a.stop_requested {
                            metrics
                                .stop_seconds
                                .observe(at.since(requested).as_secs_f64());
                        }
                    }
                    let class = attempt
                        .as_ref()
                        .map(|a| a.class.clone())
                        .unwrap_or_else(|| self.class_of(engine, job));
                    match end {
                        AttemptEnd::Succeeded => {
                            if let Some(a) = &attempt
                                && a.estimate_s > 0.0
                            {
                                metrics
                                    .estimate_ratio
                                    .get_or_create(&ClassLabels {
                                        class: class.clone(),
                                    })
                                    .observe(usage.as_secs_f64() / a.estimate_s);
                            }
                        }
                        AttemptEnd::Expired => {
                            metrics
                                .lease_expiries
                                .get_or_create(&ClassLabels {
                                    class: class.clone(),
                                })
                                .inc();
                        }
                        AttemptEnd::Preempted => {
                            let saved = progress.map(|p| p.as_secs_f64()).unwrap_or(0.0);
                            let lost = (usage.as_secs_f64() - saved).max(0.0);
                            metrics.preempted_lost_work.inc_by(lost);
                        }
                        AttemptEnd::Failed { .. } | AttemptEnd::Canceled => {}
                    }
                    self.interval(*at).finished += 1;
                    if let AfterAttempt::Done(state) = after {
                        metrics
                            .ended
                            .get_or_create(&EndedLabels {
                                class,
                                state: state.as_str(),
                            })
                            .inc();
                    }
                }
                Event::JobCanceled { job, .. } => {
                    let class = self.class_of(engine, job);
                    metrics
                        .ended
                        .get_or_create(&EndedLabels {
                            class,
                            state: "canceled",
                        })
                        .inc();
                }
                Event::JobExpired { at, job } => {
                    let status = engine.status(job);
                    let class = self.class_of(engine, job);
                    metrics
                        .ended
                        .get_or_create(&EndedLabels {
                            class: class.clone(),
                            state: "expired",
                        })
                        .inc();
                    if let Some(s) = status {
                        metrics
                            .expired_work
                            .get_or_create(&ClassLabels { class })
                            .inc_by(s.estimate.as_secs_f64());
                    }
                    self.interval(*at).expired += 1;
                }
                Event::PolicyPublished { .. }
                | Event::JobEligible { .. }
                | Event::JobDowngraded { .. }
                | Event::LeaseExtended { .. } => {}
            }
        }
        self.take_decisions(engine, &granted);
    }

    /// The class label of job `id` (from the engine, which remembers finished jobs too).
    fn class_of(&self, engine: &Engine, id: &str) -> String {
        match engine.status(id) {
            Some(s) => class_label(engine, Some(&s.class)),
            None => "unknown".to_string(),
        }
    }

    /// Copies the decision records of this turn's leases from the engine's ring: one record
    /// per `LeaseGranted`, in the same order.
    fn take_decisions(&mut self, engine: &Engine, granted: &[(&str, bool)]) {
        if granted.is_empty() {
            return;
        }
        let records = engine.decisions(granted.len().min(DECISION_RING));
        let skip = granted.len() - records.len();
        let policy = engine.policy_name();
        for (record, (job, borrowed)) in records.into_iter().zip(granted[skip..].iter()) {
            let borrowed = *borrowed && record.job == *job;
            let reason = decision_reason(&record, policy, borrowed);
            if self.decisions.len() >= DECISION_RING {
                self.decisions.pop_front();
            }
            self.decisions.push_back(Decision {
                seq: self.next_seq,
                record,
                borrowed,
                reason,
            });
            self.next_seq += 1;
        }
    }

    /// Answers a query; the answer is sent once the turn is durable.
    pub fn answer(
        &mut self,
        metrics: &Metrics,
        engine: &mut Engine,
        now: Time,
        query: Query,
    ) -> Deferred {
        match query {
            Query::Explain { job, scope, reply } => {
                let answer = self.explain(engine, &job, scope.as_deref());
                deferred(reply, answer)
            }
            Query::Tenant { name, reply } => {
                let answer = tenant_reply(engine, &name);
                deferred(reply, answer)
            }
            Query::Decisions {
                query,
                scope,
                reply,
            } => {
                let answer = self.decisions(&query, scope.as_deref());
                deferred(reply, answer)
            }
            Query::Overview { reply } => {
                let answer = self.observation(metrics, engine, now);
                deferred(reply, answer)
            }
        }
    }

    fn explain(&self, engine: &mut Engine, id: &str, scope: Option<&str>) -> Option<ExplainReply> {
        let status = engine.status(id)?;
        if let Some(scope) = scope
            && !in_scope(scope, &status.tenant)
        {
            return None;
        }
        let explanation = engine.explain(id)?;
        let visible = |name: &str| scope.is_none_or(|s| in_scope(s, name));
        // The engine gives one reason per group of workers that could run the job; groups of
        // one pool often say the same thing.
        let mut reasons: Vec<WaitReasonBody> = Vec::new();
        for r in &explanation.reasons {
            let body = wait_reason(r, &visible);
            if !reasons.contains(&body) {
                reasons.push(body);
            }
        }
        let state = status.state.as_str().to_string();
        let summary = if let Some(ended) = &explanation.ended {
            if ended == &state {
                format!("it ended: {state}")
            } else {
                format!("it ended ({state}): {ended}")
            }
        } else if !explanation.workers.is_empty() {
            format!("it is running on {}", explanation.workers.join(", "))
        } else if let Some(first) = reasons.first() {
            if reasons.len() == 1 {
                format!("it waits: {}", first.message)
            } else {
                let all: Vec<&str> = reasons.iter().map(|r| r.message.as_str()).collect();
                format!("it waits: {}", all.join("; "))
            }
        } else {
            format!("it is {state}")
        };
        let mut decisions: Vec<DecisionBody> = self
            .decisions
            .iter()
            .rev()
            .filter(|d| d.record.job == id)
            .take(10)
            .map(|d| decision_body(d, &visible))
            .collect();
        decisions.reverse();
        Some(ExplainReply {
            job_id: id.to_string(),
            tenant: status.tenant,
            class: status.class,
            state,
            summary,
            reasons,
            workers: explanation.workers,
            ended: explanation.ended,
            balance_unit: engine.balance_unit().to_string(),
            policy_version: engine.policy_version(),
            decisions,
        })
    }

    fn decisions(&self, query: &DecisionQuery, scope: Option<&str>) -> DecisionsReply {
        let visible = |name: &str| scope.is_none_or(|s| in_scope(s, name));
        let limit = query.limit.clamp(1, MAX_DECISIONS_PAGE);
        let matching = self.decisions.iter().filter(|d| {
            query.job.as_deref().is_none_or(|j| d.record.job == j)
                && query.since.is_none_or(|t| d.record.at >= t)
                && query.after.is_none_or(|s| d.seq > s)
                && visible(&d.record.tenant)
        });
        let paging = query.since.is_some() || query.after.is_some();
        let (page, next_after): (Vec<&Decision>, Option<u64>) = if paging {
            // Forward from the cursor: the first `limit`, and where to go on.
            let mut page: Vec<&Decision> = matching.take(limit + 1).collect();
            let more = page.len() > limit;
            page.truncate(limit);
            let next = more.then(|| page.last().map(|d| d.seq)).flatten();
            (page, next)
        } else {
            // No cursor: the latest `limit`.
            let all: Vec<&Decision> = matching.collect();
            let skip = all.len().saturating_sub(limit);
            (all[skip..].to_vec(), None)
        };
        DecisionsReply {
            decisions: page.iter().map(|d| decision_body(d, &visible)).collect(),
            next_after,
            oldest_seq: self
                .decisions
                .front()
                .map(|d| d.seq)
                .unwrap_or(self.next_seq),
        }
    }

    /// The latest observation if it is recent enough, else a new one. Paced: at most one per
    /// [`MIN_OBSERVE_INTERVAL`], and no sooner than 20 times the last one's cost after it.
    pub fn observation(
        &mut self,
        metrics: &Metrics,
        engine: &mut Engine,
        now: Time,
    ) -> Arc<Observation> {
        if let Some((cost, latest)) = &self.latest
            && latest.computed_at.elapsed() < MIN_OBSERVE_INTERVAL.max(cost.saturating_mul(20))
        {
            return latest.clone();
        }
        let started = Instant::now();
        self.generation += 1;
        let view = self.observe(engine, now);
        let cost = started.elapsed();
        let observation = Arc::new(Observation {
            computed_at: Instant::now(),
            view: OverviewReply {
                observe_ms: cost.as_secs_f64() * 1e3,
                ..view
            },
            stats: engine.stats().clone(),
        });
        metrics.observe_seconds.observe(cost.as_secs_f64());
        metrics.set_observation(observation.clone());
        self.latest = Some((cost, observation.clone()));
        observation
    }

    fn observe(&mut self, engine: &mut Engine, now: Time) -> OverviewReply {
        let (tenants, tenants_with_jobs, complete) = examine_tenants(engine);
        let classes = class_views(engine, &tenants, complete);
        let pools = pool_views(engine);
        let tenants_over = tenants.iter().filter(|t| t.over > 0.0).count() as u64;
        let share_above_entitlement_sum = tenants.iter().map(|t| t.over.max(0.0)).sum();
        // Workers: heard from recently, or holding leases.
        self.workers
            .retain(|_, w| !w.jobs.is_empty() || w.last_poll.elapsed() < WORKER_SHOWN_FOR);
        let workers_total = self.workers.len() as u64;
        let workers = self
            .workers
            .iter()
            .take(MAX_WORKERS_SHOWN)
            .map(|(name, w)| WorkerView {
                name: name.clone(),
                pool: w.pool.clone(),
                capacity: w.capacity.clone(),
                leases: w.jobs.len() as u64,
                jobs: w.jobs.iter().take(8).cloned().collect(),
                last_poll_ms: w.last_poll.elapsed().as_millis() as u64,
            })
            .collect();
        let decisions = self
            .decisions
            .iter()
            .rev()
            .take(OVERVIEW_DECISIONS)
            .map(|d| decision_body(d, &|_| true))
            .collect();
        let admissions = self.timeline_view(now);
        let stats = engine.stats();
        OverviewReply {
            generation: self.generation,
            at: instant(now),
            observe_ms: 0.0,
            policy_version: engine.policy_version(),
            policy: engine.policy_name().as_str().to_string(),
            balance_unit: engine.balance_unit().to_string(),
            live_jobs: engine.live_jobs() as u64,
            queued_jobs: engine.queued_jobs(),
            complete,
            tenants_with_jobs: tenants_with_jobs as u64,
            tenants_over,
            share_above_entitlement_sum,
            tenants,
            classes,
            pools,
            workers,
            workers_total,
            decisions,
            admissions,
            engine: EngineCounters {
                dispatches: stats.dispatches,
                preemptions: stats.preemptions,
                lease_expiries: stats.lease_expiries,
                stale_epochs: stats.stale_epochs,
                expired: stats.expired,
                passes: stats.passes,
            },
        }
    }

    /// The last [`TIMELINE_INTERVALS`] intervals up to `now`, empty ones included.
    fn timeline_view(&self, now: Time) -> Vec<IntervalView> {
        let step = TIMELINE_INTERVAL.as_nanos() as u64;
        let last = now.0 / step;
        let first = last.saturating_sub(TIMELINE_INTERVALS as u64 - 1);
        (first..=last)
            .map(|index| {
                let i = self
                    .timeline
                    .iter()
                    .find(|i| i.index == index)
                    .copied()
                    .unwrap_or_default();
                IntervalView {
                    start: instant(Time(index.saturating_mul(step))),
                    accepted: i.accepted,
                    deferred: i.deferred,
                    rejected_retryable: i.rejected_retryable,
                    rejected_final: i.rejected_final,
                    expired: i.expired,
                    finished: i.finished,
                }
            })
            .collect()
    }
}

/// A wait reason on the wire; names of tenants the caller may not see are replaced.
fn wait_reason(reason: &WaitReason, visible: &dyn Fn(&str) -> bool) -> WaitReasonBody {
    let shown = match reason {
        WaitReason::BehindTenants { tenants } => WaitReason::BehindTenants {
            tenants: tenants
                .iter()
                .map(|(t, b)| {
                    let t = if visible(t) {
                        t.clone()
                    } else {
                        ANOTHER_TENANT.into()
                    };
                    (t, *b)
                })
                .collect(),
        },
        other => other.clone(),
    };
    let mut body = WaitReasonBody {
        message: shown.describe(),
        ..WaitReasonBody::default()
    };
    match shown {
        WaitReason::Deferred { until } => {
            body.code = "deferred".into();
            body.until = Some(instant(until));
            body.message = format!("deferred until {}", instant(until));
        }
        WaitReason::NoWorkers => body.code = "no_workers".into(),
        WaitReason::Unplaceable { mismatches } => {
            body.code = "unplaceable".into();
            body.mismatches = mismatches;
        }
        WaitReason::BehindInQueue { ahead, head } => {
            body.code = "behind_in_queue".into();
            body.ahead = Some(ahead as u64);
            body.head = Some(head);
        }
        WaitReason::TenantAtLimit { tenant } => {
            body.code = "tenant_at_limit".into();
            body.tenant = Some(tenant);
        }
        WaitReason::ReserveHeld { pool } => {
            body.code = "reserve_held".into();
            body.pool = Some(pool);
        }
        WaitReason::WaitingForCapacity { pool } => {
            body.code = "waiting_for_capacity".into();
            body.pool = Some(pool);
        }
        WaitReason::BehindTenants { tenants } => {
            body.code = "behind_tenants".into();
            body.tenants_ahead = tenants
                .into_iter()
                .map(|(tenant, balance)| BalanceBody {
                    tenant,
                    balance,
                    within_guarantee: None,
                })
                .collect();
        }
    }
    body
}

/// Why a decision chose its job, in a sentence.
fn decision_reason(record: &DecisionRecord, policy: PolicyName, borrowed: bool) -> String {
    let mut out = match policy {
        PolicyName::Fair
        | PolicyName::Drf
        | PolicyName::RoundRobin
        | PolicyName::Drr
        | PolicyName::Wfq => {
            let mine = record.candidates.iter().find(|c| c.queue == record.tenant);
            let others: Vec<String> = record
                .candidates
                .iter()
                .filter(|c| c.queue != record.tenant)
                .map(|c| format!("{} ({:.3})", c.queue, c.balance))
                .collect();
            let head = match mine {
                Some(c) if c.within_guarantee => {
                    format!("{} was within its guarantee", record.tenant)
                }
                Some(c) => format!(
                    "{} had the smallest balance under {} ({:.3})",
                    record.tenant,
                    policy.as_str(),
                    c.balance
                ),
                None => format!("{} came first under {}", record.tenant, policy.as_str()),
            };
            if others.is_empty() {
                format!("{head}; no other tenant had work of this shape waiting")
            } else {
                format!("{head}; next: {}", others.join(", "))
            }
        }
        _ => format!(
            "{}'s job was first in the {} order",
            record.tenant,
            policy.as_str()
        ),
    };
    if record.backfilled {
        out.push_str("; started as backfill behind a reservation");
    }
    if borrowed {
        out.push_str("; borrowed capacity reserved for a higher band");
    }
    out
}

fn decision_body(d: &Decision, visible: &dyn Fn(&str) -> bool) -> DecisionBody {
    let r = &d.record;
    let hide = r.candidates.iter().any(|c| !visible(&c.queue));
    DecisionBody {
        seq: d.seq,
        at: instant(r.at),
        policy_version: r.policy_version,
        job_id: r.job.clone(),
        tenant: r.tenant.clone(),
        class: r.class.clone(),
        epoch: r.epoch,
        estimate_ms: r.estimate.as_millis(),
        workers: r.workers.clone(),
        candidates: r
            .candidates
            .iter()
            .map(|c| BalanceBody {
                tenant: if visible(&c.queue) {
                    c.queue.clone()
                } else {
                    ANOTHER_TENANT.into()
                },
                balance: c.balance,
                within_guarantee: Some(c.within_guarantee),
            })
            .collect(),
        backfilled: r.backfilled,
        borrowed: d.borrowed,
        // The sentence names the other candidates: rebuild it without them when hidden.
        reason: if hide {
            let mut reason = format!("{} was chosen among the leading queues", r.tenant);
            if r.backfilled {
                reason.push_str("; started as backfill behind a reservation");
            }
            if d.borrowed {
                reason.push_str("; borrowed capacity reserved for a higher band");
            }
            reason
        } else {
            d.reason.clone()
        },
    }
}

fn ledger_body(l: &fairway_core::Ledger) -> LedgerBody {
    LedgerBody {
        charged_ws: ws(l.charged),
        in_flight_ws: ws(l.in_flight),
        failed_ws: ws(l.failed),
        preempted_ws: ws(l.preempted),
        canceled_ws: ws(l.canceled),
        retried_ws: ws(l.retried),
        debt_ws: ws(l.debt),
        attempts: l.attempts,
    }
}

fn backlog_body(backlog: &BTreeMap<String, (u64, f64)>) -> BTreeMap<String, BacklogBody> {
    backlog
        .iter()
        .map(|(class, (queued, oldest_s))| {
            (
                class.clone(),
                BacklogBody {
                    queued: *queued,
                    oldest_age_ms: (oldest_s * 1e3).round() as u64,
                },
            )
        })
        .collect()
}

/// `GET /v1/tenants/{id}` from [`Engine::tenant_report`].
fn tenant_reply(engine: &Engine, name: &str) -> Option<TenantReply> {
    let r = engine.tenant_report(name)?;
    Some(TenantReply {
        tenant: r.name,
        declared: r.declared,
        weight: r.weight,
        guarantee: r.guarantee,
        limit: r.limit,
        usage: r.usage,
        dominant_share: r.dominant_share,
        entitlement: r.entitlement,
        balance: r.balance,
        balance_unit: engine.balance_unit().to_string(),
        backlog: backlog_body(&r.backlog),
        running: r.running,
        outstanding_ws: r.outstanding_ws,
        ledger: ledger_body(&r.ledger),
        accepted: r.admitted[0],
        deferred: r.admitted[1],
    })
}

/// The dominant share of `usage` in `capacity`.
fn dominant_share(usage: &BTreeMap<String, f64>, capacity: &BTreeMap<String, f64>) -> f64 {
    usage
        .iter()
        .filter_map(|(r, u)| capacity.get(r).filter(|c| **c > 0.0).map(|c| u / c))
        .fold(0.0, f64::max)
}

/// Examines the tenants with jobs through the engine's reports, within the budget: all of
/// them when they fit (then per-class figures are exact), otherwise those holding the most
/// capacity per unit of weight and those with the most jobs waiting. Returns them furthest
/// above their entitlement first, how many tenants have jobs, and whether all were examined.
fn examine_tenants(engine: &Engine) -> (Vec<TenantView>, usize, bool) {
    let snapshots = engine.tenant_snapshots();
    let mut capacity: BTreeMap<String, f64> = BTreeMap::new();
    for pool in engine.pool_usage().values() {
        for (r, c) in &pool.capacity {
            *capacity.entry(r.clone()).or_default() += c;
        }
    }
    let weight = |name: &str| {
        engine
            .policy()
            .tenant(name)
            .map(|t| t.weight.as_f64())
            .unwrap_or(1.0)
    };
    // Each report scans the job table once.
    let per_report = (engine.live_jobs() as u64).max(1);
    let budget = ((OBSERVE_VISIT_BUDGET / per_report) as usize).clamp(1, MAX_TENANTS_EXAMINED);
    let complete = snapshots.len() <= budget;
    let chosen: Vec<String> = if complete {
        snapshots.iter().map(|s| s.name.clone()).collect()
    } else {
        let mut by_share: Vec<(f64, &str)> = snapshots
            .iter()
            .map(|s| {
                (
                    dominant_share(&s.usage, &capacity) / weight(&s.name),
                    &*s.name,
                )
            })
            .collect();
        by_share.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
        let mut by_queue: Vec<(u64, &str)> =
            snapshots.iter().map(|s| (s.queued, &*s.name)).collect();
        by_queue.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
        let mut chosen: Vec<String> = Vec::new();
        let half = budget.div_ceil(2);
        for (_, name) in by_share.iter().take(half) {
            chosen.push(name.to_string());
        }
        for (_, name) in by_queue {
            if chosen.len() >= budget {
                break;
            }
            if !chosen.iter().any(|c| c == name) {
                chosen.push(name.to_string());
            }
        }
        chosen
    };
    let mut reports: BTreeMap<String, fairway_core::TenantReport> = BTreeMap::new();
    for name in &chosen {
        // A nested tenant's entitlement is a fraction of its parent's: report the ancestors.
        let mut path: Vec<&str> = Vec::new();
        for (i, c) in name.char_indices() {
            if c == '/' {
                path.push(&name[..i]);
            }
        }
        path.push(name);
        for p in path {
            if !reports.contains_key(p)
                && let Some(r) = engine.tenant_report(p)
            {
                reports.insert(p.to_string(), r);
            }
        }
    }
    let global_entitlement = |name: &str| -> f64 {
        let mut e = 1.0;
        let mut end = 0;
        loop {
            let next = name[end..].find('/').map(|i| end + i);
            let prefix = &name[..next.unwrap_or(name.len())];
            e *= reports.get(prefix).map(|r| r.entitlement).unwrap_or(1.0);
            match next {
                Some(i) => end = i + 1,
                None => return e,
            }
        }
    };
    let mut views: Vec<TenantView> = chosen
        .iter()
        .filter_map(|name| reports.get(name))
        .map(|r| {
            let entitlement = global_entitlement(&r.name);
            let queued: u64 = r.backlog.values().map(|(q, _)| q).sum();
            let oldest = r
                .backlog
                .values()
                .map(|(_, age)| *age)
                .fold(None, |m: Option<f64>, a| Some(m.map_or(a, |m| m.max(a))));
            TenantView {
                name: r.name.clone(),
                weight: r.weight,
                dominant_share: r.dominant_share,
                entitlement,
                over: r.dominant_share - entitlement,
                queued,
                running: r.running,
                oldest_age_ms: oldest.map(|s| (s * 1e3).round() as u64),
                backlog: backlog_body(&r.backlog),
                balance: r.balance,
                debt_ws: ws(r.ledger.debt),
                charged_ws: ws(r.ledger.charged),
            }
        })
        .collect();
    views.sort_by(|a, b| {
        b.over
            .total_cmp(&a.over)
            .then(b.queued.cmp(&a.queued))
            .then(a.name.cmp(&b.name))
    });
    (views, snapshots.len(), complete)
}

/// The classes, with their backlog from the examined tenants (when all were examined), their
/// predicted start and their books.
fn class_views(engine: &mut Engine, tenants: &[TenantView], complete: bool) -> Vec<ClassView> {
    let mut backlog: BTreeMap<&str, (u64, f64)> = BTreeMap::new();
    for t in tenants {
        for (class, b) in &t.backlog {
            let e = backlog.entry(class).or_insert((0, 0.0));
            e.0 += b.queued;
            e.1 = e.1.max(b.oldest_age_ms as f64 / 1e3);
        }
    }
    // `predict` prices a default-demand job; only ask once the default resource exists, so
    // that asking changes nothing in the engine.
    let can_predict = engine.resources().get("cpu").is_some();
    let classes = engine.policy().classes.clone();
    classes
        .iter()
        .map(|c| {
            let (ledger, misses) = engine.class_ledger(&c.name).unwrap_or_default();
            let predicted = if can_predict {
                let mut spec = JobSpec::new("fairway-observe", "fairway-observe");
                spec.class = Some(c.name.clone());
                engine
                    .predict(&spec)
                    .filter(|p| p.wait != fairway_core::Dur::MAX)
                    .map(|p| p.wait.as_secs_f64())
            } else {
                None
            };
            let b = backlog.get(c.name.as_str()).copied();
            ClassView {
                name: c.name.clone(),
                priority: c.priority,
                reserve: c.reserve_ppb as f64 / 1e9,
                queued: complete.then(|| b.map(|b| b.0).unwrap_or(0)),
                oldest_age_s: if complete { b.map(|b| b.1) } else { None },
                predicted_start_s: predicted,
                deadline_misses: misses,
                charged_ws: ws(ledger.charged),
                debt_ws: ws(ledger.debt),
            }
        })
        .collect()
}

/// The pools with live workers, their use per class and the classes' reserves there.
fn pool_views(engine: &Engine) -> Vec<PoolView> {
    let declared: Vec<&str> = engine
        .policy()
        .pools
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    let reserved_classes: Vec<(String, f64)> = engine
        .policy()
        .classes
        .iter()
        .filter(|c| c.reserve_ppb > 0)
        .map(|c| (c.name.clone(), c.reserve_ppb as f64 / 1e9))
        .collect();
    engine
        .pool_usage()
        .into_iter()
        .filter(|(_, p)| p.workers > 0)
        .take(crate::observe::MAX_WORKERS)
        .map(|(name, p)| {
            let class_used = engine.class_usage(&name);
            let reserves = reserved_classes
                .iter()
                .map(|(class, fraction)| {
                    let reserved: BTreeMap<String, f64> = p
                        .capacity
                        .iter()
                        .map(|(r, c)| (r.clone(), c * fraction))
                        .collect();
                    let used = class_used.get(class).cloned().unwrap_or_default();
                    let occupancy = dominant_share(&used, &reserved);
                    ReserveView {
                        class: class.clone(),
                        reserved,
                        used,
                        occupancy,
                    }
                })
                .collect();
            PoolView {
                label: if declared.contains(&name.as_str()) {
                    name.clone()
                } else {
                    "undeclared".to_string()
                },
                name,
                workers: p.workers,
                capacity: p.capacity,
                used: p.used,
                class_used,
                reserves,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairway_core::{Dur, EngineConfig, Outcome, Policy};

    fn engine() -> Engine {
        let policy = Policy::from_text(fairway_core::policy::BUILT_IN_POLICY).unwrap();
        Engine::new(Time::from_millis(1_000), policy, EngineConfig::default())
    }

    fn offer(name: &str) -> WorkerOffer {
        WorkerOffer {
            worker: name.into(),
            pool: "default".into(),
            capacity: BTreeMap::from([("cpu".to_string(), 1.0)]),
            labels: BTreeMap::new(),
            max_jobs: 1,
        }
    }

    #[test]
    fn scope_covers_a_tenant_and_its_descendants_only() {
        assert!(in_scope("acme", "acme"));
        assert!(in_scope("acme", "acme/etl"));
        assert!(!in_scope("acme", "acme2"));
        assert!(!in_scope("acme/etl", "acme"));
    }

    /// The decision ring keeps the last `DECISION_RING` records with increasing `seq`, each
    /// matched to its lease, and pages forward from a cursor without gaps or repeats.
    #[test]
    fn decisions_are_ringed_numbered_and_paged() {
        let metrics = Metrics::new();
        let mut engine = engine();
        let mut observer = Observer::new();
        let mut now = Time::from_millis(2_000);
        let jobs = DECISION_RING + 50;
        for i in 0..jobs {
            let mut spec = JobSpec::new(format!("j{i}"), if i % 2 == 0 { "a" } else { "b" });
            spec.estimate = Some(Dur::from_millis(10));
            assert!(engine.submit(now, spec).is_accepted());
        }
        let _ = engine.drain_events();
        let mut started = 0;
        while started < jobs {
            engine.worker_ready(now, &offer("w1")).unwrap();
            let leases = engine.schedule(now);
            assert_eq!(leases.len(), 1);
            let events = engine.drain_events();
            observer.committed(&metrics, &engine, 1, &events, Duration::ZERO);
            now = now.plus(Dur::from_millis(1));
            let l = &leases[0];
            engine
                .finish(now, &l.job, l.epoch, Outcome::Succeeded, None, None)
                .unwrap();
            let events = engine.drain_events();
            observer.committed(&metrics, &engine, 1, &events, Duration::ZERO);
            started += 1;
        }
        assert_eq!(observer.decisions.len(), DECISION_RING);
        assert_eq!(observer.decisions.front().unwrap().seq, 51);
        assert_eq!(
            observer.decisions.back().unwrap().record.job,
            format!("j{}", jobs - 1)
        );
        let latest = observer.decisions(
            &DecisionQuery {
                limit: 5,
                ..DecisionQuery::default()
            },
            None,
        );
        assert_eq!(latest.decisions.len(), 5);
        assert_eq!(latest.decisions[4].seq, jobs as u64);
        assert_eq!(latest.oldest_seq, 51);
        let mut after = Some(40);
        let mut seen = Vec::new();
        while let Some(a) = after {
            let page = observer.decisions(
                &DecisionQuery {
                    after: Some(a),
                    limit: 1000,
                    ..DecisionQuery::default()
                },
                None,
            );
            seen.extend(page.decisions.iter().map(|d| d.seq));
            after = page.next_after;
        }
        assert_eq!(seen, (51..=jobs as u64).collect::<Vec<_>>());
        // A tenant sees its own decisions only, and never another tenant's name.
        let mine = observer.decisions(
            &DecisionQuery {
                limit: 1000,
                ..DecisionQuery::default()
            },
            Some("a"),
        );
        assert!(mine.decisions.iter().all(|d| d.tenant == "a"));
        assert!(
            mine.decisions
                .iter()
                .flat_map(|d| &d.candidates)
                .all(|c| c.tenant != "b"),
        );
        let text = metrics.encode_prometheus();
        assert!(
            text.contains(&format!(
                "fairway_leases_granted_total{{class=\"default\",borrowed=\"false\"}} {jobs}"
            )),
            "{text}"
        );
    }

    /// Admissions are counted by class, outcome and reason; a class the policy does not
    /// declare is `unknown`, so user input cannot create label values.
    #[test]
    fn admission_labels_are_bounded_by_the_policy() {
        let metrics = Metrics::new();
        let mut engine = engine();
        let mut observer = Observer::new();
        let now = Time::from_millis(3_600_000);
        for class in ["default", "nope-1", "nope-2"] {
            let mut spec = JobSpec::new(format!("j-{class}"), "a");
            spec.class = Some(class.to_string());
            let admission = engine.submit(now, spec);
            observer.admitted(&metrics, &engine, now, Some(class), &admission);
        }
        let text = metrics.encode_prometheus();
        assert!(text.contains(
            "fairway_admissions_total{class=\"default\",outcome=\"accepted\",reason=\"none\"} 1"
        ));
        assert!(text.contains(
            "fairway_admissions_total{class=\"unknown\",outcome=\"rejected_final\",reason=\"unknown_class\"} 2"
        ), "{text}");
        assert!(!text.contains("nope"));
        let view = observer.timeline_view(now);
        assert_eq!(view.len(), TIMELINE_INTERVALS);
        let last = view.last().unwrap();
        assert_eq!((last.accepted, last.rejected_final), (1, 2));
    }

    /// Observations are paced: a second request within the interval gets the same one.
    #[test]
    fn observations_are_paced() {
        let metrics = Metrics::new();
        let mut engine = engine();
        let mut observer = Observer::new();
        let now = Time::from_millis(2_000);
        let first = observer.observation(&metrics, &mut engine, now);
        let second = observer.observation(&metrics, &mut engine, now);
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(first.view.generation, 1);
        assert!(first.view.complete);
    }
}
