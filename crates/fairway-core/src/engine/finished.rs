//! The finished jobs the engine remembers (at most `EngineConfig::finished_retention`), so
//! that a resubmitted id gets its earlier answer and a status query still finds the job.
//!
//! They are kept in the order they finished, each record beside its id, and an index maps an
//! id to its place in that order. A snapshot writes them in order by walking the records one
//! after the other; it used to look each one up by id in a hash map, one cache miss per job,
//! which at a few hundred thousand finished jobs was most of a snapshot's encoding time.
//!
//! The records sit in chunks ([`Chunked`]), not in one ring that doubles: a doubling copied
//! every record at once, and with 2^19 of them (46 MB, written to fresh pages) it and the id
//! index's rehash made one decision take 197 to 211 ms on machine I of BENCHMARKS.md. The
//! oldest are forgotten a whole chunk at a time, whose memory takes the next records.

use super::chunked::{CHUNK, Chunked};
use super::id_index::{Entry, IdIndex, id_hash};
use super::state::Finished;

/// The most records remembered, whatever the retention: places are kept in 32 bits.
const MAX_RETAINED: usize = 1 << 31;

/// A finished job's entry in the id index: its place in finishing order since the engine began
/// (modulo 2^32: at most [`MAX_RETAINED`] are remembered, so the places remembered at once
/// are distinct) and its id's hash, so that the index moves it without reading its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Held {
    place: u32,
    hash: u32,
}

impl Entry for Held {
    fn hash(self) -> Option<u64> {
        let h = self.hash as u64;
        Some(h << 32 | h)
    }
}

/// One remembered job: its id and record. `None` only in the slots of the first chunk's front
/// that were forgotten.
type Slot = Option<(Box<str>, Finished)>;

#[derive(Clone, Debug, Default)]
pub(crate) struct FinishedJobs {
    /// Oldest first; the first `head` slots are forgotten.
    slots: Chunked<Slot>,
    /// The hash ([`id_hash`], 32 bits) of each slot's id, beside `slots`: forgetting the
    /// oldest record takes its index entry out by hash, and reading its id instead (written a
    /// retention's worth of jobs ago, long out of every cache) was a miss per finished job.
    hashes: Chunked<u32>,
    /// Forgotten slots at the front of `slots` (fewer than a chunk).
    head: usize,
    /// Each id's place in finishing order since the engine began: `forgotten` plus its index
    /// among the remembered records, modulo 2^32.
    by_id: IdIndex<Held>,
    /// How many have been forgotten.
    forgotten: u64,
}

/// The record at index `i` (oldest first) of `slots` whose first `head` slots are forgotten.
fn slot(slots: &Chunked<Slot>, head: usize, i: usize) -> &(Box<str>, Finished) {
    slots[head + i].as_ref().expect("a remembered slot")
}

/// The index among the remembered records of the record at `place`, the first of them being
/// at `forgotten`.
fn index(place: Held, forgotten: u64) -> usize {
    place.place.wrapping_sub(forgotten as u32) as usize
}

impl FinishedJobs {
    /// None remembered, with room to index `n` before the index first grows (a restore).
    pub fn with_capacity(n: usize) -> Self {
        FinishedJobs {
            by_id: IdIndex::with_capacity(n),
            ..Default::default()
        }
    }

    /// The index of `id`'s record among those remembered.
    fn find(&self, id: &str) -> Option<usize> {
        let (slots, head, forgotten) = (&self.slots, self.head, self.forgotten);
        let place = self
            .by_id
            .get(id, |p| &slot(slots, head, index(p, forgotten)).0)?;
        Some(index(place, forgotten))
    }

    pub fn get(&self, id: &str) -> Option<&Finished> {
        Some(&slot(&self.slots, self.head, self.find(id)?).1)
    }

    pub fn contains(&self, id: &str) -> bool {
        self.find(id).is_some()
    }

    pub fn len(&self) -> usize {
        self.slots.len() - self.head
    }

    /// Oldest first.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Finished)> {
        self.slots
            .iter()
            .skip(self.head)
            .map(|s| s.as_ref().expect("a remembered slot"))
            .map(|(id, f)| (&**id, f))
    }

    /// Remembers `id` as the latest to finish; beyond `retention` the oldest is forgotten.
    pub fn push(&mut self, id: Box<str>, f: Finished, retention: usize) {
        while self.len() >= retention.clamp(1, MAX_RETAINED) {
            self.forget_oldest();
        }
        let place = Held {
            place: (self.forgotten + self.len() as u64) as u32,
            hash: id_hash(&id) as u32,
        };
        self.slots.push(Some((id, f)));
        self.hashes.push(place.hash);
        let (slots, head, forgotten) = (&self.slots, self.head, self.forgotten);
        let last = slots.last().expect("just pushed");
        let id = &last.as_ref().expect("just pushed").0;
        self.by_id
            .insert(id, place, |p| &slot(slots, head, index(p, forgotten)).0);
    }

    /// Forgets the oldest record.
    fn forget_oldest(&mut self) {
        let Some((old, _)) = self.slots[self.head].take() else {
            unreachable!("the oldest slot is remembered");
        };
        // An id remembered twice points at its later place: that stays.
        let place = Held {
            place: self.forgotten as u32,
            hash: self.hashes[self.head],
        };
        self.by_id.remove_at(&old, place);
        self.forgotten += 1;
        self.head += 1;
        if self.head == CHUNK || self.head == self.slots.len() {
            self.slots.drop_first_chunk();
            self.hashes.drop_first_chunk();
            self.head = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TenantIdx;
    use crate::job::JobState;
    use crate::time::{Dur, Time};

    fn record(attempts: u32) -> Finished {
        Finished {
            tenant: TenantIdx(0),
            class: 0,
            state: JobState::Succeeded,
            attempts,
            epoch: 1,
            arrival: Time::ZERO,
            estimate: Dur::ZERO,
            reason: None,
            digest: 7,
        }
    }

    #[test]
    fn keeps_the_latest_in_order_and_forgets_the_oldest() {
        let mut f = FinishedJobs::default();
        for i in 0..5 {
            f.push(format!("j{i}").into(), record(i), 3);
        }
        let ids: Vec<&str> = f.iter().map(|(id, _)| id).collect();
        assert_eq!(ids, ["j2", "j3", "j4"]);
        assert!(f.get("j1").is_none() && !f.contains("j0"));
        assert_eq!(f.get("j3").map(|r| r.attempts), Some(3));
        assert_eq!(f.get("j4").map(|r| r.attempts), Some(4));
        assert_eq!(f.len(), 3);
    }

    #[test]
    fn an_id_finished_twice_is_found_at_its_later_place() {
        let mut f = FinishedJobs::default();
        f.push(Box::from("a"), record(1), 2);
        f.push(Box::from("b"), record(1), 2);
        f.push(Box::from("a"), record(2), 2);
        // The first "a" was forgotten; the second must still be found.
        assert_eq!(f.get("a").map(|r| r.attempts), Some(2));
        f.push(Box::from("c"), record(1), 2);
        assert!(f.get("b").is_none());
        assert_eq!(f.get("a").map(|r| r.attempts), Some(2));
        assert_eq!(f.get("c").map(|r| r.attempts), Some(1));
    }

    // Proves: across several chunks, with the oldest forgotten at every point of a chunk, the
    // list keeps exactly the latest `retention` records in order and finds each by id.
    #[test]
    fn chunks_keep_the_latest_in_order() {
        for retention in [1, 5, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 3] {
            let mut f = FinishedJobs::default();
            let total = 3 * CHUNK + 17;
            for i in 0..total {
                f.push(format!("j{i}").into(), record(i as u32), retention);
                assert_eq!(f.len(), (i + 1).min(retention));
            }
            let first = total - retention;
            let ids: Vec<String> = f.iter().map(|(id, _)| id.to_string()).collect();
            let expected: Vec<String> = (first..total).map(|i| format!("j{i}")).collect();
            assert_eq!(ids, expected, "retention {retention}");
            for i in [0, first.saturating_sub(1), first, total - 1] {
                let found = f.get(&format!("j{i}")).map(|r| r.attempts as usize);
                assert_eq!(
                    found,
                    (i >= first).then_some(i),
                    "retention {retention}, j{i}"
                );
            }
            assert!(f.slots.len() <= retention + CHUNK);
        }
    }

    // Proves: places kept in 32 bits still find every record when the count of jobs finished
    // since the engine began passes 2^32.
    #[test]
    fn places_wrap_past_two_to_the_32() {
        let mut f = FinishedJobs {
            forgotten: u32::MAX as u64 - 10,
            ..Default::default()
        };
        for i in 0..100 {
            f.push(format!("j{i}").into(), record(i), 50);
        }
        assert!(f.forgotten > u32::MAX as u64);
        for i in 0..100 {
            let found = f.get(&format!("j{i}")).map(|r| r.attempts);
            assert_eq!(found, (i >= 50).then_some(i), "j{i}");
        }
    }
}
