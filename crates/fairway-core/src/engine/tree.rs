//! The scheduling tree and its index: which queue is served next, in O(depth · shapes · log n).
//!
//! Every leaf queue knows, for each placement group, the shape of its head job. Every node keeps,
//! per (group, shape), the number of leaves below it whose head has that shape, and sits in its
//! parent's index under `(group, shape)` with its policy key while that number is positive and
//! the node is within its limits. Choosing the next job for a group is then a walk from the root:
//! at each node take the child with the smallest key among the shapes that fit, until a leaf.
//! Idle tenants and empty queues are in no index, so they cost nothing.

use super::Engine;
use super::state::{Drr, NodeKey, NodeKind, OrderParams, TreeShape};
use crate::config::{Backfill, PolicyName};
use crate::ids::{CHAIN_MAX, Chain, GroupId, JobIdx, NodeIdx, ShapeId, TenantIdx};
use crate::job::JobState;
use crate::queue::{HeadKey, OrderKey};
use crate::resources::SHARE_SCALE;
use crate::time::Time;

/// A node's (group, shape) entries that [`Engine::rekey_node`] copies onto the stack.
const REKEY_INLINE: usize = 8;

/// An order key, saturated into 64 bits (keys are nanoseconds, or priorities times aging steps).
fn key(x: i128) -> i64 {
    x.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

impl Engine {
    /// How job `j` is ordered inside its leaf queue, entering it now.
    fn order_key(&mut self, j: JobIdx) -> OrderKey {
        let now = self.now;
        let job = self.job(j);
        let class = &self.classes[job.class as usize].policy;
        match self.policy.name {
            PolicyName::Strict => OrderKey::Fixed(
                1,
                key(-((class.priority as i128) << 32) - job.priority as i128),
            ),
            PolicyName::Sjf => OrderKey::Fixed(1, key(job.estimate.0 as i128)),
            PolicyName::Fair => {
                if job.deadline != Time::MAX && !job.downgraded {
                    // Least slack first: deadline - estimated remaining work; `now` is common to all.
                    let remaining = job.estimate.minus(job.progress);
                    return OrderKey::Fixed(0, key(job.deadline.0 as i128 - remaining.0 as i128));
                }
                match class.aging_step {
                    None => OrderKey::Fixed(1, key(-(job.priority as i128))),
                    Some(step) => {
                        let step = step.0 as i128;
                        let base = job.priority as i128 * step;
                        let entered = job.enqueued.0 as i128;
                        match class.aging_cap {
                            Some(cap) => {
                                let cap_at = job
                                    .enqueued
                                    .0
                                    .saturating_add((cap as u64).saturating_mul(step as u64));
                                if now.0 >= cap_at {
                                    OrderKey::Flat(key(base + cap as i128 * step))
                                } else {
                                    self.caps.insert((Time(cap_at), j));
                                    OrderKey::Ramp(key(entered - base))
                                }
                            }
                            None => OrderKey::Ramp(key(entered - base)),
                        }
                    }
                }
            }
            _ => OrderKey::Fixed(1, 0),
        }
    }

    /// The order key a restored job had, with its pending aging cap re-armed.
    fn restored_order_key(&mut self, j: JobIdx) -> OrderKey {
        let job = self.job(j);
        let key = job.order.into();
        if let OrderKey::Ramp(_) = key
            && let Some(cap_at) =
                OrderParams::of(&self.classes[job.class as usize].policy).cap_at(job.enqueued)
        {
            self.caps.insert((cap_at, j));
        }
        key
    }

    /// Puts job `j` into its leaf queue.
    pub(crate) fn enqueue(&mut self, j: JobIdx) {
        self.enqueue_inner(j, false);
    }

    /// Takes queued job `j` out of its leaf queue.
    pub(crate) fn dequeue(&mut self, j: JobIdx) {
        self.dequeue_inner(j, false);
    }

    /// Puts job `j` into its leaf queue. A `trial` re-entry (after being set aside during a
    /// pass) leaves admission's books and the queue's activity untouched.
    pub(crate) fn enqueue_inner(&mut self, j: JobIdx, trial: bool) {
        let (tenant, class, shape, seq) = {
            let job = self.job(j);
            (job.tenant, job.class, job.shape, job.seq)
        };
        let leaf = self.leaf_for(tenant, class);
        let key = if self.restoring {
            self.restored_order_key(j)
        } else {
            self.order_key(j)
        };
        {
            let job = self.job_mut(j);
            job.leaf = leaf;
            job.order = key.into();
            job.state = JobState::Queued;
        }
        let queue = self.nodes[leaf.ix()].leaf.as_mut().expect("leaf");
        let behind = queue
            .subqueues
            .get_or_insert_with(shape, Default::default)
            .insert(key, seq, j);
        // Joining behind the head of the leaf's only sub-queue, of fixed keys, changes no
        // group's head, so neither where the leaf is indexed nor its keys: most submissions
        // skip the re-index (BENCHMARKS.md, item 90).
        let heads_kept = behind && queue.subqueues.len() == 1;
        for n in self.ancestors(leaf) {
            self.nodes[n.ix()].queued += 1;
            if self.nodes[n.ix()].queued == 1 && !trial && !self.restoring {
                self.activate(n);
            }
        }
        self.nodes[0].queued += 1;
        if heads_kept {
            debug_assert!(self.leaf_heads_unchanged(leaf) && self.keys_current(leaf));
        } else {
            self.reindex_leaf(leaf);
        }
        if trial {
            return;
        }
        if !self.restoring {
            self.meter_enqueue(leaf, shape);
        }
        self.queued_jobs += 1;
        let cost = self.job(j).cost();
        let work = &mut self.nodes[leaf.ix()].queued_work;
        work.jobs += 1;
        work.cost += cost;
        let b = self.backlog.entry((class, shape)).or_default();
        b.queued_cost += cost;
        b.queued_jobs += 1;
        self.classes[class as usize].queued += 1;
        let job = self.job(j);
        if let Some(latest_start) = job.latest_start()
            && OrderParams::of(&self.classes[class as usize].policy)
                .watches_deadline(job.downgraded)
        {
            self.deadlines.insert((latest_start, j));
        }
    }

    /// Takes job `j` out of its leaf queue (a `trial` removal only for the rest of a pass).
    pub(crate) fn dequeue_inner(&mut self, j: JobIdx, trial: bool) {
        self.dequeue_for(j, trial, false);
    }

    /// Takes queued job `j` out of its leaf queue; `dispatched` when it leaves for a worker
    /// (admission measures that service).
    pub(crate) fn dequeue_for(&mut self, j: JobIdx, trial: bool, dispatched: bool) {
        let (leaf, shape, key, seq, class, cost, latest_start) = {
            let job = self.job(j);
            assert_eq!(
                job.state,
                JobState::Queued,
                "dequeue of a job that is not queued"
            );
            (
                job.leaf,
                job.shape,
                OrderKey::from(job.order),
                job.seq,
                job.class,
                job.cost(),
                job.latest_start(),
            )
        };
        let queue = self.nodes[leaf.ix()].leaf.as_mut().expect("leaf");
        let sub = queue
            .subqueues
            .get_mut(&shape)
            .expect("sub-queue of a queued job");
        sub.remove(key, seq, j);
        if sub.is_empty() {
            queue.subqueues.remove(&shape);
        }
        for n in self.ancestors(leaf) {
            self.nodes[n.ix()].queued -= 1;
            if self.nodes[n.ix()].queued == 0 && !trial {
                self.deactivate(n);
            }
        }
        self.nodes[0].queued -= 1;
        self.reindex_leaf(leaf);
        if let OrderKey::Ramp(_) = key
            && let Some(cap_at) =
                OrderParams::of(&self.classes[class as usize].policy).cap_at(self.job(j).enqueued)
        {
            self.caps.remove(&(cap_at, j));
        }
        if trial {
            return;
        }
        if let Some(latest_start) = latest_start {
            self.deadlines.remove(&(latest_start, j));
        }
        self.queued_jobs -= 1;
        let b = self
            .backlog
            .get_mut(&(class, shape))
            .expect("backlog of a queued job");
        b.queued_cost -= cost;
        b.queued_jobs -= 1;
        let shape_empty = b.queued_jobs == 0;
        self.classes[class as usize].queued -= 1;
        if shape_empty {
            self.backlog.remove(&(class, shape));
        }
        let work = &mut self.nodes[leaf.ix()].queued_work;
        work.jobs -= 1;
        work.cost -= cost;
        let leaf_empty = work.jobs == 0;
        if !self.restoring {
            self.meter_dequeue(
                leaf,
                shape,
                dispatched.then_some(cost),
                leaf_empty,
                shape_empty,
            );
        }
    }

    /// A node got its first queued job: it starts at its parent's virtual time, so past
    /// idleness earns no credit.
    fn activate(&mut self, n: NodeIdx) {
        let parent = self.nodes[n.ix()].parent.expect("non-root");
        match self.policy.name {
            PolicyName::Fair | PolicyName::RoundRobin => {
                let v = self.nodes[parent.ix()].child_v;
                let node = &mut self.nodes[n.ix()];
                node.vtime = node.vtime.max(v);
            }
            PolicyName::Drr => {
                // A new flow joins the tail of the active list in the current round.
                self.drr_position += 1;
                self.nodes[n.ix()].drr = Drr {
                    round: self.drr_round,
                    deficit: 0,
                    position: self.drr_position,
                    fed: false,
                };
            }
            _ => {}
        }
    }

    /// A node's last queued job left.
    fn deactivate(&mut self, n: NodeIdx) {
        if self.policy.name == PolicyName::Drr {
            // Classic DRR: an emptied flow forfeits its deficit.
            self.nodes[n.ix()].drr.deficit = 0;
        }
    }

    /// The head of `leaf` for group `g`, if it has a job that group can run.
    pub(crate) fn leaf_head(
        &mut self,
        leaf: NodeIdx,
        g: GroupId,
    ) -> Option<(HeadKey, ShapeId, JobIdx)> {
        let now = self.now.0;
        let mut best: Option<(HeadKey, ShapeId, JobIdx)> = None;
        let queue = self.nodes[leaf.ix()].leaf.as_ref().expect("leaf");
        for (&s, sub) in &queue.subqueues {
            let key = self.shapes.get(s);
            if !self.groups.get_mut(g).compatible(s, key) || !self.gang_fits_group(g, s) {
                continue;
            }
            if let Some((hk, j)) = sub.head(now)
                && best.is_none_or(|b| hk < b.0)
            {
                best = Some((hk, s, j));
            }
        }
        best
    }

    /// Recomputes where `leaf` is indexed for every live group. Without backfilling a leaf is
    /// a strict queue, indexed under its head's shape only; with backfilling a later job may
    /// pass an earlier one that cannot start (reservations protect the order), so the leaf is
    /// indexed under every shape it holds.
    pub(crate) fn reindex_leaf(&mut self, leaf: NodeIdx) {
        let head_keyed = matches!(
            self.policy.name,
            PolicyName::Wfq | PolicyName::Fifo | PolicyName::Strict | PolicyName::Sjf
        );
        if self.policy.backfill == Backfill::None && self.leaf_heads_unchanged(leaf) {
            // The common case: the head's shape did not change for any group.
            if head_keyed {
                let n = self.nodes[leaf.ix()]
                    .leaf
                    .as_ref()
                    .expect("leaf")
                    .heads
                    .len();
                for i in 0..n {
                    let (g, s) = self.nodes[leaf.ix()].leaf.as_ref().expect("leaf").heads[i];
                    self.refresh_presence(leaf, g, s);
                }
            }
            return;
        }
        let groups: Vec<GroupId> = self.live_groups.clone();
        let old: Vec<(GroupId, ShapeId)> = self.nodes[leaf.ix()]
            .leaf
            .as_ref()
            .expect("leaf")
            .heads
            .to_vec();
        let every_shape = self.policy.backfill != Backfill::None;
        let mut new = Vec::with_capacity(groups.len());
        for &g in &groups {
            if every_shape {
                let shapes: Vec<ShapeId> = self.nodes[leaf.ix()]
                    .leaf
                    .as_ref()
                    .expect("leaf")
                    .subqueues
                    .keys()
                    .copied()
                    .collect();
                for s in shapes {
                    let key = self.shapes.get(s);
                    if self.groups.get_mut(g).compatible(s, key) && self.gang_fits_group(g, s) {
                        new.push((g, s));
                    }
                }
            } else if let Some((_, s, _)) = self.leaf_head(leaf, g) {
                new.push((g, s));
            }
        }
        if old == new && !head_keyed {
            return;
        }
        for &(g, s) in &old {
            if !new.contains(&(g, s)) {
                self.move_count(leaf, g, Some(s), None);
            }
        }
        for &(g, s) in &new {
            if !old.contains(&(g, s)) {
                self.move_count(leaf, g, None, Some(s));
            } else if head_keyed {
                self.refresh_presence(leaf, g, s);
            }
        }
        self.nodes[leaf.ix()].leaf.as_mut().expect("leaf").heads = new.into();
    }

    /// Moves one leaf's head for group `g` from shape `old` to shape `new`, from `leaf` up.
    fn move_count(
        &mut self,
        leaf: NodeIdx,
        g: GroupId,
        old: Option<ShapeId>,
        new: Option<ShapeId>,
    ) {
        let mut cur = leaf;
        loop {
            if let Some(o) = old {
                let c = self.nodes[cur.ix()]
                    .counts
                    .get_mut(&(g, o))
                    .expect("count of a head shape");
                *c -= 1;
                if *c == 0 {
                    self.nodes[cur.ix()].counts.remove(&(g, o));
                }
            }
            if let Some(n) = new {
                *self.nodes[cur.ix()].counts.get_or_insert_with((g, n), || 0) += 1;
            }
            let Some(parent) = self.nodes[cur.ix()].parent else {
                break;
            };
            if let Some(o) = old {
                self.refresh_presence(cur, g, o);
            }
            if let Some(n) = new {
                self.refresh_presence(cur, g, n);
            }
            cur = parent;
        }
    }

    /// Puts node `n` in (or takes it out of) its parent's index for `(g, s)`, with its current key.
    pub(crate) fn refresh_presence(&mut self, n: NodeIdx, g: GroupId, s: ShapeId) {
        let Some(parent) = self.nodes[n.ix()].parent else {
            return;
        };
        let new_key = self.wanted_key(n, g, s);
        let old_key = self.nodes[n.ix()].keyed.get(&(g, s)).copied();
        if old_key == new_key {
            return;
        }
        if let Some(old) = old_key {
            let set = self.nodes[parent.ix()]
                .index
                .get_mut(&(g, s))
                .expect("index set of a keyed node");
            match new_key {
                // Re-keyed (a charge, a release): it moves inside the same set, which stays,
                // and its entry in `keyed` is updated in place.
                Some(new) => {
                    let moved = set.replace(&old, new);
                    assert!(
                        moved,
                        "node {n:?} was not under its key in its parent's index"
                    );
                    *self.nodes[n.ix()]
                        .keyed
                        .get_mut(&(g, s))
                        .expect("keyed above") = new;
                }
                None => {
                    let removed = set.remove(&old);
                    assert!(
                        removed,
                        "node {n:?} was not under its key in its parent's index"
                    );
                    if set.is_empty() {
                        self.nodes[parent.ix()].index.remove(&(g, s));
                    }
                    self.nodes[n.ix()].keyed.remove(&(g, s));
                }
            }
        } else if let Some(new) = new_key {
            self.nodes[parent.ix()]
                .index
                .get_or_insert_with((g, s), Default::default)
                .insert(new);
            self.nodes[n.ix()].keyed.insert((g, s), new);
        }
    }

    /// The key node `n` should be under in its parent's index for `(g, s)`: none when it holds
    /// no job of that kind or its tenant's limits refuse the shape.
    fn wanted_key(&self, n: NodeIdx, g: GroupId, s: ShapeId) -> Option<NodeKey> {
        let holds = self.nodes[n.ix()].counts.get(&(g, s)).copied().unwrap_or(0) > 0;
        (holds && self.eligible(n, s)).then(|| self.node_key(n, g, s))
    }

    /// Whether node `n` is under the key it should be for everything it holds: what a re-key
    /// that was skipped as a no-op is checked against in debug builds.
    pub(crate) fn keys_current(&self, n: NodeIdx) -> bool {
        let node = &self.nodes[n.ix()];
        node.parent.is_none()
            || node
                .counts
                .keys()
                .all(|&(g, s)| self.wanted_key(n, g, s) == node.keyed.get(&(g, s)).copied())
    }

    /// Re-keys node `n` everywhere it is indexed (after its balance or allocation changed).
    pub(crate) fn rekey_node(&mut self, n: NodeIdx) {
        // Re-keying changes the node's keys and its parent's index, never its counts. There
        // are usually one or two: copied out onto the stack, not walked by ranges (a range
        // search in a B-tree costs two descents) nor collected on the heap.
        let counts = &self.nodes[n.ix()].counts;
        let mut inline: Chain<(GroupId, ShapeId), REKEY_INLINE> = Chain::default();
        let mut spilled: Vec<(GroupId, ShapeId)> = Vec::new();
        if counts.len() <= REKEY_INLINE {
            counts.keys().for_each(|&k| inline.push(k));
        } else {
            spilled = counts.keys().copied().collect();
        }
        for &(g, s) in inline.iter().chain(&spilled) {
            self.refresh_presence(n, g, s);
        }
    }

    /// Whether a strict leaf's head shape is still the same for every live group.
    fn leaf_heads_unchanged(&mut self, leaf: NodeIdx) -> bool {
        let mut k = 0;
        for gi in 0..self.live_groups.len() {
            let g = self.live_groups[gi];
            let new = self.leaf_head(leaf, g).map(|h| h.1);
            let heads = &self.nodes[leaf.ix()].leaf.as_ref().expect("leaf").heads;
            let old = match heads.get(k) {
                Some(&(hg, s)) if hg == g => {
                    k += 1;
                    Some(s)
                }
                _ => None,
            };
            if new != old {
                return false;
            }
        }
        k == self.nodes[leaf.ix()]
            .leaf
            .as_ref()
            .expect("leaf")
            .heads
            .len()
    }

    /// Re-keys every node (after a change of capacity or policy).
    pub(crate) fn rekey_all(&mut self) {
        for n in 1..self.nodes.len() {
            if self.nodes[n].leaf.is_some() {
                self.reindex_leaf(NodeIdx(n as u32));
            }
        }
        for n in 1..self.nodes.len() {
            self.rekey_node(NodeIdx(n as u32));
        }
    }

    /// Whether node `n` may take a job of shape `s` now (its tenant's limits).
    pub(crate) fn eligible(&self, n: NodeIdx, s: ShapeId) -> bool {
        let Some(tenant) = self.nodes[n.ix()].kind.limited_tenant() else {
            return true;
        };
        let shape = self.shapes.get(s);
        self.binding_limits(tenant)
            .into_iter()
            .all(|t| self.tenants[t.ix()].has_room(&shape.demand, shape.gang_min as u64))
    }

    /// The tenants whose limits decide whether `tenant`'s node is indexed: its own, and in a
    /// flat tree (no node for its ancestors) its ancestors' too.
    fn binding_limits(&self, tenant: TenantIdx) -> Chain<TenantIdx, CHAIN_MAX> {
        if self.shape_kind == TreeShape::Flat {
            self.tenant_chain(tenant)
        } else {
            let mut own = Chain::default();
            own.push(tenant);
            own
        }
    }

    /// Whether node `n`'s keys under `fair` read its tenant's allocation: its tier (a
    /// guarantee) or whether it is indexed at all (a limit among [`Engine::binding_limits`]).
    /// A node that reads neither keeps its keys when an allocation is released and its
    /// balance stands.
    pub(crate) fn fair_keys_read_allocation(&self, n: NodeIdx) -> bool {
        let Some(tenant) = self.nodes[n.ix()].kind.limited_tenant() else {
            return false;
        };
        !self.tenants[tenant.ix()].guarantee.is_zero()
            || self
                .binding_limits(tenant)
                .into_iter()
                .any(|t| self.tenants[t.ix()].limit.is_some())
    }

    /// Whether a tenant's guarantee still covers a job of shape `s` (tier 0 under `fair`): the
    /// job uses some guaranteed resource, and every guaranteed resource stays within the
    /// guarantee. Resources the guarantee does not name do not count here (they are still
    /// charged as usage above the guarantee).
    pub(crate) fn within_guarantee(&self, t: crate::ids::TenantIdx, s: ShapeId) -> bool {
        let tenant = &self.tenants[t.ix()];
        if tenant.guarantee.is_zero() {
            return false;
        }
        let shape = self.shapes.get(s);
        let members = shape.gang_min as u64;
        let mut touches = false;
        for (r, g) in tenant.guarantee.iter() {
            if g == 0 {
                continue;
            }
            let d = shape.demand.get(r).saturating_mul(members);
            touches |= d > 0;
            if tenant.alloc.get(r).saturating_add(d) > g {
                return false;
            }
        }
        touches
    }

    /// The key of node `n` in its parent's index for `(g, s)`.
    fn node_key(&self, n: NodeIdx, g: GroupId, s: ShapeId) -> NodeKey {
        let node = &self.nodes[n.ix()];
        let (tier, primary, secondary) = match self.policy.name {
            PolicyName::Fifo | PolicyName::Strict | PolicyName::Sjf => {
                // A tenant's key is its head's place in the global order.
                let head = node
                    .leaf
                    .as_ref()
                    .and_then(|q| q.subqueues.get(&s))
                    .and_then(|sub| sub.head(self.now.0));
                match head {
                    Some((HeadKey(t, k, seq), _)) => (t, ((k as u64) ^ (1u64 << 63)) as u128, seq),
                    None => (u8::MAX, u128::MAX, u64::MAX),
                }
            }
            PolicyName::RoundRobin => (0, node.vtime, 0),
            PolicyName::Drr => (0, node.drr.round, node.drr.position),
            PolicyName::Wfq => {
                let tag = node
                    .leaf
                    .as_ref()
                    .and_then(|q| q.subqueues.get(&s))
                    .and_then(|sub| sub.head(self.now.0))
                    .map(|(_, j)| self.job(j).wfq_tag as u128)
                    .unwrap_or(u128::MAX);
                let _ = g;
                (0, tag, 0)
            }
            PolicyName::Drf => {
                let share = node.alloc.dominant_share_ppb(&self.total_capacity) as u128;
                (0, node.weight.divide(share * SHARE_SCALE as u128), 0)
            }
            PolicyName::Fair => {
                let tier = match node.kind {
                    NodeKind::Tenant(t) if self.within_guarantee(t, s) => 0,
                    _ => 1,
                };
                (tier, node.vtime, 0)
            }
        };
        NodeKey::new(tier, primary, secondary, n)
    }

    /// The next leaf, head shape and head job for group `g`, in policy order, among shapes for
    /// which `fit` holds. Leaves under a tenant whose ancestors are at their limit are skipped.
    ///
    /// A node is indexed per shape, and only for the shapes its tenant's limits admit, so the
    /// walk keeps to the shapes every node it descended through admits: a node reached through
    /// a small shape must not then yield a shape its limit refuses (fuzz finding F5).
    pub(crate) fn select(
        &self,
        g: GroupId,
        fit: &mut dyn FnMut(ShapeId) -> bool,
    ) -> Option<(NodeIdx, ShapeId, JobIdx)> {
        let lazy_limits = self.shape_kind == TreeShape::Flat;
        let mut node = NodeIdx(0);
        // The nodes below the root walked through so far.
        let mut path: Chain<NodeIdx, CHAIN_MAX> = Chain::default();
        loop {
            let current = &self.nodes[node.ix()];
            if current.is_leaf() {
                let queue = current.leaf.as_ref().expect("a leaf's queue");
                // The leaf's best head among the shapes it is indexed under for g that fit.
                let mut best: Option<(HeadKey, ShapeId, JobIdx)> = None;
                for &(hg, s) in queue.heads.iter() {
                    if hg != g || !fit(s) || !self.path_admits(&path, g, s, lazy_limits) {
                        continue;
                    }
                    let Some((hk, j)) = queue.subqueues.get(&s).and_then(|q| q.head(self.now.0))
                    else {
                        continue;
                    };
                    if best.is_none_or(|b| hk < b.0) {
                        best = Some((hk, s, j));
                    }
                }
                return best.map(|(_, s, j)| (node, s, j));
            }
            let mut best: Option<NodeKey> = None;
            for (&(_, s), set) in current
                .index
                .range(&(g, ShapeId(0)), &(g, ShapeId(u32::MAX)))
            {
                if !fit(s) || !self.path_admits(&path, g, s, lazy_limits) {
                    continue;
                }
                let first = if lazy_limits {
                    set.iter().find(|k| self.eligible(k.node(), s)).copied()
                } else {
                    set.first().copied()
                };
                if let Some(k) = first
                    && best.is_none_or(|b| k < b)
                {
                    best = Some(k);
                }
            }
            node = best?.node();
            path.push(node);
        }
    }

    /// Asks the CPU to start loading the first four lines of the node the next decision will
    /// likely descend to first (the smallest key in the root's first index set), so that what
    /// follows this decision (an attempt's end, the server's commit) overlaps that cache miss
    /// instead of the next decision waiting for it: with 10^4 tenants under `fair` the next
    /// tenant is usually one not visited for a while. A hint only: no state, no result changes.
    pub(crate) fn prefetch_next_node(&self) {
        if let Some((_, set)) = (&self.nodes[0].index).into_iter().next()
            && let Some(key) = set.first()
            && let Some(node) = self.nodes.get(key.node().ix())
        {
            let base = (node as *const super::state::Node).cast::<u8>();
            for line in 0..4 {
                crate::hint::prefetch(base.wrapping_add(64 * line));
            }
        }
    }

    /// Whether every node of `path` may take a job of shape `s` for group `g`: indexed under
    /// it in its parent (which the limits decide when the node is keyed), or, where limits are
    /// checked lazily, eligible now.
    fn path_admits(&self, path: &[NodeIdx], g: GroupId, s: ShapeId, lazy_limits: bool) -> bool {
        path.iter().all(|&n| {
            if lazy_limits {
                self.eligible(n, s)
            } else {
                self.nodes[n.ix()].keyed.contains_key(&(g, s))
            }
        })
    }
}
