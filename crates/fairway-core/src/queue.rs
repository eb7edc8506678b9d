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

use crate::ids::JobIdx;
use std::collections::BTreeSet;

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

/// The comparable position of a queue head at one instant: `(tier, key, seq)`, smaller first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HeadKey(pub u8, pub i64, pub u64);

/// The jobs of one shape in one leaf queue.
#[derive(Clone, Debug, Default)]
pub struct SubQueue {
    fixed: BTreeSet<(u8, i64, u64, JobIdx)>,
    ramp: BTreeSet<(i64, u64, JobIdx)>,
    flat: BTreeSet<(i64, u64, JobIdx)>,
}

impl SubQueue {
    /// Adds a job.
    pub fn insert(&mut self, key: OrderKey, seq: u64, job: JobIdx) {
        let fresh = match key {
            OrderKey::Fixed(tier, k) => self.fixed.insert((tier, k, seq, job)),
            OrderKey::Ramp(v) => self.ramp.insert((v, seq, job)),
            OrderKey::Flat(p) => self.flat.insert((p.saturating_neg(), seq, job)),
        };
        assert!(fresh, "job {job:?} entered a sub-queue twice");
    }

    /// Removes a job; it must be present under `key`.
    pub fn remove(&mut self, key: OrderKey, seq: u64, job: JobIdx) {
        let found = match key {
            OrderKey::Fixed(tier, k) => self.fixed.remove(&(tier, k, seq, job)),
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
        let mut best: Option<(HeadKey, JobIdx)> = self
            .fixed
            .first()
            .map(|&(t, k, s, j)| (HeadKey(t, k, s), j));
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
        self.fixed
            .iter()
            .map(|e| e.3)
            .chain(self.ramp.iter().map(|e| e.2))
            .chain(self.flat.iter().map(|e| e.2))
    }

    /// The jobs here in order at `now`, at most `limit` of them (for explanations).
    pub fn ordered(&self, now: u64, limit: usize) -> Vec<(HeadKey, JobIdx)> {
        let now_i = now.min(i64::MAX as u64) as i64;
        let mut all: Vec<(HeadKey, JobIdx)> = self
            .fixed
            .iter()
            .take(limit)
            .map(|&(t, k, s, j)| (HeadKey(t, k, s), j))
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
