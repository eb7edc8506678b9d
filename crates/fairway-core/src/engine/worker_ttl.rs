//! Live workers in the order their time to live runs out.
//!
//! Every attempt's end and every poll moves its worker's expiry to `now + ttl`. As a
//! `BTreeSet<(Time, WorkerIdx)>` that was a removal and an insertion, two descents of the tree,
//! on every decision's completion (about 330 instructions of a 10,000-instruction decision with
//! one worker, more with thousands). The engine's time never goes back and the time to live is
//! fixed, so a worker heard from now expires last: the order is an [`ExpiryList`], its links in
//! an array indexed by worker slot, and moving a worker to its end is O(1).
//! [`WorkerTtl::take_due`] hands workers due at the same instant out in `(expiry, worker)` order,
//! the order the tree gave.

use super::expiry_list::{ExpiryList, Timed};
use crate::ids::WorkerIdx;
use crate::time::Time;

/// Workers by expiry, earliest first.
#[derive(Clone, Debug, Default)]
pub(crate) struct WorkerTtl {
    /// Expiries and links by worker slot.
    links: Vec<Timed>,
    list: ExpiryList,
}

impl WorkerTtl {
    /// The earliest expiry, if any worker is listed.
    pub fn first_at(&self) -> Option<Time> {
        self.list.first(&self.links).map(|(at, _)| at)
    }

    /// Lists worker `w` as expiring at `at`, in place of its earlier expiry if it had one.
    pub fn set(&mut self, w: WorkerIdx, at: Time) {
        self.remove(w);
        if self.links.len() <= w.ix() {
            self.links.resize(w.ix() + 1, Timed::UNLISTED);
        }
        self.links[w.ix()].at = at;
        self.list.push(&mut self.links, 0, w.0);
    }

    /// Takes worker `w` off the list (nothing if it is not on it).
    pub fn remove(&mut self, w: WorkerIdx) {
        if self
            .links
            .get(w.ix())
            .is_some_and(|l| l.link.list().is_some())
        {
            self.list.unlink(&mut self.links, w.0);
        }
    }

    /// Takes off every worker expiring at `now` or earlier and returns them in `(expiry,
    /// worker)` order.
    pub fn take_due(&mut self, now: Time) -> Vec<WorkerIdx> {
        let mut due = Vec::new();
        self.list.take_due(&mut self.links, now, &mut due);
        due.sort_unstable();
        due.into_iter().map(|(_, w)| WorkerIdx(w)).collect()
    }

    /// The listed workers and their expiries, earliest first.
    pub fn iter(&self) -> impl Iterator<Item = (Time, WorkerIdx)> + '_ {
        self.list
            .iter(&self.links)
            .map(|(at, w)| (at, WorkerIdx(w)))
    }

    /// How many workers are listed.
    pub fn len(&self) -> usize {
        self.list.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::expiry_list::model::{UnderTest, agrees_with_an_ordered_set};
    use super::*;

    impl UnderTest for WorkerTtl {
        fn set(&mut self, slot: u32, at: Time, _: u64) {
            WorkerTtl::set(self, WorkerIdx(slot), at);
        }

        fn remove(&mut self, slot: u32) {
            WorkerTtl::remove(self, WorkerIdx(slot));
        }

        fn take_due(&mut self, now: Time) -> Vec<(Time, u32)> {
            let due: Vec<(Time, u32)> = self.iter().map(|(at, w)| (at, w.0)).collect();
            let taken = WorkerTtl::take_due(self, now);
            let mut due: Vec<(Time, u32)> = due.into_iter().filter(|e| e.0 <= now).collect();
            due.sort_unstable();
            assert!(due.iter().map(|e| WorkerIdx(e.1)).eq(taken.iter().copied()));
            due
        }

        fn first_at(&self) -> Option<Time> {
            WorkerTtl::first_at(self)
        }

        fn len(&self) -> usize {
            WorkerTtl::len(self)
        }

        fn lists(&self) -> Vec<Vec<(Time, u32)>> {
            vec![self.iter().map(|(at, w)| (at, w.0)).collect()]
        }
    }

    // Proves: the list agrees with the ordered set it replaced, through random sets of one
    // time to live (sometimes earlier, kept correct anyway), removals and takes: the same
    // earliest expiry, the same members in time order, and the same workers due, in the same
    // order.
    #[test]
    fn agrees_with_an_ordered_set_of_workers() {
        agrees_with_an_ordered_set(0x9E37_79B9_7F4A_7C15, &[20], WorkerTtl::default);
    }
}
