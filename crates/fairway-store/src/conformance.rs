//! The conformance suite every [`EventStore`] backend must pass, and the model-based check that
//! compares a backend with [`MemStore`] operation by operation.
//!
//! A backend plugs in through [`Backend`] (make a store, restart it, inject a failure, damage a
//! record); [`conformance_tests!`](crate::conformance_tests) turns the suite into one `#[test]`
//! per check. The suite knows nothing about any backend: [`MemBackend`], [`RedbBackend`] and
//! [`PgBackend`] run the same checks (the last only where `FAIRWAY_TEST_POSTGRES` names a
//! server; elsewhere each of its tests prints "skipped").
//!
//! Hidden from the docs: it is test support, public only so that `tests/` (and other crates'
//! tests) can use it.

use crate::postgres::testing::TestDb;
use crate::{Batch, EventStore, Fence, Lsn, MemDisk, MemStore, PgStore, RedbStore, StoreError};
use fairway_core::event::{AfterAttempt, AttemptEnd, Placement, StopReason};
use fairway_core::{Dur, Event, JobSpec, JobState, Time};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// How a test damages a stored record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tamper {
    /// Flip a bit of the event record's frame.
    FlipEventBit,
    /// Delete the event record.
    RemoveEvent,
    /// Flip a bit of the snapshot record's frame.
    FlipSnapshotBit,
}

/// What the suite needs from a backend beyond [`EventStore`].
pub trait Backend {
    /// The store under test.
    type Store: EventStore;
    /// A store on new, empty storage.
    fn fresh(&mut self) -> Self::Store;
    /// Drops the store (a crash: nothing is flushed or closed on purpose) and opens its storage
    /// again, as a restarted process does.
    fn reopen(&mut self, store: Self::Store) -> Self::Store;
    /// Makes the store's next commit with events fail partway, before anything is durable.
    fn fail_next_commit(&mut self, store: &mut Self::Store);
    /// Closes the store, damages the record at `lsn` in its storage, and reopens it.
    fn tamper(&mut self, store: Self::Store, lsn: Lsn, how: Tamper) -> Self::Store;
    /// How many event records the storage physically holds.
    fn stored_event_count(&mut self, store: &Self::Store) -> u64;
    /// Whether the backend can run here (a database server may be missing); the suite prints
    /// "skipped" and passes when it cannot.
    fn available(&self) -> bool {
        true
    }
}

/// [`Backend`] for [`MemStore`].
#[derive(Debug, Default)]
pub struct MemBackend;

impl Backend for MemBackend {
    type Store = MemStore;
    fn fresh(&mut self) -> MemStore {
        MemStore::new()
    }
    fn reopen(&mut self, store: MemStore) -> MemStore {
        store.reopen()
    }
    fn fail_next_commit(&mut self, store: &mut MemStore) {
        store.fail_next_commit();
    }
    fn tamper(&mut self, store: MemStore, lsn: Lsn, how: Tamper) -> MemStore {
        let disk: MemDisk = store.crash();
        let found = match how {
            Tamper::FlipEventBit => disk.corrupt_event(lsn),
            Tamper::RemoveEvent => disk.remove_event(lsn),
            Tamper::FlipSnapshotBit => disk.corrupt_snapshot(lsn),
        };
        assert!(found, "no record at LSN {lsn} to tamper with");
        MemStore::open(disk)
    }
    fn stored_event_count(&mut self, store: &MemStore) -> u64 {
        store.disk().stored_event_count() as u64
    }
}

/// [`Backend`] for [`RedbStore`], each store in its own temporary directory.
#[derive(Debug, Default)]
pub struct RedbBackend {
    dirs: Vec<TempDir>,
}

impl Backend for RedbBackend {
    type Store = RedbStore;
    fn fresh(&mut self) -> RedbStore {
        let dir = TempDir::new("conformance");
        let store = RedbStore::open(dir.path()).expect("open a fresh redb store");
        self.dirs.push(dir);
        store
    }
    fn reopen(&mut self, store: RedbStore) -> RedbStore {
        let dir = store.dir().to_owned();
        drop(store);
        RedbStore::open(&dir).expect("reopen a redb store")
    }
    fn fail_next_commit(&mut self, store: &mut RedbStore) {
        store.fail_next_commit();
    }
    fn tamper(&mut self, store: RedbStore, lsn: Lsn, how: Tamper) -> RedbStore {
        let dir = store.dir().to_owned();
        drop(store);
        let found = match how {
            Tamper::FlipEventBit | Tamper::FlipSnapshotBit => {
                RedbStore::tamper(&dir, lsn, how == Tamper::FlipSnapshotBit, |mut frame| {
                    let middle = frame.len() / 2;
                    frame[middle] ^= 0x10;
                    Some(frame)
                })
            }
            Tamper::RemoveEvent => RedbStore::tamper(&dir, lsn, false, |_| None),
        }
        .expect("tamper with a redb store");
        assert!(found, "no record at LSN {lsn} to tamper with");
        RedbStore::open(&dir).expect("reopen a tampered redb store")
    }
    fn stored_event_count(&mut self, store: &RedbStore) -> u64 {
        store.stored_event_count().expect("count events")
    }
}

/// [`Backend`] for [`PgStore`]: one database per test (dropped at the end, even on failure),
/// one schema per store within it, each store the leader of its schema's leader row (term 1).
/// A restart reopens the store under the same fence, as a replica that keeps its term does.
#[derive(Debug)]
pub struct PgBackend {
    db: Option<TestDb>,
    next_schema: u64,
    /// The URL of each store's schema, by its fence's holder.
    urls: Vec<(String, String)>,
}

impl PgBackend {
    /// A backend on a new database of the server named by `FAIRWAY_TEST_POSTGRES`; unavailable
    /// (and every test "skipped") without it.
    pub fn from_env(test: &str) -> PgBackend {
        PgBackend {
            db: TestDb::create(test),
            next_schema: 0,
            urls: Vec::new(),
        }
    }

    fn url_of(&self, store: &PgStore) -> String {
        let holder = &store.fence_of().holder;
        self.urls
            .iter()
            .find(|(h, _)| h == holder)
            .map(|(_, url)| url.clone())
            .expect("a store this backend made")
    }
}

impl Backend for PgBackend {
    type Store = PgStore;
    fn fresh(&mut self) -> PgStore {
        let db = self.db.as_ref().expect("a test database");
        self.next_schema += 1;
        let schema = format!("s{}", self.next_schema);
        db.create_schema(&schema);
        let url = db.url_with_schema(&schema);
        let holder = format!("conformance-{schema}");
        let store = PgStore::open_leading(&url, &holder, "http://conformance.invalid", 600_000)
            .expect("open a fresh PostgreSQL store");
        self.urls.push((holder, url));
        store
    }
    fn reopen(&mut self, store: PgStore) -> PgStore {
        let url = self.url_of(&store);
        let fence: Fence = store.fence_of().clone();
        drop(store);
        PgStore::open(&url, fence).expect("reopen a PostgreSQL store")
    }
    fn fail_next_commit(&mut self, store: &mut PgStore) {
        store.fail_next_commit();
    }
    fn tamper(&mut self, store: PgStore, lsn: Lsn, how: Tamper) -> PgStore {
        let found = match how {
            Tamper::FlipEventBit => store.tamper(lsn, false, false),
            Tamper::RemoveEvent => store.tamper(lsn, false, true),
            Tamper::FlipSnapshotBit => store.tamper(lsn, true, false),
        }
        .expect("tamper with a PostgreSQL store");
        assert!(found, "no record at LSN {lsn} to tamper with");
        self.reopen(store)
    }
    fn stored_event_count(&mut self, store: &PgStore) -> u64 {
        store.stored_event_count().expect("count events")
    }
    fn available(&self) -> bool {
        self.db.is_some()
    }
}

/// A directory under the system's temporary directory, removed on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new, not yet existing, uniquely named directory path (the store creates it).
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(
            "fairway-store-{label}-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        TempDir(std::env::temp_dir().join(name))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A deterministic event for LSN-like index `n`, cycling through the event variants, so that a
/// reader can check a record's content from its LSN alone.
pub fn sample_event(n: u64) -> Event {
    let job = format!("job-{n}");
    let at = Time(n * 1_000);
    match n % 6 {
        0 => {
            let mut spec = JobSpec::new(job, format!("tenant-{}/team", n % 7));
            spec.demand.insert("cpu".into(), (n % 5) as f64 + 0.5);
            spec.estimate = Some(Dur(n));
            spec.deadline = n.is_multiple_of(2).then_some(Time(n * 10));
            Event::JobAccepted {
                at,
                seq: n,
                spec,
                estimate: Dur(n + 1),
                deferred_until: None,
                wfq_tag: u128::from(n) << 70,
                cost: u128::from(n),
            }
        }
        1 => Event::LeaseGranted {
            at,
            job,
            attempt: (n % 3) as u32,
            epoch: n,
            expires: Time(n * 2_000),
            placements: vec![Placement {
                worker: format!("w{}", n % 4).into(),
                pool: "default".into(),
                members: 1,
            }],
            charges: vec![n, n / 2],
            estimate: Dur(n),
            policy_version: 1,
            borrowed: n % 2 == 1,
            drr: Some((u128::from(n), -(i128::from(n)), n)),
            worker_share: n * 7,
        },
        2 => Event::LeaseExtended {
            at,
            job,
            epoch: n,
            expires: Time(n * 3_000),
            progress: Some(Dur(n)),
        },
        3 => Event::StopRequested {
            at,
            job,
            epoch: n,
            reason: StopReason::Preempt,
            deadline: Time(n * 4_000),
        },
        4 => Event::AttemptEnded {
            at,
            job,
            epoch: n,
            end: AttemptEnd::Succeeded,
            usage: Dur(n),
            progress: None,
            after: AfterAttempt::Done(JobState::Succeeded),
        },
        _ => Event::PolicyPublished {
            at,
            version: n,
            source: format!("# policy {n}\n"),
        },
    }
}

/// `count` sample events starting at index `from`.
pub fn sample_events(from: u64, count: u64) -> Vec<Event> {
    (from..from + count).map(sample_event).collect()
}

fn lsns(recovered: &crate::Recovered) -> Vec<Lsn> {
    recovered.events.iter().map(|(lsn, _)| *lsn).collect()
}

/// Proves: committed events come back from `recover` in order, with their LSNs, both from the
/// running store and after a restart; recovering twice gives the same answer (it has no effect).
pub fn round_trip<B: Backend>(backend: &mut B) {
    let mut store = backend.fresh();
    assert_eq!(store.last_lsn(), 0);
    assert_eq!(store.recover().unwrap(), crate::Recovered::default());
    store
        .commit(&Batch::of_events(sample_events(1, 3)))
        .unwrap();
    store
        .commit(&Batch::of_events(sample_events(4, 6)))
        .unwrap();
    let expected: Vec<(Lsn, Event)> = (1..=9).map(|n| (n, sample_event(n))).collect();
    let recovered = store.recover().unwrap();
    assert_eq!(recovered.snapshot, None);
    assert_eq!(recovered.events, expected);
    assert_eq!(store.recover().unwrap(), recovered, "recover is repeatable");
    let mut store = backend.reopen(store);
    assert_eq!(store.last_lsn(), 9, "last LSN survives a restart");
    assert_eq!(store.recover().unwrap().events, expected);
}

/// Proves: LSNs start at 1, each batch's events get consecutive LSNs, `commit` returns the last
/// one, and numbering continues after a restart without reusing or skipping any.
pub fn lsn_contiguity<B: Backend>(backend: &mut B) {
    let mut store = backend.fresh();
    let mut next = 1;
    for size in [1u64, 5, 2, 17] {
        let last = store
            .commit(&Batch::of_events(sample_events(next, size)))
            .unwrap();
        assert_eq!(last, next + size - 1, "commit returns the batch's last LSN");
        assert_eq!(store.last_lsn(), last);
        next += size;
    }
    let mut store = backend.reopen(store);
    assert_eq!(
        store
            .commit(&Batch::of_events(sample_events(next, 3)))
            .unwrap(),
        next + 2,
        "numbering continues after a restart"
    );
    let recovered = store.recover().unwrap();
    assert_eq!(lsns(&recovered), (1..=next + 2).collect::<Vec<_>>());
    for (lsn, event) in &recovered.events {
        assert_eq!(event, &sample_event(*lsn), "event at LSN {lsn}");
    }
}

/// Proves: an empty batch writes nothing and returns the current last LSN (0 on a fresh store);
/// a batch of payloads without events returns the current LSN and still stores its payloads.
pub fn empty_batches<B: Backend>(backend: &mut B) {
    let mut store = backend.fresh();
    assert_eq!(store.commit(&Batch::default()).unwrap(), 0);
    store
        .commit(&Batch::of_events(sample_events(1, 4)))
        .unwrap();
    assert_eq!(store.commit(&Batch::default()).unwrap(), 4);
    let payload_only = Batch {
        put_payloads: vec![("job-x".into(), b"x".to_vec())],
        ..Batch::default()
    };
    assert_eq!(store.commit(&payload_only).unwrap(), 4);
    let mut store = backend.reopen(store);
    assert_eq!(store.last_lsn(), 4);
    assert_eq!(lsns(&store.recover().unwrap()), vec![1, 2, 3, 4]);
    assert_eq!(store.payload("job-x").unwrap(), Some(b"x".to_vec()));
}

/// Proves: payloads are stored with their batch, replaced by a later put, deleted by a delete
/// (deletes apply after puts within a batch; deleting an absent one is harmless), and all of it
/// survives a restart.
pub fn payloads<B: Backend>(backend: &mut B) {
    let mut store = backend.fresh();
    assert_eq!(store.payload("a").unwrap(), None);
    store
        .commit(&Batch {
            events: sample_events(1, 2),
            put_payloads: vec![
                ("a".into(), b"alpha".to_vec()),
                ("b".into(), Vec::new()),
                ("c".into(), vec![0xff; 4096]),
            ],
            delete_payloads: vec!["never-stored".into()],
        })
        .unwrap();
    assert_eq!(store.payload("a").unwrap(), Some(b"alpha".to_vec()));
    assert_eq!(
        store.payload("b").unwrap(),
        Some(Vec::new()),
        "empty ≠ absent"
    );
    assert_eq!(store.payload("c").unwrap(), Some(vec![0xff; 4096]));
    store
        .commit(&Batch {
            events: sample_events(3, 1),
            put_payloads: vec![
                ("a".into(), b"alpha2".to_vec()),
                ("d".into(), b"d".to_vec()),
            ],
            delete_payloads: vec!["c".into(), "d".into()],
        })
        .unwrap();
    let store = backend.reopen(store);
    assert_eq!(store.payload("a").unwrap(), Some(b"alpha2".to_vec()));
    assert_eq!(store.payload("b").unwrap(), Some(Vec::new()));
    assert_eq!(store.payload("c").unwrap(), None, "deleted");
    assert_eq!(
        store.payload("d").unwrap(),
        None,
        "put then deleted in one batch"
    );
    // Read together, in the order asked (repeats included), they are what each read says.
    let jobs = ["d", "a", "never-stored", "b", "a"];
    assert_eq!(
        store.payloads(&jobs).unwrap(),
        vec![
            None,
            Some(b"alpha2".to_vec()),
            None,
            Some(Vec::new()),
            Some(b"alpha2".to_vec())
        ]
    );
    assert_eq!(store.payloads(&[]).unwrap(), Vec::<Option<Vec<u8>>>::new());
}

/// Proves: a snapshot comes back from `recover` with exactly the events after it; it prunes the
/// events at or before its LSN and older snapshots; a later snapshot replaces it; a snapshot at
/// the last LSN leaves no events to replay; and all of it survives restarts.
pub fn snapshot_and_pruning<B: Backend>(backend: &mut B) {
    let mut store = backend.fresh();
    store
        .commit(&Batch::of_events(sample_events(1, 10)))
        .unwrap();
    store.put_snapshot(6, b"state@6").unwrap();
    assert_eq!(backend.stored_event_count(&store), 4, "events 1..=6 pruned");
    store
        .commit(&Batch::of_events(sample_events(11, 4)))
        .unwrap();
    let expected = crate::Recovered {
        snapshot: Some((6, b"state@6".to_vec())),
        events: (7..=14).map(|n| (n, sample_event(n))).collect(),
    };
    assert_eq!(store.recover().unwrap(), expected);
    let mut store = backend.reopen(store);
    assert_eq!(store.recover().unwrap(), expected);
    assert_eq!(store.last_lsn(), 14);

    store.put_snapshot(14, b"state@14").unwrap();
    assert_eq!(backend.stored_event_count(&store), 0);
    let mut store = backend.reopen(store);
    assert_eq!(
        store.last_lsn(),
        14,
        "the snapshot carries the last LSN when every event is pruned"
    );
    assert_eq!(
        store.recover().unwrap(),
        crate::Recovered {
            snapshot: Some((14, b"state@14".to_vec())),
            events: vec![],
        }
    );
    assert_eq!(
        store
            .commit(&Batch::of_events(sample_events(15, 1)))
            .unwrap(),
        15,
        "numbering continues after a snapshot that pruned everything"
    );
    let mut store = backend.reopen(store);
    let recovered = store.recover().unwrap();
    assert_eq!(recovered.snapshot, Some((14, b"state@14".to_vec())));
    assert_eq!(recovered.events, vec![(15, sample_event(15))]);
}

/// Proves: a snapshot after the last LSN, or older than the stored one, is refused and poisons
/// the store, and nothing of it is stored.
pub fn snapshot_arguments_checked<B: Backend>(backend: &mut B) {
    let mut store = backend.fresh();
    store
        .commit(&Batch::of_events(sample_events(1, 5)))
        .unwrap();
    assert!(matches!(
        store.put_snapshot(6, b"future"),
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store.commit(&Batch::of_events(sample_events(6, 1))),
        Err(StoreError::Poisoned)
    ));
    let mut store = backend.reopen(store);
    assert_eq!(store.recover().unwrap().snapshot, None);
    store.put_snapshot(3, b"s3").unwrap();
    assert!(matches!(
        store.put_snapshot(2, b"older"),
        Err(StoreError::Invalid(_))
    ));
    let mut store = backend.reopen(store);
    assert_eq!(store.recover().unwrap().snapshot, Some((3, b"s3".to_vec())));
}

/// Proves: after a failed commit every call fails with `Poisoned` (commit, snapshot, recover,
/// payload) and the failed batch left nothing durable; after a restart the store works again and
/// numbering continues from the last successful commit.
pub fn poisoning_after_failed_commit<B: Backend>(backend: &mut B) {
    let mut store = backend.fresh();
    store
        .commit(&Batch {
            events: sample_events(1, 3),
            put_payloads: vec![("kept".into(), b"k".to_vec())],
            delete_payloads: vec![],
        })
        .unwrap();
    backend.fail_next_commit(&mut store);
    let failing = Batch {
        events: sample_events(4, 2),
        put_payloads: vec![("lost".into(), b"l".to_vec())],
        delete_payloads: vec!["kept".into()],
    };
    let err = store.commit(&failing).unwrap_err();
    assert!(
        !matches!(err, StoreError::Poisoned),
        "the failure itself is reported, not Poisoned: {err}"
    );
    assert_eq!(
        store.last_lsn(),
        3,
        "a failed commit does not advance the LSN"
    );
    let ok_batch = Batch::of_events(sample_events(4, 1));
    assert!(matches!(store.commit(&ok_batch), Err(StoreError::Poisoned)));
    assert!(matches!(
        store.commit(&Batch::default()),
        Err(StoreError::Poisoned)
    ));
    assert!(matches!(
        store.put_snapshot(3, b"s"),
        Err(StoreError::Poisoned)
    ));
    assert!(matches!(store.recover(), Err(StoreError::Poisoned)));
    assert!(matches!(store.payload("kept"), Err(StoreError::Poisoned)));

    let mut store = backend.reopen(store);
    assert_eq!(store.last_lsn(), 3);
    assert_eq!(lsns(&store.recover().unwrap()), vec![1, 2, 3]);
    assert_eq!(store.payload("kept").unwrap(), Some(b"k".to_vec()));
    assert_eq!(store.payload("lost").unwrap(), None);
    assert_eq!(store.commit(&ok_batch).unwrap(), 4);
}

/// Proves: a record whose bytes changed is reported as `Corrupt` with its LSN, and recovery
/// does not return the records before it as if the log ended there.
pub fn corrupted_record_detected<B: Backend>(backend: &mut B) {
    let mut store = backend.fresh();
    store
        .commit(&Batch::of_events(sample_events(1, 8)))
        .unwrap();
    let mut store = backend.tamper(store, 5, Tamper::FlipEventBit);
    match store.recover() {
        Err(StoreError::Corrupt { lsn: 5, reason }) => {
            assert!(matches!(reason, crate::CorruptReason::Codec(_)), "{reason}")
        }
        other => panic!("expected Corrupt at LSN 5, got {other:?}"),
    }
    // The last record too: a damaged tail is an error, not a shorter log.
    let mut store = backend.fresh();
    store
        .commit(&Batch::of_events(sample_events(1, 3)))
        .unwrap();
    let mut store = backend.tamper(store, 3, Tamper::FlipEventBit);
    assert!(matches!(
        store.recover(),
        Err(StoreError::Corrupt { lsn: 3, .. })
    ));
}

/// Proves: a hole in the log (a record missing between two present ones) is reported as
/// `Corrupt { reason: Missing }` naming the missing LSN.
pub fn missing_record_detected<B: Backend>(backend: &mut B) {
    let mut store = backend.fresh();
    store
        .commit(&Batch::of_events(sample_events(1, 6)))
        .unwrap();
    let mut store = backend.tamper(store, 2, Tamper::RemoveEvent);
    assert!(matches!(
        store.recover(),
        Err(StoreError::Corrupt {
            lsn: 2,
            reason: crate::CorruptReason::Missing
        })
    ));
    // A hole right after a snapshot is detected too.
    let mut store = backend.fresh();
    store
        .commit(&Batch::of_events(sample_events(1, 6)))
        .unwrap();
    store.put_snapshot(3, b"s").unwrap();
    let mut store = backend.tamper(store, 4, Tamper::RemoveEvent);
    assert!(matches!(
        store.recover(),
        Err(StoreError::Corrupt {
            lsn: 4,
            reason: crate::CorruptReason::Missing
        })
    ));
}

/// Proves: a damaged snapshot is reported as `CorruptSnapshot` with its LSN, not skipped.
pub fn corrupted_snapshot_detected<B: Backend>(backend: &mut B) {
    let mut store = backend.fresh();
    store
        .commit(&Batch::of_events(sample_events(1, 4)))
        .unwrap();
    store.put_snapshot(2, b"a snapshot of some length").unwrap();
    let mut store = backend.tamper(store, 2, Tamper::FlipSnapshotBit);
    assert!(matches!(
        store.recover(),
        Err(StoreError::CorruptSnapshot { lsn: 2, .. })
    ));
}

/// One step of a model-based run.
#[derive(Clone, Debug)]
pub enum Op {
    /// Commit a batch.
    Commit(Batch),
    /// Inject a failure, then commit a batch (which fails and poisons if it has anything in it).
    FailingCommit(Batch),
    /// Snapshot at `back` events before the last LSN (not before the current snapshot).
    Snapshot {
        /// Distance back from the last LSN.
        back: u64,
        /// The snapshot's bytes.
        bytes: Vec<u8>,
    },
    /// Crash and restart.
    Reopen,
    /// Recover and compare.
    Recover,
    /// Read one payload and compare.
    Payload(String),
}

/// An outcome compared across backends: errors by kind only (messages differ by backend).
fn outcome<T>(result: Result<T, StoreError>) -> Result<T, &'static str> {
    result.map_err(|e| match e {
        StoreError::Io { .. } => "io",
        StoreError::Backend { .. } => "backend",
        StoreError::Corrupt { .. } => "corrupt",
        StoreError::CorruptSnapshot { .. } => "corrupt snapshot",
        StoreError::CorruptPayload { .. } => "corrupt payload",
        StoreError::NewerFormat { .. } => "newer format",
        StoreError::NewerSchema { .. } => "newer schema",
        StoreError::Deposed { .. } => "deposed",
        StoreError::Encode(_) => "encode",
        StoreError::Invalid(_) => "invalid",
        StoreError::Poisoned => "poisoned",
        StoreError::Injected => "injected",
    })
}

/// Proves (for one operation sequence): the backend answers every operation exactly as the
/// [`MemStore`] model does, including LSNs, payloads, poisoning and every `recover`, and after a
/// final restart both recover the same state.
pub fn check_against_model<B: Backend>(backend: &mut B, ops: &[Op]) {
    let mut store = backend.fresh();
    let mut model = MemStore::new();
    let mut snapshot_floor: Lsn = 0;
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Commit(batch) => {
                assert_eq!(
                    outcome(store.commit(batch)),
                    outcome(model.commit(batch)),
                    "op {i}: {op:?}"
                );
            }
            Op::FailingCommit(batch) => {
                backend.fail_next_commit(&mut store);
                model.fail_next_commit();
                assert_eq!(
                    outcome(store.commit(batch)),
                    outcome(model.commit(batch)),
                    "op {i}: {op:?}"
                );
            }
            Op::Snapshot { back, bytes } => {
                let lsn = model.last_lsn().saturating_sub(*back).max(snapshot_floor);
                let got = outcome(store.put_snapshot(lsn, bytes));
                let want = outcome(model.put_snapshot(lsn, bytes));
                assert_eq!(got, want, "op {i}: snapshot at {lsn}");
                if want.is_ok() {
                    snapshot_floor = lsn;
                }
            }
            Op::Reopen => {
                store = backend.reopen(store);
                model = model.reopen();
            }
            Op::Recover => {
                assert_eq!(
                    outcome(store.recover()),
                    outcome(model.recover()),
                    "op {i}: recover"
                );
            }
            Op::Payload(job) => {
                assert_eq!(
                    outcome(store.payload(job)),
                    outcome(model.payload(job)),
                    "op {i}: payload {job:?}"
                );
            }
        }
        assert_eq!(store.last_lsn(), model.last_lsn(), "op {i}: last LSN");
    }
    let mut store = backend.reopen(store);
    let mut model = model.reopen();
    assert_eq!(
        outcome(store.recover()),
        outcome(model.recover()),
        "final recover"
    );
}

/// Declares one `#[test]` per conformance check for a backend: `conformance_tests!(MyBackend::default())`.
#[macro_export]
macro_rules! conformance_tests {
    ($backend:expr) => {
        #[test]
        fn round_trip() {
            let mut backend = $backend;
            if !$crate::conformance::Backend::available(&backend) {
                return;
            }
            $crate::conformance::round_trip(&mut backend);
        }
        #[test]
        fn lsn_contiguity() {
            let mut backend = $backend;
            if !$crate::conformance::Backend::available(&backend) {
                return;
            }
            $crate::conformance::lsn_contiguity(&mut backend);
        }
        #[test]
        fn empty_batches() {
            let mut backend = $backend;
            if !$crate::conformance::Backend::available(&backend) {
                return;
            }
            $crate::conformance::empty_batches(&mut backend);
        }
        #[test]
        fn payloads() {
            let mut backend = $backend;
            if !$crate::conformance::Backend::available(&backend) {
                return;
            }
            $crate::conformance::payloads(&mut backend);
        }
        #[test]
        fn snapshot_and_pruning() {
            let mut backend = $backend;
            if !$crate::conformance::Backend::available(&backend) {
                return;
            }
            $crate::conformance::snapshot_and_pruning(&mut backend);
        }
        #[test]
        fn snapshot_arguments_checked() {
            let mut backend = $backend;
            if !$crate::conformance::Backend::available(&backend) {
                return;
            }
            $crate::conformance::snapshot_arguments_checked(&mut backend);
        }
        #[test]
        fn poisoning_after_failed_commit() {
            let mut backend = $backend;
            if !$crate::conformance::Backend::available(&backend) {
                return;
            }
            $crate::conformance::poisoning_after_failed_commit(&mut backend);
        }
        #[test]
        fn corrupted_record_detected() {
            let mut backend = $backend;
            if !$crate::conformance::Backend::available(&backend) {
                return;
            }
            $crate::conformance::corrupted_record_detected(&mut backend);
        }
        #[test]
        fn missing_record_detected() {
            let mut backend = $backend;
            if !$crate::conformance::Backend::available(&backend) {
                return;
            }
            $crate::conformance::missing_record_detected(&mut backend);
        }
        #[test]
        fn corrupted_snapshot_detected() {
            let mut backend = $backend;
            if !$crate::conformance::Backend::available(&backend) {
                return;
            }
            $crate::conformance::corrupted_snapshot_detected(&mut backend);
        }
    };
}
