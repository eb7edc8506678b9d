//! The finished jobs the engine remembers (at most `EngineConfig::finished_retention`), so
//! that a resubmitted id gets its earlier answer and a status query still finds the job.
//!
//! They are kept in the order they finished, and an index maps an id to its place in that
//! order. Each is held **encoded**, exactly as a snapshot writes it (a [`FinishedSnap`] in
//! postcard), one after the other in chunks of [`CHUNK`] records: a snapshot takes those bytes
//! instead of encoding every remembered job again (at the default retention of 10^6, most of a
//! busy server's snapshot, and 80 ms of the writer's time each), and a record takes about 60
//! bytes instead of a boxed id beside a decoded record. A status query or a resubmission
//! decodes the one record it needs.
//!
//! A full chunk never changes again, so its bytes are shared (an `Arc`): a snapshot holds the
//! full chunks as they are, without copying them ([`FinishedJobs::pieces`]), and only the
//! last chunk, still filling, is copied. The oldest records are forgotten a whole chunk at a
//! time; the chunk's memory takes the next records (a list at its retention allocates
//! nothing) unless a snapshot still holds it, which then frees it when it is done.

use super::chunked::CHUNK;
use super::id_index::{Entry, IdIndex, id_hash};
use crate::job::JobState;
use crate::time::{Dur, Time};
use crate::varint::put_varint;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;

/// The most records remembered, whatever the retention: places are kept in 32 bits.
const MAX_RETAINED: usize = 1 << 31;

/// A finished job as a snapshot holds it, and as the list keeps it (encoded): its tenant and
/// class by index, its final state, its last attempt and epoch, why it ended (when it
/// failed), and its spec's digest (to tell a resubmission from a reused id).
#[derive(Serialize, Deserialize)]
pub(crate) struct FinishedSnap<'a> {
    pub id: Cow<'a, str>,
    pub tenant: u32,
    pub class: u16,
    pub state: JobState,
    pub attempts: u32,
    pub epoch: u64,
    pub arrival: Time,
    pub estimate: Dur,
    pub reason: Option<Cow<'a, str>>,
    pub digest: u64,
}

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

/// Up to [`CHUNK`] records (as many as a chunk of job records), encoded one after the other.
#[derive(Clone, Debug, Default)]
struct Chunk {
    /// Shared with the snapshots taken since the chunk filled (never while it fills).
    bytes: Arc<Vec<u8>>,
    /// Where each record ends in `bytes`.
    ends: Vec<u32>,
    /// The hash ([`id_hash`], 32 bits) of each record's id: forgetting the oldest record takes
    /// its index entry out by hash, without reading a record written a retention's worth of
    /// jobs ago (long out of every cache).
    hashes: Vec<u32>,
}

impl Chunk {
    fn record(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.bytes[start..self.ends[i] as usize]
    }

    /// The chunk emptied for new records, or `None` if a snapshot still holds its bytes.
    fn recycled(mut self) -> Option<Chunk> {
        Arc::get_mut(&mut self.bytes)?.clear();
        self.ends.clear();
        self.hashes.clear();
        Some(self)
    }
}

/// A run of encoded records, oldest first, as [`FinishedJobs::pieces`] gives them.
pub(crate) enum Piece<'a> {
    /// A full chunk's bytes from `.1` on: they never change, and may be held as they are.
    Shared(&'a Arc<Vec<u8>>, usize),
    /// The records of the chunk still filling: to be copied.
    Filling(&'a [u8]),
}

/// Appends `f` exactly as postcard encodes it (its derived `Serialize`, field by field:
/// strings as their length then their bytes, integers and enum variants as varints, an
/// option as 0 or 1 then its value), without serde's machinery: the engine encodes every
/// job that finishes (`tests::records_encode_as_postcard_writes_them`). The integers go
/// through a buffer on the stack (at most 10 bytes each), appended in three pieces.
fn encode(f: &FinishedSnap<'_>, out: &mut Vec<u8>) {
    let mut buf = [0u8; 64];
    let n = put_varint(&mut buf, 0, f.id.len() as u64);
    out.extend_from_slice(&buf[..n]);
    out.extend_from_slice(f.id.as_bytes());
    let mut n = put_varint(&mut buf, 0, f.tenant as u64);
    n = put_varint(&mut buf, n, f.class as u64);
    // Its variant index: `JobState` is a plain enum, declared in serde's order.
    n = put_varint(&mut buf, n, f.state as u64);
    n = put_varint(&mut buf, n, f.attempts as u64);
    n = put_varint(&mut buf, n, f.epoch);
    n = put_varint(&mut buf, n, f.arrival.0);
    n = put_varint(&mut buf, n, f.estimate.0);
    match &f.reason {
        None => {
            buf[n] = 0;
            n += 1;
        }
        Some(r) => {
            buf[n] = 1;
            n = put_varint(&mut buf, n + 1, r.len() as u64);
            out.extend_from_slice(&buf[..n]);
            out.extend_from_slice(r.as_bytes());
            n = 0;
        }
    }
    n = put_varint(&mut buf, n, f.digest);
    out.extend_from_slice(&buf[..n]);
}

/// The id a record begins with.
fn id_of(record: &[u8]) -> &str {
    postcard::take_from_bytes::<&str>(record)
        .expect("a finished record begins with its id")
        .0
}

#[derive(Clone, Debug, Default)]
pub(crate) struct FinishedJobs {
    /// Oldest first; every chunk but the last holds [`CHUNK`] records.
    chunks: VecDeque<Chunk>,
    /// Forgotten records at the front of the first chunk (fewer than a chunk).
    head: usize,
    /// Records remembered.
    len: usize,
    /// Each id's place in finishing order since the engine began: `forgotten` plus its index
    /// among the remembered records, modulo 2^32.
    by_id: IdIndex<Held>,
    /// How many have been forgotten.
    forgotten: u64,
    /// A chunk dropped from the front, emptied, for the next chunk the back needs.
    spare: Option<Chunk>,
}

/// The index among the remembered records of the record at `place`, the first of them being
/// at `forgotten`.
fn index(place: Held, forgotten: u64) -> usize {
    place.place.wrapping_sub(forgotten as u32) as usize
}

/// Record `i` (oldest first, counting the forgotten ones of the first chunk) of `chunks`.
fn record_at(chunks: &VecDeque<Chunk>, i: usize) -> &[u8] {
    chunks[i / CHUNK].record(i % CHUNK)
}

impl FinishedJobs {
    /// None remembered, with room to index `n` before the index first grows (a restore).
    pub fn with_capacity(n: usize) -> Self {
        FinishedJobs {
            by_id: IdIndex::with_capacity(n),
            ..Default::default()
        }
    }

    /// The encoded record of `id`.
    fn find(&self, id: &str) -> Option<&[u8]> {
        let (chunks, head, forgotten) = (&self.chunks, self.head, self.forgotten);
        let place = self
            .by_id
            .get(id, |p| id_of(record_at(chunks, head + index(p, forgotten))))?;
        Some(record_at(chunks, head + index(place, forgotten)))
    }

    /// Reads where `id` would be indexed, ahead of a [`FinishedJobs::push`] of it; and, when
    /// that push will forget the oldest record (the list at `retention`), the oldest's entry
    /// too, so that these cold misses overlap the caller's others (items 92 and 93).
    pub fn touch(&self, id: &str, retention: usize) {
        self.by_id.touch(id_hash(id));
        if self.full(retention)
            && let Some(oldest) = self.oldest()
        {
            self.by_id.touch_entry(oldest);
        }
    }

    /// Whether the list holds `retention` records (or its own limit): the next push forgets
    /// the oldest.
    fn full(&self, retention: usize) -> bool {
        self.len >= retention.clamp(1, MAX_RETAINED)
    }

    /// The index entry of the oldest record, if any.
    fn oldest(&self) -> Option<Held> {
        let first = self.chunks.front().filter(|_| self.len > 0)?;
        Some(Held {
            place: self.forgotten as u32,
            hash: first.hashes[self.head],
        })
    }

    /// The record of `id`, decoded.
    pub fn get(&self, id: &str) -> Option<FinishedSnap<'static>> {
        Some(postcard::from_bytes(self.find(id)?).expect("a finished record"))
    }

    pub fn contains(&self, id: &str) -> bool {
        self.find(id).is_some()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// [`FinishedJobs::pieces`] as plain slices.
    #[cfg(test)]
    pub fn encoded(&self) -> impl Iterator<Item = &[u8]> {
        self.pieces().map(|piece| match piece {
            Piece::Shared(bytes, from) => &bytes[from..],
            Piece::Filling(bytes) => bytes,
        })
    }

    /// The encoded records, oldest first, each as a snapshot writes it (their concatenation
    /// is the snapshot's list of finished jobs after its length): a full chunk's bytes as
    /// they are shared, the chunk still filling borrowed.
    pub fn pieces(&self) -> impl Iterator<Item = Piece<'_>> {
        self.chunks.iter().enumerate().map(|(c, chunk)| {
            let from = if c == 0 && self.head > 0 {
                chunk.ends[self.head - 1] as usize
            } else {
                0
            };
            if chunk.ends.len() == CHUNK {
                Piece::Shared(&chunk.bytes, from)
            } else {
                Piece::Filling(&chunk.bytes[from..])
            }
        })
    }

    /// Their encoded size.
    #[cfg(test)]
    pub fn encoded_len(&self) -> usize {
        self.encoded().map(<[u8]>::len).sum()
    }

    /// Oldest first, decoded.
    pub fn iter(&self) -> impl Iterator<Item = FinishedSnap<'_>> {
        (self.head..self.head + self.len)
            .map(|i| postcard::from_bytes(record_at(&self.chunks, i)).expect("a finished record"))
    }

    /// Remembers `f` as the latest to finish; beyond `retention` the oldest is forgotten.
    pub fn push(&mut self, f: &FinishedSnap<'_>, retention: usize) {
        while self.full(retention) {
            self.forget_oldest();
        }
        let place = Held {
            place: (self.forgotten + self.len as u64) as u32,
            hash: id_hash(&f.id) as u32,
        };
        if self.chunks.back().is_none_or(|c| c.ends.len() == CHUNK) {
            // The first chunk grows as a vector does, so that a small engine holds little;
            // the next ones are sized at once from the last full one's bytes (an eighth
            // more), not grown by doubling, which copied each chunk's bytes twice over.
            let chunk = self
                .spare
                .take()
                .unwrap_or_else(|| match self.chunks.back() {
                    None => Chunk::default(),
                    Some(last) => Chunk {
                        bytes: Arc::new(Vec::with_capacity(
                            last.bytes.len() + last.bytes.len() / 8,
                        )),
                        ends: Vec::with_capacity(CHUNK),
                        hashes: Vec::with_capacity(CHUNK),
                    },
                });
            self.chunks.push_back(chunk);
        }
        let chunk = self.chunks.back_mut().expect("a chunk with room");
        // A chunk still filling is shared only by a clone of the engine: that one copies.
        encode(f, Arc::make_mut(&mut chunk.bytes));
        let end = u32::try_from(chunk.bytes.len()).expect("a chunk of records under 4 GiB");
        chunk.ends.push(end);
        chunk.hashes.push(place.hash);
        self.len += 1;
        let (chunks, head, forgotten) = (&self.chunks, self.head, self.forgotten);
        self.by_id.insert(&f.id, place, |p| {
            id_of(record_at(chunks, head + index(p, forgotten)))
        });
    }

    /// Forgets the oldest record.
    fn forget_oldest(&mut self) {
        // An id remembered twice points at its later place: that stays.
        let place = self.oldest().expect("a record to forget");
        self.by_id.remove_entry(place);
        self.forgotten += 1;
        self.head += 1;
        self.len -= 1;
        if self.head == CHUNK || self.len == 0 {
            let dropped = self.chunks.pop_front().expect("the first chunk");
            self.spare = dropped.recycled();
            self.head = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, attempts: u32) -> FinishedSnap<'_> {
        FinishedSnap {
            id: Cow::Borrowed(id),
            tenant: 0,
            class: 0,
            state: JobState::Succeeded,
            attempts,
            epoch: 1,
            arrival: Time::ZERO,
            estimate: Dur::ZERO,
            // Some records with a reason, so that records differ in length.
            reason: (attempts % 3 == 1).then(|| Cow::Owned(format!("reason {attempts}"))),
            digest: 7,
        }
    }

    // Proves: the hand-written encoder writes what postcard's derived encoding writes, for
    // every state, integers at each varint width's edges, long ids and reasons.
    #[test]
    fn records_encode_as_postcard_writes_them() {
        let states = [
            JobState::Deferred,
            JobState::Queued,
            JobState::Running,
            JobState::Succeeded,
            JobState::Failed,
            JobState::Canceled,
            JobState::Expired,
        ];
        let edges = [
            0u64,
            1,
            127,
            128,
            16_383,
            16_384,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ];
        let long = "x".repeat(300);
        for (i, &state) in states.iter().enumerate() {
            for (k, &v) in edges.iter().enumerate() {
                let id = if k % 2 == 0 { "job-1" } else { long.as_str() };
                let f = FinishedSnap {
                    id: Cow::Borrowed(id),
                    tenant: v as u32,
                    class: v as u16,
                    state,
                    attempts: (v >> 3) as u32,
                    epoch: v,
                    arrival: Time(v ^ i as u64),
                    estimate: Dur(v / 3),
                    reason: match k % 3 {
                        0 => None,
                        1 => Some(Cow::Borrowed("")),
                        _ => Some(Cow::Borrowed(long.as_str())),
                    },
                    digest: u64::MAX - v,
                };
                let mut mine = vec![9u8];
                encode(&f, &mut mine);
                let theirs = postcard::to_extend(&f, vec![9u8]).unwrap();
                assert_eq!(mine, theirs, "{state:?}, {v}");
            }
        }
    }

    /// The ids remembered, oldest first.
    fn ids(f: &FinishedJobs) -> Vec<String> {
        f.iter().map(|r| r.id.into_owned()).collect()
    }

    #[test]
    fn keeps_the_latest_in_order_and_forgets_the_oldest() {
        let mut f = FinishedJobs::default();
        for i in 0..5 {
            f.push(&record(&format!("j{i}"), i), 3);
        }
        assert_eq!(ids(&f), ["j2", "j3", "j4"]);
        assert!(f.get("j1").is_none() && !f.contains("j0"));
        assert_eq!(f.get("j3").map(|r| r.attempts), Some(3));
        assert_eq!(f.get("j4").map(|r| r.attempts), Some(4));
        assert_eq!(f.len(), 3);
    }

    #[test]
    fn an_id_finished_twice_is_found_at_its_later_place() {
        let mut f = FinishedJobs::default();
        f.push(&record("a", 1), 2);
        f.push(&record("b", 1), 2);
        f.push(&record("a", 2), 2);
        // The first "a" was forgotten; the second must still be found.
        assert_eq!(f.get("a").map(|r| r.attempts), Some(2));
        f.push(&record("c", 1), 2);
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
                let id = format!("j{i}");
                // The read-ahead an attempt's end makes, in every state the list passes
                // through (empty, filling, at its retention, a chunk just dropped).
                f.touch(&id, retention);
                if f.len() >= retention {
                    let oldest = f.oldest().expect("a list at its retention has an oldest");
                    assert_eq!(oldest.place as usize, i - retention);
                    assert_eq!(oldest.hash, id_hash(&format!("j{}", i - retention)) as u32);
                }
                f.push(&record(&id, i as u32), retention);
                assert_eq!(f.len(), (i + 1).min(retention));
            }
            let first = total - retention;
            let expected: Vec<String> = (first..total).map(|i| format!("j{i}")).collect();
            assert_eq!(ids(&f), expected, "retention {retention}");
            for i in [0, first.saturating_sub(1), first, total - 1] {
                let found = f.get(&format!("j{i}")).map(|r| r.attempts as usize);
                assert_eq!(
                    found,
                    (i >= first).then_some(i),
                    "retention {retention}, j{i}"
                );
            }
            assert!(f.chunks.len() * CHUNK <= retention + 2 * CHUNK);
            // The bytes a snapshot copies are the remembered records, in order.
            let encoded: Vec<u8> = f.encoded().flatten().copied().collect();
            let mut want = Vec::new();
            for r in f.iter() {
                want = postcard::to_extend(&r, want).unwrap();
            }
            assert_eq!(encoded, want, "retention {retention}");
            assert_eq!(f.encoded_len(), want.len());
        }
    }

    // Proves: a full chunk's bytes are shared (not copied) with whoever holds a snapshot's
    // pieces, and stay as they were when the list forgets that chunk and goes on: the list
    // takes fresh memory for its next records instead of reusing the held chunk's.
    #[test]
    fn a_chunk_a_snapshot_holds_keeps_its_bytes_while_the_list_goes_on() {
        let mut f = FinishedJobs::default();
        for i in 0..CHUNK + 5 {
            f.push(&record(&format!("j{i}"), i as u32), CHUNK);
        }
        // The oldest five forgotten: the first full chunk is shared from its sixth record.
        let held: Vec<(Arc<Vec<u8>>, usize, Vec<u8>)> = f
            .pieces()
            .filter_map(|piece| match piece {
                Piece::Shared(bytes, from) => Some((Arc::clone(bytes), from, bytes.to_vec())),
                Piece::Filling(_) => None,
            })
            .collect();
        assert_eq!(held.len(), 1, "one full chunk");
        assert!(held[0].1 > 0, "shared from its first remembered record");
        let encoded: Vec<u8> = f.encoded().flatten().copied().collect();
        for i in CHUNK + 5..4 * CHUNK {
            f.push(&record(&format!("j{i}"), i as u32), CHUNK);
        }
        let (bytes, from, copy) = &held[0];
        assert_eq!(
            bytes.as_slice(),
            copy.as_slice(),
            "the held bytes never changed"
        );
        assert_eq!(Arc::strong_count(bytes), 1, "the list let go of the chunk");
        assert_eq!(&encoded[..bytes.len() - from], &bytes[*from..]);
        let expected: Vec<String> = (3 * CHUNK..4 * CHUNK).map(|i| format!("j{i}")).collect();
        assert_eq!(ids(&f), expected);
        assert_eq!(
            f.get(&format!("j{}", 4 * CHUNK - 1)).map(|r| r.attempts),
            Some(4 * CHUNK as u32 - 1)
        );
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
            f.push(&record(&format!("j{i}"), i), 50);
        }
        assert!(f.forgotten > u32::MAX as u64);
        for i in 0..100 {
            let found = f.get(&format!("j{i}")).map(|r| r.attempts);
            assert_eq!(found, (i >= 50).then_some(i), "j{i}");
        }
    }
}
