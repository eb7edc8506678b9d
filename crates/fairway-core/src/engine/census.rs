//! The census: one pass over the live jobs that answers what a dashboard or a metrics scrape
//! asks about every class, tenant, pool and worker at once.
//!
//! Reports that scan the job table per tenant ([`Engine::tenant_report`]) cost O(jobs) each;
//! asking for every tenant that way is O(jobs × tenants). The census visits each live job once,
//! each tenant once and each pool once: O(jobs + tenants + pools × classes). It reads the
//! engine and changes nothing.

use super::Engine;
use crate::ids::{ShapeId, TenantIdx};
use crate::job::JobState;
use crate::resources::ResVec;
use crate::time::Time;
use std::collections::BTreeMap;

/// Queued work somewhere: how many jobs and since when the oldest has been waiting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueuedWork {
    /// Jobs queued.
    pub queued: u64,
    /// Arrival of the oldest of them (`None` when none is queued).
    pub oldest: Option<Time>,
}

impl QueuedWork {
    fn add(&mut self, arrival: Time) {
        self.queued += 1;
        self.oldest = Some(self.oldest.map_or(arrival, |o| o.min(arrival)));
    }
}

/// A class's work, everywhere and per pool.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassCensus {
    /// Name.
    pub name: String,
    /// Its queued jobs.
    pub backlog: QueuedWork,
    /// Per pool, its queued jobs that some live worker of the pool could run (a job that fits
    /// several pools counts in each).
    pub by_pool: BTreeMap<String, QueuedWork>,
    /// Queued jobs no live worker can run.
    pub unplaceable: u64,
    /// Jobs waiting for their not-before time or a retry backoff.
    pub deferred: u64,
    /// Running jobs.
    pub running: u64,
}

/// A tenant's standing: what it holds against what it is entitled to, and what it waits for.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantCensus {
    /// Name (`org/team` for a nested tenant).
    pub name: String,
    /// Whether the policy declares it.
    pub declared: bool,
    /// Weight.
    pub weight: f64,
    /// Resources held by its running attempts and its descendants'.
    pub usage: BTreeMap<String, f64>,
    /// The same, per pool.
    pub usage_by_pool: BTreeMap<String, BTreeMap<String, f64>>,
    /// Dominant share of `usage` in all live capacity.
    pub dominant_share: f64,
    /// Its share of the whole fleet when every active tenant takes what its weight says: its
    /// weight's fraction among its active siblings, times its parent's entitlement.
    pub entitlement: f64,
    /// Its weight's fraction among its active siblings alone.
    pub sibling_entitlement: f64,
    /// Virtual service balance (`fair`).
    pub balance: f64,
    /// Its own queued jobs (not its descendants').
    pub backlog: QueuedWork,
    /// Its own queued jobs per class.
    pub backlog_by_class: BTreeMap<String, QueuedWork>,
    /// Its own running jobs.
    pub running: u64,
    /// Its own deferred jobs.
    pub deferred: u64,
    /// Outstanding accepted work, worker-seconds.
    pub outstanding_ws: f64,
    /// Its books.
    pub ledger: super::state::Ledger,
}

/// A reserve held in a pool for a band.
#[derive(Clone, Debug, PartialEq)]
pub struct ReserveStatus {
    /// The band's class.
    pub class: String,
    /// Capacity reserved: the pool's live capacity times the class's reserve fraction.
    pub reserved: BTreeMap<String, f64>,
    /// Used by the band's running attempts.
    pub used: BTreeMap<String, f64>,
    /// Reserved and not used: what lower bands may not take (except by borrowing).
    pub held: BTreeMap<String, f64>,
}

/// A pool's capacity, use, reserves and borrowing.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolCensus {
    /// Name.
    pub name: String,
    /// Live workers.
    pub workers: u32,
    /// Capacity of its live workers.
    pub capacity: BTreeMap<String, f64>,
    /// Held by running attempts.
    pub used: BTreeMap<String, f64>,
    /// Held by running attempts per class.
    pub used_by_class: BTreeMap<String, BTreeMap<String, f64>>,
    /// Reserves of the bands that have one (policy order).
    pub reserves: Vec<ReserveStatus>,
    /// Held now by attempts that borrowed reserved capacity.
    pub borrowed: BTreeMap<String, f64>,
}

/// Everything the census counted, at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct Census {
    /// The engine's time when it was taken.
    pub at: Time,
    /// Classes in policy order.
    pub classes: Vec<ClassCensus>,
    /// Tenants that have live jobs or hold resources, and their ancestors, by name.
    pub tenants: Vec<TenantCensus>,
    /// Pools by name.
    pub pools: Vec<PoolCensus>,
}

/// A worker the engine knows.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerView {
    /// Name.
    pub name: String,
    /// Pool.
    pub pool: String,
    /// Labels of its group (including the implicit `pool` label); empty while not live.
    pub labels: BTreeMap<String, String>,
    /// Capacity (zero until it first asks for work).
    pub capacity: BTreeMap<String, f64>,
    /// Capacity not held by attempts.
    pub free: BTreeMap<String, f64>,
    /// Jobs it runs, by id.
    pub jobs: Vec<String>,
    /// When it was last heard from.
    pub last_seen: Time,
    /// Whether it waits for work now.
    pub polling: bool,
    /// Whether it is live (heard from within the worker time-to-live).
    pub live: bool,
}

/// Per-tenant counts gathered from the job table.
#[derive(Default)]
struct Own {
    backlog: QueuedWork,
    by_class: BTreeMap<u16, QueuedWork>,
    running: u64,
    deferred: u64,
    by_pool: BTreeMap<String, ResVec>,
}

impl Engine {
    /// Counts every class, tenant and pool in one pass over the live jobs (see the module
    /// documentation for the cost).
    pub fn census(&self) -> Census {
        let n_classes = self.classes.len();
        let mut class_backlog = vec![QueuedWork::default(); n_classes];
        let mut class_pools: Vec<BTreeMap<String, QueuedWork>> = vec![BTreeMap::new(); n_classes];
        let mut class_unplaceable = vec![0u64; n_classes];
        let mut class_deferred = vec![0u64; n_classes];
        let mut class_running = vec![0u64; n_classes];
        let mut own: BTreeMap<TenantIdx, Own> = BTreeMap::new();
        let mut borrowed: BTreeMap<String, ResVec> = BTreeMap::new();
        // Pools whose live workers can run each shape, worked out once per shape.
        let mut shape_pools: BTreeMap<ShapeId, Vec<String>> = BTreeMap::new();
        for job in self.jobs.iter().flatten() {
            let c = job.class as usize;
            let tenant = own.entry(job.tenant).or_default();
            match job.state {
                JobState::Queued => {
                    class_backlog[c].add(job.arrival);
                    tenant.backlog.add(job.arrival);
                    tenant
                        .by_class
                        .entry(job.class)
                        .or_default()
                        .add(job.arrival);
                    let pools = shape_pools
                        .entry(job.shape)
                        .or_insert_with(|| self.pools_accepting(job.shape));
                    if pools.is_empty() {
                        class_unplaceable[c] += 1;
                    }
                    for pool in pools.iter() {
                        class_pools[c]
                            .entry(pool.clone())
                            .or_default()
                            .add(job.arrival);
                    }
                }
                JobState::Deferred => {
                    class_deferred[c] += 1;
                    tenant.deferred += 1;
                }
                JobState::Running => {
                    class_running[c] += 1;
                    tenant.running += 1;
                    if let Some(attempt) = &job.attempt {
                        let demand = &self.shapes.get(job.shape).demand;
                        for (w, members) in &attempt.placements {
                            let pool = &self.workers[w.ix()].pool;
                            let held = demand.times(*members as u64);
                            tenant
                                .by_pool
                                .entry(pool.to_string())
                                .or_default()
                                .add(&held);
                            if attempt.borrowed {
                                borrowed.entry(pool.to_string()).or_default().add(&held);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        let classes = (0..n_classes)
            .map(|c| ClassCensus {
                name: self.class_name(c as u16).to_string(),
                backlog: class_backlog[c],
                by_pool: std::mem::take(&mut class_pools[c]),
                unplaceable: class_unplaceable[c],
                deferred: class_deferred[c],
                running: class_running[c],
            })
            .collect();
        let tenants = self.tenant_census(own);
        let pools = self
            .pools
            .iter()
            .map(|(name, p)| PoolCensus {
                name: name.clone(),
                workers: p.live_workers,
                capacity: self.resources.named(&p.capacity),
                used: self.resources.named(&p.used),
                used_by_class: p
                    .class_used
                    .iter()
                    .filter(|(_, used)| !used.is_zero())
                    .map(|(&c, used)| (self.class_name(c).to_string(), self.resources.named(used)))
                    .collect(),
                reserves: self
                    .classes
                    .iter()
                    .enumerate()
                    .filter(|(_, class)| class.policy.reserve_ppb > 0)
                    .map(|(c, class)| {
                        let reserved = p.capacity.scaled_ppb(class.policy.reserve_ppb);
                        let used = p.class_used.get(&(c as u16)).cloned().unwrap_or_default();
                        ReserveStatus {
                            class: class.policy.name.clone(),
                            held: self.resources.named(&reserved.saturating_minus(&used)),
                            reserved: self.resources.named(&reserved),
                            used: self.resources.named(&used),
                        }
                    })
                    .collect(),
                borrowed: borrowed
                    .get(name)
                    .map(|b| self.resources.named(b))
                    .unwrap_or_default(),
            })
            .collect();
        Census {
            at: self.now,
            classes,
            tenants,
            pools,
        }
    }

    /// Names of the pools with a live group that can run shape `s`, sorted.
    fn pools_accepting(&self, s: ShapeId) -> Vec<String> {
        let key = self.shapes.get(s);
        let mut pools: Vec<String> = self
            .live_groups
            .iter()
            .copied()
            .filter(|&g| self.groups.get(g).accepts(key) && self.gang_fits_group(g, s))
            .map(|g| self.groups.get(g).pool.clone())
            .collect();
        pools.sort();
        pools.dedup();
        pools
    }

    /// The tenants with live jobs or held resources, and their ancestors, sorted by name.
    fn tenant_census(&self, mut own: BTreeMap<TenantIdx, Own>) -> Vec<TenantCensus> {
        let n = self.tenants.len();
        let active: Vec<bool> = (0..n)
            .map(|t| {
                let tenant = &self.tenants[t];
                !tenant.alloc.is_zero()
                    || tenant
                        .node
                        .is_some_and(|node| self.nodes[node.ix()].queued > 0)
            })
            .collect();
        // Weight of the active children of each tenant (index n: the roots).
        let mut active_weight = vec![0u128; n + 1];
        for (tenant, _) in self.tenants.iter().zip(&active).filter(|(_, a)| **a) {
            let parent = tenant.parent.map_or(n, |p| p.ix());
            active_weight[parent] += tenant.weight.micros() as u128;
        }
        let mut included = vec![false; n];
        for t in 0..n {
            if own.contains_key(&TenantIdx(t as u32)) || !self.tenants[t].alloc.is_zero() {
                let mut at = Some(TenantIdx(t as u32));
                while let Some(x) = at {
                    if included[x.ix()] {
                        break;
                    }
                    included[x.ix()] = true;
                    at = self.tenants[x.ix()].parent;
                }
            }
        }
        // What each tenant's and its descendants' running attempts hold per pool, as `usage`
        // (the tenant's alloc) counts descendants.
        let mut subtree_by_pool: Vec<BTreeMap<String, ResVec>> = vec![BTreeMap::new(); n];
        for (&t, counts) in &own {
            let mut at = Some(t);
            while let Some(x) = at {
                for (pool, held) in &counts.by_pool {
                    subtree_by_pool[x.ix()]
                        .entry(pool.clone())
                        .or_default()
                        .add(held);
                }
                at = self.tenants[x.ix()].parent;
            }
        }
        let sibling_entitlement = |t: usize| -> f64 {
            let tenant = &self.tenants[t];
            let parent = tenant.parent.map_or(n, |p| p.ix());
            // An idle tenant is priced as if it became active.
            let others = active_weight[parent]
                - if active[t] {
                    tenant.weight.micros() as u128
                } else {
                    0
                };
            let mine = tenant.weight.micros() as u128;
            mine as f64 / (others + mine).max(1) as f64
        };
        let mut out: Vec<TenantCensus> = Vec::new();
        for t in (0..n).filter(|&t| included[t]) {
            let tenant = &self.tenants[t];
            let mut entitlement = sibling_entitlement(t);
            let mut up = tenant.parent;
            while let Some(p) = up {
                entitlement *= sibling_entitlement(p.ix());
                up = self.tenants[p.ix()].parent;
            }
            let counts = own.remove(&TenantIdx(t as u32)).unwrap_or_default();
            let usage_by_pool = std::mem::take(&mut subtree_by_pool[t]);
            out.push(TenantCensus {
                name: tenant.name.clone(),
                declared: tenant.declared,
                weight: tenant.weight.as_f64(),
                usage: self.resources.named(&tenant.alloc),
                usage_by_pool: usage_by_pool
                    .iter()
                    .map(|(pool, held)| (pool.clone(), self.resources.named(held)))
                    .collect(),
                dominant_share: tenant
                    .alloc
                    .dominant_share_ppb(&self.total_capacity)
                    .min(u64::MAX / 2) as f64
                    / 1e9,
                entitlement,
                sibling_entitlement: sibling_entitlement(t),
                balance: tenant
                    .node
                    .map(|node| self.nodes[node.ix()].vtime as f64 / 1e18)
                    .unwrap_or(0.0),
                backlog: counts.backlog,
                backlog_by_class: counts
                    .by_class
                    .into_iter()
                    .map(|(c, b)| (self.class_name(c).to_string(), b))
                    .collect(),
                running: counts.running,
                deferred: counts.deferred,
                outstanding_ws: tenant.outstanding as f64 / 1e18,
                ledger: tenant.ledger.clone(),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Every worker the engine knows, by name.
    pub fn workers(&self) -> Vec<WorkerView> {
        let mut out: Vec<WorkerView> = self
            .worker_by_name
            .values()
            .map(|&w| {
                let worker = &self.workers[w.ix()];
                let mut jobs: Vec<String> = worker
                    .jobs
                    .iter()
                    .map(|j| self.job(j).id.to_text())
                    .collect();
                jobs.sort();
                WorkerView {
                    name: worker.name.to_string(),
                    pool: worker.pool.to_string(),
                    labels: worker
                        .group
                        .map(|g| self.groups.get(g).labels.clone())
                        .unwrap_or_default(),
                    capacity: self.resources.named(&worker.capacity),
                    free: self.resources.named(&worker.free()),
                    jobs,
                    last_seen: worker.last_seen,
                    polling: worker.polling,
                    live: worker.group.is_some(),
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}
