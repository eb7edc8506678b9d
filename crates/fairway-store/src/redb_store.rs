//! The embedded backend: one redb file in a data directory, and the latest snapshot in a file
//! beside it.
//!
//! Tables (all keys fixed-width or short, all values framed by [`crate::codec`]):
//!
//! | table       | key            | value                                  |
//! | ----------- | -------------- | -------------------------------------- |
//! | `meta`      | `&str`         | `u64`: `format_version`; `snapshot_lsn`, the LSN of the snapshot file in force; `wal_seq`, the number of the last commit |
//! | `events`    | `u64` (LSN)    | framed `LogRecord`: a group commit's events (`V2`), keyed by the LSN of its first; one event (`V1`) in files of format 1 |
//! | `snapshots` | `u64` (LSN)    | framed `SnapshotRecord`, in files of format 2 only (until their next snapshot) |
//! | `payloads`  | `&str` (job)   | framed opaque bytes                    |
//!
//! **Snapshots are files** (`snapshot-<LSN>.fws`, one framed `SnapshotRecord`), not redb
//! values: a snapshot of a large state is tens of megabytes, and redb stored one as a single
//! value, copying it into pages and, to delete the one before, reading that back, all while
//! the commits waited. [`EventStore::put_snapshot`] writes the file under a temporary name,
//! syncs it, renames it and syncs the directory; only then does one redb transaction record
//! its LSN in `meta` and prune the events it covers. A crash before that transaction leaves
//! the previous snapshot and the events in force, and the new file is deleted on the next
//! open, as are files older than the one in force.
//!
//! Each [`EventStore::commit`] is one redb write transaction that inserts one record for all of
//! its events (and one per payload put or delete) and records the commit's number in `meta`
//! (`wal_seq`). It is made durable by the **write-ahead log** beside the file ([`crate::wal`]):
//! the same writes as one record, appended and synced; the transaction itself runs later, on
//! a thread of its own, batched with the next commits' into one `Durability::None` transaction
//! ([`crate::applier`]).
//! A commit whose record would take the log past its limit is a
//! **checkpoint** instead, committed with `Durability::Immediate` (redb fsyncs before `commit`
//! returns, and a crash during that fsync rolls the whole transaction back on the next open:
//! redb's 1PC+C), after which the log starts again; so is every snapshot, and a clean close.
//! [`RedbStore::open`] replays the log's records past the durable `wal_seq` into redb in one
//! durable transaction. Following redb's own audit, this module never uses savepoints, table
//! deletion or renaming, and never catches a panic around a write transaction.

use crate::applier::{Applier, Pending};
use crate::codec::{self, CodecError};
use crate::wal::{self, Entry, WAL_LIMIT, Wal};
use crate::{Batch, EventStore, Lsn, Recovered, SnapshotBytes, StoreError};
use redb::{
    Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition,
    TableError,
};
use std::borrow::Borrow;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The file inside the data directory.
pub const DB_FILE_NAME: &str = "fairway.redb";

/// The on-disk format this build writes and the newest it reads. Bump it (and teach
/// [`RedbStore::open`] to upgrade) whenever the tables or their meaning change.
///
/// - 1: one `V1` log record (one event) per LSN in `events`.
/// - 2: one log record per group commit, keyed by the LSN of its first event: `V2` (a group)
///   as this build writes them, or `V1` (one event). A file of format 1 is therefore a file of
///   format 2 already; opening one records the new version, and rewrites nothing else.
/// - 3: snapshots in files beside the database, the one in force named by `meta`'s
///   `snapshot_lsn`. A file of format 2 keeps its snapshot in table `snapshots`, which
///   recovery still reads, until the next snapshot replaces it.
/// - 4: commits made durable by the write-ahead log `fairway.wal`, numbered by `meta`'s
///   `wal_seq`. A build that does not know the log would lose the commits it holds, so it must
///   refuse the file; a file of format 3 has no log and is one of format 4 already.
/// - 5: the log in two files, `fairway.wal` and `fairway.wal.2` (the log moves between them at
///   durable points, see [`Wal`]). A build of format 4 would read the first only and lose the
///   commits the second holds, so it must refuse the file; a file of format 4 has one log
///   file and is one of format 5 already.
pub const FORMAT_VERSION: u64 = 5;

/// redb's page cache. redb keeps every page it writes in it (up to this size), but the store
/// reads back only payloads (recent ones, as jobs are leased) and, once at start, the log: a
/// larger cache would mostly hold pages nobody reads, resident (docs/store.md measures it).
/// Pages beyond it are read from the file (the OS's page cache).
pub const CACHE_BYTES: usize = 16 << 20;

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
const SNAPSHOTS: TableDefinition<u64, &[u8]> = TableDefinition::new("snapshots");
const PAYLOADS: TableDefinition<&str, &[u8]> = TableDefinition::new("payloads");
const FORMAT_KEY: &str = "format_version";
const SNAPSHOT_KEY: &str = "snapshot_lsn";
const WAL_SEQ_KEY: &str = "wal_seq";

/// The snapshot file of `lsn` in `dir`.
fn snapshot_path(dir: &Path, lsn: Lsn) -> PathBuf {
    dir.join(format!("snapshot-{lsn:020}.fws"))
}

/// The LSN a snapshot file's name holds (`snapshot-<LSN>.fws`), or `None` for another file.
fn snapshot_file_lsn(name: &str) -> Option<Lsn> {
    name.strip_prefix("snapshot-")?
        .strip_suffix(".fws")?
        .parse()
        .ok()
}

/// Writes `parts`, one after the other, as the file `path`, durably: a temporary file beside
/// it, synced, renamed over it, and the directory synced. A crash leaves either no file (or the
/// old one) or all of it.
fn write_durably(dir: &Path, path: &Path, parts: &[&[u8]]) -> Result<(), StoreError> {
    use std::io::Write;
    let tmp = path.with_extension("fws.tmp");
    let io = |context: &str, at: &Path| {
        let context = format!("{context} {}", at.display());
        move |source| StoreError::Io { context, source }
    };
    let mut file = File::create(&tmp).map_err(io("creating", &tmp))?;
    for part in parts {
        file.write_all(part).map_err(io("writing", &tmp))?;
    }
    file.sync_data().map_err(io("syncing", &tmp))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(io("renaming into place", &tmp))?;
    sync_dir(dir)
}

/// Writes the snapshot file of `lsn` durably: the frame's head, then the engine's state as it
/// is, its pieces one after the other (no copy of the state into one frame). The file is whole
/// and durable before anything refers to it.
fn write_snapshot_file(dir: &Path, lsn: Lsn, pieces: &[&[u8]]) -> Result<(), StoreError> {
    let head = codec::snapshot_frame_head(pieces).map_err(StoreError::Encode)?;
    let parts: Vec<&[u8]> = std::iter::once(head.as_slice())
        .chain(pieces.iter().copied())
        .collect();
    write_durably(dir, &snapshot_path(dir, lsn), &parts)
}

/// Deletes the snapshot files (and temporary ones) of `dir` other than `keep`'s: superseded
/// ones, and any written by a run that crashed before recording it. Best effort: a file left
/// over is deleted on a later call.
fn delete_other_snapshot_files(dir: &Path, keep: Option<Lsn>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let stale = if let Some(lsn) = snapshot_file_lsn(name) {
            Some(lsn) != keep
        } else {
            name.starts_with("snapshot-") && name.ends_with(".fws.tmp")
        };
        if stale {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The embedded [`EventStore`]: a data directory holding one redb file.
pub struct RedbStore {
    /// Shared with the applier thread, which writes the commits into it.
    db: Arc<Database>,
    dir: PathBuf,
    last_lsn: Lsn,
    snapshot_lsn: Option<Lsn>,
    poisoned: Cell<bool>,
    fail_next_commit: bool,
    /// The commits durable in the log that redb does not hold yet (a `RefCell` so that
    /// reads, which take `&self`, can index them).
    applier: RefCell<Applier>,
    wal: Wal,
    /// The number of the last commit (durable in the log or in redb).
    wal_seq: u64,
    /// A snapshot whose file is being written while commits go on
    /// ([`EventStore::stage_snapshot`]).
    staged: Option<Staged>,
    /// A durable point the applier thread is making: a snapshot whose file is written, put in
    /// force, with its bytes (freed once it is in force, as [`Staged`] says), or none, for the
    /// log alone.
    installing: Option<(Option<Lsn>, Option<SnapshotBytes>)>,
}

/// A staged snapshot: its LSN, and the thread writing its file, which hands the bytes back.
/// They are freed once the snapshot is in force, after redb holds every commit before it, as
/// `put_snapshot`'s are: the server returns freed memory to the OS as they are freed, and
/// freed before the applier's drain a filled server held 6 to 19 more bytes a job
/// (BENCHMARKS.md, item 52).
struct Staged {
    lsn: Lsn,
    writing: std::thread::JoinHandle<(Result<(), StoreError>, SnapshotBytes)>,
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore")
            .field("dir", &self.dir)
            .field("last_lsn", &self.last_lsn)
            .field("snapshot_lsn", &self.snapshot_lsn)
            .field("poisoned", &self.poisoned.get())
            .field("wal_seq", &self.wal_seq)
            .field("staged", &self.staged.as_ref().map(|s| s.lsn))
            .field("installing", &self.installing.as_ref().map(|(lsn, _)| *lsn))
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
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(&path)
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
            Some(FORMAT_VERSION) => {}
            Some(_) => write_format(&db, FORMAT_VERSION, "upgrading the store's format")?,
            None => init_tables(&db)?,
        }
        // Before anything reads the tables: the commits only the log holds go into redb.
        let (mut wal, contents) = Wal::open(dir)?;
        let wal_seq = replay_wal(&db, &contents, read_wal_seq(&db)?)?;
        drop(contents);
        wal.restart();
        // The log's directory entry, if it was just created (redb's file is synced below).
        sync_dir(dir)?;

        let read = db
            .begin_read()
            .map_err(|e| StoreError::backend("reading the log bounds", e))?;
        let events = read
            .open_table(EVENTS)
            .map_err(|e| StoreError::backend("opening table events", e))?;
        let snapshots = read
            .open_table(SNAPSHOTS)
            .map_err(|e| StoreError::backend("opening table snapshots", e))?;
        // The last record's first LSN, plus the events after its first. A damaged last record
        // counts as one event here; recovery refuses it anyway.
        let last_event = events
            .last()
            .map_err(|e| StoreError::backend("reading the last event", e))?
            .map(|(k, v)| k.value() + codec::record_len(v.value()).unwrap_or(1).max(1) - 1);
        let in_table = snapshots
            .last()
            .map_err(|e| StoreError::backend("reading the last snapshot", e))?
            .map(|(k, _)| k.value());
        let in_file = snapshot_file_in_force(&read)?;
        let snapshot_lsn = in_table.max(in_file);
        // Events are pruned only up to a snapshot, so the log ends at whichever is later.
        let last_lsn = last_event.unwrap_or(0).max(snapshot_lsn.unwrap_or(0));
        drop(events);
        drop(snapshots);
        drop(read);
        delete_other_snapshot_files(dir, in_file);
        let db = Arc::new(db);
        let applier = Applier::start(db.clone(), wal_seq)?;
        Ok(RedbStore {
            db,
            dir: dir.to_owned(),
            last_lsn,
            snapshot_lsn,
            poisoned: Cell::new(false),
            fail_next_commit: false,
            applier: RefCell::new(applier),
            wal,
            wal_seq,
            staged: None,
            installing: None,
        })
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Test hook: the next non-empty [`EventStore::commit`] fails before writing anything, as
    /// if its transaction had been aborted.
    #[doc(hidden)]
    pub fn fail_next_commit(&mut self) {
        self.fail_next_commit = true;
    }

    /// Test hook: how many events the stored records hold (pruned ones are gone).
    #[doc(hidden)]
    pub fn stored_event_count(&self) -> Result<u64, StoreError> {
        self.apply_unapplied()?;
        self.read_events("counting events", |events| {
            let mut count = 0;
            for record in events
                .iter()
                .map_err(|e| StoreError::backend("counting events", e))?
            {
                let (_, value) = record.map_err(|e| StoreError::backend("counting events", e))?;
                count += codec::record_len(value.value()).unwrap_or(1);
            }
            Ok(count)
        })
    }

    /// Test hook: the format version the file records.
    #[doc(hidden)]
    pub fn stored_format_version(&self) -> Result<Option<u64>, StoreError> {
        self.apply_unapplied()?;
        read_format(&self.db)
    }

    /// Test hook: how many log records are stored (one per group commit).
    #[doc(hidden)]
    pub fn stored_record_count(&self) -> Result<u64, StoreError> {
        self.apply_unapplied()?;
        self.read_events("counting records", |events| {
            events
                .len()
                .map_err(|e| StoreError::backend("counting records", e))
        })
    }

    /// Runs `read` on the events table in a read transaction.
    fn read_events<T>(
        &self,
        context: &str,
        read: impl FnOnce(&redb::ReadOnlyTable<u64, &[u8]>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let txn = self
            .db
            .begin_read()
            .map_err(|e| StoreError::backend(context, e))?;
        let events = txn
            .open_table(EVENTS)
            .map_err(|e| StoreError::backend("opening table events", e))?;
        read(&events)
    }

    /// Test hook: rewrites the stored frame of the event (or, with `snapshot`, the snapshot) at
    /// `lsn` in a closed store's directory. `edit` gets the frame and returns the new one, or
    /// `None` to delete the record. The group record holding the event is first split into
    /// one `V1` record per event (a valid layout: format 1's), so that the edit hits that event
    /// alone. Returns whether a record was there.
    #[doc(hidden)]
    pub fn tamper(
        dir: &Path,
        lsn: Lsn,
        snapshot: bool,
        edit: impl FnOnce(Vec<u8>) -> Option<Vec<u8>>,
    ) -> Result<bool, StoreError> {
        Self::tamper_inner(dir, lsn, snapshot, !snapshot, edit)
    }

    /// Test hook: rewrites the stored log record keyed `first` (a whole group) in a closed
    /// store's directory, as [`RedbStore::tamper`] does, without splitting it.
    #[doc(hidden)]
    pub fn tamper_record(
        dir: &Path,
        first: Lsn,
        edit: impl FnOnce(Vec<u8>) -> Option<Vec<u8>>,
    ) -> Result<bool, StoreError> {
        Self::tamper_inner(dir, first, false, false, edit)
    }

    fn tamper_inner(
        dir: &Path,
        lsn: Lsn,
        snapshot: bool,
        split: bool,
        edit: impl FnOnce(Vec<u8>) -> Option<Vec<u8>>,
    ) -> Result<bool, StoreError> {
        let file = snapshot_path(dir, lsn);
        if snapshot && file.exists() {
            let io = |source| StoreError::Io {
                context: format!("tampering with {}", file.display()),
                source,
            };
            let old = std::fs::read(&file).map_err(io)?;
            match edit(old) {
                Some(new) => std::fs::write(&file, new).map_err(io)?,
                None => std::fs::remove_file(&file).map_err(io)?,
            }
            return Ok(true);
        }
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
            if split {
                split_group_holding(&mut table, lsn)?;
            }
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

    /// Test hook: the bytes in the write-ahead log since the last checkpoint.
    #[doc(hidden)]
    pub fn wal_bytes(&self) -> u64 {
        self.wal.tail()
    }

    /// Makes every commit durable in redb itself (one durable transaction) and starts the
    /// write-ahead log again: a reopen then has nothing to replay.
    pub fn checkpoint(&mut self) -> Result<(), StoreError> {
        self.apply_unapplied()?;
        // A durable commit persists the non-durable ones before it.
        let result = make_durable(&self.db, self.wal_seq);
        self.poison_on_error(result)?;
        self.wal.restart();
        Ok(())
    }

    /// Moves the staged snapshot on towards being in force, without making commits wait for
    /// redb: once its file is written, the applier thread is asked to put it in force after
    /// the commits taken so far (a durable point, see `crate::applier`); once it has, the
    /// snapshot is in force here too, and the log starts again or moves to its other file
    /// ([`Wal::switch`]). With `wait`, waits for every step; else takes only those already
    /// done. A failure of any poisons the store.
    ///
    /// Done on the store thread, the applier's drain and the durable transaction held every
    /// commit for 40 to 55 ms at each snapshot (on machine AA of BENCHMARKS.md, item 76:
    /// tenant B's 200 jobs waited that long behind tenant A's 20,000 in 6 runs of 10).
    fn settle(&mut self, wait: bool) -> Result<(), StoreError> {
        loop {
            if self.installing.is_some() {
                let result = self.applier.get_mut().installed(wait);
                let Some((lsn, through)) = self.poison_on_error(result)? else {
                    return Ok(());
                };
                // Freed last, as `put_snapshot`'s are: their owner learns then that the
                // snapshot's work is over (and the server returns what it freed to the OS).
                self.installing = None;
                if lsn.is_some() {
                    self.snapshot_lsn = lsn;
                }
                let result = self.wal.switch(through);
                self.poison_on_error(result)?;
            }
            let Some(staged) = self.staged.take_if(|s| wait || s.writing.is_finished()) else {
                return Ok(());
            };
            let (written, bytes) = match staged.writing.join() {
                Ok((written, bytes)) => (written, Some(bytes)),
                Err(_) => {
                    let panicked = StoreError::Backend {
                        context: format!("writing the snapshot at LSN {}", staged.lsn),
                        message: "its writer thread panicked".into(),
                    };
                    (Err(panicked), None)
                }
            };
            let result =
                written.and_then(|()| self.applier.get_mut().install(Some(staged.lsn), &self.dir));
            self.poison_on_error(result)?;
            self.installing = Some((Some(staged.lsn), bytes));
            if !wait {
                return Ok(());
            }
        }
    }

    fn check_poisoned(&self) -> Result<(), StoreError> {
        crate::unpoisoned(self.poisoned.get())
    }

    /// `result`, poisoning the store when it is an error.
    fn poison_on_error<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        let mut poisoned = self.poisoned.get();
        let result = crate::poison_on_error(&mut poisoned, result);
        self.poisoned.set(poisoned);
        result
    }

    /// Returns once redb holds every commit (the applier drained). Takes `&self` so that the
    /// test hooks that read redb can call it.
    fn apply_unapplied(&self) -> Result<(), StoreError> {
        self.check_poisoned()?;
        let result = self.applier.borrow_mut().drain();
        self.poison_on_error(result)
    }

    fn commit_inner(&mut self, batch: &Batch) -> Result<Lsn, StoreError> {
        // Encode everything before the transaction starts: a record that cannot be framed fails
        // the commit without touching the file. The events are one record.
        let record = if batch.events.is_empty() {
            None
        } else {
            Some(codec::encode_events(&batch.events).map_err(StoreError::Encode)?)
        };
        let puts = batch
            .put_payloads
            .iter()
            .map(|(job, bytes)| Ok((job.clone(), codec::encode_blob(bytes)?)))
            .collect::<Result<Vec<_>, CodecError>>()
            .map_err(StoreError::Encode)?;
        let entry = Entry {
            seq: self.wal_seq + 1,
            first_lsn: self.last_lsn + 1,
            events: record,
            puts,
            deletes: batch.delete_payloads.clone(),
        };
        if std::mem::take(&mut self.fail_next_commit) {
            // Nothing written: as if the transaction had been aborted.
            return Err(StoreError::Injected);
        }
        // A failed redb transaction surfaces before the log takes anything more.
        self.applier.get_mut().check_failed()?;
        let logged = wal::encode(&entry)?;
        if self.wal.fits(logged.len()) {
            self.wal.append(&logged, entry.seq)?;
            drop(logged);
            // Durable: its redb transaction can wait (see `crate::applier`).
            self.wal_seq = entry.seq;
            self.applier.get_mut().push(entry)?;
            if self.wal.active_tail() >= WAL_LIMIT / 2 && self.installing.is_none() {
                // Half full: a durable point in redb, on the applier thread, lets the log move
                // to its other file before this one fills (a checkpoint here would hold this
                // thread, and every commit behind it, for the drain and the sync).
                self.applier.get_mut().install(None, &self.dir)?;
                self.installing = Some((None, None));
            }
        } else {
            // A checkpoint: redb itself makes this commit, and every one before, durable.
            drop(logged);
            self.apply_unapplied()?;
            write_entries(
                &self.db,
                std::slice::from_ref(&entry),
                Durability::Immediate,
            )?;
            self.wal_seq = entry.seq;
            self.wal.restart();
        }
        Ok(self.last_lsn + batch.events.len() as u64)
    }

    fn put_snapshot_inner(&mut self, lsn: Lsn, bytes: &[u8]) -> Result<(), StoreError> {
        crate::check_snapshot_lsn(lsn, self.last_lsn, self.snapshot_lsn)?;
        write_snapshot_file(&self.dir, lsn, &[bytes])?;
        install_snapshot(&self.db, &self.dir, lsn)?;
        // Every commit was applied first, and is durable with it: the log starts again.
        self.wal.restart();
        Ok(())
    }
}

/// Makes every commit `db` holds durable, up to commit `through`, the last: one durable
/// transaction. A checkpoint's (on the store thread), and the applier thread's for a durable
/// point without a snapshot.
pub(crate) fn make_durable(db: &Database, through: u64) -> Result<(), StoreError> {
    write_meta(
        db,
        WAL_SEQ_KEY,
        through,
        "making the commits durable in redb",
    )
}

/// Puts the snapshot whose file in `dir` is written at `lsn` in force in `db`: recorded, and
/// the events it covers and the older snapshots pruned, in one durable transaction, which makes
/// every commit redb holds durable too; then the other snapshot files are deleted. redb must
/// hold the commit of the event at `lsn` already. Called by the store thread
/// (`put_snapshot`) and by the applier thread (`stage_snapshot`).
pub(crate) fn install_snapshot(db: &Database, dir: &Path, lsn: Lsn) -> Result<(), StoreError> {
    let txn = begin(db, Durability::Immediate, "beginning a snapshot")?;
    {
        let mut meta = txn
            .open_table(META)
            .map_err(|e| StoreError::backend("opening table meta", e))?;
        meta.insert(SNAPSHOT_KEY, lsn)
            .map_err(|e| StoreError::backend("recording a snapshot", e))?;
        // Pruning in the same transaction: the snapshot and the pruning become durable
        // together, so there is never a moment with neither the events nor the snapshot.
        // A snapshot of format 2 in the table is older than this one.
        let mut snapshots = txn
            .open_table(SNAPSHOTS)
            .map_err(|e| StoreError::backend("opening table snapshots", e))?;
        snapshots
            .retain_in(0..=u64::MAX, |_, _| false)
            .map_err(|e| StoreError::backend("pruning older snapshots", e))?;
        let mut events = txn
            .open_table(EVENTS)
            .map_err(|e| StoreError::backend("opening table events", e))?;
        // Exact by LSN: a group holding events on both sides of `lsn` keeps those after
        // it, as a group of its own keyed `lsn + 1`.
        let kept = after_in_group(&events, lsn)?;
        events
            .retain_in(..=lsn, |_, _| false)
            .map_err(|e| StoreError::backend("pruning events", e))?;
        if let Some(kept) = kept {
            events
                .insert(lsn + 1, kept.as_slice())
                .map_err(|e| StoreError::backend("pruning events", e))?;
        }
    }
    txn.commit()
        .map_err(|e| StoreError::backend("committing a snapshot", e))?;
    delete_other_snapshot_files(dir, Some(lsn));
    Ok(())
}

/// The LSN `meta` records for the snapshot file in force, if any.
fn snapshot_file_in_force(read: &redb::ReadTransaction) -> Result<Option<Lsn>, StoreError> {
    read_meta(read, SNAPSHOT_KEY, "reading the snapshot in force")
}

/// `key`'s value in `meta`, if it is set.
fn read_meta(
    read: &redb::ReadTransaction,
    key: &str,
    context: &str,
) -> Result<Option<u64>, StoreError> {
    let meta = read
        .open_table(META)
        .map_err(|e| StoreError::backend("opening table meta", e))?;
    Ok(meta
        .get(key)
        .map_err(|e| StoreError::backend(context, e))?
        .map(|v| v.value()))
}

impl EventStore for RedbStore {
    fn commit(&mut self, batch: &Batch) -> Result<Lsn, StoreError> {
        self.check_poisoned()?;
        self.settle(false)?;
        if batch.is_empty() {
            return Ok(self.last_lsn);
        }
        let result = self.commit_inner(batch);
        self.last_lsn = self.poison_on_error(result)?;
        Ok(self.last_lsn)
    }

    fn put_snapshot(&mut self, lsn: Lsn, bytes: &[u8]) -> Result<(), StoreError> {
        self.settle(true)?;
        self.apply_unapplied()?;
        let result = self.put_snapshot_inner(lsn, bytes);
        self.poison_on_error(result)?;
        self.snapshot_lsn = Some(lsn);
        Ok(())
    }

    /// The file is written by a thread of its own while commits go on (on a busy server it is
    /// tens of megabytes: the finished jobs remembered for idempotency); the store puts it in
    /// force at the first commit (or `settle_snapshot`) after the file is durable.
    fn stage_snapshot(&mut self, lsn: Lsn, bytes: SnapshotBytes) -> Result<(), StoreError> {
        self.settle(true)?;
        let result = crate::check_snapshot_lsn(lsn, self.last_lsn, self.snapshot_lsn);
        self.poison_on_error(result)?;
        let dir = self.dir.clone();
        let writing = std::thread::Builder::new()
            .name("fairway-snapshot".into())
            .spawn(move || (write_snapshot_file(&dir, lsn, &bytes.pieces()), bytes))
            .map_err(|source| StoreError::Io {
                context: "starting the snapshot's writer thread".into(),
                source,
            });
        let writing = self.poison_on_error(writing)?;
        self.staged = Some(Staged { lsn, writing });
        Ok(())
    }

    fn settle_snapshot(&mut self, wait: bool) -> Result<bool, StoreError> {
        self.settle(wait)?;
        Ok(self.staged.is_some() || self.installing.is_some())
    }

    fn recover(&mut self) -> Result<Recovered, StoreError> {
        self.settle(true)?;
        self.apply_unapplied()?;
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
        let in_table = snapshots
            .last()
            .map_err(|e| StoreError::backend("reading the latest snapshot", e))?;
        let in_table = in_table.as_ref().map(|(k, v)| (k.value(), v.value()));
        // The file in force, read whole; a missing or unreadable one is an error, never a
        // reason to fall back to an older state.
        let in_file = match snapshot_file_in_force(&read)? {
            Some(lsn) if in_table.is_none_or(|(t, _)| lsn >= t) => {
                let path = snapshot_path(&self.dir, lsn);
                let bytes = std::fs::read(&path).map_err(|source| StoreError::Io {
                    context: format!("reading the snapshot in force, {}", path.display()),
                    source,
                })?;
                Some((lsn, bytes))
            }
            _ => None,
        };
        let snapshot = match &in_file {
            Some((lsn, bytes)) => Some((*lsn, bytes.as_slice())),
            None => in_table,
        };
        let from = snapshot.map_or(1, |(lsn, _)| lsn + 1);
        // From the record holding `from` (a group may begin before it), to the end.
        let start = record_holding(&events, from, "reading events")?.map_or(from, |(k, _)| k);
        let range = events
            .range(start..)
            .map_err(|e| StoreError::backend("reading events", e))?;
        crate::recover_from_records(
            snapshot,
            range.map(|item| {
                item.map(|(k, v)| (k.value(), v.value().to_vec()))
                    .map_err(|e| StoreError::backend("reading events", e))
            }),
            self.last_lsn,
        )
    }

    fn payload(&self, job: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.payloads(&[job])?.pop().flatten())
    }

    fn payloads(&self, jobs: &[&str]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.check_poisoned()?;
        // The latest write of a payload is in memory until redb holds it (`crate::applier`);
        // only the others are read from redb, in one read transaction opened for the first.
        self.applier.borrow_mut().index_unapplied();
        let applier = self.applier.borrow();
        let mut table = None;
        let decode = |job: &str, frame: &[u8]| {
            codec::decode_blob(frame).map_err(|reason| StoreError::CorruptPayload {
                job: job.to_owned(),
                reason,
            })
        };
        jobs.iter()
            .map(|&job| match applier.pending(job) {
                Pending::Put(frame) => decode(job, frame).map(Some),
                Pending::Deleted => Ok(None),
                Pending::InRedb => {
                    if table.is_none() {
                        let read = self
                            .db
                            .begin_read()
                            .map_err(|e| StoreError::backend("reading payloads", e))?;
                        let opened = read
                            .open_table(PAYLOADS)
                            .map_err(|e| StoreError::backend("opening table payloads", e))?;
                        table = Some(opened);
                    }
                    let table = table.as_ref().expect("opened above");
                    let value = table
                        .get(job)
                        .map_err(|e| StoreError::backend("reading a payload", e))?;
                    value.map(|v| decode(job, v.value())).transpose()
                }
            })
            .collect()
    }

    fn last_lsn(&self) -> Lsn {
        self.last_lsn
    }
}

impl Drop for RedbStore {
    /// A clean close checkpoints, so that the next open replays nothing. Best effort: if it
    /// fails, the log still holds every commit.
    fn drop(&mut self) {
        // A staged snapshot is put in force if its file was written; if not, the store
        // recovers from the one before it and the events after.
        let _ = self.settle(true);
        if !self.poisoned.get() && self.wal.tail() > 0 {
            let _ = self.checkpoint();
        }
    }
}

/// The number of the last commit redb holds (`meta`'s `wal_seq`; 0 in a file that predates the
/// log).
fn read_wal_seq(db: &Database) -> Result<u64, StoreError> {
    let context = "reading the commit number";
    let read = db
        .begin_read()
        .map_err(|e| StoreError::backend(context, e))?;
    Ok(read_meta(&read, WAL_SEQ_KEY, context)?.unwrap_or(0))
}

/// Applies the write-ahead log's records past `durable` (the `wal_seq` of redb's last durable
/// commit) to redb in one durable transaction, and returns the number of the last commit.
fn replay_wal(db: &Database, contents: &[Vec<u8>], durable: u64) -> Result<u64, StoreError> {
    let contents: Vec<&[u8]> = contents.iter().map(Vec::as_slice).collect();
    let entries = wal::scan_files(&contents, durable)?;
    let Some(last) = entries.last().map(|e| e.seq) else {
        return Ok(durable);
    };
    write_entries(db, &entries, Durability::Immediate)?;
    Ok(last)
}

/// Makes the writes of `entries` (consecutive commits) in one transaction, exactly as their
/// commits meant them, and records the last one's number. Their events must go on from the
/// last stored record, each from the one before.
pub(crate) fn write_entries<E: Borrow<Entry>>(
    db: &Database,
    entries: &[E],
    durability: Durability,
) -> Result<(), StoreError> {
    let Some(last) = entries.last().map(|e| e.borrow().seq) else {
        return Ok(());
    };
    let context = "writing commits into redb";
    let txn = begin(db, durability, context)?;
    {
        let mut events = txn
            .open_table(EVENTS)
            .map_err(|e| StoreError::backend("opening table events", e))?;
        let mut payloads = txn
            .open_table(PAYLOADS)
            .map_err(|e| StoreError::backend("opening table payloads", e))?;
        let mut meta = txn
            .open_table(META)
            .map_err(|e| StoreError::backend("opening table meta", e))?;
        // The LSN after the last stored event (none stored: whatever the first record says).
        let mut next = events
            .last()
            .map_err(|e| StoreError::backend(context, e))?
            .map(|(k, v)| k.value() + codec::record_len(v.value()).unwrap_or(1));
        let mut last_writes: BTreeMap<&str, Option<&[u8]>> = BTreeMap::new();
        for entry in entries {
            let entry = entry.borrow();
            if let Some(record) = &entry.events {
                if let Some(expected) = next
                    && entry.first_lsn != expected
                {
                    return Err(StoreError::Corrupt {
                        lsn: expected.min(entry.first_lsn),
                        reason: crate::CorruptReason::Missing,
                    });
                }
                events
                    .insert(entry.first_lsn, record.as_slice())
                    .map_err(|e| StoreError::backend("appending the events", e))?;
                next = Some(entry.first_lsn + codec::record_len(record).unwrap_or(1));
            }
            // Within a commit the deletes apply after the puts.
            for (job, frame) in &entry.puts {
                last_writes.insert(job.as_str(), Some(frame.as_slice()));
            }
            for job in &entry.deletes {
                last_writes.insert(job.as_str(), None);
            }
        }
        // Each payload's last write only, in key order: a job accepted and ended within these
        // commits (most, under a steady load) costs a look-up of a missing key, not an insert
        // and a removal, and the result is the same as writing every write in order.
        for (job, write) in last_writes {
            match write {
                Some(frame) => payloads
                    .insert(job, frame)
                    .map_err(|e| StoreError::backend("storing a payload", e))?,
                None => payloads
                    .remove(job)
                    .map_err(|e| StoreError::backend("deleting a payload", e))?,
            };
        }
        meta.insert(WAL_SEQ_KEY, last)
            .map_err(|e| StoreError::backend("numbering the commits", e))?;
    }
    txn.commit().map_err(|e| StoreError::backend(context, e))
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
    let txn = begin(db, Durability::Immediate, "initializing the store")?;
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
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| StoreError::Io {
            context: format!("syncing directory {}", dir.display()),
            source,
        })
}

/// Records `version` as the file's format, in one durable transaction.
fn write_format(db: &Database, version: u64, context: &str) -> Result<(), StoreError> {
    write_meta(db, FORMAT_KEY, version, context)
}

/// Sets `key` in `meta` to `value`, in one durable transaction.
fn write_meta(db: &Database, key: &str, value: u64, context: &str) -> Result<(), StoreError> {
    let txn = begin(db, Durability::Immediate, context)?;
    {
        let mut meta = txn
            .open_table(META)
            .map_err(|e| StoreError::backend(context, e))?;
        meta.insert(key, value)
            .map_err(|e| StoreError::backend(context, e))?;
    }
    txn.commit().map_err(|e| StoreError::backend(context, e))
}

/// A write transaction on `db` with `durability`; a failure to begin it names `context`.
fn begin(
    db: &Database,
    durability: Durability,
    context: &str,
) -> Result<redb::WriteTransaction, StoreError> {
    let mut txn = db
        .begin_write()
        .map_err(|e| StoreError::backend(context, e))?;
    txn.set_durability(durability)
        .map_err(|e| StoreError::backend(context, e))?;
    Ok(txn)
}

/// The frames of the record keyed `first`, or the error naming the damaged event's LSN.
fn frames_of(first: Lsn, record: &[u8]) -> Result<Vec<&[u8]>, StoreError> {
    codec::split_record(record).map_err(|(i, e)| StoreError::Corrupt {
        lsn: first + i as u64,
        reason: crate::CorruptReason::Codec(e),
    })
}

/// The last record keyed at or before `lsn` (the one holding `lsn`, if any does), copied.
fn record_holding(
    events: &impl ReadableTable<u64, &'static [u8]>,
    lsn: Lsn,
    context: &str,
) -> Result<Option<(Lsn, Vec<u8>)>, StoreError> {
    Ok(events
        .range(..=lsn)
        .map_err(|e| StoreError::backend(context, e))?
        .next_back()
        .transpose()
        .map_err(|e| StoreError::backend(context, e))?
        .map(|(k, v)| (k.value(), v.value().to_vec())))
}

/// The events after `lsn` of the group that holds `lsn` and goes on past it, as a group
/// record of their own; `None` when no group straddles `lsn`.
fn after_in_group(
    events: &redb::Table<'_, u64, &[u8]>,
    lsn: Lsn,
) -> Result<Option<Vec<u8>>, StoreError> {
    let Some((first, record)) = record_holding(events, lsn, "pruning events")? else {
        return Ok(None);
    };
    let frames = frames_of(first, &record)?;
    let covered = (lsn - first + 1) as usize;
    if frames.len() <= covered {
        return Ok(None);
    }
    codec::group_frames(&frames[covered..])
        .map(Some)
        .map_err(StoreError::Encode)
}

/// Test support: replaces the group record holding `lsn` by one `V1` record per event.
fn split_group_holding(
    table: &mut redb::Table<'_, u64, &[u8]>,
    lsn: Lsn,
) -> Result<(), StoreError> {
    let Some((first, record)) = record_holding(table, lsn, "tampering")? else {
        return Ok(());
    };
    let Ok(frames) = codec::split_record(&record) else {
        return Ok(());
    };
    if frames.len() < 2 || first + frames.len() as u64 <= lsn {
        return Ok(());
    }
    table
        .remove(first)
        .map_err(|e| StoreError::backend("tampering", e))?;
    for (at, frame) in (first..).zip(frames) {
        table
            .insert(at, frame)
            .map_err(|e| StoreError::backend("tampering", e))?;
    }
    Ok(())
}

/// Test hook: writes a newer format version into a closed store, to test that it is refused.
#[doc(hidden)]
pub fn set_format_version_for_test(dir: &Path, version: u64) -> Result<(), StoreError> {
    let db =
        Database::create(dir.join(DB_FILE_NAME)).map_err(|e| StoreError::backend("opening", e))?;
    write_format(&db, version, "writing meta")
}
