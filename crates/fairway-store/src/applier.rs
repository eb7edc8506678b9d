//! The redb transactions of commits already durable in the write-ahead log, run on a thread of
//! their own.
//!
//! A commit is durable once its log record is synced ([`crate::wal`]), but its writes must
//! still reach redb: payloads are read from there, and a checkpoint or a snapshot makes redb
//! durable without the log. Those writes gather, [`GATHER_COMMITS`] commits or
//! [`GATHER_BYTES`] at a time, and are then handed to the applier thread, which runs them as one
//! `Durability::None` transaction while the store thread goes on appending the next commits to
//! the log. So a commit's answer waits for its log sync only, and redb's CPU runs beside the
//! commits instead of between them.
//!
//! **Reads never wait for it.** A payload whose latest write is not in redb yet is answered
//! from that write in memory ([`Applier::pending`]); any other is read from redb, which then
//! holds its latest write. Only the store thread commits and reads, so no write can slip in
//! between the look-up and the read. What must see redb whole (a snapshot, a checkpoint,
//! recovery, a close) first drains the applier ([`Applier::drain`]).
//!
//! **Bounded.** When [`MAX_UNAPPLIED_COMMITS`] commits or [`MAX_UNAPPLIED_BYTES`] are not in
//! redb yet, the next commit waits for the thread (backpressure, never an unbounded queue).
//!
//! **Durable points.** A snapshot whose file is written is put in force here too
//! ([`Applier::install`]): once redb holds every commit the store had taken when it asked, the
//! thread runs the durable transaction that records the snapshot and prunes the events it
//! covers ([`install_snapshot`]), and the store learns it at its next look
//! ([`Applier::installed`]), with the last commit made durable with it, so that its log can
//! start again. The store asks for a durable point without a snapshot the same way when its
//! log is half full. So neither the drain before one nor its `fsync` holds up a commit.
//!
//! **Failure.** A failed transaction stops the thread; the store's next commit or drain
//! returns its error, and the store poisons itself (the log still holds every commit, so a
//! restart replays them).

use crate::redb_store::{install_snapshot, make_durable, write_entries};
use crate::wal::Entry;
use crate::{Lsn, StoreError};
use fairway_core::hash::hash_str as hash;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry as Found;
use redb::{Database, Durability};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;

/// Commits gathered before they are handed to the thread as one transaction.
pub(crate) const GATHER_COMMITS: usize = 32;
/// Bytes of commits gathered before they are handed to the thread.
pub(crate) const GATHER_BYTES: usize = 8 << 20;
/// The most commits not yet in redb; the next commit waits for the thread.
pub(crate) const MAX_UNAPPLIED_COMMITS: usize = 4 * GATHER_COMMITS;
/// The most bytes of commits not yet in redb; the next commit waits for the thread.
pub(crate) const MAX_UNAPPLIED_BYTES: usize = 4 * GATHER_BYTES;

/// What the store thread and the applier thread share.
struct Shared {
    state: Mutex<State>,
    /// Signalled when commits are handed over, or the thread is to stop.
    work: Condvar,
    /// Signalled when a transaction has ended, applied or failed.
    progress: Condvar,
}

struct State {
    /// Commits handed over and not yet taken by the thread, oldest first.
    handed: Vec<Arc<Entry>>,
    /// The number of the last commit redb holds.
    applied: u64,
    /// The error of the transaction that failed; the thread has stopped.
    failed: Option<StoreError>,
    /// Set when the store closes: the thread applies what it was handed, then ends.
    stop: bool,
    /// The durable point to make once redb holds commit `after`, until it is made.
    install: Option<Install>,
    /// The durable point made (its snapshot put in force, if any), and the last commit redb
    /// held, durably, with it.
    installed: Option<(Option<Lsn>, u64)>,
}

/// A durable point (with a snapshot whose file is written, or none), waiting for the commits
/// before it to be in redb.
struct Install {
    lsn: Option<Lsn>,
    dir: PathBuf,
    after: u64,
    /// The thread has begun its transaction.
    begun: bool,
}

impl State {
    /// The install to begin now (its snapshot and data directory): requested, not begun, with
    /// every commit before it in redb.
    fn install_due(&mut self) -> Option<(Option<Lsn>, PathBuf)> {
        let applied = self.applied;
        let install = self
            .install
            .as_mut()
            .filter(|i| !i.begun && i.after <= applied)?;
        install.begun = true;
        Some((install.lsn, install.dir.clone()))
    }
}

/// The latest write of a payload not yet in redb, as [`Applier::pending`] finds it.
pub(crate) enum Pending<'a> {
    /// Put: its framed bytes.
    Put(&'a [u8]),
    /// Deleted.
    Deleted,
    /// No write of it waits: redb holds the latest.
    InRedb,
}

/// One payload's latest unapplied write, in [`Applier`]'s index. Its key, the job id, is the
/// commit's own string: indexing a write allocates nothing.
struct Slot {
    /// The commit that wrote it, held (a delete's too) so that [`Applier::forget_applied`]
    /// can find the slots of a commit redb holds now.
    entry: Arc<Entry>,
    /// Which of that commit's writes it is.
    write: Write,
}

/// A write's place in its commit.
#[derive(Clone, Copy)]
enum Write {
    /// `entry.puts[i]`.
    Put(usize),
    /// `entry.deletes[i]`.
    Delete(usize),
}

impl Slot {
    /// The job whose payload it writes.
    fn job(&self) -> &str {
        match self.write {
            Write::Put(i) => &self.entry.puts[i].0,
            Write::Delete(i) => &self.entry.deletes[i],
        }
    }
}

/// Makes `slot` its job's latest write in `index`.
fn index_write(index: &mut HashTable<Slot>, slot: Slot) {
    let hashed = hash(slot.job());
    match index.entry(hashed, |s| s.job() == slot.job(), |s| hash(s.job())) {
        Found::Occupied(mut found) => *found.get_mut() = slot,
        Found::Vacant(vacant) => {
            vacant.insert(slot);
        }
    }
}

/// A commit not known to be in redb, as the store thread remembers it.
struct Unapplied {
    seq: u64,
    bytes: usize,
    /// Weak: the commit's writes are freed by the thread as soon as they are in redb, not at
    /// the store's next call (an idle store would hold them); the index keeps the ones it
    /// answers from.
    entry: Weak<Entry>,
}

/// The store thread's side: commits gathering, the ones not yet in redb, and the thread.
pub(crate) struct Applier {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// Commits not handed over yet.
    gathering: Vec<Arc<Entry>>,
    gathering_bytes: usize,
    /// Every commit not known to be in redb (gathering or handed), oldest first.
    unapplied: VecDeque<Unapplied>,
    unapplied_bytes: usize,
    /// The latest write of each payload in `unapplied`, built when payloads are read (a
    /// producer that only submits never pays for it).
    index: HashTable<Slot>,
    /// The last commit in `index`.
    indexed: u64,
    /// The thread's failure was returned once already.
    failure_returned: bool,
}

impl Applier {
    /// Starts the thread on `db`, which holds every commit up to number `applied`.
    pub(crate) fn start(db: Arc<Database>, applied: u64) -> Result<Applier, StoreError> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                handed: Vec::new(),
                applied,
                failed: None,
                stop: false,
                install: None,
                installed: None,
            }),
            work: Condvar::new(),
            progress: Condvar::new(),
        });
        let thread = std::thread::Builder::new()
            .name("fairway-redb".into())
            .spawn({
                let shared = shared.clone();
                move || run(&db, &shared)
            })
            .map_err(|source| StoreError::Io {
                context: "starting the thread that writes commits into redb".into(),
                source,
            })?;
        Ok(Applier {
            shared,
            thread: Some(thread),
            gathering: Vec::new(),
            gathering_bytes: 0,
            unapplied: VecDeque::new(),
            unapplied_bytes: 0,
            index: HashTable::new(),
            indexed: applied,
            failure_returned: false,
        })
    }

    /// Takes `entry`, a commit durable in the log, for redb. Hands the gathered commits over
    /// when there are enough, and waits while too many are not in redb yet.
    pub(crate) fn push(&mut self, entry: Entry) -> Result<(), StoreError> {
        self.check_failed()?;
        let bytes = entry.bytes();
        let entry = Arc::new(entry);
        self.unapplied.push_back(Unapplied {
            seq: entry.seq,
            bytes,
            entry: Arc::downgrade(&entry),
        });
        self.unapplied_bytes += bytes;
        self.gathering.push(entry);
        self.gathering_bytes += bytes;
        if self.gathering.len() >= GATHER_COMMITS || self.gathering_bytes >= GATHER_BYTES {
            self.hand_over();
        }
        self.forget_applied();
        while self.unapplied.len() > MAX_UNAPPLIED_COMMITS
            || self.unapplied_bytes > MAX_UNAPPLIED_BYTES
        {
            // Over the bound, every gathered commit was handed over: the oldest is the thread's.
            let oldest = self.unapplied.front().map_or(0, |u| u.seq);
            self.wait_for(oldest)?;
            self.forget_applied();
        }
        Ok(())
    }

    /// Returns once redb holds every commit taken, or with the thread's error.
    pub(crate) fn drain(&mut self) -> Result<(), StoreError> {
        self.check_failed()?;
        let Some(last) = self.unapplied.back().map(|u| u.seq) else {
            return Ok(());
        };
        self.hand_over();
        self.wait_for(last)?;
        self.forget_applied();
        debug_assert!(self.unapplied.is_empty() && self.index.is_empty());
        Ok(())
    }

    /// Asks the thread for a durable point once redb holds every commit taken so far: the
    /// snapshot at `lsn`, whose file in `dir` is written, put in force (the commit holding the
    /// event at `lsn` is among those), or, with `None`, the commits alone made durable;
    /// [`Applier::installed`] says when it is made. One at a time.
    pub(crate) fn install(&mut self, lsn: Option<Lsn>, dir: &Path) -> Result<(), StoreError> {
        self.check_failed()?;
        let after = self.unapplied.back().map_or(0, |u| u.seq);
        self.hand_over();
        let mut state = lock(&self.shared.state);
        debug_assert!(state.install.is_none() && state.installed.is_none());
        state.install = Some(Install {
            lsn,
            dir: dir.to_owned(),
            after,
            begun: false,
        });
        self.shared.work.notify_one();
        Ok(())
    }

    /// The durable point the thread has made since it was asked (its snapshot, if any), with
    /// the number of the last commit made durable with it; `None` while it has not. With
    /// `wait`, waits for it (or the thread's failure).
    pub(crate) fn installed(
        &mut self,
        wait: bool,
    ) -> Result<Option<(Option<Lsn>, u64)>, StoreError> {
        let installed = {
            let mut state = lock(&self.shared.state);
            while wait
                && state.installed.is_none()
                && state.install.is_some()
                && state.failed.is_none()
            {
                state = self
                    .shared
                    .progress
                    .wait(state)
                    .unwrap_or_else(|e| e.into_inner());
            }
            state.installed.take()
        };
        self.check_failed()?;
        Ok(installed)
    }

    /// Brings the index up to date with every commit not yet in redb; call it before
    /// [`Applier::pending`].
    pub(crate) fn index_unapplied(&mut self) {
        // A commit already freed is in redb (the thread records that before it frees it):
        // forget it, and what it overwrote in the index, and go on.
        while !self.index_from_unapplied() {}
    }

    /// Indexes the commits after the last indexed, up to the first one already freed;
    /// whether there was none.
    fn index_from_unapplied(&mut self) -> bool {
        self.forget_applied();
        let from = self.indexed;
        for unapplied in self.unapplied.iter().filter(|u| u.seq > from) {
            let Some(entry) = unapplied.entry.upgrade() else {
                return false;
            };
            // Within a commit the deletes apply after the puts, so they are indexed after.
            let puts = (0..entry.puts.len()).map(Write::Put);
            for write in puts.chain((0..entry.deletes.len()).map(Write::Delete)) {
                index_write(
                    &mut self.index,
                    Slot {
                        entry: entry.clone(),
                        write,
                    },
                );
            }
            self.indexed = entry.seq;
        }
        true
    }

    /// The latest write of `job`'s payload that redb does not hold yet, as of the last
    /// [`Applier::index_unapplied`].
    pub(crate) fn pending(&self, job: &str) -> Pending<'_> {
        match self.index.find(hash(job), |s| s.job() == job) {
            None => Pending::InRedb,
            Some(Slot {
                write: Write::Delete(_),
                ..
            }) => Pending::Deleted,
            Some(Slot {
                entry,
                write: Write::Put(i),
            }) => Pending::Put(&entry.puts[*i].1),
        }
    }

    /// Hands the gathered commits to the thread.
    fn hand_over(&mut self) {
        if self.gathering.is_empty() {
            return;
        }
        let mut state = lock(&self.shared.state);
        state.handed.append(&mut self.gathering);
        self.gathering_bytes = 0;
        self.shared.work.notify_one();
    }

    /// Waits until redb holds commit `seq`, or the thread has failed.
    fn wait_for(&mut self, seq: u64) -> Result<(), StoreError> {
        {
            let mut state = lock(&self.shared.state);
            while state.applied < seq && state.failed.is_none() {
                state = self
                    .shared
                    .progress
                    .wait(state)
                    .unwrap_or_else(|e| e.into_inner());
            }
        }
        self.check_failed()
    }

    /// The thread's error, the first time it is asked for after the thread failed.
    pub(crate) fn check_failed(&mut self) -> Result<(), StoreError> {
        if self.failure_returned {
            return Err(StoreError::Poisoned);
        }
        match lock(&self.shared.state).failed.take() {
            Some(error) => {
                self.failure_returned = true;
                Err(error)
            }
            None => Ok(()),
        }
    }

    /// Drops the commits redb holds now, and their index entries.
    fn forget_applied(&mut self) {
        let applied = lock(&self.shared.state).applied;
        while self.unapplied.front().is_some_and(|u| u.seq <= applied) {
            let Some(unapplied) = self.unapplied.pop_front() else {
                break;
            };
            self.unapplied_bytes -= unapplied.bytes;
            // Freed already: none of its writes is left in the index (a slot holds its commit).
            let Some(entry) = unapplied.entry.upgrade() else {
                continue;
            };
            if entry.seq <= self.indexed {
                let jobs = entry.puts.iter().map(|(job, _)| job).chain(&entry.deletes);
                for job in jobs {
                    if let Ok(found) = self.index.find_entry(hash(job), |s| s.job() == job)
                        && found.get().entry.seq == entry.seq
                    {
                        found.remove();
                    }
                }
            }
        }
    }
}

impl Drop for Applier {
    /// The thread applies what it was handed (each commit is durable in the log anyway), then
    /// ends; commits still gathering are left to the log.
    fn drop(&mut self) {
        lock(&self.shared.state).stop = true;
        self.shared.work.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What the thread does next.
enum Work {
    Apply(Vec<Arc<Entry>>),
    /// A durable point to make (the snapshot to put in force, if any, and the data
    /// directory), with the last commit redb holds.
    Install(Option<Lsn>, PathBuf, u64),
}

/// The applier thread: one transaction for everything handed over since the last, and a
/// durable point's as soon as it is due (before more commits, so that a busy store does not
/// put it off), until told to stop or a transaction fails.
fn run(db: &Database, shared: &Shared) {
    loop {
        let work = {
            let mut state = lock(&shared.state);
            loop {
                if let Some((lsn, dir)) = state.install_due() {
                    break Work::Install(lsn, dir, state.applied);
                }
                if !state.handed.is_empty() {
                    break Work::Apply(std::mem::take(&mut state.handed));
                }
                if state.stop {
                    return;
                }
                state = shared.work.wait(state).unwrap_or_else(|e| e.into_inner());
            }
        };
        let batch = match work {
            Work::Apply(batch) => batch,
            Work::Install(lsn, dir, through) => {
                let result = match lsn {
                    Some(lsn) => install_snapshot(db, &dir, lsn),
                    None => make_durable(db, through),
                };
                let mut state = lock(&shared.state);
                shared.progress.notify_all();
                state.install = None;
                match result {
                    Ok(()) => state.installed = Some((lsn, through)),
                    Err(error) => {
                        state.failed = Some(error);
                        return;
                    }
                }
                continue;
            }
        };
        let result = write_entries(db, &batch, Durability::None);
        let mut state = lock(&shared.state);
        shared.progress.notify_all();
        match result {
            // The batch is freed once this is recorded (the guard is dropped first): a commit
            // freed is a commit in redb, which the store's reads rely on.
            Ok(()) => state.applied = batch.last().map_or(state.applied, |e| e.seq),
            Err(error) => {
                // Kept, not freed: the store still answers reads from these commits.
                state.failed = Some(error);
                let later = std::mem::replace(&mut state.handed, batch);
                state.handed.extend(later);
                return;
            }
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::TempDir;
    use redb::ReadableDatabase;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// A new database in a directory of its own, and a write transaction held on it, which
    /// keeps the thread from writing until it is dropped.
    fn blocked_db(label: &str) -> (TempDir, Arc<Database>, redb::WriteTransaction) {
        let dir = TempDir::new(label);
        std::fs::create_dir_all(dir.path()).unwrap();
        let db = Arc::new(Database::create(dir.path().join("applier.redb")).unwrap());
        let blocker = db.begin_write().unwrap();
        (dir, db, blocker)
    }

    /// `key`'s value in `db`'s `meta`.
    fn meta_of(db: &Database, key: &str) -> u64 {
        let read = db.begin_read().unwrap();
        let meta = read
            .open_table(redb::TableDefinition::<&str, u64>::new("meta"))
            .unwrap();
        meta.get(key).unwrap().unwrap().value()
    }

    fn entry(seq: u64) -> Entry {
        Entry {
            seq,
            first_lsn: 0,
            events: None,
            puts: vec![(format!("job-{seq}"), vec![seq as u8; 8])],
            deletes: Vec::new(),
        }
    }

    /// Every payload of `db`, in key order.
    fn payloads_of(db: &Database) -> Vec<(String, Vec<u8>)> {
        let read = db.begin_read().unwrap();
        let table = read
            .open_table(redb::TableDefinition::<&str, &[u8]>::new("payloads"))
            .unwrap();
        redb::ReadableTable::iter(&table)
            .unwrap()
            .map(|row| {
                let (k, v) = row.unwrap();
                (k.value().to_string(), v.value().to_vec())
            })
            .collect()
    }

    // Proves: commits written together (each payload's last write only) leave redb as the
    // same commits written one at a time: a job put and deleted within them leaves nothing,
    // a put overwritten keeps the last, a delete of an earlier transaction's put removes it,
    // and a delete of a payload never stored changes nothing.
    #[test]
    fn commits_written_together_end_as_written_one_by_one() {
        let commit = |seq: u64, puts: &[(&str, u8)], deletes: &[&str]| Entry {
            seq,
            first_lsn: 0,
            events: None,
            puts: puts
                .iter()
                .map(|(j, v)| (j.to_string(), vec![*v; 4]))
                .collect(),
            deletes: deletes.iter().map(|j| j.to_string()).collect(),
        };
        let commits = || {
            vec![
                commit(1, &[("old", 1), ("kept", 1)], &[]),
                commit(2, &[("a", 2), ("b", 2)], &["a"]),
                commit(3, &[("c", 3), ("b", 3)], &["old", "never"]),
                commit(4, &[("d", 4)], &["c"]),
                commit(5, &[("e", 5)], &["d", "e"]),
            ]
        };
        let dir = TempDir::new("applier-together");
        std::fs::create_dir_all(dir.path()).unwrap();
        let together = Database::create(dir.path().join("together.redb")).unwrap();
        let one_by_one = Database::create(dir.path().join("one-by-one.redb")).unwrap();
        let all = commits();
        write_entries(&together, &all[..1], Durability::None).unwrap();
        write_entries(&together, &all[1..], Durability::None).unwrap();
        for entry in commits() {
            write_entries(&one_by_one, &[entry], Durability::None).unwrap();
        }
        let expected = vec![
            ("b".to_string(), vec![3; 4]),
            ("kept".to_string(), vec![1; 4]),
        ];
        assert_eq!(payloads_of(&one_by_one), expected);
        assert_eq!(payloads_of(&together), expected);
    }

    // Proves: the bound holds. While the thread cannot write (a write transaction held on
    // redb), commits are taken until MAX_UNAPPLIED_COMMITS are not in redb, and the next waits;
    // once the thread can write again every commit is taken, and a drain leaves redb holding
    // the last one's number with every payload.
    #[test]
    fn commits_wait_while_too_many_are_not_in_redb() {
        let (_dir, db, blocker) = blocked_db("applier-bound");
        let taken = Arc::new(AtomicUsize::new(0));
        let pusher = std::thread::spawn({
            let (db, taken) = (db.clone(), taken.clone());
            move || {
                let mut applier = Applier::start(db, 0).unwrap();
                for seq in 1..=200 {
                    applier.push(entry(seq)).unwrap();
                    taken.store(seq as usize, Ordering::SeqCst);
                }
                applier.drain().unwrap();
            }
        });
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(taken.load(Ordering::SeqCst), MAX_UNAPPLIED_COMMITS);
        drop(blocker);
        pusher.join().unwrap();
        assert_eq!(taken.load(Ordering::SeqCst), 200);
        assert_eq!(meta_of(&db, "wal_seq"), 200);
        let read = db.begin_read().unwrap();
        let payloads = read
            .open_table(redb::TableDefinition::<&str, &[u8]>::new("payloads"))
            .unwrap();
        assert_eq!(
            redb::ReadableTableMetadata::len(&payloads).unwrap(),
            200,
            "every commit's payload is in redb"
        );
    }

    // Proves: a snapshot is put in force by the thread, not by the store's calls: while the
    // thread cannot write (a write transaction held on redb), asking for it and taking more
    // commits return at once, and it is not in force; once the thread can write, it is, after
    // every commit taken before the request (the last one redb held then is at least that one),
    // with the snapshot recorded in `meta`.
    #[test]
    fn a_snapshot_is_put_in_force_by_the_thread_while_commits_go_on() {
        let (dir, db, blocker) = blocked_db("applier-install");
        let mut applier = Applier::start(db.clone(), 0).unwrap();
        for seq in 1..=3 {
            applier.push(entry(seq)).unwrap();
        }
        applier.install(Some(2), dir.path()).unwrap();
        applier.push(entry(4)).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(applier.installed(false).unwrap(), None);
        drop(blocker);
        let (lsn, through) = applier.installed(true).unwrap().expect("in force");
        assert_eq!(lsn, Some(2));
        assert!(through >= 3, "in force after commit {through}");
        assert_eq!(applier.installed(false).unwrap(), None, "reported once");
        applier.drain().unwrap();
        assert_eq!(meta_of(&db, "snapshot_lsn"), 2);
        assert_eq!(meta_of(&db, "wal_seq"), 4);
    }
}
