//! What the writer sees, kept for operators: it counts the engine's events and the commands'
//! outcomes into [`Metrics`], keeps admission outcomes per interval, and answers the
//! observability queries ([`Query`]): explanations, tenant reports, decision records and the
//! overview.
//!
//! Everything here runs in the writer thread, which owns the engine, and everything is
//! bounded: [`MAX_TRACKED_ATTEMPTS`] running attempts, [`TIMELINE_INTERVALS`] intervals,
//! [`MAX_TENANTS_SHOWN`] tenants and [`MAX_WORKERS_SHOWN`] workers in an overview. An
//! observation is one [`Engine::census`] (one pass over the live jobs, each tenant and each
//! pool once) and one [`Engine::workers`], made at most once per [`MIN_OBSERVE_INTERVAL`] (and
//! no sooner than 20 times its own cost after the last one), so that dashboards and scrapers
//! cannot take the writer's time from the work.
//!
//! **Nothing here decides, and nothing here keeps what the engine keeps.** Classes, tenants,
//! pools, reserves and workers come from the census; decision records come from the engine's
//! ring, numbered by its durable dispatch count, so that readers page across restarts; a job's
//! explanation and a tenant's report are the engine's own ([`Engine::explain`],
//! [`Engine::tenant_report`]). What the engine does not expose is left out rather than
//! estimated.

use crate::metrics::{
    AdmissionLabels, CallLabels, ClassLabels, ClassOutcomeLabels, EndedLabels, LeaseLabels,
    Metrics, RefusalLabels,
};
use crate::wire::instant;
use crate::wire::observe::*;
use crate::writer::{Reply, Unavailable};
use fairway_core::event::{AfterAttempt, AttemptEnd, StopReason};
use fairway_core::hash::FxHashMap;
use fairway_core::{
    Admission, Census, DecisionRecord, Engine, EngineStats, Event, JobSpec, LeaseError, PolicyName,
    QueuedWork, Time, WaitReason,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// Decision records the engine keeps (see `engine_config`): `GET /v1/decisions` pages them.
pub const DECISION_RING: usize = 4096;
/// Running attempts followed for estimate errors and stop times; beyond, new ones are not.
pub const MAX_TRACKED_ATTEMPTS: usize = 1_000_000;
/// Admission intervals kept, of [`TIMELINE_INTERVAL`] each.
pub const TIMELINE_INTERVALS: usize = 60;
/// The length of one admission interval.
pub const TIMELINE_INTERVAL: Duration = Duration::from_secs(10);
/// Tenants listed in an overview, at most (the furthest above their entitlement; the rest
/// are counted).
pub const MAX_TENANTS_SHOWN: usize = 200;
/// Observations are made at most this often.
pub const MIN_OBSERVE_INTERVAL: Duration = Duration::from_secs(1);
/// Most decision records one `GET /v1/decisions` returns.
pub const MAX_DECISIONS_PAGE: usize = 1000;
/// Rows in the overview's worker list, at most (the rest are counted).
pub const MAX_WORKERS_SHOWN: usize = 200;
/// Pools in an overview, at most: pools are named by workers, so bound them too.
const MAX_POOLS_SHOWN: usize = 10_000;
/// Jobs named per worker in an overview.
const JOBS_SHOWN_PER_WORKER: usize = 8;
/// Decisions in the overview.
const OVERVIEW_DECISIONS: usize = 20;
/// Decisions in an explanation.
const EXPLAIN_DECISIONS: usize = 10;
/// Records copied from the engine's ring at a time while filtering decisions.
const DECISION_SCAN_CHUNK: usize = 256;
/// Policy versions remembered for the wording of decision reasons.
const POLICY_VERSIONS_KEPT: usize = 64;

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

/// A running attempt, followed from its lease to its end.
#[derive(Clone, Debug)]
struct Attempt {
    /// Its class's series (an index into [`Classes::series`]).
    class: usize,
    estimate_s: f64,
    stop_requested: Option<Time>,
}

/// The series of one class label, resolved once, so that counting an event is an atomic add
/// rather than a hash of its labels and a label `String`.
struct ClassSeries {
    name: String,
    /// Admissions accepted and deferred (reason `none`); refusals are rare and looked up.
    admissions: [Counter; 2],
    /// Work admitted: accepted, deferred.
    admitted_work: [Counter<f64, AtomicU64>; 2],
    /// Leases: not borrowed, borrowed.
    leases: [Counter; 2],
    preemptions: Counter,
    lease_expiries: Counter,
    estimate_ratio: Histogram,
    expired_work: Counter<f64, AtomicU64>,
    /// Ended jobs by final state, resolved as each first occurs.
    ended: Vec<(&'static str, Counter)>,
}

impl ClassSeries {
    fn new(metrics: &Metrics, name: &str) -> ClassSeries {
        let class = || ClassLabels {
            class: name.to_string(),
        };
        let admission = |outcome| AdmissionLabels {
            class: name.to_string(),
            outcome,
            reason: "none",
        };
        let work = |outcome| ClassOutcomeLabels {
            class: name.to_string(),
            outcome,
        };
        let lease = |borrowed| LeaseLabels {
            class: name.to_string(),
            borrowed,
        };
        ClassSeries {
            name: name.to_string(),
            admissions: [
                metrics
                    .admissions
                    .get_or_create_owned(&admission("accepted")),
                metrics
                    .admissions
                    .get_or_create_owned(&admission("deferred")),
            ],
            admitted_work: [
                metrics.admitted_work.get_or_create_owned(&work("accepted")),
                metrics.admitted_work.get_or_create_owned(&work("deferred")),
            ],
            leases: [
                metrics.leases.get_or_create_owned(&lease("false")),
                metrics.leases.get_or_create_owned(&lease("true")),
            ],
            preemptions: metrics.preemptions.get_or_create_owned(&class()),
            lease_expiries: metrics.lease_expiries.get_or_create_owned(&class()),
            estimate_ratio: metrics.estimate_ratio.get_or_create_owned(&class()),
            expired_work: metrics.expired_work.get_or_create_owned(&class()),
            ended: Vec::new(),
        }
    }

    /// The series of this class's jobs that ended in `state`.
    fn ended(&mut self, metrics: &Metrics, state: &'static str) -> &Counter {
        let at = match self.ended.iter().position(|(s, _)| *s == state) {
            Some(at) => at,
            None => {
                let counter = metrics.ended.get_or_create_owned(&EndedLabels {
                    class: self.name.clone(),
                    state,
                });
                self.ended.push((state, counter));
                self.ended.len() - 1
            }
        };
        &self.ended[at].1
    }
}

/// The class labels seen, each with its series: `unknown` first, then every class a policy in
/// force declared (kept when a later policy drops it, as its series are). Bounded as the
/// label values are: by what the policies declared.
struct Classes {
    /// The policy version `declared` is of.
    version: u64,
    /// The classes the policy in force declares, by name.
    declared: BTreeMap<String, usize>,
    series: Vec<ClassSeries>,
}

/// The label of a class the policy in force does not declare.
const UNKNOWN_CLASS: usize = 0;

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
    attempts: FxHashMap<String, Attempt>,
    classes: Classes,
    /// `fairway_engine_call_seconds` by call, resolved as each first occurs.
    calls: Vec<(&'static str, Histogram)>,
    timeline: VecDeque<Interval>,
    /// The ordering policy of each recent policy version, to word the reasons of the
    /// decisions it took.
    policies: BTreeMap<u64, PolicyName>,
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

impl Observer {
    /// An observer with nothing seen yet.
    pub fn new() -> Observer {
        Observer {
            attempts: FxHashMap::default(),
            classes: Classes {
                version: 0,
                declared: BTreeMap::new(),
                series: Vec::new(),
            },
            calls: Vec::new(),
            timeline: VecDeque::new(),
            policies: BTreeMap::new(),
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

    /// The series of the class label for class `name` (the default class for `None`): the
    /// class when the policy in force declares it (so label values stay bounded by the
    /// policy), else `unknown`.
    fn class_series(&mut self, metrics: &Metrics, engine: &Engine, name: Option<&str>) -> usize {
        self.sync_classes(metrics, engine);
        let name = name.unwrap_or(fairway_core::policy::DEFAULT_CLASS);
        let declared = &self.classes.declared;
        declared.get(name).copied().unwrap_or(UNKNOWN_CLASS)
    }

    /// Brings the declared classes up to the policy in force (a version number compared, on
    /// every call but the first after a publish).
    fn sync_classes(&mut self, metrics: &Metrics, engine: &Engine) {
        let classes = &mut self.classes;
        if classes.series.is_empty() || classes.version != engine.policy_version() {
            if classes.series.is_empty() {
                classes.series.push(ClassSeries::new(metrics, "unknown"));
            }
            classes.version = engine.policy_version();
            classes.declared.clear();
            for class in &engine.policy().classes {
                let at = match classes.series.iter().position(|s| s.name == class.name) {
                    Some(at) => at,
                    None => {
                        classes.series.push(ClassSeries::new(metrics, &class.name));
                        classes.series.len() - 1
                    }
                };
                classes.declared.insert(class.name.clone(), at);
            }
        }
    }

    /// The series of job `id`'s class label (from the engine, which remembers finished jobs
    /// too; `unknown` for a job it does not know).
    fn job_series(&mut self, metrics: &Metrics, engine: &Engine, id: &str) -> usize {
        match engine.job_labels(id) {
            Some((_, class)) => self.class_series(metrics, engine, Some(class)),
            None => {
                self.sync_classes(metrics, engine);
                UNKNOWN_CLASS
            }
        }
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
        let series = self.class_series(metrics, engine, class);
        match outcome {
            "accepted" => self.classes.series[series].admissions[0].inc(),
            "deferred" => self.classes.series[series].admissions[1].inc(),
            _ => metrics
                .admissions
                .get_or_create(&AdmissionLabels {
                    class: self.classes.series[series].name.clone(),
                    outcome,
                    reason,
                })
                .inc(),
        };
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

    /// Times one engine call.
    pub fn timed(&mut self, metrics: &Metrics, call: &'static str, took: Duration) {
        let at = match self.calls.iter().position(|(c, _)| *c == call) {
            Some(at) => at,
            None => {
                let series = metrics
                    .engine_call_seconds
                    .get_or_create_owned(&CallLabels { call });
                self.calls.push((call, series));
                self.calls.len() - 1
            }
        };
        self.calls[at].1.observe(took.as_secs_f64());
    }

    /// Remembers which ordering policy the version in force is, for the wording of the
    /// reasons of the decisions it takes.
    fn note_policy(&mut self, engine: &Engine) {
        self.policies
            .insert(engine.policy_version(), engine.policy_name());
        while self.policies.len() > POLICY_VERSIONS_KEPT {
            self.policies.pop_first();
        }
    }

    /// The ordering policy of version `version`, if known.
    fn policy_of(&self, engine: &Engine, version: u64) -> Option<PolicyName> {
        if version == engine.policy_version() {
            Some(engine.policy_name())
        } else {
            self.policies.get(&version).copied()
        }
    }

    /// Counts the events of a turn, as it is handed to the store (the process stops if its
    /// commit fails, so nothing counted here outlives a lost turn).
    pub fn count_events(&mut self, metrics: &Metrics, engine: &Engine, events: &[Event]) {
        self.note_policy(engine);
        for event in events {
            match event {
                Event::JobAccepted {
                    spec,
                    cost,
                    deferred_until,
                    ..
                } => {
                    let series = self.class_series(metrics, engine, spec.class.as_deref());
                    let deferred = usize::from(deferred_until.is_some());
                    self.classes.series[series].admitted_work[deferred].inc_by(ws(*cost));
                }
                Event::LeaseGranted {
                    job,
                    estimate,
                    borrowed,
                    ..
                } => {
                    let class = self.job_series(metrics, engine, job);
                    self.classes.series[class].leases[usize::from(*borrowed)].inc();
                    let attempt = Attempt {
                        class,
                        estimate_s: estimate.as_secs_f64(),
                        stop_requested: None,
                    };
                    if let Some(known) = self.attempts.get_mut(job.as_str()) {
                        *known = attempt;
                    } else if self.attempts.len() < MAX_TRACKED_ATTEMPTS {
                        self.attempts.insert(job.clone(), attempt);
                    }
                }
                Event::StopRequested {
                    at, job, reason, ..
                } => {
                    if *reason == StopReason::Preempt {
                        let class = self.job_series(metrics, engine, job);
                        self.classes.series[class].preemptions.inc();
                    }
                    if let Some(a) = self.attempts.get_mut(job.as_str()) {
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
                    let attempt = self.attempts.remove(job.as_str());
                    if let Some(requested) = attempt.as_ref().and_then(|a| a.stop_requested) {
                        metrics
                            .stop_seconds
                            .observe(at.since(requested).as_secs_f64());
                    }
                    let class = match &attempt {
                        Some(a) => a.class,
                        None => self.job_series(metrics, engine, job),
                    };
                    let series = &mut self.classes.series[class];
                    match end {
                        AttemptEnd::Succeeded => {
                            if let Some(a) = &attempt
                                && a.estimate_s > 0.0
                            {
                                series
                                    .estimate_ratio
                                    .observe(usage.as_secs_f64() / a.estimate_s);
                            }
                        }
                        AttemptEnd::Expired => {
                            series.lease_expiries.inc();
                        }
                        AttemptEnd::Preempted => {
                            let saved = progress.map(|p| p.as_secs_f64()).unwrap_or(0.0);
                            let lost = (usage.as_secs_f64() - saved).max(0.0);
                            metrics.preempted_lost_work.inc_by(lost);
                        }
                        AttemptEnd::Failed { .. } | AttemptEnd::Canceled => {}
                    }
                    if let AfterAttempt::Done(state) = after {
                        series.ended(metrics, state.as_str()).inc();
                    }
                    self.interval(*at).finished += 1;
                }
                Event::JobCanceled { job, .. } => {
                    let class = self.job_series(metrics, engine, job);
                    self.classes.series[class].ended(metrics, "canceled").inc();
                }
                Event::JobExpired { at, job } => {
                    let class = self.job_series(metrics, engine, job);
                    let series = &mut self.classes.series[class];
                    series.ended(metrics, "expired").inc();
                    if let Some(s) = engine.status(job) {
                        series.expired_work.inc_by(s.estimate.as_secs_f64());
                    }
                    self.interval(*at).expired += 1;
                }
                Event::PolicyPublished { .. }
                | Event::JobEligible { .. }
                | Event::JobDowngraded { .. }
                | Event::LeaseExtended { .. } => {}
            }
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
                let answer = self.decisions(engine, &query, scope.as_deref());
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
        let records = engine.decisions_for(id);
        let skip = records.len().saturating_sub(EXPLAIN_DECISIONS);
        let decisions: Vec<DecisionBody> = records[skip..]
            .iter()
            .map(|d| self.decision_body(engine, d, &visible))
            .collect();
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

    /// Decision records from the engine's ring, filtered. Numbered by the engine's durable
    /// dispatch count, so a cursor (`after`) stays valid across restarts; the ring itself
    /// starts empty after one. Costs at most one pass over the ring.
    fn decisions(
        &self,
        engine: &Engine,
        query: &DecisionQuery,
        scope: Option<&str>,
    ) -> DecisionsReply {
        let visible = |name: &str| scope.is_none_or(|s| in_scope(s, name));
        let limit = query.limit.clamp(1, MAX_DECISIONS_PAGE);
        let wanted = |d: &DecisionRecord| {
            query.job.as_deref().is_none_or(|j| d.job == j)
                && query.since.is_none_or(|t| d.at >= t)
                && visible(&d.tenant)
        };
        let paging = query.since.is_some() || query.after.is_some();
        let after = query.after.unwrap_or(0);
        let matching: Box<dyn Iterator<Item = DecisionRecord>> = match &query.job {
            // One job's records are few: the engine finds them in one pass over its ring.
            Some(job) => Box::new(
                engine
                    .decisions_for(job)
                    .into_iter()
                    .filter(move |d| d.seq > after),
            ),
            None if !paging && scope.is_none() => Box::new(engine.decisions(limit).into_iter()),
            // Forward from the cursor, a chunk of the ring at a time.
            None => {
                let mut cursor = after;
                Box::new(
                    std::iter::from_fn(move || {
                        let chunk = engine.decisions_after(cursor, DECISION_SCAN_CHUNK);
                        cursor = chunk.last()?.seq;
                        Some(chunk)
                    })
                    .flatten(),
                )
            }
        };
        let mut page: VecDeque<DecisionRecord> = VecDeque::new();
        let mut more = false;
        for d in matching.filter(|d| wanted(d)) {
            if page.len() == limit {
                if paging {
                    // Forward from the cursor: the first `limit`, and where to go on.
                    more = true;
                    break;
                }
                // No cursor: the latest `limit`.
                page.pop_front();
            }
            page.push_back(d);
        }
        let next_after = if more {
            page.back().map(|d| d.seq)
        } else {
            None
        };
        let oldest_seq = engine
            .decisions_after(0, 1)
            .first()
            .map(|d| d.seq)
            .unwrap_or(engine.stats().dispatches + 1);
        DecisionsReply {
            decisions: page
                .iter()
                .map(|d| self.decision_body(engine, d, &visible))
                .collect(),
            next_after,
            oldest_seq,
        }
    }

    /// A decision record on the wire; names of tenants the caller may not see are replaced.
    fn decision_body(
        &self,
        engine: &Engine,
        r: &DecisionRecord,
        visible: &dyn Fn(&str) -> bool,
    ) -> DecisionBody {
        let hide = r.candidates.iter().any(|c| !visible(&c.queue));
        DecisionBody {
            seq: r.seq,
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
            borrowed: r.borrowed,
            waited_ms: r.waited.as_millis(),
            // The sentence names the other candidates: word it without them when hidden.
            reason: match self.policy_of(engine, r.policy_version) {
                Some(policy) if !hide => decision_reason(r, policy),
                _ => decision_reason_plain(r),
            },
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
        let census = engine.census();
        let all_tenants = tenant_views(&census, now);
        let tenants_with_jobs = all_tenants.len() as u64;
        let tenants_over = all_tenants.iter().filter(|t| t.over > 0.0).count() as u64;
        let share_above_entitlement_sum = all_tenants.iter().map(|t| t.over.max(0.0)).sum();
        let mut tenants = all_tenants;
        tenants.truncate(MAX_TENANTS_SHOWN);
        let classes = class_views(engine, &census, now);
        let pools = pool_views(engine, &census);
        let known = engine.workers();
        let workers_total = known.len() as u64;
        let workers = known
            .into_iter()
            .take(MAX_WORKERS_SHOWN)
            .map(|w| WorkerView {
                leases: w.jobs.len() as u64,
                jobs: w.jobs.into_iter().take(JOBS_SHOWN_PER_WORKER).collect(),
                last_poll_ms: now.since(w.last_seen).as_millis(),
                name: w.name,
                pool: w.pool,
                capacity: w.capacity,
                free: w.free,
                live: w.live,
                polling: w.polling,
            })
            .collect();
        let decisions = engine
            .decisions(OVERVIEW_DECISIONS)
            .iter()
            .rev()
            .map(|d| self.decision_body(engine, d, &|_| true))
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
            complete: true,
            tenants_with_jobs,
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
fn decision_reason(record: &DecisionRecord, policy: PolicyName) -> String {
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
    out.push_str(&decision_manner(record));
    out
}

/// Why a decision chose its job, without naming the other candidates (or the policy, when
/// the version that decided is no longer known).
fn decision_reason_plain(record: &DecisionRecord) -> String {
    format!(
        "{} was chosen among the leading queues{}",
        record.tenant,
        decision_manner(record)
    )
}

/// How the job started, as clauses to append to its reason.
fn decision_manner(record: &DecisionRecord) -> String {
    let mut out = String::new();
    if record.backfilled {
        out.push_str("; started as backfill behind a reservation");
    }
    if record.borrowed {
        out.push_str("; borrowed capacity reserved for a higher band");
    }
    out
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
        dominant_share: bounded_share(r.dominant_share),
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

/// What the engine reports as the dominant share of resources that no live worker offers
/// (its "infinite" share, `u64::MAX / 2` parts per billion).
const UNBOUNDED_SHARE: f64 = (u64::MAX / 2) as f64 / 1e9;

/// A dominant share from the engine, bounded for the wire: holding resources no live worker
/// offers (recovered leases after a restart, before their workers ask for work again) counts
/// as holding all there is, 1, rather than an enormous number that would rank the tenant
/// first above its entitlement.
fn bounded_share(share: f64) -> f64 {
    if share >= UNBOUNDED_SHARE { 1.0 } else { share }
}

/// A tenant's dominant share of one pool: like [`bounded_share`], holding a resource the
/// pool's live workers do not offer counts as 1.
fn pool_share(usage: &BTreeMap<String, f64>, capacity: Option<&BTreeMap<String, f64>>) -> f64 {
    let offered = |r: &str| capacity.and_then(|c| c.get(r)).is_some_and(|c| *c > 0.0);
    if usage.iter().any(|(r, u)| *u > 0.0 && !offered(r)) {
        return 1.0;
    }
    capacity.map_or(0.0, |c| dominant_share(usage, c))
}

/// The dominant share of `usage` in `capacity` (resources `capacity` lacks are skipped).
fn dominant_share(usage: &BTreeMap<String, f64>, capacity: &BTreeMap<String, f64>) -> f64 {
    usage
        .iter()
        .filter_map(|(r, u)| capacity.get(r).filter(|c| **c > 0.0).map(|c| u / c))
        .fold(0.0, f64::max)
}

/// Queued work on the wire, its age taken at `now`.
fn backlog_of(work: &QueuedWork, now: Time) -> BacklogBody {
    BacklogBody {
        queued: work.queued,
        oldest_age_ms: work.oldest.map_or(0, |t| now.since(t).as_millis()),
    }
}

/// The tenants with jobs of their own (queued, deferred or running), furthest above their
/// entitlement first. Ancestors the census lists only for their descendants' sake are left
/// out (their reports are one `GET /v1/tenants/{id}` away).
fn tenant_views(census: &Census, now: Time) -> Vec<TenantView> {
    let pool_capacity: BTreeMap<&str, &BTreeMap<String, f64>> = census
        .pools
        .iter()
        .map(|p| (p.name.as_str(), &p.capacity))
        .collect();
    let mut views: Vec<TenantView> = census
        .tenants
        .iter()
        .filter(|t| t.backlog.queued + t.deferred + t.running > 0)
        .map(|t| TenantView {
            name: t.name.clone(),
            weight: t.weight,
            dominant_share: bounded_share(t.dominant_share),
            dominant_share_by_pool: t
                .usage_by_pool
                .iter()
                .map(|(pool, usage)| {
                    let capacity = pool_capacity.get(pool.as_str()).copied();
                    (pool.clone(), pool_share(usage, capacity))
                })
                .collect(),
            entitlement: t.entitlement,
            over: bounded_share(t.dominant_share) - t.entitlement,
            queued: t.backlog.queued,
            running: t.running,
            oldest_age_ms: t.backlog.oldest.map(|o| now.since(o).as_millis()),
            backlog: t
                .backlog_by_class
                .iter()
                .map(|(class, work)| (class.clone(), backlog_of(work, now)))
                .collect(),
            balance: t.balance,
            debt_ws: ws(t.ledger.debt),
            charged_ws: ws(t.ledger.charged),
        })
        .collect();
    views.sort_by(|a, b| {
        b.over
            .total_cmp(&a.over)
            .then(b.queued.cmp(&a.queued))
            .then(a.name.cmp(&b.name))
    });
    views
}

/// The policy's classes: their backlog everywhere and per pool, their predicted start and
/// their books.
fn class_views(engine: &mut Engine, census: &Census, now: Time) -> Vec<ClassView> {
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
            let counted = census.classes.iter().find(|k| k.name == c.name);
            let backlog = counted.map(|k| k.backlog).unwrap_or_default();
            ClassView {
                name: c.name.clone(),
                priority: c.priority,
                reserve: c.reserve_ppb as f64 / 1e9,
                queued: Some(backlog.queued),
                oldest_age_s: backlog.oldest.map(|o| now.since(o).as_secs_f64()),
                queued_by_pool: counted
                    .map(|k| {
                        k.by_pool
                            .iter()
                            .map(|(pool, work)| (pool.clone(), backlog_of(work, now)))
                            .collect()
                    })
                    .unwrap_or_default(),
                unplaceable: counted.map_or(0, |k| k.unplaceable),
                predicted_start_s: predicted,
                deadline_misses: misses,
                charged_ws: ws(ledger.charged),
                debt_ws: ws(ledger.debt),
            }
        })
        .collect()
}

/// The pools with live workers: their use per class, the classes' reserves there, and what
/// borrowed attempts hold.
fn pool_views(engine: &Engine, census: &Census) -> Vec<PoolView> {
    let declared: Vec<&str> = engine
        .policy()
        .pools
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    census
        .pools
        .iter()
        .filter(|p| p.workers > 0)
        .take(MAX_POOLS_SHOWN)
        .map(|p| PoolView {
            label: if declared.contains(&p.name.as_str()) {
                p.name.clone()
            } else {
                "undeclared".to_string()
            },
            name: p.name.clone(),
            workers: p.workers,
            capacity: p.capacity.clone(),
            used: p.used.clone(),
            class_used: p.used_by_class.clone(),
            reserves: p
                .reserves
                .iter()
                .map(|r| ReserveView {
                    class: r.class.clone(),
                    occupancy: dominant_share(&r.used, &r.reserved),
                    reserved: r.reserved.clone(),
                    used: r.used.clone(),
                    held: r.held.clone(),
                })
                .collect(),
            borrowed: p.borrowed.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairway_core::{Dur, EngineConfig, Outcome, Policy, WorkerOffer};

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

    /// Decision records come from the engine's ring: the last `DECISION_RING`, numbered by
    /// the dispatch count, each its lease's; they page forward from a cursor without gaps or
    /// repeats, and a tenant sees only its own.
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
            observer.count_events(&metrics, &engine, &events);
            now = now.plus(Dur::from_millis(1));
            let l = &leases[0];
            engine
                .finish(now, &l.job, l.epoch, Outcome::Succeeded, None, None)
                .unwrap();
            let events = engine.drain_events();
            observer.count_events(&metrics, &engine, &events);
            started += 1;
        }
        let latest = observer.decisions(
            &engine,
            &DecisionQuery {
                limit: 5,
                ..DecisionQuery::default()
            },
            None,
        );
        assert_eq!(latest.decisions.len(), 5);
        assert_eq!(latest.decisions[4].seq, jobs as u64);
        assert_eq!(latest.decisions[4].job_id, format!("j{}", jobs - 1));
        assert_eq!(latest.oldest_seq, 51);
        // Every `seq` visible to `scope` after `from`, a page of `limit` at a time.
        let page_through = |from: u64, limit: usize, scope: Option<&str>| {
            let mut after = Some(from);
            let mut seen = Vec::new();
            while let Some(a) = after {
                let page = observer.decisions(
                    &engine,
                    &DecisionQuery {
                        after: Some(a),
                        limit,
                        ..DecisionQuery::default()
                    },
                    scope,
                );
                assert!(page.decisions.len() <= limit);
                seen.extend(page.decisions.iter().map(|d| d.seq));
                after = page.next_after;
            }
            seen
        };
        let seen = page_through(40, 1000, None);
        assert_eq!(seen, (51..=jobs as u64).collect::<Vec<_>>());
        // A tenant sees its own decisions only, and never another tenant's name.
        let mine = observer.decisions(
            &engine,
            &DecisionQuery {
                limit: 1000,
                ..DecisionQuery::default()
            },
            Some("a"),
        );
        assert_eq!(mine.decisions.len(), 1000, "the latest 1000 of a's");
        assert_eq!(mine.decisions[999].seq, jobs as u64 - 1);
        assert!(mine.decisions.iter().all(|d| d.tenant == "a"));
        assert!(
            mine.decisions
                .iter()
                .flat_map(|d| &d.candidates)
                .all(|c| c.tenant != "b"),
        );
        // Paging a tenant's records crosses the chunks the ring is read in.
        let seen = page_through(0, 300, Some("a"));
        // Job `j{i}` is the `i + 1`th started; a's are the even `i`.
        let expected: Vec<u64> = (51..=jobs as u64).filter(|s| s % 2 == 1).collect();
        assert_eq!(seen, expected);
        let one = observer.decisions(
            &engine,
            &DecisionQuery {
                job: Some("j100".into()),
                limit: 10,
                ..DecisionQuery::default()
            },
            None,
        );
        let seqs: Vec<u64> = one.decisions.iter().map(|d| d.seq).collect();
        assert_eq!(seqs, [101]);
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

    /// A class label follows the policy in force: a job of a class the new policy no longer
    /// declares is `unknown` from the publish on, while an attempt leased before it ends under
    /// the class it was leased as, and the series of the dropped class keep their counts
    /// (the observer resolves each class's series once, not per event).
    #[test]
    fn class_labels_follow_the_policy_in_force() {
        let metrics = Metrics::new();
        let with = |classes: &[&str]| {
            let mut text = String::from("[policy]\nname = \"fair\"\n");
            for c in classes {
                text.push_str(&format!("[[class]]\nname = \"{c}\"\n"));
            }
            text
        };
        let policy = Policy::from_text(&with(&["default", "batch"])).unwrap();
        let mut engine = Engine::new(Time::from_millis(1_000), policy, EngineConfig::default());
        let mut observer = Observer::new();
        let mut now = Time::from_millis(2_000);
        let submit = |engine: &mut Engine, observer: &mut Observer, id: &str, now| {
            let mut spec = JobSpec::new(id, "a");
            spec.class = Some("batch".into());
            let admission = engine.submit(now, spec);
            observer.admitted(&metrics, engine, now, Some("batch"), &admission);
            let events = engine.drain_events();
            observer.count_events(&metrics, engine, &events);
        };
        submit(&mut engine, &mut observer, "before", now);
        engine.worker_ready(now, &offer("w1")).unwrap();
        let lease = engine.schedule(now).pop().expect("a lease");
        let events = engine.drain_events();
        observer.count_events(&metrics, &engine, &events);
        engine.publish(now, &with(&["default"])).unwrap();
        let _ = engine.drain_events();
        now = now.plus(Dur::from_millis(5));
        engine
            .finish(now, &lease.job, lease.epoch, Outcome::Succeeded, None, None)
            .unwrap();
        let events = engine.drain_events();
        observer.count_events(&metrics, &engine, &events);
        submit(&mut engine, &mut observer, "after", now);
        let text = metrics.encode_prometheus();
        for line in [
            "fairway_admissions_total{class=\"batch\",outcome=\"accepted\",reason=\"none\"} 1",
            "fairway_leases_granted_total{class=\"batch\",borrowed=\"false\"} 1",
            "fairway_jobs_ended_total{class=\"batch\",state=\"succeeded\"} 1",
            "fairway_estimate_ratio_count{class=\"batch\"} 1",
        ] {
            assert!(text.contains(line), "missing {line}\n{text}");
        }
        // The engine still runs the dropped class's job; its label is `unknown`.
        let after =
            "fairway_admissions_total{class=\"unknown\",outcome=\"accepted\",reason=\"none\"} 1";
        assert!(text.contains(after), "{text}");
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
