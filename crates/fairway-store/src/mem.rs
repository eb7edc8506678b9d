//! The in-memory reference store: a few `BTreeMap`s, with fault injection for simulation.
//!
//! A [`MemDisk`] plays the disk: what it holds survives a "crash". A [`MemStore`] plays the
//! process's view of it (its last LSN, its poisoned flag, a pending injected fault): dropping it
//! is a crash, and [`MemStore::open`] on the same disk is a restart. Records are stored framed,
//! exactly as a real backend stores them, so corruption can be injected byte by byte and
//! recovery detects it through the same code.

use crate::codec;
use crate::{Batch, EventStore, Lsn, Recovered, StoreError};
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
    /// How to undo the last write, as a crash during its flush would (see
    /// [`MemStore::tear_last_record`] and [`MemStore::tear_last_snapshot`]).
    last_write: Option<LastWrite>,
}

#[derive(Debug)]
enum LastWrite {
    Batch(Undo),
    Snapshot(SnapshotUndo),
}

/// What a snapshot's commit replaced and pruned: the disk before it.
#[derive(Debug)]
struct SnapshotUndo {
    /// The snapshots before it (the one it replaced, at most).
    snapshots: BTreeMap<Lsn, Vec<u8>>,
    /// The events it pruned.
    pruned: BTreeMap<Lsn, Vec<u8>>,
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

    /// Test hook: cuts the stored frame of the snapshot at `lsn` short, as a snapshot written
    /// in place and torn by a crash would be left. Returns whether the record was there.
    pub fn tear_snapshot_frame(&self, lsn: Lsn) -> bool {
        cut_short(self.lock().snapshots.get_mut(&lsn))
    }

    /// The LSN of the latest stored snapshot.
    pub fn snapshot_lsn(&self) -> Option<Lsn> {
        self.lock().snapshots.keys().next_back().copied()
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
                last_write: None,
            })),
        }
    }

    /// Test hook: cuts the stored frame of the event at `lsn` short, as a write torn by a
    /// crash leaves a record in a log file: its header claims more bytes than there are.
    /// Returns whether the record was there.
    pub fn tear_event_frame(&self, lsn: Lsn) -> bool {
        cut_short(self.lock().events.get_mut(&lsn))
    }
}

fn cut_short(frame: Option<&mut Vec<u8>>) -> bool {
    match frame {
        Some(frame) if frame.len() > 1 => {
            frame.truncate(frame.len() / 2 + 1);
            true
        }
        _ => false,
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

/// How a snapshot write injected with [`MemStore::fail_next_snapshot`] fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotFailure {
    /// Nothing reaches the disk: the previous snapshot and every event after it stay.
    NotWritten,
    /// The snapshot and its pruning reach the disk, but the call fails all the same: after a
    /// failed commit redb says the transaction "may already have become durable", so a caller
    /// cannot tell this case from the other.
    Written,
}

/// The in-memory [`EventStore`]: the reference model every backend is tested against, and the
/// store of the deterministic simulator.
///
/// Faults: [`MemStore::fail_next_commit`] (a commit that fails cleanly),
/// [`MemStore::fail_next_snapshot`] (a snapshot write that fails, written or not),
/// [`MemStore::tear_last_record`] and [`MemStore::tear_last_snapshot`] (a crash during the
/// last commit's or snapshot's fsync), [`MemStore::crash`] and [`MemStore::open`] (a restart),
/// and the corruption hooks of [`MemDisk`].
#[derive(Debug)]
pub struct MemStore {
    disk: MemDisk,
    last_lsn: Lsn,
    snapshot_lsn: Option<Lsn>,
    poisoned: bool,
    fail_next_commit: bool,
    fail_next_snapshot: Option<SnapshotFailure>,
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
            fail_next_snapshot: None,
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

    /// Whether a commit failure injected by [`MemStore::fail_next_commit`] has yet to happen.
    pub fn commit_fault_pending(&self) -> bool {
        self.fail_next_commit
    }

    /// The next [`EventStore::put_snapshot`] whose arguments are valid fails with
    /// [`StoreError::Injected`] and poisons the store, having written the snapshot (and pruned
    /// the log) or not, as `how` says.
    pub fn fail_next_snapshot(&mut self, how: SnapshotFailure) {
        self.fail_next_snapshot = Some(how);
    }

    /// Whether a snapshot failure injected by [`MemStore::fail_next_snapshot`] has yet to
    /// happen.
    pub fn snapshot_fault_pending(&self) -> bool {
        self.fail_next_snapshot.is_some()
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
        let Some(LastWrite::Batch(undo)) = self.crash_during_last_write(false) else {
            return false;
        };
        let mut disk = self.disk.lock();
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

    /// Simulates a torn write of the last snapshot: the process crashed during the snapshot's
    /// fsync, and the disk came back as it was before: the previous snapshot, and every event
    /// the new one would have pruned. redb and PostgreSQL roll a torn snapshot transaction back
    /// whole, as they do a batch (docs/store.md, "A crash at every point of a group commit").
    /// Poisons the store (the process is dead; [`MemStore::reopen`] to restart).
    ///
    /// Returns `false`, and changes nothing on the disk, if the last write was not a snapshot.
    pub fn tear_last_snapshot(&mut self) -> bool {
        let Some(LastWrite::Snapshot(undo)) = self.crash_during_last_write(true) else {
            return false;
        };
        let mut disk = self.disk.lock();
        disk.snapshots = undo.snapshots;
        disk.events.extend(undo.pruned);
        true
    }

    /// The process dies (the store is poisoned) during its last write's flush: takes that
    /// write's undo if it was a snapshot (`snapshot`) or a batch commit (otherwise).
    fn crash_during_last_write(&mut self, snapshot: bool) -> Option<LastWrite> {
        self.poisoned = true;
        self.disk
            .lock()
            .last_write
            .take_if(|w| matches!(w, LastWrite::Snapshot(_)) == snapshot)
    }

    fn check_poisoned(&self) -> Result<(), StoreError> {
        crate::unpoisoned(self.poisoned)
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
        disk.last_write = Some(LastWrite::Batch(undo));
        Ok(last)
    }
}

impl EventStore for MemStore {
    fn commit(&mut self, batch: &Batch) -> Result<Lsn, StoreError> {
        self.check_poisoned()?;
        if batch.is_empty() {
            return Ok(self.last_lsn);
        }
        let result = self.commit_inner(batch);
        self.last_lsn = crate::poison_on_error(&mut self.poisoned, result)?;
        Ok(self.last_lsn)
    }

    fn put_snapshot(&mut self, lsn: Lsn, bytes: &[u8]) -> Result<(), StoreError> {
        self.check_poisoned()?;
        let frame = crate::check_snapshot_lsn(lsn, self.last_lsn, self.snapshot_lsn)
            .and_then(|()| codec::encode_snapshot(bytes).map_err(StoreError::Encode));
        let frame = crate::poison_on_error(&mut self.poisoned, frame)?;
        let fault = self.fail_next_snapshot.take();
        if fault == Some(SnapshotFailure::NotWritten) {
            self.poisoned = true;
            return Err(StoreError::Injected);
        }
        let mut disk = self.disk.lock();
        // One commit: the snapshot, the older snapshots dropped and the events it covers pruned.
        // The arguments' check makes `lsn` at least every stored snapshot's LSN, so the new one
        // is all that stays.
        let snapshots = std::mem::replace(&mut disk.snapshots, BTreeMap::from([(lsn, frame)]));
        let pruned = {
            let after = disk.events.split_off(&(lsn + 1));
            std::mem::replace(&mut disk.events, after)
        };
        disk.last_write = Some(LastWrite::Snapshot(SnapshotUndo { snapshots, pruned }));
        drop(disk);
        if fault == Some(SnapshotFailure::Written) {
            self.poisoned = true;
            return Err(StoreError::Injected);
        }
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
        crate::recover_from_records(
            snapshot,
            disk.events
                .iter()
                .map(|(lsn, frame)| Ok((*lsn, frame.as_slice()))),
            self.last_lsn,
        )
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

    fn events(from: u64, to: u64) -> Batch {
        Batch::of_events((from..=to).map(|n| eligible(&format!("j{n}"))).collect())
    }

    fn lsns(recovered: &Recovered) -> Vec<Lsn> {
        recovered.events.iter().map(|(lsn, _)| *lsn).collect()
    }

    // Proves: a snapshot write that fails before reaching the disk poisons the store and leaves
    // the previous snapshot and every event after it, so a restart recovers the same state.
    #[test]
    fn failed_snapshot_not_written_keeps_the_previous_snapshot_and_the_log() {
        let mut store = MemStore::new();
        store.commit(&events(1, 4)).unwrap();
        store.put_snapshot(2, b"s2").unwrap();
        store.commit(&events(5, 6)).unwrap();
        store.fail_next_snapshot(SnapshotFailure::NotWritten);
        assert!(store.snapshot_fault_pending());
        assert!(matches!(
            store.put_snapshot(6, b"s6"),
            Err(StoreError::Injected)
        ));
        assert!(!store.snapshot_fault_pending());
        assert!(matches!(
            store.commit(&events(7, 7)),
            Err(StoreError::Poisoned)
        ));
        let mut store = store.reopen();
        assert_eq!(store.last_lsn(), 6);
        let recovered = store.recover().unwrap();
        assert_eq!(recovered.snapshot, Some((2, b"s2".to_vec())));
        assert_eq!(lsns(&recovered), vec![3, 4, 5, 6]);
    }

    // Proves: a snapshot write that reached the disk but still failed poisons the store, and a
    // restart recovers from that snapshot (the two outcomes of a failed write recover alike).
    #[test]
    fn failed_snapshot_written_recovers_from_it() {
        let mut store = MemStore::new();
        store.commit(&events(1, 4)).unwrap();
        store.fail_next_snapshot(SnapshotFailure::Written);
        assert!(matches!(
            store.put_snapshot(3, b"s3"),
            Err(StoreError::Injected)
        ));
        assert!(matches!(store.recover(), Err(StoreError::Poisoned)));
        let mut store = store.reopen();
        assert_eq!(store.last_lsn(), 4);
        let recovered = store.recover().unwrap();
        assert_eq!(recovered.snapshot, Some((3, b"s3".to_vec())));
        assert_eq!(lsns(&recovered), vec![4]);
        assert_eq!(store.disk().stored_event_count(), 1);
    }

    // Proves: tearing the last snapshot brings back the snapshot it replaced and every event it
    // pruned, and poisons the store; with no snapshot before, the whole log comes back. A batch
    // cannot be torn as a snapshot, nor a snapshot as a batch.
    #[test]
    fn tear_undoes_exactly_the_last_snapshot() {
        let mut store = MemStore::new();
        store.commit(&events(1, 3)).unwrap();
        assert!(!store.tear_last_snapshot());
        let mut store = store.reopen();
        store.put_snapshot(2, b"s2").unwrap();
        assert!(store.tear_last_snapshot());
        let mut store = store.reopen();
        let recovered = store.recover().unwrap();
        assert_eq!(recovered.snapshot, None);
        assert_eq!(lsns(&recovered), vec![1, 2, 3]);

        store.put_snapshot(2, b"s2").unwrap();
        store.commit(&events(4, 6)).unwrap();
        store.put_snapshot(5, b"s5").unwrap();
        assert_eq!(store.disk().stored_event_count(), 1);
        assert!(!store.tear_last_record());
        assert!(matches!(
            store.commit(&events(7, 7)),
            Err(StoreError::Poisoned)
        ));
        assert!(store.tear_last_snapshot());
        let mut store = store.reopen();
        assert_eq!(store.last_lsn(), 6);
        let recovered = store.recover().unwrap();
        assert_eq!(recovered.snapshot, Some((2, b"s2".to_vec())));
        assert_eq!(lsns(&recovered), vec![3, 4, 5, 6]);
        // Only one level of undo.
        assert!(!store.tear_last_snapshot());
    }

    // Proves: a snapshot record cut short or with a flipped bit is refused at its LSN by its
    // length check or its CRC; recovery never falls back to anything else (the events the
    // snapshot covers are pruned, so nothing else holds that state).
    #[test]
    fn damaged_snapshot_is_refused_at_its_lsn() {
        let mut store = MemStore::new();
        store.commit(&events(1, 4)).unwrap();
        store.put_snapshot(3, b"a snapshot of some length").unwrap();
        assert_eq!(store.disk().snapshot_lsn(), Some(3));
        for cut in [true, false] {
            let copy = store.disk().deep_copy();
            assert!(if cut {
                copy.tear_snapshot_frame(3)
            } else {
                copy.corrupt_snapshot(3)
            });
            match MemStore::open(copy).recover() {
                Err(StoreError::CorruptSnapshot { lsn: 3, reason }) => assert!(
                    matches!(
                        (cut, &reason),
                        (true, codec::CodecError::LengthMismatch { .. })
                            | (false, codec::CodecError::Checksum { .. })
                    ),
                    "{reason:?}"
                ),
                other => panic!("a damaged snapshot was not refused: {other:?}"),
            }
        }
        assert!(
            store.recover().is_ok(),
            "the copies were damaged, not the disk"
        );
    }

    fn put(job: &str, bytes: &[u8]) -> (String, Vec<u8>) {
        (job.into(), bytes.to_vec())
    }

    /// Proves: committing `a` with `b` appended leaves the store as committing `a` and then
    /// `b` does, for every way their puts and deletes can meet: put then deleted (gone),
    /// deleted then put again (kept, with the new bytes), put twice (the later bytes), and
    /// deleted by both.
    #[test]
    fn an_appended_batch_commits_as_the_two_in_turn() {
        let first = Batch {
            events: vec![eligible("1")],
            put_payloads: vec![put("ended-later", b"e"), put("twice", b"old")],
            delete_payloads: vec!["put-again".into(), "deleted-twice".into()],
        };
        let second = Batch {
            events: vec![eligible("2"), eligible("3")],
            put_payloads: vec![put("put-again", b"new"), put("twice", b"new")],
            delete_payloads: vec!["ended-later".into(), "deleted-twice".into()],
        };
        let before = Batch {
            put_payloads: vec![put("put-again", b"before"), put("deleted-twice", b"d")],
            ..Batch::default()
        };
        let mut one_by_one = MemStore::new();
        one_by_one.commit(&before).unwrap();
        one_by_one.commit(&first).unwrap();
        one_by_one.commit(&second).unwrap();
        let mut merged = first.clone();
        merged.append(second);
        let mut together = MemStore::new();
        together.commit(&before).unwrap();
        assert_eq!(together.commit(&merged).unwrap(), 3);
        assert_eq!(together.recover().unwrap(), one_by_one.recover().unwrap());
        for job in ["ended-later", "twice", "put-again", "deleted-twice"] {
            assert_eq!(
                together.payload(job).unwrap(),
                one_by_one.payload(job).unwrap(),
                "{job}"
            );
        }
        assert_eq!(
            together.payload("put-again").unwrap(),
            Some(b"new".to_vec())
        );
    }
}
