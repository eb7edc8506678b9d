//! The engine's records: jobs, attempts, tenants, classes, pools and tree nodes.

use super::chunked::Chunked;
use super::expiry_list::{Link, Links};
use super::small_map::{SmallList, SmallMap};
use crate::config::{DeadlinePolicy, PolicyName};
use crate::event::StopReason;
use crate::ids::{CHAIN_MAX, Chain, GroupId, NodeIdx, PoolIdx, ShapeId, TenantIdx, WorkerIdx};
use crate::job::JobState;
use crate::policy::ClassPolicy;
use crate::queue::{PackedOrderKey, SubQueue};
use crate::resources::{Limit, ResVec};
use crate::time::{Dur, Time};
use crate::weight::Weight;
use std::collections::{BTreeMap, BTreeSet};

/// A live job (waiting, deferred or running).
#[derive(Clone, Debug)]
pub(crate) struct Job {
    /// The id index compares ids through this field: it is stored once, most ids inside it.
    pub id: super::job_id::JobId,
    pub tenant: TenantIdx,
    pub class: u16,
    pub shape: ShapeId,
    pub priority: i32,
    pub state: JobState,
    /// Position in arrival order; a retry gets a fresh one so it does not jump ahead.
    pub seq: u64,
    pub arrival: Time,
    /// When it last entered its queue (for aging); while it is deferred, when it may enter it
    /// (its not-before time, see [`Job::deferred_until`]): the two are written together.
    pub enqueued: Time,
    pub estimate: Dur,
    /// `Time::MAX` when it has none.
    pub deadline: Time,
    pub max_attempts: u32,
    pub attempts: u32,
    /// Attempts that count against `max_attempts` (failures and expiries, not preemptions).
    pub failures: u32,
    pub epoch: u64,
    pub checkpointable: bool,
    pub downgraded: bool,
    /// Work done by earlier attempts (checkpoints).
    pub progress: Dur,
    /// WFQ virtual finish tag, in worker-nanoseconds per unit of weight.
    pub wfq_tag: u64,
    /// Its leaf queue and key there, while queued.
    pub leaf: NodeIdx,
    pub order: PackedOrderKey,
    /// Estimated cost counted in its tenant's outstanding work.
    pub cost_wns: u64,
    /// Whether the job re-entered after a failure (spends retry budget when it starts).
    pub retry: bool,
    /// Digest of the submitted spec (to tell a resubmission from a reused id).
    pub digest: u64,
    pub attempt: Option<Box<Attempt>>,
}

impl Job {
    /// Estimated cost counted in its tenant's outstanding work, in cost units.
    #[inline]
    pub fn cost(&self) -> u128 {
        self.cost_wns as u128 * COST_UNITS_PER_WNS
    }

    /// When a deferred job becomes eligible (its timer's key in `Engine::deferred`): the time
    /// it will enter its queue. Meaningless for a job that is not deferred.
    #[inline]
    pub fn deferred_until(&self) -> Time {
        self.enqueued
    }

    /// The latest start that still meets its deadline (the deadline less the estimated
    /// remaining work); `None` without a deadline.
    pub fn latest_start(&self) -> Option<Time> {
        (self.deadline != Time::MAX)
            .then(|| self.deadline.minus(self.estimate.minus(self.progress)))
    }
}

// A queued job costs its record, its id and its queue entries: the record is most of issue
// 7's 300 bytes a job, so a field that grows it past 152 bytes fails the build here.
const _: () = assert!(
    size_of::<Job>() <= 152,
    "the job record grew past 152 bytes"
);

/// What of a class's policy decides its queued jobs' order and timers: when these change, a
/// publish re-keys the class's queued jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OrderParams {
    pub priority: i32,
    pub aging_step: Option<Dur>,
    pub aging_cap: Option<u32>,
    pub on_deadline: DeadlinePolicy,
}

impl OrderParams {
    pub fn of(class: &ClassPolicy) -> OrderParams {
        OrderParams {
            priority: class.priority,
            aging_step: class.aging_step,
            aging_cap: class.aging_cap,
            on_deadline: class.on_deadline,
        }
    }

    /// When a job that entered its queue at `enqueued` reaches the aging cap, if it has one.
    pub fn cap_at(&self, enqueued: Time) -> Option<Time> {
        let (step, cap) = (self.aging_step?, self.aging_cap?);
        Some(Time(
            enqueued
                .0
                .saturating_add((cap as u64).saturating_mul(step.0)),
        ))
    }

    /// Whether a queued job with a deadline is watched for missing it.
    pub fn watches_deadline(&self, downgraded: bool) -> bool {
        self.on_deadline != DeadlinePolicy::RunLate && !downgraded
    }
}

/// Cost units (see `policy::COST_PER_WORKER_SECOND`) per worker-nanosecond: jobs keep their
/// cost in worker-nanoseconds, which is exact enough and fits 64 bits for 584 worker-years.
pub(crate) const COST_UNITS_PER_WNS: u128 = 1_000_000_000;

/// Cost units to worker-nanoseconds, saturating.
pub(crate) fn to_wns(cost: u128) -> u64 {
    (cost / COST_UNITS_PER_WNS).min(u64::MAX as u128) as u64
}

/// Where an attempt runs: (worker, members) per worker. One worker, unless a gang spreads.
pub(crate) type Placements = SmallList<(WorkerIdx, u32)>;

/// A running attempt.
#[derive(Clone, Debug)]
pub(crate) struct Attempt {
    pub number: u32,
    pub epoch: u64,
    pub started: Time,
    pub expires: Time,
    pub placements: Placements,
    pub members: u32,
    pub estimate: Dur,
    /// Share increments charged along the job's charge path (ppb), top first.
    /// Inline, as is `path`: a decision allocates neither.
    pub charges: Chain<u64, CHAIN_MAX>,
    pub path: Chain<NodeIdx, CHAIN_MAX>,
    pub stop: Option<(StopReason, Time)>,
    pub borrowed: bool,
    pub policy_version: u64,
    /// Dominant share of one worker times members (ppb): cost per nanosecond.
    pub worker_share: u64,
    /// The attempt's place in `Engine::expiries` at `expires` (unlisted while stopping).
    pub lease_link: Link,
}

/// The running attempt of the job in `slot`, which a lease list names.
fn listed_attempt(jobs: &Chunked<Option<Job>>, slot: u32) -> &Attempt {
    jobs[slot as usize]
        .as_ref()
        .and_then(|job| job.attempt.as_deref())
        .expect("a listed lease's running attempt")
}

/// A running attempt's place among the leases, by job slot: in the attempt, so that a list
/// of leases costs nothing per queued job; its expiry is the attempt's `expires`.
impl Links for Chunked<Option<Job>> {
    fn at(&self, slot: u32) -> Time {
        listed_attempt(self, slot).expires
    }

    fn link(&self, slot: u32) -> &Link {
        &listed_attempt(self, slot).lease_link
    }

    fn link_mut(&mut self, slot: u32) -> &mut Link {
        &mut self[slot as usize]
            .as_mut()
            .and_then(|job| job.attempt.as_deref_mut())
            .expect("a listed lease's running attempt")
            .lease_link
    }
}

/// The books of a tenant (also kept per class and per pool): cost in cost units.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ledger {
    /// Cost charged for finished attempts (actual usage), all outcomes.
    pub charged: u128,
    /// Estimated cost of running attempts.
    pub in_flight: u128,
    /// Part of `charged` spent on attempts that failed or expired.
    pub failed: u128,
    /// Part of `charged` spent on attempts that were preempted.
    pub preempted: u128,
    /// Part of `charged` spent on attempts that were canceled.
    pub canceled: u128,
    /// Part of `charged` spent on retries.
    pub retried: u128,
    /// Underestimation: actual cost above the estimate, summed.
    pub debt: u128,
    /// Attempts finished (any outcome).
    pub attempts: u64,
}

/// Learned estimates of one tenant in one class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Estimator {
    /// EWMA of actual run time (ns).
    pub mean_ns: u64,
    /// EWMA of actual / declared, in ppm (1e6 = honest).
    pub ratio_ppm: u64,
    pub samples: u32,
    /// Recent underestimates (decays by one per honest completion).
    pub strikes: u32,
}

impl Estimator {
    /// A successful attempt ran `usage` against `ratio_ppm` of its estimate.
    pub fn observe(&mut self, usage: Dur, ratio_ppm: u64) {
        if self.samples == 0 {
            self.mean_ns = usage.0;
            self.ratio_ppm = ratio_ppm;
        } else {
            // EWMA with weight 1/8.
            self.mean_ns = (self.mean_ns as u128 * 7 / 8 + usage.0 as u128 / 8) as u64;
            self.ratio_ppm = (self.ratio_ppm as u128 * 7 / 8 + ratio_ppm as u128 / 8) as u64;
        }
        self.samples = self.samples.saturating_add(1);
    }
}

/// A tenant's estimators by class. Most tenants submit to one class, so the first class's
/// estimator is kept inline, in the tenant's record: learning from a completion then touches
/// no other memory. Further classes go to a map.
#[derive(Clone, Default)]
pub(crate) struct Estimators {
    first: Option<(u16, Estimator)>,
    rest: BTreeMap<u16, Estimator>,
}

impl Estimators {
    /// The estimator of `class`, if the tenant has one.
    pub fn get(&self, class: u16) -> Option<&Estimator> {
        match self.first {
            Some((c, ref e)) if c == class => Some(e),
            _ => self.rest.get(&class),
        }
    }

    /// The estimator of `class`, created empty if the tenant has none.
    pub fn entry(&mut self, class: u16) -> &mut Estimator {
        match self.first {
            None => &mut self.first.insert((class, Estimator::default())).1,
            Some((c, ref mut e)) if c == class => e,
            Some(_) => self.rest.entry(class).or_default(),
        }
    }

    /// Every class's estimator, in class order.
    pub fn to_vec(&self) -> Vec<(u16, Estimator)> {
        let mut all: Vec<(u16, Estimator)> = self.first.into_iter().collect();
        all.extend(self.rest.iter().map(|(c, e)| (*c, *e)));
        all.sort_by_key(|(c, _)| *c);
        all
    }
}

impl FromIterator<(u16, Estimator)> for Estimators {
    fn from_iter<I: IntoIterator<Item = (u16, Estimator)>>(iter: I) -> Estimators {
        let mut out = Estimators::default();
        for (class, e) in iter {
            *out.entry(class) = e;
        }
        out
    }
}

impl std::fmt::Debug for Estimators {
    /// As the map by class it stands for.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.to_vec()).finish()
    }
}

/// A tenant (a node of the tenant tree, declared or seen in a submission).
///
/// `repr(C)` keeps the fields in the order written: those every dispatch and completion
/// touches come first, together, so that a tenant not seen for a while costs a few adjacent
/// cache lines rather than one line per field scattered over the record.
#[derive(Clone, Debug)]
#[repr(C)]
pub(crate) struct Tenant {
    // Hot: read or written by every grant and attempt end.
    pub parent: Option<TenantIdx>,
    /// Its node in the current tree (tenant node under `fair`, leaf under flat policies).
    pub node: Option<NodeIdx>,
    /// Jobs of this tenant (not descendants) that are live.
    pub live_jobs: u64,
    /// Demand of running attempts of this tenant and its descendants.
    pub alloc: ResVec,
    pub guarantee: ResVec,
    pub limit: Option<Limit>,
    pub outstanding: u128,
    pub ledger: Ledger,
    pub estimators: Estimators,
    pub retry_used: u128,
    // Cold: admission, publishing and reports.
    pub name: String,
    pub children: Vec<TenantIdx>,
    pub declared: bool,
    pub weight: Weight,
    /// What it held when a publish lowered its limit below that (it keeps it, starting
    /// nothing, until back within the limit); `None` when within its limit then.
    pub limit_grace: Option<ResVec>,
    /// Classes permitted (by index); `None` means all.
    pub classes: Option<BTreeSet<u16>>,
    /// Band leaves under `fair`, by class.
    pub bands: BTreeMap<u16, NodeIdx>,
    pub max_outstanding: Option<u128>,
    pub burst: Option<u128>,
    pub rate: Option<u128>,
    pub tokens: u128,
    pub tokens_at: Time,
    pub retry_budget: Option<u128>,
    pub retry_window: Dur,
    pub retry_since: Time,
    /// Admission outcomes: accepted, deferred, rejected.
    pub admitted: [u64; 3],
}

impl Tenant {
    /// Whether its limit (if any) leaves room for `times` copies of `demand` more.
    pub fn has_room(&self, demand: &ResVec, times: u64) -> bool {
        self.limit
            .as_ref()
            .is_none_or(|limit| limit.admits(&self.alloc, demand, times))
    }

    /// How many copies of `demand` more its limit leaves room for (`u64::MAX` without one).
    pub fn room_for(&self, demand: &ResVec) -> u64 {
        self.limit
            .as_ref()
            .map_or(u64::MAX, |limit| limit.copies_within(&self.alloc, demand))
    }
}

/// A class at run time.
#[derive(Clone, Debug)]
pub(crate) struct Class {
    pub policy: ClassPolicy,
    /// Jobs of this class waiting in queues.
    pub queued: u64,
    pub ledger: Ledger,
    pub deadline_misses: u64,
    /// Run times of the class's jobs, all tenants: the estimate of a job that declares none
    /// from a tenant with no history in the class yet (the job type is known, the tenant new).
    pub estimator: Estimator,
}

/// A pool at run time: capacity of live workers and what runs there.
#[derive(Clone, Debug, Default)]
pub(crate) struct Pool {
    pub capacity: ResVec,
    pub used: ResVec,
    /// Demand running per class.
    pub class_used: BTreeMap<u16, ResVec>,
    pub ledger: Ledger,
    pub live_workers: u32,
}

/// The pools, by name for reports and by a slot that never changes for the attempts' books: a
/// worker keeps its pool's slot, so that granting and ending an attempt update the pool's use
/// and ledger without comparing names. Pools are created by name and never removed.
#[derive(Clone, Debug, Default)]
pub(crate) struct Pools {
    by_name: BTreeMap<String, PoolIdx>,
    slots: Vec<Pool>,
}

impl Pools {
    /// The slot of pool `name`, created empty if new (its name allocated only then).
    pub fn slot(&mut self, name: &str) -> PoolIdx {
        if let Some(&p) = self.by_name.get(name) {
            return p;
        }
        let p = PoolIdx(self.slots.len() as u32);
        self.slots.push(Pool::default());
        self.by_name.insert(name.to_string(), p);
        p
    }

    /// Pool `name`, created empty if new.
    pub fn entry(&mut self, name: &str) -> &mut Pool {
        let p = self.slot(name);
        &mut self.slots[p.ix()]
    }

    pub fn get(&self, name: &str) -> Option<&Pool> {
        self.by_name.get(name).map(|p| &self.slots[p.ix()])
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut Pool> {
        self.by_name.get(name).map(|p| &mut self.slots[p.ix()])
    }

    pub fn at_mut(&mut self, p: PoolIdx) -> &mut Pool {
        &mut self.slots[p.ix()]
    }

    /// The pools in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Pool)> + '_ {
        self.by_name.iter().map(|(n, p)| (n, &self.slots[p.ix()]))
    }
}

/// DRR state of a queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Drr {
    pub round: u128,
    pub deficit: i128,
    pub position: u64,
    /// Whether the quantum of `round` was already added.
    pub fed: bool,
}

/// What a tree node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeKind {
    Root,
    /// A tenant's node under `fair` (children: sub-tenants and bands).
    Tenant(TenantIdx),
    /// A tenant's band leaf under `fair`.
    Band(TenantIdx, u16),
    /// A tenant's leaf under the flat policies (and the queue-order policies, where a tenant's
    /// key is its head job's place in the one global order).
    Flat(TenantIdx),
}

impl NodeKind {
    /// The tenant whose limits decide whether a node of this kind is indexed: a tenant's own
    /// node or a flat tree's leaf (bands and the root have none).
    pub fn limited_tenant(self) -> Option<TenantIdx> {
        match self {
            NodeKind::Tenant(t) | NodeKind::Flat(t) => Some(t),
            NodeKind::Root | NodeKind::Band(..) => None,
        }
    }
}

/// The key under which a child sits in its parent's index: smaller is served first. It orders
/// by (tier, primary, secondary, node), packed into two words so that the index's searches,
/// a dozen comparisons each at 10^4 tenants, compare two integers instead of four fields.
///
/// `primary` (a virtual time, a round, a tag) is kept to 120 bits, saturating: a `fair` node's
/// virtual time reaches 2^120 after about 4 * 10^10 worker-years of service at weight 1, so no
/// real order changes; past it, equal keys fall back to `secondary` and the node's index.
///
/// The two words are kept as 64-bit halves, so that a key is aligned to 8 bytes, not 16: a
/// node's index then holds one child's key inline with no padding, within the node's first
/// four cache lines (`Node`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeKey {
    /// tier << 120 | primary, high half first.
    hi: [u64; 2],
    /// secondary << 32 | node, high half first.
    lo: [u64; 2],
}

impl Ord for NodeKey {
    #[inline]
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Word by word, most significant first, stopping at the first that differs: keys
        // usually differ in their first or second word (tier and the primary's high half, or
        // its low half), and a B-tree search compares a key a dozen times or more.
        let a = [self.hi[0], self.hi[1], self.lo[0], self.lo[1]];
        let b = [other.hi[0], other.hi[1], other.lo[0], other.lo[1]];
        for i in 0..4 {
            if a[i] != b[i] {
                return a[i].cmp(&b[i]);
            }
        }
        std::cmp::Ordering::Equal
    }
}

impl PartialOrd for NodeKey {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl NodeKey {
    const PRIMARY_MAX: u128 = (1 << 120) - 1;

    pub fn new(tier: u8, primary: u128, secondary: u64, node: NodeIdx) -> NodeKey {
        let halves = |x: u128| [(x >> 64) as u64, x as u64];
        NodeKey {
            hi: halves((tier as u128) << 120 | primary.min(Self::PRIMARY_MAX)),
            lo: halves((secondary as u128) << 32 | node.0 as u128),
        }
    }

    #[inline]
    fn hi(&self) -> u128 {
        (self.hi[0] as u128) << 64 | self.hi[1] as u128
    }

    pub fn tier(&self) -> u8 {
        (self.hi() >> 120) as u8
    }

    pub fn primary(&self) -> u128 {
        self.hi() & Self::PRIMARY_MAX
    }

    pub fn node(&self) -> NodeIdx {
        NodeIdx(self.lo[1] as u32)
    }
}

/// Children's keys in a node's index for one (group, shape): a set, read smallest first. A
/// tenant's node usually has one child with work (its one band), whose key then sits in the
/// node itself; as a `BTreeSet` it was a heap node of its own, one more cache miss on the way
/// down to the leaf of a tenant not visited for a while.
///
/// The set is stored largest first. A child served is charged for it and its key grows, under
/// every policy's order (a virtual time, a dominant share, the place of the next job in a
/// global queue): it moves from the smallest end, most often to near the largest. A B-tree
/// searches each node from its first key, so an insertion near the stored front compares once
/// per level, where one at the back compares with every key of each node on its path (some
/// thirty comparisons at 10^4 children); the smallest key, now the stored back, is reached
/// without a comparison.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeySet(SmallMap<Desc, ()>);

/// A [`NodeKey`] ordered largest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Desc(NodeKey);

impl Ord for Desc {
    #[inline]
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.cmp(&self.0)
    }
}

impl PartialOrd for Desc {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl KeySet {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, key: &NodeKey) -> bool {
        self.0.contains_key(&Desc(*key))
    }

    /// Adds `key`; false if it was there.
    pub fn insert(&mut self, key: NodeKey) -> bool {
        self.0.insert(Desc(key), ()).is_none()
    }

    /// Removes `key`; false if it was not there.
    pub fn remove(&mut self, key: &NodeKey) -> bool {
        self.0.remove(&Desc(*key)).is_some()
    }

    /// Replaces `old` by `new` (absent, or `old`); false if `old` was not there.
    pub fn replace(&mut self, old: &NodeKey, new: NodeKey) -> bool {
        self.0.replace_key(&Desc(*old), Desc(new))
    }

    /// The smallest key.
    #[inline]
    pub fn first(&self) -> Option<&NodeKey> {
        self.0.last_key().map(|d| &d.0)
    }

    /// The keys, smallest first.
    pub fn iter(&self) -> impl Iterator<Item = &NodeKey> {
        (&self.0).into_iter().rev().map(|(d, _)| &d.0)
    }
}

/// A leaf's queue.
#[derive(Clone, Debug, Default)]
pub(crate) struct LeafQueue {
    pub subqueues: SmallMap<ShapeId, SubQueue>,
    /// The shape of its head, per placement group.
    pub heads: SmallList<(GroupId, ShapeId)>,
}

/// Queued jobs and their estimated cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct QueuedCost {
    pub jobs: u64,
    pub cost: u128,
}

/// A node of the scheduling tree.
///
/// `repr(C, align(64))` keeps the fields in the order written, on whole cache lines: what
/// every grant and attempt end reads or writes of any node (balances, books, its keys and its
/// children's index, with a lone child's key inline: 248 bytes) fills the first four lines;
/// then a leaf's queue and meters, which only
/// a leaf's decisions touch (whether it is a leaf is told from `kind`, on the first line);
/// DRR's state last. A node not visited for a while (under `fair` the next tenant usually is
/// one) then costs an inner node four lines and a leaf eight, where the 560-byte record in the
/// compiler's order straddled nine or ten, every one of them touched.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub(crate) struct Node {
    // Every node, every decision that passes through it.
    /// Virtual service (fair), item count (round-robin).
    pub vtime: u128,
    /// Virtual time of its children: a child that becomes active starts here. It is the most
    /// any child has been charged for *settled* service (its `vtime` less its `pending`), so
    /// that estimates still in flight, which reconciliation may take back, do not push a
    /// newcomer behind service nobody received.
    pub child_v: u128,
    /// The part of `vtime` charged at grant for the estimates of running attempts, not yet
    /// reconciled with their actual usage (`fair` only). Always the sum, over the running
    /// attempts charged to this node, of `weight.divide(charge × estimate)`: kept at grant and
    /// attempt end, recomputed when a publish changes weights or rebuilds the tree.
    pub pending: u128,
    pub parent: Option<NodeIdx>,
    pub kind: NodeKind,
    pub weight: Weight,
    /// Jobs queued under this node.
    pub queued: u64,
    /// Demand running under this node.
    pub alloc: ResVec,
    /// Children with work of shape s for group g, by key.
    pub index: SmallMap<(GroupId, ShapeId), KeySet>,
    /// The key under which this node sits in its parent's index, per (group, shape).
    pub keyed: SmallMap<(GroupId, ShapeId), NodeKey>,
    /// Leaves under this node whose head for group g has shape s.
    pub counts: SmallMap<(GroupId, ShapeId), u32>,
    // A leaf's, on the decisions that take from it.
    /// A leaf's queue, in the node itself: a decision reaches it with no further cache miss.
    pub leaf: Option<LeafQueue>,
    /// A leaf's queued work (not counting jobs set aside during a pass), and how fast it
    /// leaves while backlogged: admission's prediction for the leaf.
    pub queued_work: QueuedCost,
    pub meter: super::meter::RateMeter,
    // `drr` only.
    pub drr: Drr,
}

impl Node {
    /// A node of `kind`; bands and flat tenants are leaves and get an empty queue.
    pub fn new(parent: Option<NodeIdx>, kind: NodeKind, weight: Weight) -> Node {
        Node {
            parent,
            kind,
            weight,
            vtime: 0,
            child_v: 0,
            pending: 0,
            queued_work: QueuedCost::default(),
            meter: Default::default(),
            drr: Drr::default(),
            alloc: ResVec::default(),
            queued: 0,
            counts: SmallMap::default(),
            keyed: SmallMap::default(),
            index: SmallMap::default(),
            leaf: Node::kind_is_leaf(kind).then(LeafQueue::default),
        }
    }

    /// Whether a node of this kind is a leaf (holds a queue): bands and flat tenants.
    pub fn kind_is_leaf(kind: NodeKind) -> bool {
        matches!(kind, NodeKind::Band(..) | NodeKind::Flat(_))
    }

    /// Whether it is a leaf, told from its first cache line (its queue starts at the end of
    /// the fourth).
    pub fn is_leaf(&self) -> bool {
        Node::kind_is_leaf(self.kind)
    }
}

/// What shape of tree a policy uses.
pub(crate) fn tree_shape(name: PolicyName) -> TreeShape {
    match name {
        PolicyName::Fifo
        | PolicyName::Strict
        | PolicyName::Sjf
        | PolicyName::RoundRobin
        | PolicyName::Drr
        | PolicyName::Wfq
        | PolicyName::Drf => TreeShape::Flat,
        PolicyName::Fair => TreeShape::Hierarchical,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TreeShape {
    Flat,
    Hierarchical,
}

/// A record of one dispatch decision, kept in a bounded ring for explanations.
#[derive(Clone, Debug, PartialEq)]
pub struct DecisionRecord {
    /// Its number: the count of leases granted so far, this one included. Unique, increasing,
    /// and kept across restarts (it is the engine's durable dispatch count), so that a reader
    /// can page with [`Engine::decisions_after`](crate::Engine::decisions_after).
    pub seq: u64,
    /// When.
    pub at: Time,
    /// The policy version that decided.
    pub policy_version: u64,
    /// The job chosen.
    pub job: String,
    /// Its tenant.
    pub tenant: String,
    /// Its class.
    pub class: String,
    /// Its epoch.
    pub epoch: u64,
    /// Its estimate.
    pub estimate: Dur,
    /// Workers it was placed on.
    pub workers: Vec<String>,
    /// The best other candidates at the top of the tree, with their balances (bounded).
    pub candidates: Vec<Candidate>,
    /// Whether it started as backfill behind a reservation.
    pub backfilled: bool,
    /// Whether it borrowed capacity held in reserve for a higher band.
    pub borrowed: bool,
    /// How long it waited in its queue this time (since it last entered it).
    pub waited: Dur,
}

/// A decision as the engine's ring keeps it: its tenant, class and candidates by number (the
/// engine never removes a tenant or a class, so a number names the same one for the
/// engine's life), named only when the record is read
/// ([`Engine::decision_record`](crate::Engine)). The job id and workers are strings
/// overwritten in place when the ring refills its oldest record: a decision allocates nothing
/// for its record and reads no name.
#[derive(Clone, Debug)]
pub(crate) struct KeptDecision {
    pub seq: u64,
    pub at: Time,
    pub policy_version: u64,
    pub job: String,
    pub tenant: TenantIdx,
    pub class: u16,
    pub epoch: u64,
    pub estimate: Dur,
    pub workers: Vec<String>,
    /// The best other candidates at the top of the tree (the first `candidate_count`).
    pub candidates: [KeptCandidate; MAX_CANDIDATES],
    pub candidate_count: u8,
    pub backfilled: bool,
    pub borrowed: bool,
    pub waited: Dur,
}

/// Candidates a decision record keeps.
pub(crate) const MAX_CANDIDATES: usize = 4;

/// A candidate of a [`KeptDecision`]: its tenant (`None`: the root), balance and tier.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KeptCandidate {
    pub tenant: Option<TenantIdx>,
    pub balance: f64,
    pub within_guarantee: bool,
}

impl KeptDecision {
    /// A record with nothing in it, to be filled.
    pub(crate) fn blank() -> KeptDecision {
        KeptDecision {
            seq: 0,
            at: Time::ZERO,
            policy_version: 0,
            job: String::new(),
            tenant: TenantIdx(0),
            class: 0,
            epoch: 0,
            estimate: Dur::ZERO,
            workers: Vec::new(),
            candidates: [KeptCandidate::default(); MAX_CANDIDATES],
            candidate_count: 0,
            backfilled: false,
            borrowed: false,
            waited: Dur::ZERO,
        }
    }
}

/// Overwrites `s` with `value` in the allocation `s` already has (when it is large enough):
/// the decision ring refills its oldest record instead of freeing it and allocating anew.
pub(crate) fn overwrite(s: &mut String, value: &str) {
    s.clear();
    s.push_str(value);
}

/// Overwrites `names` with `values`, reusing its strings as [`overwrite`] does.
pub(crate) fn overwrite_all<'a>(names: &mut Vec<String>, values: impl Iterator<Item = &'a str>) {
    let mut n = 0;
    for value in values {
        match names.get_mut(n) {
            Some(name) => overwrite(name, value),
            None => names.push(value.to_owned()),
        }
        n += 1;
    }
    names.truncate(n);
}

/// A candidate considered in a decision.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The tenant (or queue) name.
    pub queue: String,
    /// Its balance: virtual service (fair), share (drf), count (round-robin), round (drr), tag (wfq).
    pub balance: f64,
    /// Whether it was within its guarantee for this shape.
    pub within_guarantee: bool,
}

/// Counters of what the engine did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EngineStats {
    /// Leases granted.
    pub dispatches: u64,
    /// Dispatches that were backfill behind a reservation.
    pub backfills: u64,
    /// Preemptions requested.
    pub preemptions: u64,
    /// Leases that expired and were reclaimed.
    pub lease_expiries: u64,
    /// Heartbeats or completions refused for a stale epoch.
    pub stale_epochs: u64,
    /// Jobs dropped at their deadline.
    pub expired: u64,
    /// Attempts that failed.
    pub failures: u64,
    /// Retries scheduled.
    pub retries: u64,
    /// Scheduling passes run.
    pub passes: u64,
    /// Candidates examined by passes.
    pub candidates_examined: u64,
}

/// GPS virtual time for WFQ.
#[derive(Clone, Debug, Default)]
pub(crate) struct Gps {
    pub v: u128,
    pub at: Time,
    /// Backlogged flows in the fluid system: (last finish tag, flow).
    pub backlog: BTreeSet<(u128, TenantIdx)>,
    pub last_finish: BTreeMap<TenantIdx, u128>,
    /// Sum of backlogged weights (millionths).
    pub weight_sum: u128,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn overwrite_all_reuses_grows_and_truncates() {
        let mut names = vec!["a-long-name".to_string(), "b".to_string(), "c".to_string()];
        let kept = names[0].as_ptr();
        overwrite_all(&mut names, ["x", "y"].into_iter());
        assert_eq!(names, ["x", "y"]);
        assert_eq!(
            names[0].as_ptr(),
            kept,
            "the first string's allocation is reused"
        );
        overwrite_all(&mut names, ["p", "q", "r", "s"].into_iter());
        assert_eq!(names, ["p", "q", "r", "s"]);
        overwrite_all(&mut names, std::iter::empty());
        assert!(names.is_empty());
    }

    fn primary() -> impl Strategy<Value = u128> {
        prop_oneof![
            any::<u64>().prop_map(u128::from),
            any::<u128>(),
            (0u128..4).prop_map(|d| NodeKey::PRIMARY_MAX - 1 + d),
        ]
    }

    proptest! {
        // Proves: packed keys order as the tuple (tier, primary, secondary, node) they pack,
        // with primary saturated at 2^120 - 1, and give back each part.
        #[test]
        fn node_keys_order_as_their_fields(
            a in (any::<u8>(), primary(), any::<u64>(), any::<u32>()),
            b in (any::<u8>(), primary(), any::<u64>(), any::<u32>()),
        ) {
            let key = |(t, p, s, n): (u8, u128, u64, u32)| NodeKey::new(t, p, s, NodeIdx(n));
            let sat = |(t, p, s, n): (u8, u128, u64, u32)| (t, p.min(NodeKey::PRIMARY_MAX), s, n);
            prop_assert_eq!(key(a).cmp(&key(b)), sat(a).cmp(&sat(b)));
            let k = key(a);
            prop_assert_eq!((k.tier(), k.primary(), k.node()), (a.0, sat(a).1, NodeIdx(a.3)));
        }
    }

    // Proves: the inline-first estimator table answers, lists (in class order) and prints as
    // the map by class it replaces, whichever class came first.
    #[test]
    fn estimators_behave_as_a_map_by_class() {
        let e = |n: u64| Estimator {
            mean_ns: n,
            ratio_ppm: n,
            samples: n as u32,
            strikes: 0,
        };
        let mut table = Estimators::default();
        let mut map: BTreeMap<u16, Estimator> = BTreeMap::new();
        for (class, n) in [(3u16, 1u64), (1, 2), (3, 4), (7, 5), (1, 6)] {
            *table.entry(class) = e(n);
            map.insert(class, e(n));
        }
        for class in 0..9 {
            assert_eq!(table.get(class), map.get(&class), "class {class}");
        }
        let listed: Vec<(u16, Estimator)> = map.iter().map(|(c, e)| (*c, *e)).collect();
        assert_eq!(table.to_vec(), listed);
        assert_eq!(format!("{table:?}"), format!("{map:?}"));
        let rebuilt: Estimators = listed.iter().copied().collect();
        assert_eq!(rebuilt.to_vec(), listed);
        assert_eq!(Estimators::default().entry(2).samples, 0);
    }
}
