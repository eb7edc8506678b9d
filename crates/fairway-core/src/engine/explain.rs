//! Explanations and reports: why a job waits, what a tenant has and is owed, what was decided.

use super::Engine;
use super::state::{Candidate, DecisionRecord, KeptDecision, Ledger, NodeKind};
use crate::config::PolicyName;
use crate::ids::{GroupId, JobIdx, NodeIdx, TenantIdx};
use crate::job::JobState;
use crate::resources::amount_to_f64;
use crate::time::Time;
use std::collections::BTreeMap;

/// One reason a job is not running.
#[derive(Clone, Debug, PartialEq)]
pub enum WaitReason {
    /// It waits for its not-before window or a retry backoff.
    Deferred {
        /// Eligible from.
        until: Time,
    },
    /// No worker is alive at all.
    NoWorkers,
    /// No live worker can ever run it; each entry says which requirement fails where.
    Unplaceable {
        /// Per pool, what does not match.
        mismatches: Vec<String>,
    },
    /// Earlier jobs of its own queue come first.
    BehindInQueue {
        /// Jobs ahead of it in its queue (counted up to a bound).
        ahead: usize,
        /// The job at the head of its queue.
        head: String,
    },
    /// Its tenant (or an ancestor) is at its limit.
    TenantAtLimit {
        /// The tenant at its limit.
        tenant: String,
    },
    /// The free capacity is held in reserve for higher bands.
    ReserveHeld {
        /// The pool.
        pool: String,
    },
    /// It is next in its queue but no waiting worker has room for its shape now.
    WaitingForCapacity {
        /// The pool.
        pool: String,
    },
    /// Other tenants come first by the policy's balances.
    BehindTenants {
        /// Tenants ahead, with their balances.
        tenants: Vec<(String, f64)>,
    },
}

impl WaitReason {
    /// A sentence for humans.
    pub fn describe(&self) -> String {
        match self {
            WaitReason::Deferred { until } => format!("deferred until {until}"),
            WaitReason::NoWorkers => "no worker is alive".to_string(),
            WaitReason::Unplaceable { mismatches } => {
                format!("no live worker can run it: {}", mismatches.join("; "))
            }
            WaitReason::BehindInQueue { ahead, head } => {
                format!("{ahead} job(s) of its own queue come first (head: {head})")
            }
            WaitReason::TenantAtLimit { tenant } => format!("tenant {tenant} is at its limit"),
            WaitReason::ReserveHeld { pool } => {
                format!("the free capacity of pool {pool} is reserved for higher bands")
            }
            WaitReason::WaitingForCapacity { pool } => {
                format!("next in its queue; waiting for capacity of its shape in pool {pool}")
            }
            WaitReason::BehindTenants { tenants } => {
                let names: Vec<String> = tenants
                    .iter()
                    .map(|(t, b)| format!("{t} ({b:.3})"))
                    .collect();
                format!(
                    "tenants with smaller balances come first: {}",
                    names.join(", ")
                )
            }
        }
    }
}

/// Why a job is (not) running.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// Job id.
    pub job: String,
    /// Its state.
    pub state: JobState,
    /// Why it waits (empty when it runs or ended).
    pub reasons: Vec<WaitReason>,
    /// Workers it runs on.
    pub workers: Vec<String>,
    /// For ended jobs, why they ended.
    pub ended: Option<String>,
}

/// What a tenant has, is owed and owes.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantReport {
    /// Name.
    pub name: String,
    /// Whether the policy declares it.
    pub declared: bool,
    /// Weight.
    pub weight: f64,
    /// Guarantee per resource.
    pub guarantee: BTreeMap<String, f64>,
    /// Limit per resource.
    pub limit: BTreeMap<String, f64>,
    /// Resources held by its running attempts (and its descendants').
    pub usage: BTreeMap<String, f64>,
    /// Dominant share of its usage, of all live capacity.
    pub dominant_share: f64,
    /// Its weight's fraction among its active siblings: the share it is entitled to beyond
    /// guarantees.
    pub entitlement: f64,
    /// Virtual service balance (`fair`).
    pub balance: f64,
    /// Per class: (queued jobs, oldest queued age in seconds).
    pub backlog: BTreeMap<String, (u64, f64)>,
    /// Running jobs.
    pub running: u64,
    /// Outstanding accepted work, worker-seconds.
    pub outstanding_ws: f64,
    /// Its books.
    pub ledger: Ledger,
    /// Admission outcomes: accepted, deferred.
    pub admitted: [u64; 3],
}

/// A pool's live capacity and what runs there.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolUsage {
    /// Capacity of its live workers.
    pub capacity: BTreeMap<String, f64>,
    /// Held by running attempts.
    pub used: BTreeMap<String, f64>,
    /// Live workers.
    pub workers: u32,
}

/// A tenant's queued and running jobs and held resources, for probes.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantSnapshot {
    /// Name.
    pub name: String,
    /// Queued jobs (own).
    pub queued: u64,
    /// Running jobs (own).
    pub running: u64,
    /// Resources held by its own running attempts.
    pub usage: BTreeMap<String, f64>,
}

impl Engine {
    /// Why job `id` is not running, from the engine's current state.
    pub fn explain(&mut self, id: &str) -> Option<Explanation> {
        let Some(j) = self.job_idx(id) else {
            let f = self.finished.get(id)?;
            return Some(Explanation {
                job: id.to_string(),
                state: f.state,
                reasons: Vec::new(),
                workers: Vec::new(),
                ended: Some(
                    f.reason
                        .map(std::borrow::Cow::into_owned)
                        .unwrap_or_else(|| f.state.as_str().to_string()),
                ),
            });
        };
        let state = self.job(j).state;
        let mut reasons = Vec::new();
        let mut workers = Vec::new();
        match state {
            JobState::Running => {
                let a = self.job(j).attempt.as_ref().expect("running");
                workers = a
                    .placements
                    .iter()
                    .map(|(w, _)| self.workers[w.ix()].name.to_string())
                    .collect();
            }
            JobState::Deferred => reasons.push(WaitReason::Deferred {
                until: self.job(j).deferred_until(),
            }),
            JobState::Queued => reasons = self.wait_reasons(j),
            _ => {}
        }
        Some(Explanation {
            job: id.to_string(),
            state,
            reasons,
            workers,
            ended: None,
        })
    }

    fn wait_reasons(&mut self, j: JobIdx) -> Vec<WaitReason> {
        let groups: Vec<GroupId> = self.groups.live().collect();
        if groups.is_empty() {
            return vec![WaitReason::NoWorkers];
        }
        let s = self.job(j).shape;
        let key = self.shapes.get(s).clone();
        let compatible: Vec<GroupId> = groups
            .iter()
            .copied()
            .filter(|&g| self.groups.get_mut(g).compatible(s, &key) && self.gang_fits_group(g, s))
            .collect();
        if compatible.is_empty() {
            let mut mismatches: Vec<String> = groups
                .iter()
                .filter_map(|&g| self.groups.get(g).mismatch(&key))
                .collect();
            if mismatches.is_empty() {
                mismatches.push(format!(
                    "a gang of at least {} members does not fit the live workers",
                    key.gang_min
                ));
            }
            mismatches.dedup();
            return vec![WaitReason::Unplaceable { mismatches }];
        }
        let mut reasons = Vec::new();
        let leaf = self.job(j).leaf;
        for g in compatible {
            let pool = self.groups.get(g).pool.clone();
            let head = self.leaf_head(leaf, g);
            if let Some((_, hs, hj)) = head
                && hj != j
            {
                let ahead = self.nodes[leaf.ix()]
                    .leaf
                    .as_ref()
                    .expect("leaf")
                    .subqueues
                    .get(&hs)
                    .expect("the head's sub-queue")
                    .ordered(self.now.0, 10_000)
                    .iter()
                    .take_while(|(_, x)| *x != j)
                    .count()
                    .max(1);
                reasons.push(WaitReason::BehindInQueue {
                    ahead,
                    head: self.job(hj).id.to_text(),
                });
                continue;
            }
            let tenant = self.job(j).tenant;
            if let Some(t) = self
                .tenant_chain(tenant)
                .into_iter()
                .find(|&t| !self.tenant_room(t, s))
            {
                reasons.push(WaitReason::TenantAtLimit {
                    tenant: self.tenants[t.ix()].name.clone(),
                });
                continue;
            }
            if self.hold_status(g, s).is_none() {
                reasons.push(WaitReason::ReserveHeld { pool });
                continue;
            }
            if !self.fits_now(g, s) {
                reasons.push(WaitReason::WaitingForCapacity { pool });
                continue;
            }
            reasons.push(WaitReason::BehindTenants {
                tenants: self.tenants_ahead(leaf, g, s),
            });
        }
        reasons
    }

    fn tenant_room(&self, t: TenantIdx, s: crate::ids::ShapeId) -> bool {
        let shape = self.shapes.get(s);
        self.tenants[t.ix()].has_room(&shape.demand, shape.gang_min as u64)
    }

    /// Tenants whose keys come before the one holding `leaf` at the top of the tree.
    fn tenants_ahead(
        &self,
        leaf: NodeIdx,
        g: GroupId,
        s: crate::ids::ShapeId,
    ) -> Vec<(String, f64)> {
        let top = self
            .ancestors(leaf)
            .as_slice()
            .last()
            .copied()
            .unwrap_or(leaf);
        let Some(mine) = self.nodes[top.ix()].keyed.get(&(g, s)).copied() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (&(_, _), set) in self.nodes[0].index.range(
            &(g, crate::ids::ShapeId(0)),
            &(g, crate::ids::ShapeId(u32::MAX)),
        ) {
            for k in set.iter().take_while(|k| **k < mine).take(5) {
                out.push((self.node_name(k.node()), k.primary() as f64 / 1e18));
            }
        }
        out.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        out.dedup_by(|a, b| a.0 == b.0);
        out.truncate(5);
        out
    }

    pub(crate) fn node_name(&self, n: NodeIdx) -> String {
        match self.nodes[n.ix()].kind {
            NodeKind::Tenant(t) | NodeKind::Flat(t) => self.tenants[t.ix()].name.clone(),
            NodeKind::Band(t, c) => format!("{}:{}", self.tenants[t.ix()].name, self.class_name(c)),
            NodeKind::Root => "root".to_string(),
        }
    }

    /// What tenant `name` has, is owed and owes.
    pub fn tenant_report(&self, name: &str) -> Option<TenantReport> {
        let &t = self.tenant_by_name.get(name)?;
        let tenant = &self.tenants[t.ix()];
        let mut backlog: BTreeMap<String, (u64, f64)> = BTreeMap::new();
        let mut running = 0;
        for job in self.jobs.iter().flatten() {
            if job.tenant != t {
                continue;
            }
            match job.state {
                JobState::Queued => {
                    let e = backlog
                        .entry(self.class_name(job.class).to_string())
                        .or_insert((0, 0.0));
                    e.0 += 1;
                    e.1 = e.1.max(self.now.since(job.arrival).as_secs_f64());
                }
                JobState::Running => running += 1,
                _ => {}
            }
        }
        let siblings: Vec<TenantIdx> = match tenant.parent {
            Some(p) => self.tenants[p.ix()].children.clone(),
            None => self
                .tenants
                .iter()
                .enumerate()
                .filter(|(_, x)| x.parent.is_none())
                .map(|(i, _)| TenantIdx(i as u32))
                .collect(),
        };
        let active_weight: u128 = siblings
            .iter()
            .filter(|&&s| s == t || self.tenant_active(s))
            .map(|&s| self.tenants[s.ix()].weight.micros() as u128)
            .sum();
        let balance = tenant
            .node
            .map(|n| self.nodes[n.ix()].vtime as f64 / 1e18)
            .unwrap_or(0.0);
        Some(TenantReport {
            name: tenant.name.clone(),
            declared: tenant.declared,
            weight: tenant.weight.as_f64(),
            guarantee: self.resources.named(&tenant.guarantee),
            limit: tenant
                .limit
                .as_ref()
                .map(|l| {
                    l.capped()
                        .map(|(id, a)| (self.resources.name(id).to_string(), amount_to_f64(a)))
                        .collect()
                })
                .unwrap_or_default(),
            usage: self.resources.named(&tenant.alloc),
            dominant_share: tenant
                .alloc
                .dominant_share_ppb(&self.total_capacity)
                .min(u64::MAX / 2) as f64
                / 1e9,
            entitlement: tenant.weight.micros() as f64 / active_weight.max(1) as f64,
            balance,
            backlog,
            running,
            outstanding_ws: tenant.outstanding as f64 / 1e18,
            ledger: tenant.ledger.clone(),
            admitted: tenant.admitted,
        })
    }

    fn tenant_active(&self, t: TenantIdx) -> bool {
        !self.tenants[t.ix()].alloc.is_zero()
            || self.tenants[t.ix()]
                .node
                .is_some_and(|n| self.nodes[n.ix()].queued > 0)
    }

    /// Every tenant's queued and running jobs and usage (own jobs only), by name.
    pub fn tenant_snapshots(&self) -> Vec<TenantSnapshot> {
        let mut by: BTreeMap<TenantIdx, (u64, u64, crate::resources::ResVec)> = BTreeMap::new();
        for job in self.jobs.iter().flatten() {
            let e = by.entry(job.tenant).or_default();
            match job.state {
                JobState::Queued => e.0 += 1,
                JobState::Running => {
                    e.1 += 1;
                    let members = job.attempt.as_ref().map(|a| a.members).unwrap_or(1);
                    e.2.add_times(&self.shapes.get(job.shape).demand, members as u64);
                }
                _ => {}
            }
        }
        let mut out: Vec<TenantSnapshot> = by
            .into_iter()
            .map(|(t, (q, r, usage))| TenantSnapshot {
                name: self.tenants[t.ix()].name.clone(),
                queued: q,
                running: r,
                usage: self.resources.named(&usage),
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Whether job `id` is queued and no live worker can ever run it.
    pub fn is_unplaceable(&mut self, id: &str) -> bool {
        let Some(j) = self.job_idx(id) else {
            return false;
        };
        if self.job(j).state != JobState::Queued {
            return false;
        }
        let s = self.job(j).shape;
        let key = self.shapes.get(s).clone();
        let groups: Vec<GroupId> = self.groups.live().collect();
        !groups
            .into_iter()
            .any(|g| self.groups.get_mut(g).compatible(s, &key) && self.gang_fits_group(g, s))
    }

    /// Names of all tenants, sorted.
    pub fn tenant_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tenants.iter().map(|t| t.name.clone()).collect();
        names.sort_unstable();
        names
    }

    /// The most recent decision records (oldest first), at most `limit`.
    pub fn decisions(&self, limit: usize) -> Vec<DecisionRecord> {
        let skip = self.decisions.len().saturating_sub(limit);
        self.decisions
            .iter()
            .skip(skip)
            .map(|d| self.decision_record(d))
            .collect()
    }

    /// A kept decision with its tenant, class and candidates named.
    fn decision_record(&self, d: &KeptDecision) -> DecisionRecord {
        let tenant_name = |t: TenantIdx| self.tenants[t.ix()].name.clone();
        DecisionRecord {
            seq: d.seq,
            at: d.at,
            policy_version: d.policy_version,
            job: d.job.clone(),
            tenant: tenant_name(d.tenant),
            class: self.class_name(d.class).to_string(),
            epoch: d.epoch,
            estimate: d.estimate,
            workers: d.workers.clone(),
            candidates: d.candidates[..usize::from(d.candidate_count)]
                .iter()
                .map(|c| Candidate {
                    queue: c.tenant.map_or_else(|| "root".to_string(), tenant_name),
                    balance: c.balance,
                    within_guarantee: c.within_guarantee,
                })
                .collect(),
            backfilled: d.backfilled,
            borrowed: d.borrowed,
            waited: d.waited,
        }
    }

    /// Decision records numbered above `seq` (oldest first), at most `limit`. Records older
    /// than the ring's size are gone: a reader that falls behind sees a gap in the numbers.
    pub fn decisions_after(&self, seq: u64, limit: usize) -> Vec<DecisionRecord> {
        // The ring is in increasing `seq` order.
        let start = self.decisions.partition_point(|d| d.seq <= seq);
        self.decisions
            .range(start..)
            .take(limit)
            .map(|d| self.decision_record(d))
            .collect()
    }

    /// Decision records about job `id`.
    pub fn decisions_for(&self, id: &str) -> Vec<DecisionRecord> {
        self.decisions
            .iter()
            .filter(|d| d.job == id)
            .map(|d| self.decision_record(d))
            .collect()
    }

    /// Ledger of class `name`.
    pub fn class_ledger(&self, name: &str) -> Option<(Ledger, u64)> {
        let &c = self.class_by_name.get(name)?;
        let class = &self.classes[c as usize];
        Some((class.ledger.clone(), class.deadline_misses))
    }

    /// Class names in index order.
    pub fn class_names(&self) -> Vec<String> {
        self.classes.iter().map(|c| c.policy.name.clone()).collect()
    }

    /// Per pool: capacity and use of live workers, as named amounts.
    pub fn pool_usage(&self) -> BTreeMap<String, PoolUsage> {
        self.pools
            .iter()
            .map(|(name, p)| {
                let usage = PoolUsage {
                    capacity: self.resources.named(&p.capacity),
                    used: self.resources.named(&p.used),
                    workers: p.live_workers,
                };
                (name.clone(), usage)
            })
            .collect()
    }

    /// Resources held in `pool` by running attempts of each class.
    pub fn class_usage(&self, pool: &str) -> BTreeMap<String, BTreeMap<String, f64>> {
        let Some(p) = self.pools.get(pool) else {
            return BTreeMap::new();
        };
        p.class_used
            .iter()
            .map(|(c, used)| (self.class_name(*c).to_string(), self.resources.named(used)))
            .collect()
    }

    /// The policy's name for the balance shown in reports.
    pub fn balance_unit(&self) -> &'static str {
        match self.policy.name {
            PolicyName::Fair => "virtual service (worker-seconds per unit weight)",
            PolicyName::Drf => "weighted dominant share",
            PolicyName::RoundRobin => "jobs served per unit weight",
            PolicyName::Drr => "round",
            PolicyName::Wfq => "virtual finish tag",
            _ => "none",
        }
    }
}
