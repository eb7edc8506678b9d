//! The jobs a worker runs, in slot order.
//!
//! Every grant adds a job to its worker's set and every attempt's end removes it. As a
//! `BTreeSet` that was a descent to insert and one to remove (about 200 of a decision's 10,000
//! instructions for a worker running one job at a time, the common case). Up to [`FEW`] jobs
//! sit in a sorted vector instead, which keeps its allocation as the worker's jobs come and
//! go; a worker that runs more (a large machine taking many small jobs) moves to a `BTreeSet`,
//! and back to the vector only once down to half that, so that a worker hovering at the
//! boundary does not convert on every grant. Iteration is in slot order either way.

use crate::ids::JobIdx;
use std::collections::BTreeSet;

/// The most jobs kept in the sorted vector.
const FEW: usize = 32;

/// A set of job slots, ordered.
#[derive(Clone, Debug)]
pub(crate) enum JobSet {
    /// Sorted, at most [`FEW`].
    Few(Vec<JobIdx>),
    /// More than [`FEW`] at some point, and more than half that since.
    Many(BTreeSet<JobIdx>),
}

impl Default for JobSet {
    fn default() -> Self {
        JobSet::Few(Vec::new())
    }
}

impl JobSet {
    /// Adds `j`; false if it was there.
    pub fn insert(&mut self, j: JobIdx) -> bool {
        match self {
            JobSet::Few(v) => match v.binary_search(&j) {
                Ok(_) => false,
                Err(at) => {
                    if v.len() < FEW {
                        v.insert(at, j);
                    } else {
                        let mut set: BTreeSet<JobIdx> = v.drain(..).collect();
                        set.insert(j);
                        *self = JobSet::Many(set);
                    }
                    true
                }
            },
            JobSet::Many(set) => set.insert(j),
        }
    }

    /// Removes `j`; false if it was not there.
    pub fn remove(&mut self, j: JobIdx) -> bool {
        match self {
            JobSet::Few(v) => match v.binary_search(&j) {
                Ok(at) => {
                    v.remove(at);
                    true
                }
                Err(_) => false,
            },
            JobSet::Many(set) => {
                let removed = set.remove(&j);
                if set.len() <= FEW / 2 {
                    *self = JobSet::Few(std::mem::take(set).into_iter().collect());
                }
                removed
            }
        }
    }

    /// How many jobs.
    pub fn len(&self) -> usize {
        match self {
            JobSet::Few(v) => v.len(),
            JobSet::Many(set) => set.len(),
        }
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The jobs in slot order.
    pub fn iter(&self) -> impl Iterator<Item = JobIdx> + '_ {
        let (few, many) = match self {
            JobSet::Few(v) => (Some(v.iter()), None),
            JobSet::Many(set) => (None, Some(set.iter())),
        };
        few.into_iter()
            .flatten()
            .chain(many.into_iter().flatten())
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves: the set agrees with a `BTreeSet` through random insertions and removals that
    // cross the boundary between its two forms both ways (members, order, length, and what
    // each call returns), and it returns to the vector once down to half the boundary.
    #[test]
    fn agrees_with_a_btree_set() {
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || crate::xorshift(&mut state);
        let (mut grew, mut shrank) = (0, 0);
        for _ in 0..20 {
            let mut set = JobSet::default();
            let mut model: BTreeSet<JobIdx> = BTreeSet::new();
            for step in 0..3_000 {
                // Phases of growing (toward 80 of the 100 slots) and shrinking (toward 10), so
                // the size crosses both thresholds again and again.
                let grow = if (step / 300) % 2 == 0 { 80 } else { 10 };
                let was_few = matches!(set, JobSet::Few(_));
                let j = JobIdx((next() % 100) as u32);
                if next() % 100 < grow {
                    assert_eq!(set.insert(j), model.insert(j));
                } else {
                    assert_eq!(set.remove(j), model.remove(&j));
                }
                assert_eq!(set.len(), model.len());
                assert_eq!(set.is_empty(), model.is_empty());
                assert!(set.iter().eq(model.iter().copied()));
                if let JobSet::Few(v) = &set {
                    assert!(v.len() <= FEW);
                }
                if model.len() <= FEW / 2 {
                    assert!(matches!(set, JobSet::Few(_)), "back to the vector");
                }
                if model.len() > FEW {
                    assert!(matches!(set, JobSet::Many(_)));
                }
                match (was_few, matches!(set, JobSet::Few(_))) {
                    (true, false) => grew += 1,
                    (false, true) => shrank += 1,
                    _ => {}
                }
            }
        }
        assert!(grew > 20 && shrank > 20, "{grew} {shrank}");
    }
}
