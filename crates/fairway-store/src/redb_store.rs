//! The embedded backend: one redb file in a data directory.
//!
//! Tables (all keys fixed-width or short, all values framed by [`crate::codec`]):
//!
//! | table       | key            | value                                  |
//! | ----------- | -------------- | -------------------------------------- |
//! | `meta`      | `&str`         | `u64`: `format_version`                |
//! | `events`    | `u64` (LSN)    | framed `LogRecord`                     |
//! | `snapshots` | `u64` (LSN)    | framed `SnapshotRecord`                |
//! | `payloads`  | `&str` (job)   | framed opaque bytes                    |
//!
//! Each [`EventStore::commit`] is one redb write transaction with `Durability::Immediate`: redb
//! fsyncs before `commit` returns, and a crash during that fsync rolls the whole transaction back
//! on the next open (redb's 1PC+C). Following redb's own audit, this module never uses
//! savepoints, table deletion or renaming, and never catches a panic around a write transaction.

use crate::codec::{self, CodecError};
use crate::{Batch, EventStore, Lsn, Recovered, StoreError};
use redb::{
    Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition,
    TableError,
};
use std::fs::File;
use std::path::{Path, PathBuf};

/// The file inside the data directory.
pub const DB_FILE_NAME: &str = "fairway.redb";

/// The on-disk format this build writes and the newest it reads. Bump it (and teach
/// [`RedbStore::open`] to upgrade) whenever the tables or their meaning change.
pub const FORMAT_VERSION: u64 = 1;

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
const SNAPSHOTS: TableDefinition<u64, &[u8]> = TableDefinition::new("snapshots");
const PAYLOADS: TableDefinition<&str, &[u8]> = TableDefinition::new("payloads");
const FORMAT_KEY: &str = "format_version";

/// The embedded [`EventStore`]: a data directory holding one redb file.
pub struct RedbStore {
    db: Database,
    dir: PathBuf,
    last_lsn: Lsn,
    snapshot_lsn: Option<Lsn>,
    poisoned: bool,
    fail_next_commit: bool,
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore")
            .field("dir", &self.dir)
            .field("last_lsn", &self.last_lsn)
            .field("snapshot_lsn", &self.snapshot_lsn)
            .field("poisoned", &self.poisoned)
            .finish()
    }
}

impl RedbStore {
    /// Opens the store in `dir`, creating the directory and an empty store if needed.
    ///
    /// Refuses a store written in a newer format ([`StoreError::NewerFormat`]) before writing
    /// anything to it. Opening does not read the log; call [`EventStore::recover`] for that.
    pub fn open(dir: &Path) -> Result<RedbStore, StoreError> {
        let created_dir = !dir.exists();
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            context: format!("creating data directory {}", dir.display()),
            source,
        })?;
        let path = dir.join(DB_FILE_NAME);
        let db = Database::create(&path)
            .map_err(|e| StoreError::backend(&format!("opening {}", path.display()), e))?;
        // A new file's directory entry is durable only once its directory is synced; without
        // this a power loss could lose the whole file even after its first commit was fsynced.
        // Synced on every open, not only on creation, in case the last run died in between.
        sync_dir(dir)?;
        if created_dir && let Some(parent) = dir.parent() {
            sync_dir(parent)?;
        }

        let format = read_format(&db)?;
        match format {
            Some(found) if found > FORMAT_VERSION => {
                return Err(StoreError::NewerFormat {
                    found,
                    supported: FORMAT_VERSION,
                });
            }
            Some(_) => {}
            None => init_tables(&db)?,
        }

        let read = db
            .begin_read()
            .map_err(|e| StoreError::backend("reading the log bounds", e))?;
        let events = read
            .open_table(EVENTS)
            .map_err(|e| StoreError::backend("opening table events", e))?;
        let snapshots = read
            .open_table(SNAPSHOTS)
            .map_err(|e| StoreError::backend("opening table snapshots", e))?;
        let last_event = events
            .last()
            .map_err(|e| StoreError::backend("reading the last event", e))?
            .map(|(k, _)| k.value());
        let snapshot_lsn = snapshots
            .last()
            .map_err(|e| StoreError::backend("reading the last snapshot", e))?
            .map(|(k, _)| k.value());
        // Events are pruned only up to a snapshot, so the log ends at whichever is later.
        let last_lsn = last_event.unwrap_or(0).max(snapshot_lsn.unwrap_or(0));
        drop(events);
        drop(snapshots);
        drop(read);
        Ok(RedbStore {
            db,
            dir: dir.to_owned(),
            last_lsn,
            snapshot_lsn,
            poisoned: false,
            fail_next_commit: false,
        })
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Test hook: the next non-empty [`EventStore::commit`] fails after writing its records
    /// into the transaction but before committing it, so the transaction is dropped (aborted).
    #[doc(hidden)]
    pub fn fail_next_commit(&mut self) {
        self.fail_next_commit = true;
    }

    /// Test hook: how many event records are physically stored (pruned ones are gone).
    #[doc(hidden)]
    pub fn stored_event_count(&self) -> Result<u64, StoreError> {
        let read = self
            .db
            .begin_read()
            .map_err(|e| StoreError::backend("counting events", e))?;
        let events = read
            .open_table(EVENTS)
            .map_err(|e| StoreError::backend("opening table events", e))?;
        events
            .len()
            .map_err(|e| StoreError::backend("counting events", e))
    }

    /// Test hook: rewrites the stored frame of the event (or, with `snapshot`, the snapshot) at
    /// `lsn` in a closed store's directory. `edit` gets the frame and returns the new one, or
    /// `None` to delete the record. Returns whether a record was there.
    #[doc(hidden)]
    pub fn tamper(
        dir: &Path,
        lsn: Lsn,
        snapshot: bool,
        edit: impl FnOnce(Vec<u8>) -> Option<Vec<u8>>,
    ) -> Result<bool, StoreError> {
        let db = Database::create(dir.join(DB_FILE_NAME))
            .map_err(|e| StoreError::backend("opening for tampering", e))?;
        let txn = db
            .begin_write()
            .map_err(|e| StoreError::backend("tampering", e))?;
        let found;
        {
            let mut table = txn
                .open_table(if snapshot { SNAPSHOTS } else { EVENTS })
                .map_err(|e| StoreError::backend("tampering", e))?;
            let old = table
                .remove(lsn)
                .map_err(|e| StoreError::backend("tampering", e))?
                .map(|v| v.value().to_vec());
            found = old.is_some();
            if let Some(new) = old.and_then(edit) {
                table
                    .insert(lsn, new.as_slice())
                    .map_err(|e| StoreError::backend("tampering", e))?;
            }
        }
        txn.commit()
            .map_err(|e| StoreError::backend("tampering", e))?;
        Ok(found)
    }

    fn check_poisoned(&self) -> Result<(), StoreError> {
        if self.poisoned {
            Err(StoreError::Poisoned)
        } else {
            Ok(())
        }
    }

    fn commit_inner(&mut self, batch: &Batch) -> Result<Lsn, StoreError> {
        // Encode everything before the transaction starts: a record that cannot be framed fails
        // the commit without touching the file.
        let frames = batch
            .events
            .iter()
            .map(codec::encode_event)
            .collect::<Result<Vec<_>, CodecError>>()
            .map_err(StoreError::Encode)?;
        let payloads = batch
            .put_payloads
            .iter()
            .map(|(job, bytes)| Ok((job.as_str(), codec::encode_blob(bytes)?)))
            .collect::<Result<Vec<_>, CodecError>>()
            .map_err(StoreError::Encode)?;

        let mut txn = self
            .db
            .begin_write()
            .map_err(|e| StoreError::backend("beginning a commit", e))?;
        txn.set_durability(Durability::Immediate)
            .map_err(|e| StoreError::backend("setting durability", e))?;
        let first = self.last_lsn + 1;
        {
            let mut events = txn
                .open_table(EVENTS)
                .map_err(|e| StoreError::backend("opening table events", e))?;
            for (lsn, frame) in (first..).zip(&frames) {
                events
                    .insert(lsn, frame.as_slice())
                    .map_err(|e| StoreError::backend("appending an event", e))?;
            }
            let mut table = txn
                .open_table(PAYLOADS)
                .map_err(|e| StoreError::backend("opening table payloads", e))?;
            for (job, frame) in &payloads {
                table
                    .insert(*job, frame.as_slice())
                    .map_err(|e| StoreError::backend("storing a payload", e))?;
            }
            for job in &batch.delete_payloads {
                table
                    .remove(job.as_str())
                    .map_err(|e| StoreError::backend("deleting a payload", e))?;
            }
        }
        if std::mem::take(&mut self.fail_next_commit) {
            // Dropping `txn` here aborts it, as any error above does.
            return Err(StoreError::Injected);
        }
        txn.commit()
            .map_err(|e| StoreError::backend("committing", e))?;
        Ok(self.last_lsn + frames.len() as u64)
    }

    fn put_snapshot_inner(&mut self, lsn: Lsn, bytes: &[u8]) -> Result<(), StoreError> {
        crate::check_snapshot_lsn(lsn, self.last_lsn, self.snapshot_lsn)?;
        let frame = codec::encode_snapshot(bytes).map_err(StoreError::Encode)?;
        let mut txn = self
            .db
            .begin_write()
            .map_err(|e| StoreError::backend("beginning a snapshot", e))?;
        txn.set_durability(Durability::Immediate)
            .map_err(|e| StoreError::backend("setting durability", e))?;
        {
            let mut snapshots = txn
                .open_table(SNAPSHOTS)
                .map_err(|e| StoreError::backend("opening table snapshots", e))?;
            snapshots
                .insert(lsn, frame.as_slice())
                .map_err(|e| StoreError::backend("storing a snapshot", e))?;
            // Pruning in the same transaction: the snapshot and the pruning become durable
            // together, so there is never a moment with neither the events nor the snapshot.
            snapshots
                .retain_in(..lsn, |_, _| false)
                .map_err(|e| StoreError::backend("pruning older snapshots", e))?;
            let mut events = txn
                .open_table(EVENTS)
                .map_err(|e| StoreError::backend("opening table events", e))?;
            events
                .retain_in(..=lsn, |_, _| false)
                .map_err(|e| StoreError::backend("pruning events", e))?;
        }
        txn.commit()
            .map_err(|e| StoreError::backend("committing a snapshot", e))?;
        Ok(())
    }
}

impl EventStore for RedbStore {
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
                // redb's own rule one level up: after a failed commit the outcome on disk is
                // unknown (it may even have become durable) and the engine is ahead of the disk.
                self.poisoned = true;
                Err(e)
            }
        }
    }

    fn put_snapshot(&mut self, lsn: Lsn, bytes: &[u8]) -> Result<(), StoreError> {
        self.check_poisoned()?;
        match self.put_snapshot_inner(lsn, bytes) {
            Ok(()) => {
                self.snapshot_lsn = Some(lsn);
                Ok(())
            }
            Err(e) => {
                self.poisoned = true;
                Err(e)
            }
        }
    }

    fn recover(&mut self) -> Result<Recovered, StoreError> {
        self.check_poisoned()?;
        let read = self
            .db
            .begin_read()
            .map_err(|e| StoreError::backend("beginning recovery", e))?;
        let snapshots = read
            .open_table(SNAPSHOTS)
            .map_err(|e| StoreError::backend("opening table snapshots", e))?;
        let events = read
            .open_table(EVENTS)
            .map_err(|e| StoreError::backend("opening table events", e))?;
        let snapshot = snapshots
            .last()
            .map_err(|e| StoreError::backend("reading the latest snapshot", e))?;
        let snapshot = snapshot.as_ref().map(|(k, v)| (k.value(), v.value()));
        let from = snapshot.map_or(1, |(lsn, _)| lsn + 1);
        let range = events
            .range(from..)
            .map_err(|e| StoreError::backend("reading events", e))?;
        let recovered = crate::recover_from_frames(
            snapshot,
            range.map(|item| {
                item.map(|(k, v)| (k.value(), v.value().to_vec()))
                    .map_err(|e| StoreError::backend("reading events", e))
            }),
        )?;
        // The log must reach the last LSN this store committed: a shortened tail is a loss.
        if recovered.last_lsn() < self.last_lsn {
            return Err(StoreError::Corrupt {
                lsn: recovered.last_lsn() + 1,
                reason: crate::CorruptReason::Missing,
            });
        }
        Ok(recovered)
    }

    fn payload(&self, job: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.check_poisoned()?;
        let read = self
            .db
            .begin_read()
            .map_err(|e| StoreError::backend("reading a payload", e))?;
        let table = read
            .open_table(PAYLOADS)
            .map_err(|e| StoreError::backend("opening table payloads", e))?;
        let Some(value) = table
            .get(job)
            .map_err(|e| StoreError::backend("reading a payload", e))?
        else {
            return Ok(None);
        };
        codec::decode_blob(value.value())
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

/// The format version in `meta`, or `None` for a file that has never been initialized.
fn read_format(db: &Database) -> Result<Option<u64>, StoreError> {
    let read = db
        .begin_read()
        .map_err(|e| StoreError::backend("reading the format version", e))?;
    let meta = match read.open_table(META) {
        Ok(meta) => meta,
        Err(TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(StoreError::backend("opening table meta", e)),
    };
    let version = meta
        .get(FORMAT_KEY)
        .map_err(|e| StoreError::backend("reading the format version", e))?
        .map(|v| v.value());
    match version {
        Some(v) => Ok(Some(v)),
        None => Err(StoreError::Backend {
            context: "reading the format version".into(),
            message: "table meta exists but has no format_version: not a fairway store".into(),
        }),
    }
}

/// Creates the tables and records the format version, in one durable transaction.
fn init_tables(db: &Database) -> Result<(), StoreError> {
    let mut txn = db
        .begin_write()
        .map_err(|e| StoreError::backend("initializing the store", e))?;
    txn.set_durability(Durability::Immediate)
        .map_err(|e| StoreError::backend("setting durability", e))?;
    {
        let mut meta = txn
            .open_table(META)
            .map_err(|e| StoreError::backend("creating table meta", e))?;
        meta.insert(FORMAT_KEY, FORMAT_VERSION)
            .map_err(|e| StoreError::backend("writing the format version", e))?;
        txn.open_table(EVENTS)
            .map_err(|e| StoreError::backend("creating table events", e))?;
        txn.open_table(SNAPSHOTS)
            .map_err(|e| StoreError::backend("creating table snapshots", e))?;
        txn.open_table(PAYLOADS)
            .map_err(|e| StoreError::backend("creating table payloads", e))?;
    }
    txn.commit()
        .map_err(|e| StoreError::backend("initializing the store", e))
}

/// Makes a directory's entries durable.
fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| StoreError::Io {
            context: format!("syncing directory {}", dir.display()),
            source,
        })
}

/// Test hook: writes a newer format version into a closed store, to test that it is refused.
#[doc(hidden)]
pub fn set_format_version_for_test(dir: &Path, version: u64) -> Result<(), StoreError> {
    let db =
        Database::create(dir.join(DB_FILE_NAME)).map_err(|e| StoreError::backend("opening", e))?;
    let txn = db
        .begin_write()
        .map_err(|e| StoreError::backend("writing meta", e))?;
    {
        let mut meta = txn
            .open_table(META)
            .map_err(|e| StoreError::backend("writing meta", e))?;
        meta.insert(FORMAT_KEY, version)
            .map_err(|e| StoreError::backend("writing meta", e))?;
    }
    txn.commit()
        .map_err(|e| StoreError::backend("writing meta", e))
}
