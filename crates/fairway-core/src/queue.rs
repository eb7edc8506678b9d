//! The jobs waiting in one leaf queue, split by shape.
//!
//! A leaf queue is the unit of strict order: the single queue of `fifo`, `strict` and `sjf`,
//! a tenant under the flat fair policies, or one tenant's band under `fair`. Jobs of one shape
//! are interchangeable for placement, so each shape has its own sub-queue; the head of the leaf
//! for a placement group is the best head among the sub-queues of the shapes that group can run.
//!
//! Order inside a sub-queue is by [`HeadKey`], smallest first. Most keys are fixed when the job
//! enters. Aging is the exception: a job's effective priority grows by one point per
//! `aging_step` of waiting, up to `aging_cap` points. Before the cap, ordering by effective
//! priority at any instant equals ordering by the static "virtual arrival" `enqueued - priority
//! * step`, so those jobs sit in the `ramp` set; once a job reaches the cap its priority is flat
//! and it moves to the `flat` set. The head is the better of the two heads, compared at `now`.
//!
//! Most jobs with fixed keys enter their sub-queue in order: one key (a tenant's jobs of one
//! priority, no deadline) and rising sequence numbers. Those sit in a ring, 16 bytes a job with
//! its head at the front; a B-tree entry took about 60 bytes (32-byte keys in leaves split
//! half full by appends) and a descent from the root to find the head. Jobs that enter out of
//! order go to a B-tree beside the ring.

use crate::ids::JobIdx;
use std::collections::{BTreeSet, VecDeque};

/// How a job is ordered inside its leaf queue, fixed when it enters the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum OrderKey {
    /// A fixed key: `(tier, key)`, smaller first. Tier 0 holds jobs with deadlines (key: least
    /// slack), tier 1 the others (key: policy-specific, e.g. negated priority).
    Fixed(u8, i64),
    /// An aging job before its cap: its virtual arrival `enqueued - priority * step` (ns).
    Ramp(i64),
    /// An aging job at its cap: `(priority + cap) * step` (ns), larger first.
    Flat(i64),
}

/// An [`OrderKey`] as a job record keeps it: 10 bytes with no alignment (its kind, the tier,
/// the key little-endian), where the enum takes 16 with its padding. Every queued job carries
/// one, and the record then packs it among its small fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedOrderKey([u8; 10]);

impl From<OrderKey> for PackedOrderKey {
    fn from(key: OrderKey) -> Self {
        let (kind, tier, value) = match key {
            OrderKey::Fixed(tier, v) => (0, tier, v),
            OrderKey::Ramp(v) => (1, 0, v),
            OrderKey::Flat(v) => (2, 0, v),
        };
        let mut bytes = [0; 10];
        bytes[0] = kind;
        bytes[1] = tier;
        bytes[2..].copy_from_slice(&value.to_le_bytes());
        PackedOrderKey(bytes)
    }
}

impl From<PackedOrderKey> for OrderKey {
    fn from(PackedOrderKey(bytes): PackedOrderKey) -> Self {
        let value = i64::from_le_bytes(bytes[2..].try_into().expect("eight bytes"));
        match bytes[0] {
            0 => OrderKey::Fixed(bytes[1], value),
            1 => OrderKey::Ramp(value),
            // Only `From<OrderKey>` makes one: the kind is 0, 1 or 2.
            _ => OrderKey::Flat(value),
        }
    }
}

/// The comparable position of a queue head at one instant: `(tier, key, seq)`, smaller first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HeadKey(pub u8, pub i64, pub u64);

/// A job with a fixed key in its sub-queue: `(tier, key, seq, job)`, smallest first.
type FixedEntry = (u8, i64, u64, JobIdx);

/// Marks a job removed from the middle of the ring (job slots never reach `u32::MAX`).
const GONE: JobIdx = JobIdx(u32::MAX);

/// The jobs of a sub-queue with fixed keys: a ring of jobs that entered in order and a
/// B-tree of the others.
#[derive(Clone, Debug, Default)]
struct FixedJobs {
    /// The `(tier, key)` of every job in `run`.
    run_key: (u8, i64),
    /// `(seq, job)` by rising `seq`. A job removed from the middle stays as a tombstone
    /// (`GONE`) until it reaches an end or the ring is compacted; both ends are always live.
    run: VecDeque<(u64, JobIdx)>,
    /// Tombstones in `run`.
    gone: usize,
    /// The jobs that did not enter in order.
    other: BTreeSet<FixedEntry>,
}

impl FixedJobs {
    /// Where `seq` is in the ring if a live job holds it there under `(tier, key)`.
    fn in_run(&self, tier: u8, key: i64, seq: u64, job: JobIdx) -> Option<usize> {
        if self.run.is_empty() || self.run_key != (tier, key) {
            return None;
        }
        // Most removals are of the head: no search (a search of a long ring is a cache miss
        // a step).
        if self.run.front() == Some(&(seq, job)) {
            return Some(0);
        }
        let i = self.run.binary_search_by_key(&seq, |e| e.0).ok()?;
        (self.run[i].1 == job).then_some(i)
    }

    /// Adds a job; false if it was here already.
    fn insert(&mut self, (tier, key, seq, job): FixedEntry) -> bool {
        debug_assert_ne!(job, GONE);
        if self.run.is_empty() {
            self.run_key = (tier, key);
        }
        if self.run_key == (tier, key) && self.run.back().is_none_or(|&(last, _)| seq > last) {
            // Usually `other` is empty and this costs nothing.
            if self.other.contains(&(tier, key, seq, job)) {
                return false;
            }
            self.run.push_back((seq, job));
            return true;
        }
        self.in_run(tier, key, seq, job).is_none() && self.other.insert((tier, key, seq, job))
    }

    /// Removes a job; false if it was not here.
    fn remove(&mut self, entry: FixedEntry) -> bool {
        let (tier, key, seq, job) = entry;
        let Some(i) = self.in_run(tier, key, seq, job) else {
            return self.other.remove(&entry);
        };
        if i == 0 {
            self.run.pop_front();
        } else if i + 1 == self.run.len() {
            self.run.pop_back();
        } else {
            self.run[i].1 = GONE;
            self.gone += 1;
        }
        self.tidy();
        true
    }

    /// Drops tombstones at the ends; compacts the ring when they are most of it, and gives
    /// back capacity it no longer needs.
    fn tidy(&mut self) {
        while self.run.front().is_some_and(|e| e.1 == GONE) {
            self.run.pop_front();
            self.gone -= 1;
        }
        while self.run.back().is_some_and(|e| e.1 == GONE) {
            self.run.pop_back();
            self.gone -= 1;
        }
        if self.gone > 0 && self.gone * 2 > self.run.len() {
            self.run.retain(|e| e.1 != GONE);
            self.gone = 0;
        }
        if self.run.capacity() > 64 && self.run.len() * 4 < self.run.capacity() {
            self.run.shrink_to(self.run.len() * 2);
        }
    }

    fn is_empty(&self) -> bool {
        self.run.is_empty() && self.other.is_empty()
    }

    fn len(&self) -> usize {
        self.run.len() - self.gone + self.other.len()
    }

    /// The smallest entry.
    fn first(&self) -> Option<FixedEntry> {
        let (tier, key) = self.run_key;
        let run = self.run.front().map(|&(s, j)| (tier, key, s, j));
        match (run, self.other.first().copied()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The ring's entries in order, then the others' in order (two sorted runs).
    fn runs(
        &self,
    ) -> (
        impl Iterator<Item = FixedEntry> + '_,
        impl Iterator<Item = FixedEntry> + '_,
    ) {
        let (tier, key) = self.run_key;
        let run = self
            .run
            .iter()
            .filter(|e| e.1 != GONE)
            .map(move |&(s, j)| (tier, key, s, j));
        (run, self.other.iter().copied())
    }
}

/// The jobs of one shape in one leaf queue.
#[derive(Clone, Debug, Default)]
pub struct SubQueue {
    fixed: FixedJobs,
    ramp: BTreeSet<(i64, u64, JobIdx)>,
    flat: BTreeSet<(i64, u64, JobIdx)>,
}

impl SubQueue {
    /// Adds a job. True when the sub-queue holds only jobs of fixed keys and the job entered
    /// behind its head: the head is then the same as before, at any time (a fixed key does not
    /// age), which spares the caller recomputing it.
    pub fn insert(&mut self, key: OrderKey, seq: u64, job: JobIdx) -> bool {
        let (fresh, behind) = match key {
            OrderKey::Fixed(tier, k) => {
                let entry = (tier, k, seq, job);
                let behind = self.ramp.is_empty()
                    && self.flat.is_empty()
                    && self.fixed.first().is_some_and(|head| entry > head);
                (self.fixed.insert(entry), behind)
            }
            OrderKey::Ramp(v) => (self.ramp.insert((v, seq, job)), false),
            OrderKey::Flat(p) => (self.flat.insert((p.saturating_neg(), seq, job)), false),
        };
        assert!(fresh, "job {job:?} entered a sub-queue twice");
        behind
    }

    /// Removes a job; it must be present under `key`.
    pub fn remove(&mut self, key: OrderKey, seq: u64, job: JobIdx) {
        let found = match key {
            OrderKey::Fixed(tier, k) => self.fixed.remove((tier, k, seq, job)),
            OrderKey::Ramp(v) => self.ramp.remove(&(v, seq, job)),
            OrderKey::Flat(p) => self.flat.remove(&(p.saturating_neg(), seq, job)),
        };
        assert!(found, "job {job:?} was not in its sub-queue under {key:?}");
    }

    /// Whether no job waits here.
    pub fn is_empty(&self) -> bool {
        self.fixed.is_empty() && self.ramp.is_empty() && self.flat.is_empty()
    }

    /// How many jobs wait here.
    pub fn len(&self) -> usize {
        self.fixed.len() + self.ramp.len() + self.flat.len()
    }

    /// The head at `now` (ns since origin) and its comparable key.
    pub fn head(&self, now: u64) -> Option<(HeadKey, JobIdx)> {
        let mut best: Option<(HeadKey, JobIdx)> =
            self.fixed.first().map(|(t, k, s, j)| (HeadKey(t, k, s), j));
        if matches!(best, Some((HeadKey(0, _, _), _))) {
            return best;
        }
        let now = now.min(i64::MAX as u64) as i64;
        // A ramp job's effective priority is (now - v) / step; a flat job's is p. Both are
        // compared as "score * step" in ns, negated so that smaller keys come first.
        if let Some(&(v, s, j)) = self.ramp.first() {
            let candidate = (HeadKey(1, v.saturating_sub(now), s), j);
            best = Some(best.map_or(candidate, |b| b.min(candidate)));
        }
        if let Some(&(neg_p, s, j)) = self.flat.first() {
            let candidate = (HeadKey(1, neg_p, s), j);
            best = Some(best.map_or(candidate, |b| b.min(candidate)));
        }
        best
    }

    /// Every job here, in no particular order of significance (fixed, ramp, flat).
    pub fn jobs(&self) -> impl Iterator<Item = JobIdx> + '_ {
        let (run, other) = self.fixed.runs();
        run.chain(other)
            .map(|e| e.3)
            .chain(self.ramp.iter().map(|e| e.2))
            .chain(self.flat.iter().map(|e| e.2))
    }

    /// The jobs here in order at `now`, at most `limit` of them (for explanations).
    pub fn ordered(&self, now: u64, limit: usize) -> Vec<(HeadKey, JobIdx)> {
        let now_i = now.min(i64::MAX as u64) as i64;
        let (run, other) = self.fixed.runs();
        let mut all: Vec<(HeadKey, JobIdx)> = run
            .take(limit)
            .chain(other.take(limit))
            .map(|(t, k, s, j)| (HeadKey(t, k, s), j))
            .chain(
                self.ramp
                    .iter()
                    .take(limit)
                    .map(|&(v, s, j)| (HeadKey(1, v.saturating_sub(now_i), s), j)),
            )
            .chain(
                self.flat
                    .iter()
                    .take(limit)
                    .map(|&(p, s, j)| (HeadKey(1, p, s), j)),
            )
            .collect();
        all.sort();
        all.truncate(limit);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves: a job record's packed order key gives back the very key it was made from, for
    // every kind, every tier a byte holds and the extreme values, and that it takes 10 bytes.
    #[test]
    fn a_packed_order_key_unpacks_to_the_same_key() {
        let values = [i64::MIN, -1, 0, 1, 0x0102_0304_0506_0708, i64::MAX];
        let mut keys = Vec::new();
        for v in values {
            keys.extend([0, 1, 7, 255].map(|tier| OrderKey::Fixed(tier, v)));
            keys.extend([OrderKey::Ramp(v), OrderKey::Flat(v)]);
        }
        for key in keys {
            assert_eq!(OrderKey::from(PackedOrderKey::from(key)), key, "{key:?}");
        }
        assert_eq!(size_of::<PackedOrderKey>(), 10);
        assert_eq!(align_of::<PackedOrderKey>(), 1);
    }

    #[test]
    fn deadlines_come_first_then_fixed_keys_then_sequence() {
        let mut q = SubQueue::default();
        q.insert(OrderKey::Fixed(1, 0), 1, JobIdx(1));
        q.insert(OrderKey::Fixed(1, -5), 2, JobIdx(2));
        q.insert(OrderKey::Fixed(0, 100), 3, JobIdx(3));
        assert_eq!(q.head(0).unwrap().1, JobIdx(3));
        q.remove(OrderKey::Fixed(0, 100), 3, JobIdx(3));
        assert_eq!(q.head(0).unwrap().1, JobIdx(2));
    }

    /// The ring and its B-tree hold the same set, in the same order, as one B-tree would,
    /// through in-order and out-of-order inserts, removals at the ends and in the middle,
    /// re-inserts and key changes; an insertion says it left the head as it was exactly when
    /// it entered behind it.
    #[test]
    fn fixed_jobs_behave_as_one_ordered_set() {
        let mut model: BTreeSet<FixedEntry> = BTreeSet::new();
        let mut q = SubQueue::default();
        let mut seq = 0u64;
        let mut behind_seen = 0;
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || crate::xorshift(&mut rng);
        for step in 0..20_000u32 {
            let r = next();
            if r % 10 < 6 || model.is_empty() {
                // Mostly in order with one key; now and then another key or an old sequence.
                let key = if r % 97 == 0 {
                    ((r >> 8) % 3) as i64 - 1
                } else {
                    0
                };
                let tier = u8::from(r % 89 == 0);
                seq += 1;
                let s = if r % 53 == 0 && seq > 10 {
                    seq - 1 - (r >> 20) % 10
                } else {
                    seq
                };
                let job = JobIdx(step);
                let e = (tier, key, s, job);
                let head = model.first().copied();
                let behind = q.insert(OrderKey::Fixed(tier, key), s, job);
                assert!(model.insert(e));
                assert_eq!(behind, head.is_some_and(|h| e > h), "step {step}");
                if behind {
                    assert_eq!(model.first().copied(), head, "step {step}");
                    behind_seen += 1;
                }
            } else {
                // The head, or a job from anywhere.
                let e = if r % 3 == 0 {
                    *model.first().unwrap()
                } else {
                    *model.iter().nth((r >> 16) as usize % model.len()).unwrap()
                };
                q.remove(OrderKey::Fixed(e.0, e.1), e.2, e.3);
                model.remove(&e);
            }
            assert_eq!(q.len(), model.len());
            assert_eq!(q.is_empty(), model.is_empty());
            assert_eq!(
                q.head(0),
                model.first().map(|&(t, k, s, j)| (HeadKey(t, k, s), j)),
                "step {step}"
            );
        }
        let mut jobs: Vec<JobIdx> = q.jobs().collect();
        jobs.sort();
        let mut want: Vec<JobIdx> = model.iter().map(|e| e.3).collect();
        want.sort();
        assert_eq!(jobs, want);
        let ordered: Vec<JobIdx> = q.ordered(0, 5).into_iter().map(|e| e.1).collect();
        let want: Vec<JobIdx> = model.iter().take(5).map(|e| e.3).collect();
        assert_eq!(ordered, want);
        assert!(
            behind_seen > 1_000,
            "{behind_seen} insertions behind the head"
        );
    }

    // Proves: a sub-queue holding an aging (ramp) or flat job never says an insertion left
    // its head as it was: that head depends on the time it is read at.
    #[test]
    fn an_insertion_beside_aging_jobs_never_claims_the_head_kept() {
        let mut q = SubQueue::default();
        assert!(
            !q.insert(OrderKey::Fixed(1, 0), 1, JobIdx(1)),
            "the first job is the head"
        );
        assert!(q.insert(OrderKey::Fixed(1, 0), 2, JobIdx(2)));
        assert!(
            !q.insert(OrderKey::Fixed(0, 0), 3, JobIdx(3)),
            "a deadline goes first"
        );
        assert!(!q.insert(OrderKey::Ramp(0), 4, JobIdx(4)));
        assert!(!q.insert(OrderKey::Fixed(1, 0), 5, JobIdx(5)));
        let mut flat = SubQueue::default();
        flat.insert(OrderKey::Flat(3), 1, JobIdx(1));
        assert!(!flat.insert(OrderKey::Fixed(1, 0), 2, JobIdx(2)));
    }

    #[test]
    #[should_panic(expected = "entered a sub-queue twice")]
    fn a_job_in_the_ring_cannot_enter_again() {
        let mut q = SubQueue::default();
        q.insert(OrderKey::Fixed(1, 0), 1, JobIdx(1));
        q.insert(OrderKey::Fixed(1, 0), 2, JobIdx(2));
        q.insert(OrderKey::Fixed(1, 0), 1, JobIdx(1));
    }

    #[test]
    #[should_panic(expected = "entered a sub-queue twice")]
    fn a_job_beside_the_ring_cannot_enter_it_too() {
        let mut q = SubQueue::default();
        q.insert(OrderKey::Fixed(1, 0), 5, JobIdx(1));
        // An earlier sequence number: beside the ring.
        q.insert(OrderKey::Fixed(1, 0), 3, JobIdx(2));
        q.remove(OrderKey::Fixed(1, 0), 5, JobIdx(1));
        // The ring is empty now, so job 2's key would go into it.
        q.insert(OrderKey::Fixed(1, 0), 3, JobIdx(2));
    }

    #[test]
    fn a_drained_ring_gives_its_memory_back() {
        let mut q = SubQueue::default();
        for s in 0..100_000u32 {
            q.insert(OrderKey::Fixed(1, 0), s as u64, JobIdx(s));
        }
        for s in 0..99_990u32 {
            q.remove(OrderKey::Fixed(1, 0), s as u64, JobIdx(s));
        }
        assert_eq!(q.len(), 10);
        assert!(q.fixed.run.capacity() <= 128, "{}", q.fixed.run.capacity());
    }

    #[test]
    fn capped_aging_is_compared_at_now() {
        // step = 1 ns for readability. Job 1: priority 0 entered at 0, capped at 10 points
        // (flat 10). Job 2: priority 5 entered at 8 (ramp v = 8 - 5 = 3).
        let mut q = SubQueue::default();
        q.insert(OrderKey::Flat(10), 1, JobIdx(1));
        q.insert(OrderKey::Ramp(3), 2, JobIdx(2));
        // At 9: job 2 has 5 + 1 = 6 < 10: job 1 leads.
        assert_eq!(q.head(9).unwrap().1, JobIdx(1));
        // At 13: job 2 has 5 + 5 = 10 = job 1's 10: tie, the earlier sequence (job 1) leads.
        assert_eq!(q.head(13).unwrap().1, JobIdx(1));
        // At 14: job 2 has 11 > 10.
        assert_eq!(q.head(14).unwrap().1, JobIdx(2));
    }
}
