//! The in-memory reference store: a few `BTreeMap`s, with fault injection for simulation.
//!
//! A [`MemDisk`] plays the disk: what it holds survives a "crash". A [`MemStore`] plays the
//! process's view of it (its last LSN, its poisoned flag, a pending injected fault): dropping it
//! is a crash, and [`MemStore::open`] on the same disk is a restart. Records are stored framed,
//! exactly as a real backend stores them, so corruption can be injected byte by byte and
//! recovery detects it through the same code.

use crate::codec;
use crate::{Batch, CorruptReason, EventStore, Lsn, Recovered, StoreError};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The simulated disk under a [`MemStore`]. Cloning it gives another handle to the same disk.
#[derive(Clone, Debug, Default)]
pub struct MemDisk {
    inner: Arc<Mutex<Disk>>,
}

#[derive(Debug, Default)]
struct Disk {
    events: BTreeMap<Lsn, Vec<u8>>,
    snapshots: BTreeMap<Lsn, Vec<u8>>,
    payloads: BTreeMap<String, Vec<u8>>,
    /// How to undo the last write, if it was a batch commit (see [`MemStore::tear_last_record`]).
    last_commit: Option<Undo>,
}

#[derive(Debug)]
struct Undo {
    /// LSNs the batch appended.
    lsns: std::ops::RangeInclusive<Lsn>,
    /// Each payload key the batch touched and its value before, in the order they were touched.
    payloads: Vec<(String, Option<Vec<u8>>)>,
}

impl MemDisk {
    /// An empty disk.
    pub fn new() -> MemDisk {
        MemDisk::default()
    }

    fn lock(&self) -> MutexGuard<'_, Disk> {
        // A panic while the lock was held cannot leave a half-applied commit: commits are built
        // aside and swapped in without a panicking step. So a poisoned mutex is still consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Test hook: flips one bit in the middle of the stored frame of the event at `lsn`, as a
    /// media error would. Returns whether the record was there.
    pub fn corrupt_event(&self, lsn: Lsn) -> bool {
        flip_middle_bit(self.lock().events.get_mut(&lsn))
    }

    /// Test hook: flips one bit in the stored frame of the snapshot at `lsn`.
    pub fn corrupt_snapshot(&self, lsn: Lsn) -> bool {
        flip_middle_bit(self.lock().snapshots.get_mut(&lsn))
    }

    /// Test hook: deletes the event at `lsn`, leaving a hole in the log.
    pub fn remove_event(&self, lsn: Lsn) -> bool {
        self.lock().events.remove(&lsn).is_some()
    }

    /// How many event records are stored (pruned ones are gone).
    pub fn stored_event_count(&self) -> usize {
        self.lock().events.len()
    }

    /// A new disk holding a copy of this one's records: faults injected into the copy leave
    /// this disk as it is (the simulator damages copies to check recovery, then goes on).
    pub fn deep_copy(&self) -> MemDisk {
        let d = self.lock();
        MemDisk {
            inner: Arc::new(Mutex::new(Disk {
                events: d.events.clone(),
                snapshots: d.snapshots.clone(),
                payloads: d.payloads.clone(),
                last_commit: None,
            })),
        }
    }

    /// Test hook: cuts the stored frame of the event at `lsn` short, as a write torn by a
    /// crash leaves a record in a log file: its header claims more bytes than there are.
    /// Returns whether the record was there.
    pub fn tear_event_frame(&self, lsn: Lsn) -> bool {
        match self.lock().events.get_mut(&lsn) {
            Some(frame) if frame.len() > 1 => {
                frame.truncate(frame.len() / 2 + 1);
                true
            }
            _ => false,
        }
    }
}

fn flip_middle_bit(frame: Option<&mut Vec<u8>>) -> bool {
    match frame {
        Some(frame) if !frame.is_empty() => {
            let middle = frame.len() / 2;
            frame[middle] ^= 0x10;
            true
        }
        _ => false,
    }
}

/// The in-memory [`EventStore`]: the reference model every backend is tested against, and the
/// store of the deterministic simulator.
///
/// Faults: [`MemStore::fail_next_commit`] (a commit that fails cleanly), [`MemStore::tear_last_record`]
/// (a crash during the last commit's fsync), [`MemStore::crash`] and [`MemStore::open`] (a
/// restart), and the corruption hooks of [`MemDisk`].
#[derive(Debug)]
pub struct MemStore {
    disk: MemDisk,
    last_lsn: Lsn,
    snapshot_lsn: Option<Lsn>,
    poisoned: bool,
    fail_next_commit: bool,
}

impl Default for MemStore {
    fn default() -> MemStore {
        MemStore::new()
    }
}

impl MemStore {
    /// A store on a new, empty disk.
    pub fn new() -> MemStore {
        MemStore::open(MemDisk::new())
    }

    /// Opens the store on `disk`, as a process does at start.
    pub fn open(disk: MemDisk) -> MemStore {
        let (last_lsn, snapshot_lsn) = {
            let d = disk.lock();
            let last_event = d.events.keys().next_back().copied();
            let snapshot_lsn = d.snapshots.keys().next_back().copied();
            (
                last_event.unwrap_or(0).max(snapshot_lsn.unwrap_or(0)),
                snapshot_lsn,
            )
        };
        MemStore {
            disk,
            last_lsn,
            snapshot_lsn,
            poisoned: false,
            fail_next_commit: false,
        }
    }

    /// Another handle to this store's disk.
    pub fn disk(&self) -> MemDisk {
        self.disk.clone()
    }

    /// Crashes the process: everything not on the disk (last LSN, poisoning, pending faults) is
    /// lost. Returns the disk, to [`MemStore::open`] again.
    pub fn crash(self) -> MemDisk {
        self.disk
    }

    /// A crash followed by a restart.
    pub fn reopen(self) -> MemStore {
        MemStore::open(self.crash())
    }

    /// The next commit with anything in it fails without writing anything, and poisons the store.
    pub fn fail_next_commit(&mut self) {
        self.fail_next_commit = true;
    }

    /// Simulates a torn write of the last commit: the process crashed during that commit's
    /// fsync, and the disk came back without it. The last batch (its events, payload puts and
    /// deletes) is undone on the disk as if it had never been written, and the store is poisoned
    /// (the process is dead; [`MemStore::reopen`] to restart).
    ///
    /// The caller must treat that batch as never acknowledged: a real commit that is torn never
    /// returned. Returns `false`, and changes nothing on the disk, if the last write was not a
    /// batch commit (a snapshot, or nothing since the disk was opened).
    pub fn tear_last_record(&mut self) -> bool {
        self.poisoned = true;
        let mut disk = self.disk.lock();
        let Some(undo) = disk.last_commit.take() else {
            return false;
        };
        for lsn in undo.lsns {
            disk.events.remove(&lsn);
        }
        for (job, before) in undo.payloads.into_iter().rev() {
            match before {
                Some(frame) => disk.payloads.insert(job, frame),
                None => disk.payloads.remove(&job),
            };
        }
        true
    }

    fn check_poisoned(&self) -> Result<(), StoreError> {
        if self.poisoned {
            Err(StoreError::Poisoned)
        } else {
            Ok(())
        }
    }

    fn commit_inner(&mut self, batch: &Batch) -> Result<Lsn, StoreError> {
        let frames = batch
            .events
            .iter()
            .map(codec::encode_event)
            .collect::<Result<Vec<_>, _>>()
            .map_err(StoreError::Encode)?;
        let puts = batch
            .put_payloads
            .iter()
            .map(|(job, bytes)| Ok((job.clone(), codec::encode_blob(bytes)?)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(StoreError::Encode)?;
        if std::mem::take(&mut self.fail_next_commit) {
            return Err(StoreError::Injected);
        }
        let first = self.last_lsn + 1;
        let last = self.last_lsn + frames.len() as u64;
        let mut disk = self.disk.lock();
        let mut undo = Undo {
            lsns: first..=last,
            payloads: Vec::new(),
        };
        for (lsn, frame) in (first..).zip(frames) {
            disk.events.insert(lsn, frame);
        }
        for (job, frame) in puts {
            let before = disk.payloads.insert(job.clone(), frame);
            undo.payloads.push((job, before));
        }
        for job in &batch.delete_payloads {
            let before = disk.payloads.remove(job);
            undo.payloads.push((job.clone(), before));
        }
        disk.last_commit = Some(undo);
        Ok(last)
    }
}

impl EventStore for MemStore {
    fn commit(&mut self, batch: &Batch) -> Result<Lsn, StoreError> {
        self.check_poisoned()?;
        if batch.is_empty() {
            return Ok(self.last_lsn);
        }
        match self.commit_inner(batch) {
            Ok(lsn) => {
                self.last_lsn = lsn;
                Ok(lsn)
            }
            Err(e) => {
                self.poisoned = true;
                Err(e)
            }
        }
    }

    fn put_snapshot(&mut self, lsn: Lsn, bytes: &[u8]) -> Result<(), StoreError> {
        self.check_poisoned()?;
        let frame = crate::check_snapshot_lsn(lsn, self.last_lsn, self.snapshot_lsn)
            .and_then(|()| codec::encode_snapshot(bytes).map_err(StoreError::Encode));
        let frame = match frame {
            Ok(frame) => frame,
            Err(e) => {
                self.poisoned = true;
                return Err(e);
            }
        };
        let mut disk = self.disk.lock();
        disk.snapshots.insert(lsn, frame);
        disk.snapshots.retain(|&k, _| k >= lsn);
        disk.events.retain(|&k, _| k > lsn);
        disk.last_commit = None;
        self.snapshot_lsn = Some(lsn);
        Ok(())
    }

    fn recover(&mut self) -> Result<Recovered, StoreError> {
        self.check_poisoned()?;
        let disk = self.disk.lock();
        let snapshot = disk
            .snapshots
            .iter()
            .next_back()
            .map(|(lsn, frame)| (*lsn, frame.as_slice()));
        let recovered = crate::recover_from_frames(
            snapshot,
            disk.events
                .iter()
                .map(|(lsn, frame)| Ok((*lsn, frame.as_slice()))),
        )?;
        if recovered.last_lsn() < self.last_lsn {
            return Err(StoreError::Corrupt {
                lsn: recovered.last_lsn() + 1,
                reason: CorruptReason::Missing,
            });
        }
        Ok(recovered)
    }

    fn payload(&self, job: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.check_poisoned()?;
        let disk = self.disk.lock();
        let Some(frame) = disk.payloads.get(job) else {
            return Ok(None);
        };
        codec::decode_blob(frame)
            .map(Some)
            .map_err(|reason| StoreError::CorruptPayload {
                job: job.to_owned(),
                reason,
            })
    }

    fn last_lsn(&self) -> Lsn {
        self.last_lsn
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairway_core::{Event, Time};

    fn eligible(job: &str) -> Event {
        Event::JobEligible {
            at: Time(1),
            job: job.into(),
        }
    }

    // Proves: tearing the last commit undoes exactly that batch on the disk (its events, its
    // payload put and its payload delete), keeps the batch before it, and poisons the store.
    #[test]
    fn tear_undoes_exactly_the_last_batch() {
        let mut store = MemStore::new();
        let first = Batch {
            events: vec![eligible("a")],
            put_payloads: vec![("a".into(), b"A".to_vec()), ("b".into(), b"B".to_vec())],
            delete_payloads: vec![],
        };
        assert_eq!(store.commit(&first).unwrap(), 1);
        let second = Batch {
            events: vec![eligible("b"), eligible("c")],
            put_payloads: vec![("a".into(), b"A2".to_vec()), ("c".into(), b"C".to_vec())],
            delete_payloads: vec!["b".into()],
        };
        assert_eq!(store.commit(&second).unwrap(), 3);
        assert!(store.tear_last_record());
        assert!(matches!(store.commit(&first), Err(StoreError::Poisoned)));
        let mut store = store.reopen();
        assert_eq!(store.last_lsn(), 1);
        let recovered = store.recover().unwrap();
        assert_eq!(recovered.events, vec![(1, eligible("a"))]);
        assert_eq!(store.payload("a").unwrap(), Some(b"A".to_vec()));
        assert_eq!(store.payload("b").unwrap(), Some(b"B".to_vec()));
        assert_eq!(store.payload("c").unwrap(), None);
        // Only one level of undo: a second tear finds nothing to undo.
        assert!(!store.tear_last_record());
    }

    // Proves: a snapshot is not a batch commit, so it cannot be torn away by `tear_last_record`.
    #[test]
    fn tear_after_snapshot_changes_nothing() {
        let mut store = MemStore::new();
        store
            .commit(&Batch::of_events(vec![eligible("a")]))
            .unwrap();
        store.put_snapshot(1, b"snap").unwrap();
        assert!(!store.tear_last_record());
        let mut store = store.reopen();
        assert_eq!(
            store.recover().unwrap().snapshot,
            Some((1, b"snap".to_vec()))
        );
    }
}
