//! The engine: one deterministic state machine for admission, ordering, placement, leases and
//! accounting.
//!
//! The API is a small grammar, after quinn-proto's: commands (`submit`, `worker_ready`,
//! `schedule`, `heartbeat`, `finish`, `cancel`, `tick`, `publish`) take `now` and return their
//! answer; every durable state change they cause is an [`Event`], applied at once and queued
//! for the driver to persist ([`Engine::drain_events`]); [`Engine::poll_timeout`] says when
//! `tick` must next run. [`Engine::apply`] replays persisted events without deciding anything.
//!
//! State is in two parts. **Durable** state (jobs, attempts, epochs, tenants' books and virtual
//! times, the policy) changes only through `apply`, so a replay rebuilds it exactly.
//! **Ephemeral** state (live workers, placement groups, the per-group index, decision records)
//! is rebuilt from what drivers report after a restart.

mod apply;
mod audit;
mod census;
mod chunked;
mod dispatch;
mod expiry_list;
mod explain;
mod finished;
mod id_index;
mod job_id;
pub(crate) mod job_set;
mod lease;
mod lookup;
mod meter;
mod small_map;
mod snapshot;
pub(crate) mod state;
mod submit;
mod tree;
mod worker_ttl;

pub use census::{
    Census, ClassCensus, PoolCensus, QueuedWork, ReserveStatus, TenantCensus, WorkerView,
};
pub use dispatch::WorkerOffer;
pub use explain::{Explanation, PoolUsage, TenantReport, TenantSnapshot, WaitReason};
pub use lease::TickReport;
pub use snapshot::SnapshotPieces;
pub use state::{Candidate, DecisionRecord, EngineStats, Ledger};

use crate::config::{ConfigError, PolicyName};
use crate::event::Event;
use crate::hash::FxHashMap;
use crate::ids::{CHAIN_MAX, Chain, GroupId, JobIdx, NodeIdx, ShapeId, TenantIdx, WorkerIdx};
use crate::job::{JobState, JobStatus};
use crate::policy::{DEFAULT_CLASS, Policy};
use crate::queue::OrderKey;
use crate::resources::{Limit, ResVec, ResourceTable};
use crate::shape::{GroupTable, ShapeKey, ShapeTable, Worker};
use crate::time::{Dur, Time};
use crate::weight::Weight;
use state::{Class, Gps, Job, Node, NodeKind, OrderParams, Pools, Tenant, TreeShape, tree_shape};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The most events the list that collects a turn's events starts with room for (about 1 MiB);
/// a larger turn grows it as it goes.
pub(crate) const EVENTS_ROOM: usize = 4096;
/// The least room the list starts with after a turn that held any event (about 2 KiB): turns
/// of a few events alternate in size (a submission's one, a lease and its end's two), and a
/// list sized for the smaller grew again in the larger (BENCHMARKS.md, item 89).
pub(crate) const EVENTS_MIN_ROOM: usize = 8;

/// Limits and switches of one engine instance (not part of the policy).
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Live jobs held at most; admission refuses beyond (retryable).
    pub max_jobs: usize,
    /// Finished jobs remembered for idempotent resubmission and status queries.
    pub finished_retention: usize,
    /// Decision records kept.
    pub decision_ring: usize,
    /// Whether events are queued for [`Engine::drain_events`]. Without them the engine
    /// applies a grant's and an attempt end's effects without building their events.
    pub capture_events: bool,
    /// A worker not heard from for this long is forgotten (its capacity no longer counts).
    pub worker_ttl: Dur,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_jobs: 10_000_000,
            finished_retention: 1_000_000,
            decision_ring: 4096,
            capture_events: true,
            worker_ttl: Dur::from_secs(60),
        }
    }
}

/// Queued work of one class and shape, for admission's predictions.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Backlog {
    pub queued_cost: u128,
    pub queued_jobs: u64,
}

/// The scheduling engine. See the module documentation.
#[derive(Clone)]
pub struct Engine {
    pub(crate) config: EngineConfig,
    pub(crate) policy: Policy,
    /// Whether a declared tenant of the policy limits the classes it may submit to: when none
    /// does, admission does not walk a tenant's path looking for a limit (item 91).
    pub(crate) classes_limited: bool,
    pub(crate) version: u64,
    pub(crate) shape_kind: TreeShape,
    pub(crate) resources: ResourceTable,
    pub(crate) classes: Vec<Class>,
    pub(crate) class_by_name: BTreeMap<String, u16>,
    pub(crate) tenants: Vec<Tenant>,
    /// Looked up by every submission: a hash map, not a B-tree, whose string comparisons
    /// cost about 14 calls to `memcmp` a look-up at 10^4 tenants. Never iterated in order.
    pub(crate) tenant_by_name: FxHashMap<String, TenantIdx>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) jobs: chunked::Chunked<Option<Job>>,
    pub(crate) free_jobs: Vec<u32>,
    /// Live job ids to their slots in `jobs`.
    pub(crate) job_by_id: id_index::IdIndex<JobIdx>,
    pub(crate) finished: finished::FinishedJobs,
    pub(crate) seq: u64,
    pub(crate) shapes: ShapeTable,
    pub(crate) groups: GroupTable,
    pub(crate) polling: BTreeMap<GroupId, BTreeSet<WorkerIdx>>,
    /// Groups with live workers, in id order (kept in step with the group table).
    pub(crate) live_groups: Vec<GroupId>,
    pub(crate) workers: Vec<Worker>,
    /// Slots of forgotten workers, for reuse.
    pub(crate) free_workers: Vec<u32>,
    pub(crate) worker_by_name: FxHashMap<String, WorkerIdx>,
    pub(crate) pools: Pools,
    pub(crate) total_capacity: ResVec,
    pub(crate) deferred: BTreeSet<(Time, JobIdx)>,
    /// Running attempts on a lease (not stopping) by when it runs out: one list per lease
    /// length (`None`: leases restored from a snapshot, listed in expiry order), the links in
    /// the attempts.
    pub(crate) expiries: expiry_list::ExpiryLanes<Option<Dur>>,
    pub(crate) stops: BTreeSet<(Time, JobIdx)>,
    pub(crate) caps: BTreeSet<(Time, JobIdx)>,
    pub(crate) deadlines: BTreeSet<(Time, JobIdx)>,
    /// Live workers by when they expire unless heard from again.
    pub(crate) worker_ttl: worker_ttl::WorkerTtl,
    pub(crate) gps: Gps,
    pub(crate) drr_round: u128,
    pub(crate) drr_position: u64,
    pub(crate) backlog: FxHashMap<(u16, ShapeId), Backlog>,
    /// How fast each live shape's queued work leaves (admission's prediction).
    pub(crate) meters: FxHashMap<ShapeId, meter::RateMeter>,
    /// The meters of shapes no job uses any more, kept by the shape's description so that
    /// they outlive the shape's id (ids are recycled), at most `METER_ARCHIVE_MAX`.
    pub(crate) meter_archive: FxHashMap<crate::shape::ShapeKey, meter::RateMeter>,
    pub(crate) events: Vec<Event>,
    pub(crate) decisions: VecDeque<state::KeptDecision>,
    pub(crate) stats: EngineStats,
    pub(crate) now: Time,
    pub(crate) live_jobs: usize,
    pub(crate) queued_jobs: u64,
    pub(crate) gang_shapes: u32,
    pub(crate) stop_notices: Vec<StopNotice>,
    /// Set while a snapshot is being restored: queues refill without resetting balances.
    pub(crate) restoring: bool,
    /// The time of the event being applied. Durable state computed from time reads this, not
    /// `now`: `now` also moves with commands that emit nothing (ticks, polls), which a replay
    /// of the log never sees.
    pub(crate) applying_at: Time,
    /// The job the event being applied is about, when its emitter knows it.
    pub(crate) apply_hint: Option<JobIdx>,
    /// The class and shape admission settled on for the job whose `JobAccepted` is being
    /// emitted, so that applying it does not look them up again (BENCHMARKS.md, item 85).
    /// Set just before that emit, taken by its apply; replayed events carry none.
    pub(crate) accept_hint: Option<(u16, ShapeKey)>,
}

/// A running attempt the engine asked to stop: its worker learns it from its next heartbeat,
/// and a driver that can reach the worker sooner may tell it at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopNotice {
    /// Job id.
    pub job: String,
    /// The attempt's epoch.
    pub epoch: u64,
    /// Why.
    pub reason: crate::event::StopReason,
}

impl Engine {
    /// An engine running `policy` as version 1, published at `now`.
    pub fn new(now: Time, policy: Policy, config: EngineConfig) -> Engine {
        let mut engine = Engine {
            config,
            policy: Policy::built_in(),
            classes_limited: false,
            version: 0,
            shape_kind: TreeShape::Flat,
            resources: ResourceTable::default(),
            classes: Vec::new(),
            class_by_name: BTreeMap::new(),
            tenants: Vec::new(),
            tenant_by_name: FxHashMap::default(),
            nodes: Vec::new(),
            jobs: Default::default(),
            free_jobs: Vec::new(),
            job_by_id: id_index::IdIndex::default(),
            finished: finished::FinishedJobs::default(),
            seq: 0,
            shapes: ShapeTable::default(),
            groups: GroupTable::default(),
            polling: BTreeMap::new(),
            live_groups: Vec::new(),
            workers: Vec::new(),
            free_workers: Vec::new(),
            worker_by_name: FxHashMap::default(),
            pools: Pools::default(),
            total_capacity: ResVec::default(),
            deferred: BTreeSet::new(),
            expiries: expiry_list::ExpiryLanes::default(),
            stops: BTreeSet::new(),
            caps: BTreeSet::new(),
            deadlines: BTreeSet::new(),
            worker_ttl: worker_ttl::WorkerTtl::default(),
            gps: Gps::default(),
            drr_round: 0,
            drr_position: 0,
            backlog: FxHashMap::default(),
            meters: FxHashMap::default(),
            meter_archive: FxHashMap::default(),
            events: Vec::new(),
            decisions: VecDeque::new(),
            stats: EngineStats::default(),
            now,
            live_jobs: 0,
            queued_jobs: 0,
            gang_shapes: 0,
            stop_notices: Vec::new(),
            restoring: false,
            applying_at: now,
            apply_hint: None,
            accept_hint: None,
        };
        let source = policy.source.clone();
        engine.emit(Event::PolicyPublished {
            at: now,
            version: 1,
            source,
        });
        engine
    }

    /// An empty engine for replay: apply a `PolicyPublished` event first.
    pub fn for_replay(config: EngineConfig) -> Engine {
        let mut engine = Engine::new(Time::ZERO, Policy::built_in(), config);
        // Start from nothing, as `new` does before its first policy, so that replaying the
        // log creates classes, tenants and tree nodes in the live engine's order.
        engine.events.clear();
        engine.version = 0;
        engine.classes.clear();
        engine.class_by_name.clear();
        engine.tenants.clear();
        engine.tenant_by_name.clear();
        engine.nodes.clear();
        engine.now = Time::ZERO;
        engine
    }

    /// Validates `text` and publishes it as the next policy version. A malformed policy is
    /// refused with every error found, and the prior version stays.
    pub fn publish(&mut self, now: Time, text: &str) -> Result<u64, Vec<ConfigError>> {
        self.observe(now);
        Policy::from_text(text)?;
        let version = self.version + 1;
        self.emit(Event::PolicyPublished {
            at: now,
            version,
            source: text.to_string(),
        });
        Ok(version)
    }

    /// The current policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The current policy version.
    pub fn policy_version(&self) -> u64 {
        self.version
    }

    /// Events produced since the last drain, in order. Persist them before acknowledging.
    ///
    /// The list that collects the next turn's events starts with room for as many as this one
    /// held (at least `EVENTS_MIN_ROOM`, at most `EVENTS_ROOM`; none after an empty turn): a
    /// server's turns come in runs of one size (a batch's parts, a pass's leases), and a list
    /// grown one doubling at a time copied each of its events (272 bytes) about once more, a
    /// realloc per doubling (BENCHMARKS.md, items 84 and 89).
    pub fn drain_events(&mut self) -> Vec<Event> {
        let room = match self.events.len() {
            0 => 0,
            n => n.clamp(EVENTS_MIN_ROOM, EVENTS_ROOM),
        };
        std::mem::replace(&mut self.events, Vec::with_capacity(room))
    }

    /// Stop requests issued since the last call (preemptions and cancellations of running
    /// attempts).
    pub fn poll_stops(&mut self) -> Vec<StopNotice> {
        std::mem::take(&mut self.stop_notices)
    }

    /// Counters.
    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }

    /// Live jobs (deferred, queued or running).
    pub fn live_jobs(&self) -> usize {
        self.live_jobs
    }

    /// Queued jobs.
    pub fn queued_jobs(&self) -> u64 {
        self.queued_jobs
    }

    /// The resource names seen so far.
    pub fn resources(&self) -> &ResourceTable {
        &self.resources
    }

    /// The next instant at which [`Engine::tick`] has work: a deferred job becoming eligible, a
    /// lease or stop deadline expiring, a deadline passing, a worker timing out.
    pub fn poll_timeout(&self) -> Option<Time> {
        [
            self.deferred.first().map(|e| e.0),
            self.expiries.first_at(&self.jobs),
            self.stops.first().map(|e| e.0),
            self.deadlines.first().map(|e| e.0),
            self.worker_ttl.first_at(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Applies an event and queues it for persistence.
    pub(crate) fn emit(&mut self, event: Event) {
        self.apply(&event);
        if self.config.capture_events {
            self.events.push(event);
        }
    }

    /// [`Engine::emit`] for an event about job `j`, sparing `apply` the lookup of its id.
    pub(crate) fn emit_for(&mut self, j: JobIdx, event: Event) {
        self.apply_hint = Some(j);
        self.emit(event);
        self.apply_hint = None;
    }

    /// Notes the current time; time never runs backwards inside the engine.
    pub(crate) fn observe(&mut self, now: Time) -> Time {
        if now > self.now {
            self.now = now;
        }
        self.now
    }

    pub(crate) fn job(&self, j: JobIdx) -> &Job {
        self.jobs[j.ix()].as_ref().expect("live job")
    }

    /// The slot of live job `id`.
    pub(crate) fn job_idx(&self, id: &str) -> Option<JobIdx> {
        self.job_by_id.get(id, |j| &self.job(j).id)
    }

    /// Indexes live job `j` (already in its slot) by its id, `id` (the text its record holds,
    /// which a UUID's record would otherwise write out again).
    pub(crate) fn index_job(&mut self, j: JobIdx, id: &str) {
        let jobs = &self.jobs;
        let id_of = |k: JobIdx| &jobs[k.ix()].as_ref().expect("live job").id;
        debug_assert!(id_of(j).is(id));
        self.job_by_id.insert(id, j, id_of);
    }

    pub(crate) fn job_mut(&mut self, j: JobIdx) -> &mut Job {
        self.jobs[j.ix()].as_mut().expect("live job")
    }

    pub(crate) fn class_name(&self, class: u16) -> &str {
        &self.classes[class as usize].policy.name
    }

    /// The status of job `id`, live or remembered.
    pub fn status(&self, id: &str) -> Option<JobStatus> {
        if let Some(j) = self.job_idx(id) {
            let job = self.job(j);
            let attempt = job.attempt.as_deref();
            return Some(JobStatus {
                job: id.to_string(),
                tenant: self.tenants[job.tenant.ix()].name.clone(),
                class: self.class_name(job.class).to_string(),
                state: job.state,
                attempt: job.attempts,
                epoch: job.epoch,
                arrival: job.arrival,
                not_before: (job.state == JobState::Deferred).then_some(job.deferred_until()),
                workers: attempt
                    .map(|a| {
                        a.placements
                            .iter()
                            .map(|(w, _)| self.workers[w.ix()].name.to_string())
                            .collect()
                    })
                    .unwrap_or_default(),
                expires: attempt.map(|a| a.expires),
                estimate: job.estimate,
                reason: None,
                policy_version: attempt.map(|a| a.policy_version),
            });
        }
        let f = self.finished.get(id)?;
        Some(JobStatus {
            job: id.to_string(),
            tenant: self.tenants[f.tenant as usize].name.clone(),
            class: self.class_name(f.class).to_string(),
            state: f.state,
            attempt: f.attempts,
            epoch: f.epoch,
            arrival: f.arrival,
            not_before: None,
            workers: Vec::new(),
            expires: None,
            estimate: f.estimate,
            reason: f.reason.map(std::borrow::Cow::into_owned),
            policy_version: None,
        })
    }

    // ---- tenants ------------------------------------------------------------------------

    /// The tenant named `name`, created (with its ancestors) if new.
    pub(crate) fn tenant_for(&mut self, name: &str) -> TenantIdx {
        if let Some(&t) = self.tenant_by_name.get(name) {
            return t;
        }
        let parent = name.rfind('/').map(|i| self.tenant_for(&name[..i]));
        let t = TenantIdx(self.tenants.len() as u32);
        self.tenants.push(Tenant {
            name: name.to_string(),
            parent,
            children: Vec::new(),
            declared: false,
            weight: Weight::ONE,
            guarantee: ResVec::default(),
            limit: None,
            limit_grace: None,
            classes: None,
            alloc: ResVec::default(),
            node: None,
            bands: BTreeMap::new(),
            live_jobs: 0,
            outstanding: 0,
            max_outstanding: None,
            burst: None,
            rate: None,
            tokens: 0,
            tokens_at: self.now,
            retry_budget: None,
            retry_window: Dur::from_secs(60),
            retry_used: 0,
            retry_since: self.now,
            ledger: Ledger::default(),
            estimators: Default::default(),
            admitted: [0; 3],
        });
        self.tenant_by_name.insert(name.to_string(), t);
        if let Some(p) = parent {
            self.tenants[p.ix()].children.push(t);
        }
        self.configure_tenant(t);
        self.attach_tenant_node(t);
        t
    }

    /// Applies the policy's declaration (or the defaults) to tenant `t`.
    fn configure_tenant(&mut self, t: TenantIdx) {
        let name = self.tenants[t.ix()].name.clone();
        let declared = self.policy.tenant(&name).cloned();
        let mut guarantee = ResVec::default();
        let mut limit = None;
        let mut classes = None;
        let tenant = &self.tenants[t.ix()];
        let was = (tenant.burst, tenant.tokens);
        if let Some(d) = &declared {
            for (r, a) in &d.guarantee {
                if let Some(id) = self.resources.intern(r) {
                    guarantee.set(id, *a);
                }
            }
            if !d.limit.is_empty() {
                let mut l = Limit::default();
                for (r, a) in &d.limit {
                    if let Some(id) = self.resources.intern(r) {
                        l.set(id, *a);
                    }
                }
                limit = Some(l);
            }
            classes = d.classes.as_ref().map(|names| {
                names
                    .iter()
                    .filter_map(|c| self.class_by_name.get(c).copied())
                    .collect::<BTreeSet<u16>>()
            });
        }
        let tenant = &mut self.tenants[t.ix()];
        tenant.declared = declared.is_some();
        tenant.weight = declared.as_ref().map(|d| d.weight).unwrap_or(Weight::ONE);
        tenant.guarantee = guarantee;
        tenant.limit = limit;
        tenant.classes = classes;
        tenant.max_outstanding = declared.as_ref().and_then(|d| d.max_outstanding);
        tenant.burst = declared.as_ref().and_then(|d| d.burst);
        tenant.rate = declared.as_ref().and_then(|d| d.rate);
        tenant.retry_budget = declared.as_ref().and_then(|d| d.retry_budget);
        tenant.retry_window = declared
            .as_ref()
            .map(|d| d.retry_window)
            .unwrap_or(Dur::from_secs(60));
        if tenant.burst != was.0 {
            // A new quota starts full.
            tenant.tokens = tenant.burst.unwrap_or(0);
            tenant.tokens_at = self.now;
        }
        if let Some(n) = tenant.node {
            self.nodes[n.ix()].weight = tenant.weight;
        }
    }

    /// Gives tenant `t` its node in the current tree.
    fn attach_tenant_node(&mut self, t: TenantIdx) {
        match self.shape_kind {
            TreeShape::Flat => {
                let weight = self.tenants[t.ix()].weight;
                let n = self.add_node(Some(NodeIdx(0)), NodeKind::Flat(t), weight);
                self.tenants[t.ix()].node = Some(n);
            }
            TreeShape::Hierarchical => {
                let parent = match self.tenants[t.ix()].parent {
                    Some(p) => self.tenants[p.ix()].node.expect("parent tenant has a node"),
                    None => NodeIdx(0),
                };
                let weight = self.tenants[t.ix()].weight;
                let n = self.add_node(Some(parent), NodeKind::Tenant(t), weight);
                self.tenants[t.ix()].node = Some(n);
            }
        }
    }

    pub(crate) fn add_node(
        &mut self,
        parent: Option<NodeIdx>,
        kind: NodeKind,
        weight: Weight,
    ) -> NodeIdx {
        let n = NodeIdx(self.nodes.len() as u32);
        self.nodes.push(Node::new(parent, kind, weight));
        n
    }

    /// The leaf queue for a job of tenant `t` in class `class`, created if needed.
    pub(crate) fn leaf_for(&mut self, t: TenantIdx, class: u16) -> NodeIdx {
        match self.shape_kind {
            TreeShape::Flat => self.tenants[t.ix()].node.expect("flat leaf"),
            TreeShape::Hierarchical => {
                if let Some(&n) = self.tenants[t.ix()].bands.get(&class) {
                    return n;
                }
                let parent = self.tenants[t.ix()].node.expect("tenant node");
                let weight = self.classes[class as usize].policy.weight;
                let n = self.add_node(Some(parent), NodeKind::Band(t, class), weight);
                self.tenants[t.ix()].bands.insert(class, n);
                n
            }
        }
    }

    /// Installs a validated policy (from a `PolicyPublished` event).
    pub(crate) fn install_policy(&mut self, at: Time, version: u64, policy: Policy) {
        let old_kind = (self.version > 0).then_some(self.policy.name);
        // What each existing class's queued jobs were ordered and timed by.
        let old_order: Vec<OrderParams> = self
            .classes
            .iter()
            .map(|c| OrderParams::of(&c.policy))
            .collect();
        // Classes keep their index by name; new classes are appended.
        for c in &policy.classes {
            match self.class_by_name.get(&c.name) {
                Some(&i) => self.classes[i as usize].policy = c.clone(),
                None => {
                    self.class_by_name
                        .insert(c.name.clone(), self.classes.len() as u16);
                    self.classes.push(Class {
                        policy: c.clone(),
                        queued: 0,
                        ledger: Ledger::default(),
                        deadline_misses: 0,
                        estimator: Default::default(),
                    });
                }
            }
        }
        for t in &policy.tenants {
            for r in t.guarantee.keys().chain(t.limit.keys()) {
                self.resources.intern(r);
            }
        }
        let rebuild = old_kind != Some(policy.name);
        self.classes_limited = policy.limits_classes();
        self.policy = policy;
        self.version = version;
        self.observe(at);
        // Declared tenants exist from the start so that their settings show in reports.
        let declared: Vec<String> = self.policy.tenants.iter().map(|t| t.name.clone()).collect();
        for name in &declared {
            self.tenant_for(name);
        }
        for t in 0..self.tenants.len() {
            self.configure_tenant(TenantIdx(t as u32));
        }
        if rebuild {
            self.rebuild_tree();
        } else {
            for b in self.nodes.iter_mut() {
                if let NodeKind::Band(_, c) = b.kind {
                    b.weight = self.classes[c as usize].policy.weight;
                }
            }
            self.rekey_queued_of_changed_classes(&old_order);
            self.rekey_all();
        }
        self.recompute_pending();
        self.grant_limit_grace();
    }

    /// Sets every node's `pending` from the running attempts, under the current weights: what
    /// each attempt's end will take back, so that it is taken back exactly.
    pub(crate) fn recompute_pending(&mut self) {
        let pending = self.pending_of_running();
        for (node, p) in self.nodes.iter_mut().zip(pending) {
            node.pending = p;
        }
    }

    /// Each node's pending charge computed from scratch from the running attempts (zero
    /// outside `fair`): what [`Engine::recompute_pending`] installs and the audit checks.
    pub(crate) fn pending_of_running(&self) -> Vec<u128> {
        let mut pending = vec![0u128; self.nodes.len()];
        if self.policy.name != PolicyName::Fair {
            return pending;
        }
        for job in self.jobs.iter().flatten() {
            let Some(a) = &job.attempt else { continue };
            if a.path.len() != a.charges.len() {
                continue;
            }
            for (&n, &share) in a.path.iter().zip(a.charges.iter()) {
                if let Some(node) = self.nodes.get(n.ix()) {
                    pending[n.ix()] += node.weight.divide(share as u128 * a.estimate.0 as u128);
                }
            }
        }
        pending
    }

    /// Re-keys the queued jobs of classes whose ordering parameters a publish changed, so that
    /// their order, aging cap timer and deadline watch follow the new policy, exactly as a
    /// restore from a snapshot taken now would have them (fuzz findings F6, F7: timers armed
    /// under the old parameters were left behind and fired for jobs no longer queued).
    fn rekey_queued_of_changed_classes(&mut self, old: &[OrderParams]) {
        let changed: Vec<bool> = old
            .iter()
            .zip(&self.classes)
            .map(|(o, c)| *o != OrderParams::of(&c.policy))
            .collect();
        if !changed.contains(&true) {
            return;
        }
        let queued: Vec<JobIdx> = (0..self.jobs.len())
            .map(|i| JobIdx(i as u32))
            .filter(|&j| {
                self.jobs[j.ix()].as_ref().is_some_and(|job| {
                    job.state == JobState::Queued
                        && changed.get(job.class as usize).copied().unwrap_or(false)
                })
            })
            .collect();
        for j in queued {
            let job = self.job(j);
            let was = &old[job.class as usize];
            let cap_at = match job.order.into() {
                OrderKey::Ramp(_) => was.cap_at(job.enqueued),
                _ => None,
            };
            let latest_start = job.latest_start();
            let watched = was.watches_deadline(job.downgraded);
            if let Some(at) = cap_at {
                self.caps.remove(&(at, j));
            }
            if let (true, Some(at)) = (watched, latest_start) {
                self.deadlines.remove(&(at, j));
            }
            self.dequeue_trial(j);
            self.enqueue_trial(j);
            let job = self.job(j);
            let now = OrderParams::of(&self.classes[job.class as usize].policy);
            if let (true, Some(at)) = (now.watches_deadline(job.downgraded), latest_start) {
                self.deadlines.insert((at, j));
            }
        }
    }

    /// After a publish, a tenant already holding more than its new limit allows keeps what it
    /// holds (nothing is preempted for a limit) and starts nothing until it is back within it.
    pub(crate) fn grant_limit_grace(&mut self) {
        for t in self.tenants.iter_mut() {
            let over = t
                .limit
                .as_ref()
                .is_some_and(|l| !l.admits(&t.alloc, &ResVec::default(), 0));
            t.limit_grace = over.then(|| t.alloc.clone());
        }
    }

    /// Builds the tree for the current policy and puts every queued job back in it.
    fn rebuild_tree(&mut self) {
        self.shape_kind = tree_shape(self.policy.name);
        self.nodes.clear();
        self.add_node(None, NodeKind::Root, Weight::ONE);
        for t in 0..self.tenants.len() {
            let t = TenantIdx(t as u32);
            self.tenants[t.ix()].node = None;
            self.tenants[t.ix()].bands.clear();
        }
        // Tenants were created parents first, so parents get their nodes first.
        for t in 0..self.tenants.len() {
            self.attach_tenant_node(TenantIdx(t as u32));
        }
        let mut queued: Vec<(u64, JobIdx)> = Vec::new();
        let mut running: Vec<JobIdx> = Vec::new();
        for (i, slot) in self.jobs.iter().enumerate() {
            if let Some(job) = slot {
                match job.state {
                    JobState::Queued => queued.push((job.seq, JobIdx(i as u32))),
                    JobState::Running => running.push(JobIdx(i as u32)),
                    _ => {}
                }
            }
        }
        queued.sort();
        // Queue-side books are rebuilt by the re-entries below.
        self.queued_jobs = 0;
        self.backlog.clear();
        self.deadlines.clear();
        self.caps.clear();
        for class in self.classes.iter_mut() {
            class.queued = 0;
        }
        for (_, j) in queued {
            self.enqueue(j);
        }
        for j in running {
            // Attempts that straddle a change of policy keep their allocation in the new tree but
            // are not reconciled against charges made under the old one.
            let (tenant, class) = (self.job(j).tenant, self.job(j).class);
            let leaf = self.leaf_for(tenant, class);
            let path = self.charge_path(tenant, leaf);
            let members = self.job(j).attempt.as_ref().map(|a| a.members).unwrap_or(1) as u64;
            let demand = self.shapes.get(self.job(j).shape).demand.times(members);
            for n in self.ancestors(leaf) {
                self.nodes[n.ix()].alloc.add(&demand);
            }
            let job = self.job_mut(j);
            job.leaf = leaf;
            if let Some(a) = job.attempt.as_mut() {
                a.charges = Chain::filled(0, path.len());
                a.path = path;
            }
        }
        self.rekey_all();
    }

    /// The nodes whose virtual time a job of tenant `t` in leaf `leaf` is charged to, top first.
    pub(crate) fn charge_path(&self, t: TenantIdx, leaf: NodeIdx) -> Chain<NodeIdx, CHAIN_MAX> {
        let mut path = Chain::default();
        path.push(leaf);
        if self.shape_kind == TreeShape::Hierarchical {
            let mut cur = Some(t);
            while let Some(c) = cur {
                path.push(self.tenants[c.ix()].node.expect("tenant node"));
                cur = self.tenants[c.ix()].parent;
            }
            path.as_mut_slice().reverse();
        }
        path
    }

    /// `n` and its ancestors below the root, bottom first.
    pub(crate) fn ancestors(&self, n: NodeIdx) -> Chain<NodeIdx, CHAIN_MAX> {
        let mut out = Chain::default();
        let mut cur = Some(n);
        while let Some(c) = cur {
            if c == NodeIdx(0) {
                break;
            }
            out.push(c);
            cur = self.nodes[c.ix()].parent;
        }
        out
    }

    /// The tenant `t` and its ancestors, bottom first.
    pub(crate) fn tenant_chain(&self, t: TenantIdx) -> Chain<TenantIdx, CHAIN_MAX> {
        let mut out = Chain::default();
        out.push(t);
        let mut cur = self.tenants[t.ix()].parent;
        while let Some(p) = cur {
            out.push(p);
            cur = self.tenants[p.ix()].parent;
        }
        out
    }

    /// The name of the policy in force.
    pub fn policy_name(&self) -> PolicyName {
        self.policy.name
    }

    /// The class index of `name`, or of `default`.
    pub(crate) fn class_index(&self, name: Option<&str>) -> Option<u16> {
        self.class_by_name
            .get(name.unwrap_or(DEFAULT_CLASS))
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{HeartbeatReply, JobSpec, Outcome};

    fn submit(engine: &mut Engine, from: usize, n: usize) {
        for i in from..from + n {
            let answer = engine.submit(Time::ZERO, JobSpec::new(format!("j{i}"), "t"));
            assert!(answer.is_accepted(), "{answer:?}");
        }
    }

    // Proves: a worker is forgotten once its time to live has passed since it was last heard
    // from (a poll or an attempt's end), not before; `poll_timeout` names the earliest such
    // instant; two workers due at one instant both go; the audit holds throughout.
    #[test]
    fn workers_expire_their_time_to_live_after_they_were_last_heard_from() {
        let policy = crate::bench_rig::policy("fifo").unwrap();
        let config = EngineConfig {
            worker_ttl: Dur(10),
            ..EngineConfig::default()
        };
        let mut engine = Engine::new(Time::ZERO, policy, config);
        let offer = |name: &str, max_jobs| WorkerOffer {
            worker: name.into(),
            pool: "default".into(),
            capacity: [("cpu".into(), 1.0)].into(),
            labels: Default::default(),
            max_jobs,
        };
        let live = |engine: &Engine| -> Vec<String> {
            let mut names: Vec<String> = engine
                .workers
                .iter()
                .filter(|w| w.group.is_some())
                .map(|w| w.name.to_string())
                .collect();
            names.sort();
            names
        };
        engine.worker_ready(Time(0), &offer("a", 1)).unwrap();
        engine.worker_ready(Time(5), &offer("b", 0)).unwrap();
        engine.worker_ready(Time(5), &offer("c", 0)).unwrap();
        assert!(engine.submit(Time(6), JobSpec::new("j", "t")).is_accepted());
        let leases = engine.schedule(Time(6));
        assert_eq!(leases.len(), 1);
        assert_eq!(&*leases[0].worker, "a");
        // a's expiry moves from 10 to 18; b and c stay due at 15.
        engine
            .finish(
                Time(8),
                "j",
                leases[0].epoch,
                Outcome::Succeeded,
                None,
                None,
            )
            .unwrap();
        engine.audit().unwrap();
        assert_eq!(engine.poll_timeout(), Some(Time(15)));
        engine.tick(Time(14));
        assert_eq!(live(&engine), ["a", "b", "c"]);
        engine.tick(Time(15));
        assert_eq!(live(&engine), ["a"]);
        engine.audit().unwrap();
        assert_eq!(engine.poll_timeout(), Some(Time(18)));
        // Heard from again (a poll): its expiry moves once more.
        engine.worker_ready(Time(17), &offer("a", 0)).unwrap();
        engine.tick(Time(26));
        assert_eq!(live(&engine), ["a"]);
        engine.tick(Time(27));
        assert!(live(&engine).is_empty());
        assert_eq!(engine.poll_timeout(), None);
        engine.audit().unwrap();
        // Back after expiring: listed again.
        engine.worker_ready(Time(30), &offer("b", 0)).unwrap();
        assert_eq!(live(&engine), ["b"]);
        assert_eq!(engine.poll_timeout(), Some(Time(40)));
        engine.audit().unwrap();
    }

    // Proves: leases run out at their grant or last heartbeat plus the lease length in force
    // then, in expiry order, whichever length they were granted under (a shorter length
    // published later expires before leases granted earlier), and the same after a snapshot's
    // restore; `poll_timeout` names the earliest first; the audit holds throughout, and names a
    // lease whose end was changed behind its list's back.
    #[test]
    fn leases_expire_in_order_across_lease_lengths_and_a_restore() {
        let text = |lease: &str| format!("[policy]\nname = \"fifo\"\nlease = \"{lease}\"\n");
        let policy = Policy::from_text(&text("100s")).unwrap();
        let mut engine = Engine::new(Time::ZERO, policy, EngineConfig::default());
        let offer = WorkerOffer {
            worker: "w".into(),
            pool: "default".into(),
            capacity: [("cpu".into(), 4.0)].into(),
            labels: Default::default(),
            max_jobs: 4,
        };
        let secs = |s: u64| Time::ZERO.plus(Dur::from_secs(s));
        engine.worker_ready(secs(1), &offer).unwrap();
        let grant = |engine: &mut Engine, id: &str, at: u64| {
            assert!(engine.submit(secs(at), JobSpec::new(id, "t")).is_accepted());
            let mut leases = engine.schedule(secs(at));
            assert_eq!(leases.len(), 1, "{id}");
            leases.pop().unwrap()
        };
        let a = grant(&mut engine, "a", 1);
        assert_eq!(a.expires, secs(101));
        engine.publish(secs(2), &text("50s")).unwrap();
        assert_eq!(grant(&mut engine, "b", 2).expires, secs(52));
        assert_eq!(grant(&mut engine, "c", 3).expires, secs(53));
        // a's heartbeat under the new length: 10 + 50.
        let reply = engine.heartbeat(secs(10), "a", a.epoch, None).unwrap();
        assert_eq!(reply, HeartbeatReply::Continue { expires: secs(60) });
        assert_eq!(grant(&mut engine, "d", 11).expires, secs(61));
        engine.audit().unwrap();
        assert_eq!(engine.poll_timeout(), Some(secs(52)));
        // The lists read each lease's end from its attempt: one changed while listed (a, at 60,
        // moved past d, at 61, on the 50 s list) leaves its list out of order, which the audit
        // names.
        let mut moved = engine.clone();
        let j = moved.job_idx("a").unwrap();
        moved.job_mut(j).attempt.as_mut().unwrap().expires = secs(70);
        let err = moved.audit().unwrap_err();
        assert!(err.contains("listed out of expiry order"), "{err}");
        let restored = Engine::restore(&engine.snapshot(), EngineConfig::default()).unwrap();
        for mut e in [engine, restored] {
            e.audit().unwrap();
            assert_eq!(e.poll_timeout(), Some(secs(52)));
            let reclaimed = |e: &mut Engine, at: u64| e.tick(secs(at)).reclaimed;
            assert_eq!(reclaimed(&mut e, 51), 0);
            assert_eq!(reclaimed(&mut e, 53), 2, "b and c");
            e.audit().unwrap();
            assert_eq!(reclaimed(&mut e, 59), 0);
            assert_eq!(reclaimed(&mut e, 60), 1, "a");
            assert_eq!(reclaimed(&mut e, 60), 0);
            assert_eq!(reclaimed(&mut e, 61), 1, "d");
            e.audit().unwrap();
            for id in ["a", "b", "c", "d"] {
                let status = e.status(id).unwrap();
                assert_ne!(status.state, JobState::Running, "{id}");
            }
        }
    }

    // Proves: a drain hands over every event of the turn, in order, and leaves the next turn's
    // list with room for as many as that turn held, at least EVENTS_MIN_ROOM and at most
    // EVENTS_ROOM, so that a run of turns of one size, or of a few events each, does not grow
    // its list a doubling at a time.
    #[test]
    fn the_next_turns_events_start_with_room_for_the_last_turns() {
        let policy = crate::bench_rig::policy("fair").unwrap();
        let mut engine = Engine::new(Time::ZERO, policy, EngineConfig::default());
        // The policy's publication, the engine's first event.
        assert_eq!(engine.drain_events().len(), 1);
        assert_eq!(engine.drain_events().capacity(), EVENTS_MIN_ROOM);
        submit(&mut engine, 0, 10);
        let events = engine.drain_events();
        assert_eq!(events.len(), 10);
        let mut seqs = Vec::new();
        for (i, event) in events.iter().enumerate() {
            let Event::JobAccepted { spec, seq, .. } = event else {
                panic!("{event:?}");
            };
            assert_eq!(spec.id, format!("j{i}"));
            seqs.push(*seq);
        }
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
        let next = engine.drain_events();
        assert!(next.is_empty());
        assert_eq!(next.capacity(), 10);
        // An empty turn leaves no room behind it.
        assert_eq!(engine.drain_events().capacity(), 0);
        submit(&mut engine, 10, EVENTS_ROOM + 100);
        assert_eq!(engine.drain_events().len(), EVENTS_ROOM + 100);
        assert_eq!(engine.drain_events().capacity(), EVENTS_ROOM);
    }
}
