//! Applying events: the only place durable state changes.
//!
//! `apply` never decides: every choice (who runs, where, what is charged, what happens after an
//! attempt) was taken by the live engine and is written in the event. When events are not
//! captured, a grant and an attempt's end call [`Engine::apply_granted`] and
//! [`Engine::apply_ended`] directly with what the event would have said, sparing its strings.

use super::Engine;
use super::expiry_list::Link;
use super::finished::FinishedSnap;
use super::state::{Attempt, Job, NodeKind, Placements, to_wns};
use crate::config::PolicyName;
use crate::event::{AfterAttempt, AttemptEnd, Event, StopReason};
use crate::ids::{CHAIN_MAX, Chain, JobIdx, NodeIdx, TenantIdx};
use crate::job::{JobSpec, JobState};
use crate::policy::{COST_PER_WORKER_SECOND, Policy};
use crate::queue::OrderKey;
use crate::shape::ShapeKey;
use crate::time::{Dur, Time};
use std::borrow::Cow;

/// A digest of a job spec, to tell an idempotent resubmission from a reused id.
pub(crate) fn spec_digest(spec: &JobSpec) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = crate::hash::FxHasher::default();
    spec.tenant.hash(&mut h);
    spec.class.hash(&mut h);
    spec.priority.hash(&mut h);
    for (k, v) in &spec.demand {
        k.hash(&mut h);
        v.to_bits().hash(&mut h);
    }
    spec.requires.hash(&mut h);
    spec.gang.hash(&mut h);
    h.finish()
}

/// What a `LeaseGranted` event says, with its job's workers and charge path resolved to
/// indices: built from the event on replay, or directly by a grant whose event nobody captures.
pub(crate) struct Granted {
    pub at: Time,
    pub attempt: u32,
    pub epoch: u64,
    pub expires: Time,
    pub placements: Placements,
    /// Share increments charged along `path` (ppb), top first.
    pub charges: Chain<u64, CHAIN_MAX>,
    /// The job's charge path ([`Engine::charge_path`]).
    pub path: Chain<NodeIdx, CHAIN_MAX>,
    pub estimate: Dur,
    pub policy_version: u64,
    pub borrowed: bool,
    pub drr: Option<(u128, i128, u64)>,
    pub worker_share: u64,
}

impl Engine {
    /// Applies a persisted event: replays a state change without deciding anything.
    pub fn apply(&mut self, event: &Event) {
        self.applying(event.at());
        match event {
            Event::PolicyPublished {
                at,
                version,
                source,
            } => {
                let policy = Policy::from_text(source).unwrap_or_else(|errors| {
                    panic!("a published policy no longer validates: {errors:?}")
                });
                self.install_policy(*at, *version, policy);
            }
            Event::JobAccepted {
                at,
                seq,
                spec,
                estimate,
                deferred_until,
                wfq_tag,
                cost,
            } => {
                self.apply_accepted(*at, *seq, spec, *estimate, *deferred_until, *wfq_tag, *cost);
            }
            Event::JobEligible { job, .. } => {
                let j = self.lookup(job);
                let nb = self.job(j).deferred_until();
                self.deferred.remove(&(nb, j));
                self.job_mut(j).enqueued = self.now;
                self.enqueue(j);
            }
            Event::JobDowngraded { job, .. } => {
                let j = self.lookup(job);
                self.dequeue(j);
                self.job_mut(j).downgraded = true;
                self.enqueue(j);
            }
            Event::LeaseGranted {
                at,
                job,
                attempt,
                epoch,
                expires,
                placements,
                charges,
                estimate,
                policy_version,
                borrowed,
                drr,
                worker_share,
            } => {
                let j = self.lookup(job);
                let placements: Placements = placements
                    .iter()
                    .map(|p| {
                        let w = match self.worker_by_name.get(&*p.worker) {
                            Some(&w) => w,
                            None => self.new_worker(&p.worker, &p.pool),
                        };
                        (w, p.members)
                    })
                    .collect();
                let path = {
                    let job = self.job(j);
                    self.charge_path(job.tenant, job.leaf)
                };
                self.apply_granted(
                    j,
                    Granted {
                        at: *at,
                        attempt: *attempt,
                        epoch: *epoch,
                        expires: *expires,
                        placements,
                        // One per node of the path (the engine never writes more): a
                        // longer list is cut to the path, whose length bounds the inline
                        // list; `apply_granted` reads a shorter one as zeros past its end.
                        charges: charges.iter().copied().take(path.len()).collect(),
                        path,
                        estimate: *estimate,
                        policy_version: *policy_version,
                        borrowed: *borrowed,
                        drr: *drr,
                        worker_share: *worker_share,
                    },
                );
            }
            Event::LeaseExtended {
                at,
                job,
                expires,
                progress,
                ..
            } => {
                let j = self.lookup(job);
                // Off the list while its expiry changes: the list reads it from the attempt.
                self.expiries.remove(&mut self.jobs, j.0);
                let job = self.job_mut(j);
                job.attempt.as_mut().expect("running").expires = *expires;
                if let Some(p) = progress {
                    job.progress = *p;
                }
                let length = expires.since(*at);
                self.expiries.push(&mut self.jobs, j.0, Some(length));
            }
            Event::StopRequested {
                job,
                reason,
                deadline,
                ..
            } => {
                let j = self.lookup(job);
                self.expiries.remove(&mut self.jobs, j.0);
                self.stops.insert((*deadline, j));
                let job = self.job_mut(j);
                job.attempt.as_mut().expect("running").stop = Some((*reason, *deadline));
                if *reason == StopReason::Preempt {
                    // The preempted attempt's epoch is no longer authoritative.
                    job.epoch += 1;
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
                let j = self.lookup(job);
                self.apply_ended(j, *at, *end, *usage, *progress, *after);
            }
            Event::JobCanceled { job, .. } => {
                let j = self.lookup(job);
                self.leave_waiting(j);
                self.finish_job(j, JobState::Canceled, Some("canceled".to_string()));
            }
            Event::JobExpired { job, .. } => {
                let j = self.lookup(job);
                self.leave_waiting(j);
                self.stats.expired += 1;
                let class = self.job(j).class;
                self.classes[class as usize].deadline_misses += 1;
                self.finish_job(
                    j,
                    JobState::Expired,
                    Some("deadline can no longer be met".to_string()),
                );
            }
        }
    }

    /// Notes that an event (or, when events are not captured, its effect) dated `at` is being
    /// applied.
    pub(crate) fn applying(&mut self, at: Time) {
        self.observe(at);
        self.applying_at = at;
    }

    fn lookup(&self, id: &str) -> JobIdx {
        if let Some(j) = self.apply_hint
            && self
                .jobs
                .get(j.ix())
                .and_then(|x| x.as_ref())
                .is_some_and(|x| x.id.is(id))
        {
            return j;
        }
        self.job_idx(id)
            .unwrap_or_else(|| panic!("event names unknown job {id:?}"))
    }

    /// Takes a waiting (queued or deferred) job out of wherever it waits.
    fn leave_waiting(&mut self, j: JobIdx) {
        match self.job(j).state {
            JobState::Queued => self.dequeue(j),
            JobState::Deferred => {
                let nb = self.job(j).deferred_until();
                self.deferred.remove(&(nb, j));
            }
            other => panic!("job is {other:?}, not waiting"),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_accepted(
        &mut self,
        at: Time,
        seq: u64,
        spec: &JobSpec,
        estimate: Dur,
        deferred_until: Option<Time>,
        wfq_tag: u128,
        cost: u128,
    ) {
        let tenant = self.tenant_for(&spec.tenant);
        let (class, key) = match self.accept_hint.take() {
            Some(hint) => {
                debug_assert_eq!(
                    Some(&hint),
                    self.class_and_shape(spec).as_ref(),
                    "admission's class and shape are the accepted job's"
                );
                hint
            }
            None => self
                .class_and_shape(spec)
                .expect("an accepted job's class exists and its shape is valid"),
        };
        let is_gang = key.gang_min > 1;
        let (shape, new) = self
            .shapes
            .acquire(key)
            .expect("accepted job's shape was admitted");
        if new && let Some(m) = self.meter_archive.remove(self.shapes.get(shape)) {
            self.meters.insert(shape, m);
        }
        if is_gang {
            self.gang_shapes += 1;
        }
        self.seq = self.seq.max(seq);
        let j = match self.free_jobs.pop() {
            Some(i) => JobIdx(i),
            None => {
                self.jobs.push(None);
                JobIdx(self.jobs.len() as u32 - 1)
            }
        };
        let class_policy = &self.classes[class as usize].policy;
        let max_attempts = spec
            .max_attempts
            .unwrap_or(class_policy.max_attempts)
            .clamp(1, class_policy.max_attempts.max(1));
        let not_before = deferred_until.unwrap_or(at);
        self.jobs[j.ix()] = Some(Job {
            id: super::job_id::JobId::new(&spec.id),
            tenant,
            class,
            shape,
            priority: spec.priority,
            state: JobState::Deferred,
            seq,
            arrival: at,
            enqueued: not_before,
            estimate,
            deadline: spec.deadline.unwrap_or(Time::MAX),
            max_attempts,
            attempts: 0,
            failures: 0,
            epoch: 0,
            checkpointable: spec.checkpointable,
            downgraded: false,
            progress: Dur::ZERO,
            wfq_tag: to_wns(wfq_tag),
            leaf: NodeIdx(0),
            order: OrderKey::Fixed(1, 0).into(),
            cost_wns: to_wns(cost),
            retry: false,
            digest: spec_digest(spec),
            attempt: None,
        });
        self.index_job(j, &spec.id);
        self.live_jobs += 1;
        let t = &mut self.tenants[tenant.ix()];
        t.live_jobs += 1;
        t.outstanding += to_wns(cost) as u128 * super::state::COST_UNITS_PER_WNS;
        if let Some(burst) = t.burst {
            let refill = refill(t.rate, t.tokens_at, at);
            t.tokens = (t.tokens + refill).min(burst).saturating_sub(cost);
            t.tokens_at = at;
        }
        t.admitted[if deferred_until.is_some() { 1 } else { 0 }] += 1;
        if self.policy.name == PolicyName::Wfq {
            self.gps_note_arrival(tenant, wfq_tag);
        }
        match deferred_until {
            Some(until) if until > at => {
                self.deferred.insert((until, j));
            }
            _ => self.enqueue(j),
        }
    }

    /// The class and shape of a job spec, when it has both (admission, which tells why not,
    /// looks them up itself).
    pub(crate) fn class_and_shape(&mut self, spec: &JobSpec) -> Option<(u16, ShapeKey)> {
        let class = self.class_index(spec.class.as_deref())?;
        Some((class, self.shape_key(spec, class).ok()?))
    }

    /// The shape of a job spec, or why it has none.
    pub(crate) fn shape_key(&mut self, spec: &JobSpec, class: u16) -> Result<ShapeKey, String> {
        let demand = if spec.demand.is_empty() {
            self.resources.default_demand()?
        } else {
            self.resources.vector(&spec.demand)?
        };
        if demand.is_zero() {
            return Err(
                "the demand requests no resource (every job needs some capacity)".to_string(),
            );
        }
        let gang = spec.gang.max(1);
        let gang_min = spec.gang_min.unwrap_or(gang).clamp(1, gang);
        Ok(ShapeKey {
            demand,
            requires: spec
                .requires
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            class,
            preemptible: spec.preemptible,
            gang,
            gang_min,
        })
    }

    /// A `LeaseGranted` event's effect: job `j` leaves its queue and starts `grant`.
    pub(crate) fn apply_granted(&mut self, j: JobIdx, grant: Granted) {
        self.dequeue_for(j, false, true);
        let (tenant, class, shape, leaf, retry) = {
            let job = self.job(j);
            (job.tenant, job.class, job.shape, job.leaf, job.retry)
        };
        let members: u32 = grant.placements.iter().map(|(_, m)| *m).sum();
        let per_member = self.shapes.get(shape).demand.clone();
        debug_assert_eq!(
            grant.path,
            self.charge_path(tenant, leaf),
            "the grant's charge path"
        );
        self.hold(j, tenant, class, leaf, &per_member, &grant.placements);
        // Charges: each level's virtual time advances by its share of the estimated work.
        let charge_cost = grant.estimate.0 as u128;
        for (i, &n) in grant.path.iter().enumerate() {
            let parent = self.nodes[n.ix()]
                .parent
                .expect("charged node has a parent");
            let settled = {
                let node = &self.nodes[n.ix()];
                node.vtime.saturating_sub(node.pending)
            };
            let pv = &mut self.nodes[parent.ix()].child_v;
            *pv = (*pv).max(settled);
            match self.policy.name {
                PolicyName::Fair => {
                    let share = grant.charges.get(i).copied().unwrap_or(0) as u128;
                    let node = &mut self.nodes[n.ix()];
                    let charged = node.weight.divide(share * charge_cost);
                    node.vtime += charged;
                    node.pending += charged;
                }
                PolicyName::RoundRobin => {
                    let node = &mut self.nodes[n.ix()];
                    node.vtime += node.weight.divide(COST_PER_WORKER_SECOND);
                }
                PolicyName::Drr => {
                    if let Some((round, deficit, position)) = grant.drr {
                        let node = &mut self.nodes[n.ix()];
                        node.drr.round = round;
                        node.drr.deficit = deficit;
                        node.drr.position = position;
                        node.drr.fed = true;
                        self.drr_round = self.drr_round.max(round);
                    }
                }
                _ => {}
            }
        }
        let est_cost = grant.worker_share as u128 * grant.estimate.0 as u128;
        // The attempt's pool (a gang's members share their group's): `hold` found its slot.
        let pool = grant
            .placements
            .first()
            .and_then(|(w, _)| self.workers[w.ix()].pool_slot)
            .expect("a granted attempt's pool");
        {
            let t = &mut self.tenants[tenant.ix()];
            t.ledger.in_flight += est_cost;
            if retry {
                t.retry_used += est_cost;
            }
        }
        self.classes[class as usize].ledger.in_flight += est_cost;
        self.pools.at_mut(pool).ledger.in_flight += est_cost;
        let job = self.job_mut(j);
        job.state = JobState::Running;
        job.attempts = grant.attempt;
        job.epoch = grant.epoch;
        job.retry = false;
        job.attempt = Some(Box::new(Attempt {
            number: grant.attempt,
            epoch: grant.epoch,
            started: grant.at,
            expires: grant.expires,
            placements: grant.placements,
            members,
            estimate: grant.estimate,
            charges: grant.charges,
            path: grant.path,
            stop: None,
            borrowed: grant.borrowed,
            policy_version: grant.policy_version,
            worker_share: grant.worker_share,
            lease_link: Link::UNLISTED,
        }));
        let length = grant.expires.since(grant.at);
        self.expiries.push(&mut self.jobs, j.0, Some(length));
        self.stats.dispatches += 1;
        for n in self.ancestors(leaf) {
            self.rekey_node(n);
        }
    }

    /// Books the resources an attempt holds: its tenant and the tenant's ancestors, its leaf and
    /// the leaf's ancestors, its workers, their pools and the class's use of each pool.
    pub(crate) fn hold(
        &mut self,
        j: JobIdx,
        tenant: TenantIdx,
        class: u16,
        leaf: NodeIdx,
        per_member: &crate::resources::ResVec,
        placements: &[(crate::ids::WorkerIdx, u32)],
    ) {
        let members: u32 = placements.iter().map(|(_, m)| *m).sum();
        let demand = per_member.times(members as u64);
        for t in self.tenant_chain(tenant) {
            self.tenants[t.ix()].alloc.add(&demand);
        }
        for n in self.ancestors(leaf) {
            self.nodes[n.ix()].alloc.add(&demand);
        }
        for &(w, m) in placements {
            let part = per_member.times(m as u64);
            let worker = &mut self.workers[w.ix()];
            worker.used.add(&part);
            worker.jobs.insert(j);
            let slot = match worker.pool_slot {
                Some(slot) => slot,
                None => {
                    let slot = self.pools.slot(&worker.pool);
                    worker.pool_slot = Some(slot);
                    slot
                }
            };
            let p = self.pools.at_mut(slot);
            p.used.add(&part);
            p.class_used.entry(class).or_default().add(&part);
        }
    }

    /// An `AttemptEnded` event's effect on job `j`.
    pub(crate) fn apply_ended(
        &mut self,
        j: JobIdx,
        at: Time,
        end: AttemptEnd,
        usage: Dur,
        progress: Option<Dur>,
        after: AfterAttempt,
    ) {
        self.expiries.remove(&mut self.jobs, j.0);
        let a = self
            .job_mut(j)
            .attempt
            .take()
            .expect("ended attempt was running");
        let worker_share = a.worker_share as u128;
        let (tenant, class, shape, leaf) = {
            let job = self.job(j);
            (job.tenant, job.class, job.shape, job.leaf)
        };
        if let Some((_, deadline)) = a.stop {
            self.stops.remove(&(deadline, j));
        }
        let per_member = self.shapes.get(shape).demand.clone();
        let demand = per_member.times(a.members as u64);
        for t in self.tenant_chain(tenant) {
            self.tenants[t.ix()].alloc.sub_times(&demand, 1);
        }
        for n in self.ancestors(leaf) {
            self.nodes[n.ix()].alloc.sub_times(&demand, 1);
        }
        // The pool whose ledger the attempt is booked in: its last placement's.
        let mut last_worker = None;
        let mut forget = Vec::new();
        for &(w, m) in &a.placements {
            let part = per_member.times(m as u64);
            let worker = &mut self.workers[w.ix()];
            worker.used.sub_times(&part, 1);
            worker.jobs.remove(j);
            let idle_and_gone = worker.group.is_none() && worker.jobs.is_empty();
            last_worker = Some(w);
            let p = self
                .pools
                .at_mut(worker.pool_slot.expect("pool of a placement"));
            p.used.sub_times(&part, 1);
            p.class_used
                .get_mut(&class)
                .expect("class usage")
                .sub_times(&part, 1);
            if idle_and_gone {
                forget.push(w);
            }
        }
        // Reconcile: charge actual usage instead of the estimate.
        let (more, delta) = if usage >= a.estimate {
            (true, usage.minus(a.estimate).0 as u128)
        } else {
            (false, a.estimate.minus(usage).0 as u128)
        };
        let repeated_underestimate = self.note_estimate(tenant, class, end, usage, a.estimate);
        if self.policy.name == PolicyName::Fair && a.path.len() == a.charges.len() {
            for (&n, &share) in a.path.iter().zip(a.charges.iter()) {
                if n.ix() >= self.nodes.len() {
                    continue;
                }
                let node = &mut self.nodes[n.ix()];
                let mut amount = node.weight.divide(share as u128 * delta);
                if more && repeated_underestimate && matches!(node.kind, NodeKind::Tenant(_)) {
                    // Repeated underestimation pays a penalty on top of the overrun.
                    amount += amount * self.policy.debt_penalty_ppb as u128 / 1_000_000_000;
                }
                if more {
                    node.vtime += amount;
                } else {
                    node.vtime = node.vtime.saturating_sub(amount);
                }
                let charged = node.weight.divide(share as u128 * a.estimate.0 as u128);
                node.pending = node.pending.saturating_sub(charged);
                // The service is settled now: a sibling that becomes active starts no lower.
                let settled = node.vtime.saturating_sub(node.pending);
                if let Some(parent) = node.parent {
                    let pv = &mut self.nodes[parent.ix()].child_v;
                    *pv = (*pv).max(settled);
                }
            }
        }
        let est_cost = worker_share * a.estimate.0 as u128;
        let actual = worker_share * usage.0 as u128;
        let over = if more { worker_share * delta } else { 0 };
        let retry_attempt = a.number > 1;
        let pool = last_worker
            .and_then(|w| self.workers[w.ix()].pool_slot)
            .expect("an ended attempt's pool");
        for ledger in [
            &mut self.tenants[tenant.ix()].ledger,
            &mut self.classes[class as usize].ledger,
            &mut self.pools.at_mut(pool).ledger,
        ] {
            ledger.in_flight -= est_cost;
            ledger.charged += actual;
            ledger.debt += over;
            ledger.attempts += 1;
            if retry_attempt {
                ledger.retried += actual;
            }
            match end {
                AttemptEnd::Failed { .. } | AttemptEnd::Expired => ledger.failed += actual,
                AttemptEnd::Preempted => ledger.preempted += actual,
                AttemptEnd::Canceled => ledger.canceled += actual,
                AttemptEnd::Succeeded => {}
            }
        }
        // Forgotten only now: a forgotten worker's pool name is cleared, and the books above
        // needed it.
        for w in forget {
            self.forget_worker_if_idle(w);
        }
        match end {
            AttemptEnd::Failed { .. } => {
                self.stats.failures += 1;
                self.job_mut(j).failures += 1;
            }
            AttemptEnd::Expired => {
                self.stats.lease_expiries += 1;
                self.job_mut(j).failures += 1;
            }
            _ => {}
        }
        if let Some(p) = progress {
            self.job_mut(j).progress = p;
        } else if end != AttemptEnd::Preempted || !self.job(j).checkpointable {
            // Work not checkpointed is lost: the next attempt starts over.
            self.job_mut(j).progress = Dur::ZERO;
        }
        // Under `fair` a key is a tier and a balance: with the estimate right the balances
        // stand, and a node whose tier and indexing do not read its allocation keeps its keys
        // (a band's always do): no re-key, which would find each one unchanged.
        let balances_stand = self.policy.name == PolicyName::Fair && delta == 0;
        for n in self.ancestors(leaf) {
            if balances_stand && !self.fair_keys_read_allocation(n) {
                debug_assert!(self.keys_current(n), "node {n:?} kept a stale key");
            } else {
                self.rekey_node(n);
            }
        }
        match after {
            AfterAttempt::Done(state) => {
                let reason = match end {
                    AttemptEnd::Failed { retryable: false } => {
                        Some("failed (not retryable)".to_string())
                    }
                    AttemptEnd::Failed { .. } | AttemptEnd::Expired
                        if state == JobState::Failed =>
                    {
                        Some("attempts or retry budget exhausted".to_string())
                    }
                    _ => None,
                };
                let deadline = self.job(j).deadline;
                if state == JobState::Succeeded && at > deadline {
                    self.classes[class as usize].deadline_misses += 1;
                }
                self.finish_job(j, state, reason);
            }
            AfterAttempt::Requeue {
                not_before,
                seq,
                retry,
            } => {
                if retry {
                    self.stats.retries += 1;
                }
                let job = self.job_mut(j);
                job.seq = seq;
                job.retry = retry;
                self.seq = self.seq.max(seq);
                match not_before {
                    Some(nb) if nb > at => {
                        let job = self.job_mut(j);
                        job.state = JobState::Deferred;
                        job.enqueued = nb;
                        self.deferred.insert((nb, j));
                    }
                    _ => {
                        self.job_mut(j).enqueued = at;
                        self.enqueue(j);
                    }
                }
            }
        }
    }

    /// Learns from a finished attempt how honest the tenant's estimates are in this class.
    /// Returns whether the tenant underestimates repeatedly.
    fn note_estimate(
        &mut self,
        t: TenantIdx,
        class: u16,
        end: AttemptEnd,
        usage: Dur,
        estimate: Dur,
    ) -> bool {
        let e = self.tenants[t.ix()].estimators.entry(class);
        if end != AttemptEnd::Succeeded {
            return e.strikes >= 3;
        }
        let ratio_ppm = if estimate.0 == 0 {
            1_000_000_000
        } else {
            ((usage.0 as u128 * 1_000_000) / estimate.0 as u128).min(1_000_000_000) as u64
        };
        e.observe(usage, ratio_ppm);
        // More than 50% over the estimate is a strike; an honest completion forgives one.
        if ratio_ppm > 1_500_000 {
            e.strikes = e.strikes.saturating_add(1);
        } else {
            e.strikes = e.strikes.saturating_sub(1);
        }
        let repeated = e.strikes >= 3;
        self.classes[class as usize]
            .estimator
            .observe(usage, ratio_ppm);
        repeated
    }

    /// Ends job `j` in a terminal state and remembers it.
    pub(crate) fn finish_job(&mut self, j: JobIdx, state: JobState, reason: Option<String>) {
        let job = self.jobs[j.ix()].take().expect("finished job was live");
        self.free_jobs.push(j.0);
        let id = job.id.as_str();
        self.job_by_id.remove_at(&id, j);
        self.live_jobs -= 1;
        if self.shapes.get(job.shape).gang_min > 1 {
            self.gang_shapes -= 1;
        }
        if let Some(key) = self.shapes.release(job.shape) {
            for g in self.groups.groups.iter_mut() {
                g.forget_shape(job.shape);
            }
            // Its meter outlives it, by description, for the next job of that shape.
            if let Some(m) = self.meters.remove(&job.shape) {
                if self.meter_archive.len() >= super::meter::METER_ARCHIVE_MAX {
                    self.meter_archive.clear();
                }
                self.meter_archive.insert(key, m);
            }
        }
        let t = &mut self.tenants[job.tenant.ix()];
        t.live_jobs -= 1;
        t.outstanding -= job.cost();
        let digest = job.digest;
        if self.config.finished_retention > 0 {
            let record = FinishedSnap {
                id: Cow::Borrowed(&id),
                tenant: job.tenant.0,
                class: job.class,
                state,
                attempts: job.attempts,
                epoch: job.epoch,
                arrival: job.arrival,
                estimate: job.estimate,
                reason: reason.map(Cow::Owned),
                digest,
            };
            self.finished.push(&record, self.config.finished_retention);
        }
    }

    /// WFQ: the fluid system's bookkeeping when flow `t` gets a job with finish tag `tag`.
    fn gps_note_arrival(&mut self, t: TenantIdx, tag: u128) {
        if let Some(old) = self.gps.last_finish.insert(t, tag)
            && self.gps.backlog.remove(&(old, t))
        {
            self.gps.weight_sum -= self.tenants[t.ix()].weight.micros() as u128;
        }
        self.gps.backlog.insert((tag, t));
        self.gps.weight_sum += self.tenants[t.ix()].weight.micros() as u128;
    }
}

/// Tokens a bucket refilling at `rate` (cost units per second) gains from `since` to `now`.
pub(crate) fn refill(rate: Option<u128>, since: Time, now: Time) -> u128 {
    rate.map(|r| r * now.since(since).0 as u128 / 1_000_000_000)
        .unwrap_or(0)
}
