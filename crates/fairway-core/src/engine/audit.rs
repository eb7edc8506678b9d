//! Self-checks: the engine's books recomputed from scratch and compared with what it keeps.
//!
//! Used by the property tests after every step of random traces, and by the deterministic
//! simulation of the whole server. Each check is O(state); none runs on the hot path.

use super::Engine;
use super::state::NodeKind;
use crate::config::{Backfill, PolicyName};
use crate::ids::{GroupId, ShapeId, TenantIdx, WorkerIdx};
use crate::job::JobState;
use crate::resources::ResVec;
use crate::time::Time;
use std::collections::BTreeMap;

impl Engine {
    /// Recomputes allocations from the running attempts and checks them against the books:
    /// workers, pools, tenants and nodes; capacity never over-allocated; limits never
    /// exceeded; at most one attempt (one authoritative epoch) per job; queue counts.
    pub fn audit(&self) -> Result<(), String> {
        if self.classes_limited != self.policy.limits_classes() {
            return Err("the class limits' flag disagrees with the policy".to_string());
        }
        let mut worker_used: BTreeMap<WorkerIdx, ResVec> = BTreeMap::new();
        let mut tenant_alloc: BTreeMap<TenantIdx, ResVec> = BTreeMap::new();
        let mut pool_used: BTreeMap<String, ResVec> = BTreeMap::new();
        let mut queued = 0u64;
        let mut live = 0usize;
        // Every job in a queue, once (checking each job by scanning its sub-queue would be
        // quadratic in the queue length).
        let mut in_queues: std::collections::BTreeSet<(usize, usize, ShapeId)> = Default::default();
        for (n, node) in self.nodes.iter().enumerate() {
            if let Some(leaf) = &node.leaf {
                for (&s, sub) in &leaf.subqueues {
                    for j in sub.jobs() {
                        if !in_queues.insert((j.ix(), n, s)) {
                            return Err(format!("job slot {} queued twice", j.ix()));
                        }
                    }
                }
            }
        }
        for (i, slot) in self.jobs.iter().enumerate() {
            let Some(job) = slot else { continue };
            live += 1;
            match job.state {
                JobState::Queued => {
                    queued += 1;
                    if job.attempt.is_some() {
                        return Err(format!("queued job {} holds an attempt", job.id));
                    }
                    if !in_queues.remove(&(i, job.leaf.ix(), job.shape)) {
                        return Err(format!("job {} missing from its sub-queue", job.id));
                    }
                }
                JobState::Running => {
                    let a = job
                        .attempt
                        .as_ref()
                        .ok_or_else(|| format!("running job {} has no attempt", job.id))?;
                    if a.epoch > job.epoch {
                        return Err(format!(
                            "job {}: attempt epoch {} above the job's {}",
                            job.id, a.epoch, job.epoch
                        ));
                    }
                    if a.stop.is_none() && a.epoch != job.epoch {
                        return Err(format!(
                            "job {}: a live attempt under a stale epoch",
                            job.id
                        ));
                    }
                    let demand = &self.shapes.get(job.shape).demand;
                    let mut members = 0;
                    for &(w, m) in &a.placements {
                        let part = demand.times(m as u64);
                        worker_used.entry(w).or_default().add(&part);
                        pool_used
                            .entry(self.workers[w.ix()].pool.to_string())
                            .or_default()
                            .add(&part);
                        members += m;
                    }
                    if members != a.members {
                        return Err(format!(
                            "job {}: members {} != placed {}",
                            job.id, a.members, members
                        ));
                    }
                    let shape = self.shapes.get(job.shape);
                    if members < shape.gang_min || members > shape.gang.max(1) {
                        return Err(format!(
                            "job {}: a gang started with {members} members",
                            job.id
                        ));
                    }
                    for t in self.tenant_chain(job.tenant) {
                        tenant_alloc
                            .entry(t)
                            .or_default()
                            .add_times(demand, members as u64);
                    }
                }
                JobState::Deferred => {
                    if !self
                        .deferred
                        .contains(&(job.deferred_until(), crate::ids::JobIdx(i as u32)))
                    {
                        return Err(format!("deferred job {} has no timer", job.id));
                    }
                }
                s => return Err(format!("live job {} in terminal state {s:?}", job.id)),
            }
        }
        if let Some((j, _, _)) = in_queues.first() {
            return Err(format!("job slot {j} is in a queue but not queued"));
        }
        if live != self.live_jobs {
            return Err(format!("live jobs {} != counted {}", self.live_jobs, live));
        }
        if queued != self.queued_jobs {
            return Err(format!(
                "queued jobs {} != counted {}",
                self.queued_jobs, queued
            ));
        }
        for (i, w) in self.workers.iter().enumerate() {
            let used = worker_used.remove(&WorkerIdx(i as u32)).unwrap_or_default();
            if used != w.used {
                return Err(format!(
                    "worker {}: used {:?} but attempts hold {:?}",
                    w.name, w.used, used
                ));
            }
            if w.group.is_some() && !within(&w.used, &w.capacity, w.shrink_grace.as_ref()) {
                return Err(format!(
                    "worker {} over-allocated: {:?} of {:?} (grace {:?})",
                    w.name, w.used, w.capacity, w.shrink_grace
                ));
            }
        }
        for (name, p) in self.pools.iter() {
            let used = pool_used.remove(name).unwrap_or_default();
            if used != p.used {
                return Err(format!(
                    "pool {name}: used {:?} but attempts hold {:?}",
                    p.used, used
                ));
            }
        }
        for (i, t) in self.tenants.iter().enumerate() {
            let alloc = tenant_alloc
                .remove(&TenantIdx(i as u32))
                .unwrap_or_default();
            if alloc != t.alloc {
                return Err(format!(
                    "tenant {}: alloc {:?} but attempts hold {:?}",
                    t.name, t.alloc, alloc
                ));
            }
            // Over its limit only by what it held when a publish lowered the limit.
            if let Some(limit) = &t.limit
                && !limit
                    .capped()
                    .all(|(id, cap)| t.alloc.get(id) <= cap.max(grace_of(&t.limit_grace, id)))
            {
                return Err(format!(
                    "tenant {} exceeds its limit: {:?} > {:?}",
                    t.name, t.alloc, limit
                ));
            }
        }
        for (i, n) in self.nodes.iter().enumerate().skip(1) {
            let parent = n.parent.ok_or("non-root node without parent")?;
            for (gs, key) in &n.keyed {
                if !self.nodes[parent.ix()]
                    .index
                    .get(gs)
                    .is_some_and(|set| set.contains(key))
                {
                    return Err(format!(
                        "node {i} keyed under {gs:?} but absent from its parent's index"
                    ));
                }
            }
            if let NodeKind::Tenant(t) | NodeKind::Flat(t) = n.kind
                && self.tenants[t.ix()].node.map(|x| x.ix()) != Some(i)
            {
                return Err(format!("node {i} does not belong to its tenant"));
            }
        }
        self.audit_worker_ttl()?;
        self.audit_expiries()?;
        self.audit_pending()
    }

    /// Exactly the live workers are listed by expiry, each at its last contact plus the time to
    /// live, earliest first.
    fn audit_worker_ttl(&self) -> Result<(), String> {
        let mut last = Time::ZERO;
        for (at, w) in self.worker_ttl.iter() {
            let worker = self
                .workers
                .get(w.ix())
                .ok_or_else(|| format!("worker slot {} listed by expiry but absent", w.0))?;
            if worker.group.is_none() {
                return Err(format!(
                    "worker {:?} listed by expiry but not live",
                    worker.name
                ));
            }
            if at != worker.last_seen.plus(self.config.worker_ttl) {
                return Err(format!(
                    "worker {:?} listed to expire at {at:?}, last seen {:?}",
                    worker.name, worker.last_seen
                ));
            }
            if at < last {
                return Err(format!(
                    "worker {:?} listed out of expiry order",
                    worker.name
                ));
            }
            last = at;
        }
        let live = self.workers.iter().filter(|w| w.group.is_some()).count();
        if live != self.worker_ttl.len() {
            return Err(format!(
                "{live} live workers but {} listed by expiry",
                self.worker_ttl.len()
            ));
        }
        Ok(())
    }

    /// Exactly the running attempts that are not stopping are listed by lease expiry (the
    /// list reads it from the attempt), each list earliest first (an expiry changed while listed
    /// shows as a list out of order), the leases granted or extended for one length on that
    /// length's list.
    fn audit_expiries(&self) -> Result<(), String> {
        let mut listed = 0;
        for (length, list) in self.expiries.lists() {
            let mut last = Time::ZERO;
            for (at, j) in list.iter(&self.jobs) {
                let job = self.jobs[j as usize]
                    .as_ref()
                    .expect("a listed lease's job");
                let a = job.attempt.as_deref().expect("a listed lease's attempt");
                if a.stop.is_some() {
                    return Err(format!(
                        "job {} listed to expire at {at:?} while stopping ({:?})",
                        job.id, a.stop
                    ));
                }
                if at < last {
                    return Err(format!("job {} listed out of expiry order", job.id));
                }
                if length.is_some_and(|l| at.since(a.started) < l) {
                    return Err(format!(
                        "job {} listed among leases of {length:?}, its lease shorter",
                        job.id
                    ));
                }
                last = at;
                listed += 1;
            }
        }
        let leases = self
            .jobs
            .iter()
            .flatten()
            .filter_map(|job| job.attempt.as_deref())
            .filter(|a| a.stop.is_none())
            .count();
        if leases != listed || listed != self.expiries.len() {
            return Err(format!(
                "{leases} running attempts on a lease but {listed} listed by expiry ({} counted)",
                self.expiries.len()
            ));
        }
        Ok(())
    }

    /// Each node's `pending` is what its running attempts' ends will take back.
    fn audit_pending(&self) -> Result<(), String> {
        let pending = self.pending_of_running();
        for (i, (node, want)) in self.nodes.iter().zip(pending).enumerate() {
            if node.pending != want {
                return Err(format!(
                    "node {i}: pending {} but its running attempts charged {want}",
                    node.pending
                ));
            }
        }
        Ok(())
    }

    /// Work conservation after a scheduling pass without backfilling: `Some(why)` when a job
    /// that the policy would start could start now (a waiting worker has room for it) but did
    /// not. Capacity held by reserves, limits, or (for the one-queue policies) a blocked head
    /// does not count.
    pub fn idle_violation(&mut self) -> Option<String> {
        if self.policy.backfill != Backfill::None {
            return None;
        }
        let one_queue = matches!(
            self.policy.name,
            PolicyName::Fifo | PolicyName::Strict | PolicyName::Sjf
        );
        let groups: Vec<GroupId> = self
            .polling
            .iter()
            .filter(|(_, s)| !s.is_empty())
            .map(|(g, _)| *g)
            .collect();
        for g in groups {
            let pick = if one_queue {
                self.select(g, &mut |_| true)
                    .filter(|(_, s, _)| self.fits_now(g, *s))
            } else {
                let mut cache: std::collections::BTreeMap<ShapeId, bool> = Default::default();
                self.select(g, &mut |s| {
                    *cache.entry(s).or_insert_with(|| self.fits_now(g, s))
                })
            };
            if let Some((leaf, _, j)) = pick {
                return Some(format!(
                    "job {} of {} could start in pool {} but waits",
                    self.job(j).id,
                    self.node_name(leaf),
                    self.groups.get(g).pool
                ));
            }
        }
        None
    }

    /// Tenants (by name) owed their guarantee now: they have a queued job that their guarantee
    /// still covers (see `within_guarantee`).
    pub fn tenants_owed_guarantee(&self) -> Vec<String> {
        let mut owed = std::collections::BTreeSet::new();
        for job in self.jobs.iter().flatten() {
            if job.state == JobState::Queued && self.within_guarantee(job.tenant, job.shape) {
                owed.insert(self.tenants[job.tenant.ix()].name.clone());
            }
        }
        owed.into_iter().collect()
    }
}

/// Whether `used` fits in `capacity`, or, resource by resource, in what `grace` lets it keep.
fn within(used: &ResVec, capacity: &ResVec, grace: Option<&ResVec>) -> bool {
    used.iter()
        .all(|(id, a)| a <= capacity.get(id).max(grace.map_or(0, |g| g.get(id))))
}

/// The amount of resource `id` that `grace` lets a tenant keep.
fn grace_of(grace: &Option<ResVec>, id: crate::resources::ResourceId) -> u64 {
    grace.as_ref().map_or(0, |g| g.get(id))
}
