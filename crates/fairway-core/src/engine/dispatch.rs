//! Workers, scheduling passes, placement, backfilling and preemption.

use super::Engine;
use super::apply::Granted;
use super::state::{
    KeptCandidate, KeptDecision, MAX_CANDIDATES, NodeKind, Placements, TreeShape, overwrite,
    overwrite_all,
};
use crate::config::{Backfill, PolicyName};
use crate::event::{Event, Placement, StopReason};
use crate::ids::{CHAIN_MAX, Chain, GroupId, JobIdx, NodeIdx, ShapeId, TenantIdx, WorkerIdx};
use crate::job::{JobState, Lease};
use crate::policy::check_name;
use crate::resources::{ResVec, SHARE_SCALE};
use crate::shape::{MAX_WORKERS, Worker};
use crate::time::{Dur, Time};
use std::collections::{BTreeMap, BTreeSet};

/// A worker announcing that it is alive and can take work.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerOffer {
    /// Unique worker name.
    pub worker: String,
    /// Its pool.
    pub pool: String,
    /// Its total capacity (the engine subtracts what it already runs).
    pub capacity: BTreeMap<String, f64>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Leases it accepts in this poll (0: alive but not asking for work).
    pub max_jobs: u32,
}

/// A reservation held by a waiting job under backfilling.
#[derive(Clone, Debug)]
pub(crate) struct Reservation {
    pub start: Time,
    pub end: Time,
    /// Per worker: demand reserved, and capacity to spare at `start` beyond it.
    pub parts: Vec<(WorkerIdx, ResVec, ResVec)>,
}

/// Answers per shape within one selection (few shapes: a small array, no allocation).
#[derive(Default)]
struct FitCache {
    len: usize,
    entries: [(ShapeId, bool); 16],
}

impl FitCache {
    fn get_or(&mut self, s: ShapeId, compute: impl FnOnce() -> bool) -> bool {
        if let Some(&(_, v)) = self.entries[..self.len].iter().find(|(k, _)| *k == s) {
            return v;
        }
        let v = compute();
        if self.len < self.entries.len() {
            self.entries[self.len] = (s, v);
            self.len += 1;
        }
        v
    }
}

/// Free capacity of a worker from now on: steps `(from, free)`.
type Profile = Vec<(Time, ResVec)>;

/// The most leases one pass grants, as a bound on work per call.
const MAX_GRANTS_PER_PASS: usize = 100_000;

impl Engine {
    /// Registers or refreshes a worker. With `max_jobs > 0` it waits for work until it gets
    /// leases from [`Engine::schedule`] or is withdrawn by [`Engine::worker_withdraw`].
    pub fn worker_ready(&mut self, now: Time, offer: &WorkerOffer) -> Result<(), String> {
        // The engine's time, which never goes back: the worker list is kept by expiry.
        let now = self.observe(now);
        check_name("worker", &offer.worker)?;
        check_name("pool", &offer.pool)?;
        for (k, v) in &offer.labels {
            check_name("label", k)?;
            check_name("label value", v)?;
        }
        let capacity = self.resources.vector(&offer.capacity)?;
        if capacity.is_zero() {
            return Err(format!("worker {:?} declares no capacity", offer.worker));
        }
        let w = match self.worker_by_name.get(&offer.worker) {
            Some(&w) => w,
            None => {
                if self.workers.len() >= MAX_WORKERS {
                    return Err(format!("too many workers (at most {MAX_WORKERS})"));
                }
                self.new_worker(&offer.worker, &offer.pool)
            }
        };
        let worker = &self.workers[w.ix()];
        if !worker.jobs.is_empty() && *worker.pool != *offer.pool {
            // Its attempts hold capacity in the pool they were placed in: moving the worker
            // would move their books too. It may rejoin elsewhere once they end or expire.
            return Err(format!(
                "worker {:?} holds {} lease(s) in pool {:?}: it cannot join pool {:?} until they end or expire",
                offer.worker,
                worker.jobs.len(),
                worker.pool,
                offer.pool
            ));
        }
        let group = self
            .groups
            .group_for(&offer.pool, &offer.labels, &capacity)
            .ok_or("too many distinct worker kinds (pool, labels, capacity)")?;
        let current = self.workers[w.ix()].group;
        if current != Some(group) {
            if current.is_some() {
                self.worker_leave(w);
            }
            self.worker_join(w, group, &offer.pool, capacity);
        }
        let worker = &mut self.workers[w.ix()];
        worker.last_seen = now;
        self.worker_ttl.set(w, now.plus(self.config.worker_ttl));
        worker.max_jobs_left = offer.max_jobs;
        worker.polling = offer.max_jobs > 0;
        let set = self.polling.entry(group).or_default();
        if offer.max_jobs > 0 {
            set.insert(w);
        } else {
            set.remove(&w);
        }
        Ok(())
    }

    /// The worker stops waiting for work (its long poll ended); it stays alive.
    pub fn worker_withdraw(&mut self, worker: &str) {
        if let Some(&w) = self.worker_by_name.get(worker) {
            self.stop_polling(w);
        }
    }

    fn stop_polling(&mut self, w: WorkerIdx) {
        let worker = &mut self.workers[w.ix()];
        worker.polling = false;
        worker.max_jobs_left = 0;
        if let Some(g) = worker.group
            && let Some(set) = self.polling.get_mut(&g)
        {
            set.remove(&w);
        }
    }

    pub(crate) fn new_worker(&mut self, name: &str, pool: &str) -> WorkerIdx {
        let worker = Worker {
            name: name.into(),
            pool: pool.into(),
            pool_slot: None,
            group: None,
            capacity: ResVec::default(),
            used: ResVec::default(),
            shrink_grace: None,
            jobs: Default::default(),
            polling: false,
            max_jobs_left: 0,
            last_seen: self.now,
        };
        let w = match self.free_workers.pop() {
            Some(i) => {
                self.workers[i as usize] = worker;
                WorkerIdx(i)
            }
            None => {
                self.workers.push(worker);
                WorkerIdx(self.workers.len() as u32 - 1)
            }
        };
        self.worker_by_name.insert(name.to_string(), w);
        w
    }

    /// Forgets a worker that is neither live nor holding leases, so that workers that come and
    /// go under new names do not accumulate.
    pub(crate) fn forget_worker_if_idle(&mut self, w: WorkerIdx) {
        let worker = &mut self.workers[w.ix()];
        if worker.group.is_some() || !worker.jobs.is_empty() || worker.name.is_empty() {
            return;
        }
        self.worker_by_name.remove(&*worker.name);
        worker.name = "".into();
        worker.pool = "".into();
        worker.pool_slot = None;
        self.free_workers.push(w.0);
    }

    fn worker_join(&mut self, w: WorkerIdx, g: GroupId, pool: &str, capacity: ResVec) {
        let became_live = self.groups.get(g).workers.is_empty();
        self.groups.get_mut(g).workers.insert(w);
        let worker = &mut self.workers[w.ix()];
        worker.group = Some(g);
        if *worker.pool != *pool {
            worker.pool = pool.into();
            worker.pool_slot = None;
        }
        worker.capacity = capacity.clone();
        // Back with less capacity than its running attempts hold (fuzz finding F2): they go
        // on; free capacity is zero until enough of them end.
        worker.shrink_grace = (!worker.used.fits_in(&capacity)).then(|| worker.used.clone());
        let p = self.pools.entry(pool);
        p.capacity.add(&capacity);
        p.live_workers += 1;
        self.total_capacity.add(&capacity);
        self.capacity_changed(g, became_live);
    }

    fn worker_leave(&mut self, w: WorkerIdx) {
        self.stop_polling(w);
        let Some(g) = self.workers[w.ix()].group.take() else {
            return;
        };
        self.groups.get_mut(g).workers.remove(&w);
        let capacity = self.workers[w.ix()].capacity.clone();
        let pool = self.workers[w.ix()].pool.clone();
        let p = self.pools.get_mut(&pool).expect("pool of a live worker");
        p.capacity.sub_times(&capacity, 1);
        p.live_workers -= 1;
        self.total_capacity.sub_times(&capacity, 1);
        let died = self.groups.get(g).workers.is_empty();
        self.polling.get_mut(&g).map(|s| s.remove(&w));
        self.capacity_changed(g, died);
    }

    /// Keeps the index right after a group gained or lost workers.
    fn capacity_changed(&mut self, g: GroupId, group_appeared_or_vanished: bool) {
        if group_appeared_or_vanished {
            self.live_groups = self.groups.live().collect();
        }
        if self.gang_shapes > 0 {
            // Whether a gang fits a group depends on how many workers it has.
            let bound = self.shapes.id_bound();
            for s in 0..bound {
                self.groups.get_mut(g).forget_shape(ShapeId(s as u32));
            }
        }
        if group_appeared_or_vanished || self.gang_shapes > 0 || self.policy.name == PolicyName::Drf
        {
            self.rekey_all();
        }
    }

    /// Whether gang shape `s` has enough live workers in group `g` for its minimum.
    pub(crate) fn gang_fits_group(&self, g: GroupId, s: ShapeId) -> bool {
        let shape = self.shapes.get(s);
        if shape.gang_min <= 1 {
            return true;
        }
        let group = self.groups.get(g);
        let per_worker = group.capacity.copies_of(&shape.demand);
        per_worker.saturating_mul(group.workers.len() as u64) >= shape.gang_min as u64
    }

    /// Forgets workers not heard from within the worker TTL.
    pub(crate) fn expire_workers(&mut self, now: Time) {
        for w in self.worker_ttl.take_due(now) {
            self.worker_leave(w);
            self.forget_worker_if_idle(w);
        }
    }

    /// Moves aging jobs that reached their cap into the flat order.
    pub(crate) fn process_caps(&mut self, now: Time) {
        while let Some(&(at, j)) = self.caps.first() {
            if at > now {
                break;
            }
            self.caps.remove(&(at, j));
            // Re-entering the queue at the same sequence recomputes the key as capped.
            self.dequeue_trial(j);
            self.enqueue_trial(j);
        }
    }

    /// Runs scheduling passes over every group with workers waiting for work and returns the
    /// leases granted. Durable effects are in the events.
    pub fn schedule(&mut self, now: Time) -> Vec<Lease> {
        let now = self.observe(now);
        self.process_caps(now);
        // As large as a first push would make it, without the growth path's work.
        let mut leases = Vec::with_capacity(4);
        // A job that several groups can run may block one group's pass and then start in
        // another: passes repeat until a round grants nothing.
        for _ in 0..64 {
            let before = leases.len();
            // The groups are walked in order without collecting them first: a pass over a
            // group changes only that group's set of waiting workers, so the next one is the
            // same as in a list taken before the round.
            let mut groups = 0;
            let mut next = self.next_polling_group(None);
            while let Some(g) = next {
                self.pass(g, &mut leases);
                groups += 1;
                next = self.next_polling_group(Some(g));
            }
            if leases.len() == before || groups < 2 {
                break;
            }
        }
        // Reserves and guarantees are `fair`'s; only there can preempted capacity be sure to
        // reach the work it was taken for (holds keep borrowers from taking it back).
        if self.policy.preemption && self.policy.name == PolicyName::Fair {
            self.preempt_where_owed();
        }
        self.prefetch_next_node();
        leases
    }

    /// The first group after `after` (from the first, with `None`) with workers waiting.
    fn next_polling_group(&self, after: Option<GroupId>) -> Option<GroupId> {
        let from = match after {
            Some(g) => std::ops::Bound::Excluded(g),
            None => std::ops::Bound::Unbounded,
        };
        self.polling
            .range((from, std::ops::Bound::Unbounded))
            .find(|(_, set)| !set.is_empty())
            .map(|(g, _)| *g)
    }

    /// One scheduling pass over group `g`.
    fn pass(&mut self, g: GroupId, leases: &mut Vec<Lease>) {
        self.stats.passes += 1;
        let backfill = self.policy.backfill;
        let depth = match backfill {
            Backfill::None => 0,
            Backfill::Easy => 1,
            Backfill::Conservative => self.policy.reservation_depth,
        };
        let window = self.policy.backfill_window;
        // The queue-order policies keep one global order: without backfilling, the first job
        // that cannot start blocks every later one (of the shapes this group can run).
        let one_queue = backfill == Backfill::None
            && matches!(
                self.policy.name,
                PolicyName::Fifo | PolicyName::Strict | PolicyName::Sjf
            );
        let mut reservations: Vec<Reservation> = Vec::new();
        let mut set_aside: Vec<JobIdx> = Vec::new();
        let mut passed_over = 0usize;
        let mut grants = 0usize;
        loop {
            if self.polling.get(&g).is_none_or(|s| s.is_empty()) || grants >= MAX_GRANTS_PER_PASS {
                break;
            }
            // While reservations may still be made, the policy's next choice is taken whatever
            // its shape; after that, only shapes that fit now can start.
            let only_fitting = reservations.len() >= depth && !one_queue;
            if only_fitting && !self.waiting_worker_has_room(g) {
                // Every job demands some resource: none fits where nothing is free (the pass
                // that just filled its last worker stops here, without a selection).
                break;
            }
            let pick = if only_fitting {
                let mut cache = FitCache::default();
                self.select(g, &mut |s| cache.get_or(s, || self.fits_now(g, s)))
            } else {
                self.select(g, &mut |_| true)
            };
            let Some((leaf, _, j)) = pick else { break };
            self.stats.candidates_examined += 1;
            if self.policy.name == PolicyName::Drr && !self.drr_may_send(leaf, j) {
                continue;
            }
            if let Some((placements, borrowed)) = self.try_place(j, g, &mut reservations) {
                self.grant(
                    j,
                    leaf,
                    placements,
                    borrowed,
                    !reservations.is_empty(),
                    leases,
                );
                grants += 1;
                continue;
            }
            if one_queue {
                break;
            }
            if reservations.len() < depth
                && let Some(r) = self.earliest_start(j, g, &reservations)
            {
                for other in reservations.iter_mut() {
                    shrink_spare(other, &r);
                }
                reservations.push(r);
            }
            self.dequeue_trial(j);
            set_aside.push(j);
            passed_over += 1;
            if passed_over >= window {
                break;
            }
        }
        for j in set_aside.into_iter().rev() {
            self.enqueue_trial(j);
        }
    }

    /// DRR: may queue `leaf` send its head `j` in its current round? If not, it moves to the
    /// round in which its deficit will cover the head's cost.
    fn drr_may_send(&mut self, leaf: NodeIdx, j: JobIdx) -> bool {
        let cost = self.job(j).cost() as i128;
        let quantum = (self.nodes[leaf.ix()].weight.scale(1_000_000) as i128)
            .saturating_mul(self.policy.quantum as i128)
            / 1_000_000;
        let quantum = quantum.max(1);
        let drr = &mut self.nodes[leaf.ix()].drr;
        if !drr.fed {
            drr.deficit += quantum;
            drr.fed = true;
        }
        if cost <= drr.deficit {
            return true;
        }
        let rounds = (cost - drr.deficit + quantum - 1) / quantum;
        drr.round += rounds as u128;
        drr.deficit += (rounds - 1) * quantum;
        drr.fed = false;
        self.rekey_node(leaf);
        false
    }

    /// Whether some job of shape `s` could start in group `g` now (capacity, reserve holds).
    pub(crate) fn fits_now(&self, g: GroupId, s: ShapeId) -> bool {
        // The workers' free capacity first: after a pass has filled its workers this is the
        // answer, and it is cheaper than the reserves' arithmetic of `hold_status`.
        self.fits_waiting_workers(g, s) && self.hold_status(g, s).is_some()
    }

    /// Whether some waiting worker of `g` takes another lease and has any capacity free.
    fn waiting_worker_has_room(&self, g: GroupId) -> bool {
        self.polling.get(&g).is_some_and(|polling| {
            polling.iter().any(|&w| {
                let worker = &self.workers[w.ix()];
                worker.max_jobs_left > 0 && !worker.used.exhausts(&worker.capacity)
            })
        })
    }

    /// Whether `g`'s waiting workers have the free capacity for a job of shape `s` (for a
    /// gang, its smallest size).
    fn fits_waiting_workers(&self, g: GroupId, s: ShapeId) -> bool {
        let shape = self.shapes.get(s);
        let Some(polling) = self.polling.get(&g) else {
            return false;
        };
        let mut members = 0u64;
        for &w in polling {
            members += members_fitting(&self.workers[w.ix()], shape);
            if members >= shape.gang_min as u64 {
                return true;
            }
        }
        false
    }

    /// Whether a job of shape `s` may use the free capacity of `g`'s pool given the reserves
    /// of higher bands: `Some(false)` without borrowing, `Some(true)` borrowing (preemptible work
    /// under a preempting policy), `None` not at all.
    pub(crate) fn hold_status(&self, g: GroupId, s: ShapeId) -> Option<bool> {
        if self.policy.name != PolicyName::Fair {
            return Some(false);
        }
        if !self.classes.iter().any(|c| c.policy.reserve_ppb > 0) {
            return Some(false);
        }
        let shape = self.shapes.get(s);
        let Some(pool) = self.pools.get(&self.groups.get(g).pool) else {
            return Some(false);
        };
        let holds = self.holds_above(pool, shape.class);
        if holds.is_zero() {
            return Some(false);
        }
        let need = shape.demand.times(shape.gang_min as u64);
        let mut after = pool.used.clone();
        after.add(&need);
        after.add(&holds);
        if after.fits_in(&pool.capacity) {
            Some(false)
        } else if shape.preemptible
            && self.policy.preemption
            && !self.higher_band_waiting(shape.class)
        {
            // Borrowing is for reserve nobody is asking for: lending it while the band it is
            // held for waits would only buy a preemption.
            Some(true)
        } else {
            None
        }
    }

    /// Whether a band with a reserve and higher priority than `class` has jobs waiting.
    fn higher_band_waiting(&self, class: u16) -> bool {
        let priority = self.classes[class as usize].policy.priority;
        self.classes
            .iter()
            .any(|c| c.policy.reserve_ppb > 0 && c.policy.priority > priority && c.queued > 0)
    }

    /// Capacity of pool `p` held for bands of higher priority than `class` and not used by them.
    fn holds_above(&self, p: &super::state::Pool, class: u16) -> ResVec {
        let mut holds = ResVec::default();
        let priority = self.classes[class as usize].policy.priority;
        for (c, rt) in self.classes.iter().enumerate() {
            let cp = &rt.policy;
            if cp.reserve_ppb == 0 || cp.priority <= priority {
                continue;
            }
            let reserved = p.capacity.scaled_ppb(cp.reserve_ppb);
            let used = p.class_used.get(&(c as u16)).cloned().unwrap_or_default();
            holds.add(&reserved.saturating_minus(&used));
        }
        holds
    }

    /// Where job `j` can start now on `g`'s waiting workers without delaying a reservation.
    fn try_place(
        &self,
        j: JobIdx,
        g: GroupId,
        reservations: &mut [Reservation],
    ) -> Option<(Placements, bool)> {
        let job = self.job(j);
        let shape = self.shapes.get(job.shape);
        let borrowed = self.hold_status(g, job.shape)?;
        let polling = self.polling.get(&g)?;
        let end = self.now.plus(job.estimate.minus(job.progress));
        // How many members each waiting worker can take without delaying any reservation.
        let room = |w: WorkerIdx| -> u64 {
            let mut copies = members_fitting(&self.workers[w.ix()], shape);
            if copies == 0 {
                return 0;
            }
            for r in reservations.iter() {
                if end <= r.start {
                    continue;
                }
                for (rw, _, spare) in &r.parts {
                    if *rw == w {
                        copies = copies.min(spare.copies_of(&shape.demand));
                    }
                }
            }
            copies
        };
        let placements: Placements = if shape.gang <= 1 {
            // Best fit: the worker left with the least free capacity, then the lowest index.
            let mut best: Option<(u64, WorkerIdx)> = None;
            for &w in polling {
                if room(w) == 0 {
                    continue;
                }
                if polling.len() == 1 {
                    // The only worker waiting: nothing to compare its fit with.
                    best = Some((0, w));
                    break;
                }
                let worker = &self.workers[w.ix()];
                let left = worker.free().saturating_minus(&shape.demand);
                let fit = (left.dominant_share_ppb(&worker.capacity), w);
                if best.is_none_or(|b| fit < b) {
                    best = Some(fit);
                }
            }
            Placements::One(Some((best?.1, 1)))
        } else {
            let mut room: Vec<(WorkerIdx, u64)> = polling
                .iter()
                .map(|&w| (w, room(w)))
                .filter(|&(_, copies)| copies > 0)
                .collect();
            room.sort_by_key(|(w, c)| (std::cmp::Reverse(*c), *w));
            // An elastic gang grows only as far as its tenants' limits allow (fuzz finding F4).
            let wanted = self.members_within_limits(job.tenant, &shape.demand, shape.gang);
            let mut left = wanted;
            let mut out = Vec::new();
            for (w, c) in room {
                if left == 0 {
                    break;
                }
                let take = c.min(left);
                out.push((w, take as u32));
                left -= take;
            }
            let placed = wanted - left;
            if placed < shape.gang_min as u64 {
                return None;
            }
            out.into()
        };
        for r in reservations.iter_mut() {
            if end <= r.start {
                continue;
            }
            for (rw, _, spare) in r.parts.iter_mut() {
                if let Some((_, m)) = placements.iter().find(|(w, _)| w == rw) {
                    *spare = spare.saturating_minus(&shape.demand.times(*m as u64));
                }
            }
        }
        Some((placements, borrowed))
    }

    /// The most members of a gang of `gang` with `demand` each (at most `gang`) that tenant `t`
    /// and its ancestors have room for under their limits.
    fn members_within_limits(&self, t: TenantIdx, demand: &ResVec, gang: u32) -> u64 {
        self.tenant_chain(t)
            .into_iter()
            .map(|c| self.tenants[c.ix()].room_for(demand))
            .fold(gang as u64, u64::min)
    }

    /// The attempts running on worker `w` with the instant each is expected to end. An attempt
    /// past its estimate is expected to run as long again as it has overrun (at least a
    /// millisecond): assuming it ends at once would pin the next reservation to now, leaving
    /// only spare capacity to backfill for as long as the overrun lasts.
    fn expected_ends(&self, w: WorkerIdx) -> Vec<(Time, ResVec)> {
        let now = self.now;
        self.workers[w.ix()]
            .jobs
            .iter()
            .filter_map(|j| {
                let job = self.job(j);
                let a = job.attempt.as_ref()?;
                let members = a
                    .placements
                    .iter()
                    .find(|(pw, _)| *pw == w)
                    .map(|(_, m)| *m)
                    .unwrap_or(0);
                let due = a.started.plus(a.estimate);
                let end = if due > now {
                    due
                } else {
                    now.plus(now.since(due).max(Dur::from_millis(1)))
                };
                Some((end, self.shapes.get(job.shape).demand.times(members as u64)))
            })
            .collect()
    }

    /// The free capacity of worker `w` from now on, as steps `(from, free)`, given the attempts
    /// it runs and the reservations made; and whether free capacity only grows (no reservation
    /// starts later), which makes the least free capacity over an interval its value at the start.
    fn free_profile(
        &self,
        w: WorkerIdx,
        reservations: &[Reservation],
    ) -> (Vec<(Time, ResVec)>, bool) {
        let capacity = &self.workers[w.ix()].capacity;
        let mut used = ResVec::default();
        // (time, order, demand, acquire): releases sort before acquisitions at the same instant.
        let mut changes: Vec<(Time, u8, ResVec, bool)> = Vec::new();
        for (end, demand) in self.expected_ends(w) {
            used.add(&demand);
            changes.push((end, 0, demand, false));
        }
        let mut monotone = true;
        for r in reservations {
            for (rw, part, _) in &r.parts {
                if *rw != w || r.end <= self.now {
                    continue;
                }
                if r.start <= self.now {
                    used.add(part);
                } else {
                    monotone = false;
                    changes.push((r.start, 1, part.clone(), true));
                }
                changes.push((r.end, 0, part.clone(), false));
            }
        }
        changes.sort_by_key(|a| (a.0, a.1));
        let mut steps: Vec<(Time, ResVec)> = vec![(self.now, capacity.saturating_minus(&used))];
        for (t, _, demand, acquire) in changes {
            if acquire {
                used.add(&demand);
            } else {
                used = used.saturating_minus(&demand);
            }
            let free = capacity.saturating_minus(&used);
            match steps.last_mut() {
                Some(last) if last.0 == t => last.1 = free,
                _ => steps.push((t, free)),
            }
        }
        (steps, monotone)
    }

    /// The earliest instant at which job `j` could start in group `g`, given the attempts
    /// running and the reservations already made, and where: the job's reservation.
    pub(crate) fn earliest_start(
        &self,
        j: JobIdx,
        g: GroupId,
        reservations: &[Reservation],
    ) -> Option<Reservation> {
        let job = self.job(j);
        let shape = self.shapes.get(job.shape);
        let run = job.estimate.minus(job.progress).max(Dur(1));
        let mut profiles: Vec<(WorkerIdx, Profile, bool)> = Vec::new();
        let mut times: BTreeSet<Time> = BTreeSet::new();
        for &w in &self.groups.get(g).workers {
            let (steps, monotone) = self.free_profile(w, reservations);
            times.extend(steps.iter().map(|s| s.0));
            profiles.push((w, steps, monotone));
        }
        let wanted = shape.gang.max(1) as u64;
        for &t in &times {
            let until = t.plus(run);
            let mut parts = Vec::new();
            let mut members = 0u64;
            for (w, steps, monotone) in &profiles {
                // Index of the step in force at t.
                let at = steps.partition_point(|s| s.0 <= t).saturating_sub(1);
                let free = if *monotone {
                    steps[at].1.clone()
                } else {
                    let mut least = steps[at].1.clone();
                    for (st, f) in &steps[at + 1..] {
                        if *st >= until {
                            break;
                        }
                        least = min_vec(&least, f);
                    }
                    least
                };
                let copies = free.copies_of(&shape.demand).min(wanted - members);
                if copies == 0 {
                    continue;
                }
                let part = shape.demand.times(copies);
                let spare = free.saturating_minus(&part);
                parts.push((*w, part, spare));
                members += copies;
                if members >= wanted {
                    break;
                }
            }
            if members >= shape.gang_min.max(1) as u64 {
                return Some(Reservation {
                    start: t,
                    end: until,
                    parts,
                });
            }
        }
        None
    }

    /// Starts job `j` on `placements`: emits the lease and records the decision.
    fn grant(
        &mut self,
        j: JobIdx,
        leaf: NodeIdx,
        placements: Placements,
        borrowed: bool,
        backfilled: bool,
        leases: &mut Vec<Lease>,
    ) {
        let now = self.now;
        let (tenant, shape_id, estimate) = {
            let job = self.job(j);
            (job.tenant, job.shape, job.estimate)
        };
        let members: u32 = placements.iter().map(|(_, m)| *m).sum();
        let demand = self.shapes.get(shape_id).demand.times(members as u64);
        let path = self.charge_path(tenant, leaf);
        let charges: Chain<u64, CHAIN_MAX> = path
            .iter()
            .map(|&n| self.share_increment(n, &demand))
            .collect();
        let first = placements[0].0;
        let worker_share = (self
            .shapes
            .get(shape_id)
            .demand
            .dominant_share_ppb(&self.workers[first.ix()].capacity)
            as u128
            * members as u128)
            .min(u64::MAX as u128) as u64;
        let drr = (self.policy.name == PolicyName::Drr).then(|| {
            let d = self.nodes[leaf.ix()].drr;
            (d.round, d.deficit - self.job(j).cost() as i128, d.position)
        });
        // The decision's record, written into the ring's oldest one (once the ring is full)
        // so that a decision allocates and frees no strings for it.
        let mut record = (self.config.decision_ring > 0).then(|| {
            let mut r = if self.decisions.len() >= self.config.decision_ring {
                self.decisions
                    .pop_front()
                    .unwrap_or_else(KeptDecision::blank)
            } else {
                KeptDecision::blank()
            };
            r.candidate_count = self.decision_candidates(shape_id, &mut r.candidates);
            let names = placements.iter().map(|&(w, _)| &*self.workers[w.ix()].name);
            overwrite_all(&mut r.workers, names);
            r
        });
        let job = self.job(j);
        let attempt = job.attempts + 1;
        let epoch = job.epoch + 1;
        let expires = now.plus(self.policy.lease);
        let mut id = job.id.to_text();
        let progress = job.progress;
        if let Some(r) = record.as_mut() {
            overwrite(&mut r.job, &id);
        }
        if backfilled {
            self.stats.backfills += 1;
        }
        // The id is needed after the leases only for the event: the last lease takes it
        // otherwise (one allocation fewer per decision).
        let id_needed_after = self.config.capture_events;
        for (i, &(w, m)) in placements.iter().enumerate() {
            let worker = &mut self.workers[w.ix()];
            let job = if i + 1 == placements.len() && !id_needed_after {
                std::mem::take(&mut id)
            } else {
                id.clone()
            };
            leases.push(Lease {
                job,
                worker: worker.name.clone(),
                attempt,
                epoch,
                expires,
                members: m,
                progress,
            });
            worker.max_jobs_left = worker.max_jobs_left.saturating_sub(1);
            if worker.max_jobs_left == 0 {
                self.stop_polling(w);
            }
        }
        let granted = Granted {
            at: now,
            attempt,
            epoch,
            expires,
            placements,
            charges,
            path,
            estimate,
            policy_version: self.version,
            borrowed,
            drr,
            worker_share,
        };
        if self.config.capture_events {
            let event = self.lease_granted(id, granted);
            self.emit_for(j, event);
        } else {
            // Nobody will persist the event: apply its effect without building it.
            self.applying(now);
            self.apply_granted(j, granted);
        }
        if let Some(mut r) = record {
            let job = self.job(j);
            r.tenant = tenant;
            r.class = job.class;
            r.seq = self.stats.dispatches;
            r.at = now;
            r.policy_version = self.version;
            r.epoch = epoch;
            r.estimate = estimate;
            r.backfilled = backfilled;
            r.borrowed = borrowed;
            r.waited = now.since(job.enqueued);
            self.decisions.push_back(r);
        }
    }

    /// The `LeaseGranted` event of job `job` for `g`.
    fn lease_granted(&self, job: String, g: Granted) -> Event {
        let placements = g
            .placements
            .iter()
            .map(|&(w, members)| Placement {
                worker: self.workers[w.ix()].name.clone(),
                pool: self.workers[w.ix()].pool.clone(),
                members,
            })
            .collect();
        Event::LeaseGranted {
            at: g.at,
            job,
            attempt: g.attempt,
            epoch: g.epoch,
            expires: g.expires,
            placements,
            charges: g.charges.to_vec(),
            estimate: g.estimate,
            policy_version: g.policy_version,
            borrowed: g.borrowed,
            drr: g.drr,
            worker_share: g.worker_share,
        }
    }

    /// The increase of node `n`'s weighted dominant share above its guarantee if it takes
    /// `demand` more (ppb of the lendable capacity); for a band, the job's own dominant share.
    fn share_increment(&self, n: NodeIdx, demand: &ResVec) -> u64 {
        if self.policy.name != PolicyName::Fair {
            return 0;
        }
        match self.nodes[n.ix()].kind {
            NodeKind::Tenant(t) => {
                let tenant = &self.tenants[t.ix()];
                let before = tenant
                    .alloc
                    .dominant_share_above_ppb(&tenant.guarantee, &self.total_capacity);
                let mut after = tenant.alloc.clone();
                after.add(demand);
                after
                    .dominant_share_above_ppb(&tenant.guarantee, &self.total_capacity)
                    .saturating_sub(before)
            }
            _ => demand
                .dominant_share_ppb(&self.total_capacity)
                .min(SHARE_SCALE * 1000),
        }
    }

    /// Takes a waiting job out of its queue for the rest of a pass (it is put back after).
    pub(crate) fn dequeue_trial(&mut self, j: JobIdx) {
        self.dequeue_inner(j, true);
    }

    /// Puts a job set aside by [`Engine::dequeue_trial`] back.
    pub(crate) fn enqueue_trial(&mut self, j: JobIdx) {
        self.enqueue_inner(j, true);
    }

    /// Asks preemptible borrowers to stop where a higher band's reserve or a tenant's guarantee
    /// is owed capacity they hold.
    fn preempt_where_owed(&mut self) {
        let groups: Vec<GroupId> = self.groups.live().collect();
        let mut reserved: Vec<(i32, u16)> = self
            .classes
            .iter()
            .enumerate()
            .filter(|(_, c)| c.policy.reserve_ppb > 0)
            .map(|(i, c)| (-c.policy.priority, i as u16))
            .collect();
        reserved.sort();
        for g in groups {
            // Reserves, most urgent band first: its best job that cannot start now.
            for &(_, class) in &reserved {
                if !self.class_reserve_owed(g, class) {
                    continue;
                }
                let mut cache = FitCache::default();
                let blocked = self.select(g, &mut |s| {
                    cache.get_or(s, || {
                        self.shapes.get(s).class == class && !self.fits_now(g, s)
                    })
                });
                if let Some((_, _, j)) = blocked {
                    self.preempt_for(j, g, true);
                }
            }
            // Guarantees: the policy's next job among those that cannot start, if its tenant is
            // owed its guarantee (tier 0 comes first, so it is found first).
            if self.shape_kind == TreeShape::Hierarchical {
                let mut cache = FitCache::default();
                let blocked = self.select(g, &mut |s| cache.get_or(s, || !self.fits_now(g, s)));
                if let Some((_, s, j)) = blocked
                    && self.within_guarantee(self.job(j).tenant, s)
                {
                    self.preempt_for(j, g, false);
                }
            }
        }
    }

    fn preempt_for(&mut self, j: JobIdx, g: GroupId, for_reserve: bool) {
        if let Some(victims) = self.choose_victims(j, g, for_reserve) {
            for v in victims {
                self.request_stop(v, StopReason::Preempt);
                self.stats.preemptions += 1;
            }
        }
    }

    /// Whether class `class` has part of its reserve in `g`'s pool unused and lent out.
    fn class_reserve_owed(&self, g: GroupId, class: u16) -> bool {
        let cp = &self.classes[class as usize].policy;
        if cp.reserve_ppb == 0 {
            return false;
        }
        let pool = &self.groups.get(g).pool;
        let Some(p) = self.pools.get(pool) else {
            return false;
        };
        let reserved = p.capacity.scaled_ppb(cp.reserve_ppb);
        let used = p.class_used.get(&class).cloned().unwrap_or_default();
        !reserved.saturating_minus(&used).is_zero()
    }

    /// A minimal set of running attempts whose stopping lets job `j` start on one worker of
    /// `g`: borrowers first, then lowest priority, then most recently started. Attempts already
    /// stopping count as freed. `None` when no such set exists.
    fn choose_victims(&self, j: JobIdx, g: GroupId, for_reserve: bool) -> Option<Vec<JobIdx>> {
        let job = self.job(j);
        let shape = self.shapes.get(job.shape);
        let need = shape.demand.clone();
        let my_priority = self.classes[shape.class as usize].policy.priority;
        let mut best: Option<Vec<JobIdx>> = None;
        for &w in &self.groups.get(g).workers {
            let worker = &self.workers[w.ix()];
            let mut free = worker.free();
            let mut candidates: Vec<(bool, i32, std::cmp::Reverse<Time>, JobIdx, ResVec)> =
                Vec::new();
            for v in worker.jobs.iter() {
                let vj = self.job(v);
                let Some(a) = vj.attempt.as_ref() else {
                    continue;
                };
                let members = a
                    .placements
                    .iter()
                    .find(|(pw, _)| *pw == w)
                    .map(|(_, m)| *m)
                    .unwrap_or(0);
                let held = self.shapes.get(vj.shape).demand.times(members as u64);
                if a.stop.is_some() {
                    free.add(&held);
                    continue;
                }
                let vshape = self.shapes.get(vj.shape);
                if !vshape.preemptible || a.placements.len() > 1 {
                    continue;
                }
                let vprio = self.classes[vshape.class as usize].policy.priority;
                let eligible = if for_reserve {
                    vprio < my_priority
                } else {
                    // Only tenants above their guarantee lend capacity that can be taken back.
                    vj.tenant != job.tenant && !self.tenant_within_guarantee_now(vj.tenant)
                };
                if eligible {
                    candidates.push((!a.borrowed, vprio, std::cmp::Reverse(a.started), v, held));
                }
            }
            if need.fits_in(&free) {
                // Enough is already being freed here.
                return None;
            }
            candidates.sort_by_key(|a| (a.0, a.1, a.2, a.3));
            let mut chosen: Vec<(JobIdx, ResVec)> = Vec::new();
            let mut f = free.clone();
            for (_, _, _, v, held) in candidates {
                if need.fits_in(&f) {
                    break;
                }
                f.add(&held);
                chosen.push((v, held));
            }
            if !need.fits_in(&f) {
                continue;
            }
            // Reverse pass: drop victims that turned out unnecessary.
            let mut i = chosen.len();
            while i > 0 {
                i -= 1;
                let mut without = free.clone();
                for (k, (_, held)) in chosen.iter().enumerate() {
                    if k != i {
                        without.add(held);
                    }
                }
                if need.fits_in(&without) {
                    chosen.remove(i);
                }
            }
            let victims: Vec<JobIdx> = chosen.into_iter().map(|(v, _)| v).collect();
            if best.as_ref().is_none_or(|b| victims.len() < b.len()) {
                best = Some(victims);
            }
        }
        best.filter(|v| !v.is_empty())
    }

    fn tenant_within_guarantee_now(&self, t: crate::ids::TenantIdx) -> bool {
        let tenant = &self.tenants[t.ix()];
        tenant.alloc.saturating_minus(&tenant.guarantee).is_zero()
    }

    /// Emits the stop request for running job `j`.
    pub(crate) fn request_stop(&mut self, j: JobIdx, reason: StopReason) {
        let job = self.job(j);
        let Some(a) = job.attempt.as_ref() else {
            return;
        };
        if a.stop.is_some() {
            return;
        }
        let event = Event::StopRequested {
            at: self.now,
            job: job.id.to_text(),
            epoch: a.epoch,
            reason,
            deadline: self.now.plus(self.policy.preempt_grace),
        };
        self.stop_notices.push(super::StopNotice {
            job: job.id.to_text(),
            epoch: a.epoch,
            reason,
        });
        self.emit_for(j, event);
    }

    /// Writes into `out` the leading queues at the top of the tree for shape `s` (a decision
    /// record's candidates, at most [`MAX_CANDIDATES`]) and returns how many.
    fn decision_candidates(&self, s: ShapeId, out: &mut [KeptCandidate; MAX_CANDIDATES]) -> u8 {
        let mut n = 0;
        if let Some((_, set)) = (&self.nodes[0].index)
            .into_iter()
            .find(|(key, _)| key.1 == s)
        {
            for (slot, k) in out.iter_mut().zip(set.iter()) {
                *slot = KeptCandidate {
                    tenant: match self.nodes[k.node().ix()].kind {
                        NodeKind::Tenant(t) | NodeKind::Flat(t) | NodeKind::Band(t, _) => Some(t),
                        NodeKind::Root => None,
                    },
                    balance: k.primary() as f64 / 1e18,
                    within_guarantee: k.tier() == 0 && self.policy.name == PolicyName::Fair,
                };
                n += 1;
            }
        }
        n
    }

    /// Whether job `j` is queued (for checkers).
    pub fn is_queued(&self, id: &str) -> bool {
        self.job_idx(id)
            .is_some_and(|j| self.job(j).state == JobState::Queued)
    }
}

/// How many members of a job of `shape` `worker` can take now: none if it takes no more
/// leases; for a single job whether it fits (checked beside its used capacity, without a
/// division); for a gang its free capacity's copies of the demand, at most the gang.
fn members_fitting(worker: &Worker, shape: &crate::shape::ShapeKey) -> u64 {
    if worker.max_jobs_left == 0 {
        0
    } else if shape.gang <= 1 {
        shape.demand.fits_beside(&worker.used, &worker.capacity) as u64
    } else {
        worker
            .free()
            .copies_of(&shape.demand)
            .min(shape.gang as u64)
    }
}

/// After reservation `new` is made, the capacity to spare at an earlier reservation's start
/// shrinks where they overlap.
fn shrink_spare(existing: &mut Reservation, new: &Reservation) {
    if new.start >= existing.end || new.end <= existing.start {
        return;
    }
    for (w, _, spare) in existing.parts.iter_mut() {
        for (nw, part, _) in &new.parts {
            if nw == w {
                *spare = spare.saturating_minus(part);
            }
        }
    }
}

fn min_vec(a: &ResVec, b: &ResVec) -> ResVec {
    let mut out = a.clone();
    for (id, v) in b.iter() {
        if v < out.get(id) {
            out.set(id, v);
        }
    }
    for (id, v) in a.iter() {
        if b.get(id) < v {
            out.set(id, b.get(id));
        }
    }
    out
}
