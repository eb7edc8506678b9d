//! Live workers in the order their time to live runs out.
//!
//! Every attempt's end and every poll moves its worker's expiry to `now + ttl`. As a
//! `BTreeSet<(Time, WorkerIdx)>` that was a removal and an insertion, two descents of the tree,
//! on every decision's completion (about 330 instructions of a 10,000-instruction decision with
//! one worker, more with thousands). The engine's time never goes back and the time to live is
//! fixed, so a worker heard from now expires last: the order is a queue, and moving a worker to
//! its end is O(1) in a doubly linked list threaded through an array indexed by worker slot.
//!
//! Workers due at the same instant may sit in the list in the order they were heard from;
//! [`WorkerTtl::take_due`] hands them out in `(expiry, worker)` order, the order the tree gave.
//! An expiry earlier than the last one's (not produced by the engine, kept correct anyway) walks
//! back from the end to its place.

use crate::ids::WorkerIdx;
use crate::time::Time;

/// No worker: the end of a chain.
const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Link {
    prev: u32,
    next: u32,
    /// When the worker expires (meaningful while linked).
    at: Time,
    linked: bool,
}

const UNLINKED: Link = Link {
    prev: NONE,
    next: NONE,
    at: Time::ZERO,
    linked: false,
};

/// Workers by expiry, earliest first.
#[derive(Clone, Debug)]
pub(crate) struct WorkerTtl {
    /// By worker slot.
    links: Vec<Link>,
    head: u32,
    tail: u32,
    len: usize,
}

impl Default for WorkerTtl {
    fn default() -> Self {
        WorkerTtl {
            links: Vec::new(),
            head: NONE,
            tail: NONE,
            len: 0,
        }
    }
}

impl WorkerTtl {
    /// The earliest expiry, if any worker is listed.
    pub fn first_at(&self) -> Option<Time> {
        (self.head != NONE).then(|| self.links[self.head as usize].at)
    }

    /// Lists worker `w` as expiring at `at`, in place of its earlier expiry if it had one.
    pub fn set(&mut self, w: WorkerIdx, at: Time) {
        self.remove(w);
        let i = w.0;
        if self.links.len() <= i as usize {
            self.links.resize(i as usize + 1, UNLINKED);
        }
        // After the last worker expiring no later: the end, unless time went back.
        let mut after = self.tail;
        while after != NONE && self.links[after as usize].at > at {
            after = self.links[after as usize].prev;
        }
        let before = if after == NONE {
            self.head
        } else {
            self.links[after as usize].next
        };
        self.links[i as usize] = Link {
            prev: after,
            next: before,
            at,
            linked: true,
        };
        match after {
            NONE => self.head = i,
            a => self.links[a as usize].next = i,
        }
        match before {
            NONE => self.tail = i,
            b => self.links[b as usize].prev = i,
        }
        self.len += 1;
    }

    /// Takes worker `w` off the list (nothing if it is not on it).
    pub fn remove(&mut self, w: WorkerIdx) {
        let Some(&link) = self.links.get(w.ix()) else {
            return;
        };
        if !link.linked {
            return;
        }
        match link.prev {
            NONE => self.head = link.next,
            p => self.links[p as usize].next = link.next,
        }
        match link.next {
            NONE => self.tail = link.prev,
            n => self.links[n as usize].prev = link.prev,
        }
        self.links[w.ix()] = UNLINKED;
        self.len -= 1;
    }

    /// Takes off every worker expiring at `now` or earlier and returns them in `(expiry,
    /// worker)` order.
    pub fn take_due(&mut self, now: Time) -> Vec<WorkerIdx> {
        let mut due = Vec::new();
        while self.head != NONE && self.links[self.head as usize].at <= now {
            let w = WorkerIdx(self.head);
            due.push((self.links[self.head as usize].at, w));
            self.remove(w);
        }
        due.sort_unstable();
        due.into_iter().map(|(_, w)| w).collect()
    }

    /// The listed workers and their expiries, earliest first.
    pub fn iter(&self) -> impl Iterator<Item = (Time, WorkerIdx)> + '_ {
        let mut at = self.head;
        std::iter::from_fn(move || {
            if at == NONE {
                return None;
            }
            let link = self.links[at as usize];
            let item = (link.at, WorkerIdx(at));
            at = link.next;
            Some(item)
        })
    }

    /// How many workers are listed.
    pub fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    use crate::xorshift as next;

    // Proves: the list agrees with the ordered set it replaced, through random sets (mostly
    // later than every expiry, as the engine makes them, sometimes earlier), removals and
    // takes: the same earliest expiry, the same members in time order, and the same workers
    // due, in the same order.
    #[test]
    fn agrees_with_an_ordered_set() {
        let mut state = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..50 {
            let mut list = WorkerTtl::default();
            let mut model: BTreeSet<(Time, WorkerIdx)> = BTreeSet::new();
            let mut expiry: Vec<Option<Time>> = vec![None; 40];
            let mut now = 0u64;
            for _ in 0..2_000 {
                let w = (next(&mut state) % 40) as u32;
                match next(&mut state) % 10 {
                    0..=5 => {
                        now += next(&mut state) % 3;
                        let at = if next(&mut state).is_multiple_of(8) {
                            now.saturating_sub(next(&mut state) % 50)
                        } else {
                            now + 20
                        };
                        if let Some(old) = expiry[w as usize] {
                            model.remove(&(old, WorkerIdx(w)));
                        }
                        model.insert((Time(at), WorkerIdx(w)));
                        expiry[w as usize] = Some(Time(at));
                        list.set(WorkerIdx(w), Time(at));
                    }
                    6 | 7 => {
                        if let Some(old) = expiry[w as usize].take() {
                            model.remove(&(old, WorkerIdx(w)));
                        }
                        list.remove(WorkerIdx(w));
                    }
                    _ => {
                        let due: Vec<WorkerIdx> = model
                            .iter()
                            .take_while(|(at, _)| at.0 <= now)
                            .map(|&(_, w)| w)
                            .collect();
                        for &d in &due {
                            model.remove(&(expiry[d.ix()].take().unwrap(), d));
                        }
                        assert_eq!(list.take_due(Time(now)), due);
                    }
                }
                assert_eq!(list.first_at(), model.first().map(|e| e.0));
                assert_eq!(list.len(), model.len());
                let times: Vec<Time> = list.iter().map(|e| e.0).collect();
                let model_times: Vec<Time> = model.iter().map(|e| e.0).collect();
                assert_eq!(times, model_times);
                let mut members: Vec<(Time, WorkerIdx)> = list.iter().collect();
                members.sort_unstable();
                assert!(members.iter().eq(model.iter()));
            }
        }
    }
}
