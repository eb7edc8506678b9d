//! Fairway's durable store: the engine's event log, its snapshots, and job payloads.
//!
//! The engine (`fairway-core`) is event-sourced: every durable state change is an [`Event`]. The
//! server's single writer loop applies a batch of commands, drains the resulting events and hands
//! them to [`EventStore::commit`] as one [`Batch`]: one durable commit per group, and nothing is
//! acknowledged before it returns. On start, [`EventStore::recover`] returns the latest snapshot
//! and the events after it, which the engine replays.
//!
//! Backends: [`RedbStore`] (embedded, the default: one redb file in a data directory),
//! [`PgStore`] (PostgreSQL: several server replicas on one database, every write fenced by the
//! leader's term, see [`postgres`]) and [`MemStore`] (in memory, the reference model, with fault
//! injection for simulation). All pass the same [`conformance`] suite. `docs/store.md` argues why a crash at any point of a commit
//! loses nothing acknowledged.
//!
//! **Architecture invariant:** the store persists only the record types of [`codec`], framed and
//! versioned; it never interprets snapshots or payloads, and it never decides anything.
//!
//! **Architecture invariant:** a failed write poisons the store. The caller's memory may then be
//! ahead of the disk, so the only way on is to restart and recover.

#![warn(missing_docs)]

mod applier;
pub mod codec;
#[doc(hidden)]
pub mod conformance;
mod error;
mod mem;
pub mod postgres;
mod redb_store;
mod wal;

pub use codec::{CodecError, decode_event, encode_event};
pub use error::{CorruptReason, StoreError};
pub use fairway_core::Event;
pub use mem::{MemDisk, MemStore, SnapshotFailure};
pub use postgres::{Fence, LeaderRow, Leadership, PgStore};
#[doc(hidden)]
pub use redb_store::set_format_version_for_test;
pub use redb_store::{DB_FILE_NAME, FORMAT_VERSION, RedbStore};
pub use wal::{WAL_FILE_NAME, WAL_FILE_NAME_2};

/// A log sequence number: 1 for the first event ever committed, then contiguous. 0 means "before
/// any event".
pub type Lsn = u64;

/// Everything one group commit makes durable, all or nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    /// Events, appended in this order with consecutive LSNs.
    pub events: Vec<Event>,
    /// Job payloads to store (job id, opaque bytes); a put replaces an earlier payload.
    pub put_payloads: Vec<(String, Vec<u8>)>,
    /// Job payloads to delete (absent ones are ignored). Deletes apply after the puts, so a job
    /// accepted and ended within one batch leaves no payload.
    pub delete_payloads: Vec<String>,
}

impl Batch {
    /// A batch of events only.
    pub fn of_events(events: Vec<Event>) -> Batch {
        Batch {
            events,
            ..Batch::default()
        }
    }

    /// Whether committing it would change nothing.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.put_payloads.is_empty() && self.delete_payloads.is_empty()
    }

    /// Appends `later`, so that committing the result leaves the store as committing `self`
    /// and then `later` would: the events follow in order, and a payload `later` puts is no
    /// longer deleted by `self` (within one batch deletes apply after the puts, so without
    /// this a job deleted in `self` and put again in `later` would end deleted).
    pub fn append(&mut self, later: Batch) {
        if !later.put_payloads.is_empty() && !self.delete_payloads.is_empty() {
            let put: std::collections::BTreeSet<&str> = later
                .put_payloads
                .iter()
                .map(|(job, _)| job.as_str())
                .collect();
            self.delete_payloads
                .retain(|job| !put.contains(job.as_str()));
        }
        self.events.extend(later.events);
        self.put_payloads.extend(later.put_payloads);
        self.delete_payloads.extend(later.delete_payloads);
    }
}

/// What [`EventStore::recover`] found: the engine is the snapshot's state plus these events.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recovered {
    /// The latest snapshot and the LSN of the last event it includes.
    pub snapshot: Option<(Lsn, Vec<u8>)>,
    /// Every event after the snapshot (all events without one), in LSN order, contiguous.
    pub events: Vec<(Lsn, Event)>,
}

impl Recovered {
    /// The LSN of the last event the recovered state includes.
    pub fn last_lsn(&self) -> Lsn {
        match (self.events.last(), &self.snapshot) {
            (Some((lsn, _)), _) => *lsn,
            (None, Some((lsn, _))) => *lsn,
            (None, None) => 0,
        }
    }
}

/// A snapshot's bytes, in pieces one after the other: an engine's snapshot shares most of its
/// bytes (the finished jobs' records) with the engine instead of copying them
/// (`fairway_core::SnapshotPieces`). Any `AsRef<[u8]>` is one piece.
pub trait SnapshotSource: Send {
    /// The pieces, in order: their concatenation is the snapshot.
    fn pieces(&self) -> Vec<&[u8]>;
}

impl<T: AsRef<[u8]> + Send> SnapshotSource for T {
    fn pieces(&self) -> Vec<&[u8]> {
        vec![self.as_ref()]
    }
}

/// A snapshot's bytes handed to [`EventStore::stage_snapshot`].
pub type SnapshotBytes = Box<dyn SnapshotSource>;

/// A durable home for the engine's events, snapshots and job payloads.
///
/// Synchronous: the server calls it from its dedicated writer thread. Every write is durable
/// when it returns `Ok` (and only then may the caller acknowledge anything), but for a staged
/// snapshot ([`EventStore::stage_snapshot`]), on which nothing is acknowledged. Any write error
/// poisons the store: every later call returns [`StoreError::Poisoned`] until the process
/// reopens the store and recovers.
pub trait EventStore: Send {
    /// Makes the whole batch durable in one commit, or nothing of it: its events appended with
    /// consecutive LSNs, its payload puts, then its deletes. Returns the LSN of the batch's last
    /// event, or the current last LSN for a batch without events (an empty batch writes nothing).
    fn commit(&mut self, batch: &Batch) -> Result<Lsn, StoreError>;

    /// Durably stores a snapshot of the engine's state after the event at `lsn`, which must be
    /// between the current snapshot's LSN and [`EventStore::last_lsn`]. In the same commit it
    /// prunes the events at or before `lsn` and the older snapshots.
    fn put_snapshot(&mut self, lsn: Lsn, bytes: &[u8]) -> Result<(), StoreError>;

    /// Stores a snapshot as [`EventStore::put_snapshot`] does, but a backend may write it while
    /// later commits go on, and put it in force (pruning what it covers) at one of its later
    /// calls: the server's commits then do not wait while tens of megabytes reach the disk.
    /// Until it is in force the store recovers as before it (the older snapshot and every event
    /// after it), and a failure to store it is the error of a later call (which poisons, as a
    /// failed write does). [`EventStore::recover`], [`EventStore::put_snapshot`] and
    /// [`EventStore::settle_snapshot`] put a staged snapshot in force first; so does staging
    /// the next one. By default, `put_snapshot` at once.
    ///
    /// The bytes are dropped where and when the store is done with them (on a thread of its
    /// own, perhaps), so that their owner can learn it in their `Drop`.
    fn stage_snapshot(&mut self, lsn: Lsn, bytes: SnapshotBytes) -> Result<(), StoreError> {
        match bytes.pieces().as_slice() {
            [one] => self.put_snapshot(lsn, one),
            pieces => self.put_snapshot(lsn, &pieces.concat()),
        }
    }

    /// Puts a snapshot staged by [`EventStore::stage_snapshot`] in force: waiting for it to be
    /// written if `wait` (after a clean stop's snapshot, so that the next start replays
    /// nothing), else only if it is written already (an idle server's, so that a restart
    /// does not replay what it covers). Returns whether one is still staged, or any other
    /// work the backend does beside the commits is still under way (the redb store's durable
    /// points): a caller that goes idle calls again until it is not.
    fn settle_snapshot(&mut self, wait: bool) -> Result<bool, StoreError> {
        let _ = wait;
        Ok(false)
    }

    /// Reads the latest snapshot and every event after it, verifying each record's frame and
    /// that the LSNs are contiguous. A bad or missing record is an error naming its LSN: the
    /// store never returns a log with a hole or a silently shortened tail.
    fn recover(&mut self) -> Result<Recovered, StoreError>;

    /// The payload of `job`, if one is stored.
    fn payload(&self, job: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// The payloads of `jobs`, in their order: what [`EventStore::payload`] answers for each,
    /// read in one transaction where the backend can (the writer reads a turn's leased jobs
    /// at once). An error for one job is the error of the whole call.
    fn payloads(&self, jobs: &[&str]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        jobs.iter().map(|job| self.payload(job)).collect()
    }

    /// The LSN of the last committed event (0 before the first). Durable: it survives reopening.
    fn last_lsn(&self) -> Lsn;

    /// Confirms that this store still holds the right to write: for a backend fenced by a
    /// leader term ([`PgStore`]), a read of the leader row (and [`StoreError::Deposed`] when
    /// another replica has taken over); for a single-writer backend, nothing. The server calls it before answering a turn that committed nothing
    /// (reads, refusals), so that a deposed leader answers nothing at all. An error poisons.
    fn fence(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// `Poisoned` once a write of the store failed (see [`EventStore`]), shared by every backend.
pub(crate) fn unpoisoned(poisoned: bool) -> Result<(), StoreError> {
    if poisoned {
        Err(StoreError::Poisoned)
    } else {
        Ok(())
    }
}

/// A write's result, poisoning the store when it failed: the outcome of a failed write is
/// unknown (it may even have become durable) and the caller's memory is ahead of the store,
/// so the only way on is a restart (redb's own rule, one level up). Shared by every backend.
pub(crate) fn poison_on_error<T>(
    poisoned: &mut bool,
    result: Result<T, StoreError>,
) -> Result<T, StoreError> {
    if result.is_err() {
        *poisoned = true;
    }
    result
}

/// Checks the arguments of [`EventStore::put_snapshot`], shared by every backend.
pub(crate) fn check_snapshot_lsn(
    lsn: Lsn,
    last_lsn: Lsn,
    snapshot_lsn: Option<Lsn>,
) -> Result<(), StoreError> {
    if lsn > last_lsn {
        return Err(StoreError::Invalid(format!(
            "snapshot at LSN {lsn} is after the last committed LSN {last_lsn}"
        )));
    }
    if let Some(current) = snapshot_lsn
        && lsn < current
    {
        return Err(StoreError::Invalid(format!(
            "snapshot at LSN {lsn} is older than the stored snapshot at LSN {current}"
        )));
    }
    Ok(())
}

/// Builds a [`Recovered`] from framed records, shared by every backend: decodes the snapshot,
/// then each log record (keyed by the LSN of its first event: one event for a `V1` record, a
/// group for `V2`), checking that the events after the snapshot start right after it, have no
/// hole, and reach `last_lsn`, the last LSN the store committed (a shortened tail is a loss).
/// A damaged record is refused at the LSN of the event it hit.
pub(crate) fn recover_from_records<E>(
    snapshot: Option<(Lsn, &[u8])>,
    records: impl IntoIterator<Item = Result<(Lsn, E), StoreError>>,
    last_lsn: Lsn,
) -> Result<Recovered, StoreError>
where
    E: AsRef<[u8]>,
{
    let snapshot = match snapshot {
        Some((lsn, frame)) => Some((
            lsn,
            codec::decode_snapshot(frame)
                .map_err(|reason| StoreError::CorruptSnapshot { lsn, reason })?,
        )),
        None => None,
    };
    let mut expected = snapshot.as_ref().map_or(1, |(lsn, _)| lsn + 1);
    let mut out = Vec::new();
    for item in records {
        let (first, record) = item?;
        if first > expected {
            return Err(StoreError::Corrupt {
                lsn: expected,
                reason: CorruptReason::Missing,
            });
        }
        let events =
            codec::decode_events(record.as_ref()).map_err(|(i, e)| StoreError::Corrupt {
                lsn: first + i as u64,
                reason: CorruptReason::Codec(e),
            })?;
        for (lsn, event) in (first..).zip(events) {
            if lsn < expected {
                // Older than the snapshot and not yet pruned: not part of the recovered state.
                continue;
            }
            out.push((lsn, event));
            expected += 1;
        }
    }
    let recovered = Recovered {
        snapshot,
        events: out,
    };
    if recovered.last_lsn() < last_lsn {
        return Err(StoreError::Corrupt {
            lsn: recovered.last_lsn() + 1,
            reason: CorruptReason::Missing,
        });
    }
    Ok(recovered)
}
