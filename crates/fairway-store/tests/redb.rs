//! Behaviour specific to the embedded backend: the data directory and the format version.

use fairway_store::conformance::{TempDir, sample_events};
use fairway_store::{
    Batch, CodecError, DB_FILE_NAME, EventStore, FORMAT_VERSION, RedbStore, StoreError,
    set_format_version_for_test,
};

// Proves: opening creates the missing directory (and parents) holding exactly one file,
// `fairway.redb`, and a new store starts empty at LSN 0.
#[test]
fn open_creates_the_directory_and_one_file() {
    let root = TempDir::new("layout");
    let dir = root.path().join("nested").join("data");
    let mut store = RedbStore::open(&dir).unwrap();
    assert_eq!(store.last_lsn(), 0);
    assert_eq!(store.recover().unwrap(), Default::default());
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec![DB_FILE_NAME.to_owned()]);
}

// Proves: a store written by a newer format is refused with `NewerFormat` and a message naming
// both versions, and refusing it writes nothing (the same file opens again once the version is
// one this build reads, with its data intact).
#[test]
fn newer_format_is_refused() {
    let dir = TempDir::new("format");
    let mut store = RedbStore::open(dir.path()).unwrap();
    store
        .commit(&Batch::of_events(sample_events(1, 3)))
        .unwrap();
    drop(store);
    set_format_version_for_test(dir.path(), FORMAT_VERSION + 1).unwrap();
    let err = RedbStore::open(dir.path()).unwrap_err();
    match &err {
        StoreError::NewerFormat { found, supported } => {
            assert_eq!((*found, *supported), (FORMAT_VERSION + 1, FORMAT_VERSION));
        }
        other => panic!("expected NewerFormat, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains(&format!("version {}", FORMAT_VERSION + 1)),
        "{message}"
    );
    set_format_version_for_test(dir.path(), FORMAT_VERSION).unwrap();
    let mut store = RedbStore::open(dir.path()).unwrap();
    assert_eq!(store.recover().unwrap().events.len(), 3);
}

// Proves: a file that is not a redb database is refused with an error naming the file, without
// a panic and without being overwritten.
#[test]
fn not_a_store_is_refused() {
    let dir = TempDir::new("garbage");
    std::fs::create_dir_all(dir.path()).unwrap();
    let file = dir.path().join(DB_FILE_NAME);
    let garbage = b"this is not a redb file, just some bytes".repeat(200);
    std::fs::write(&file, &garbage).unwrap();
    let err = RedbStore::open(dir.path()).unwrap_err();
    assert!(err.to_string().contains(DB_FILE_NAME), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), garbage);
}

// Proves: a data directory cannot be opened twice at once (two writers would break the
// single-writer argument of docs/store.md); the second opener gets an error, not a shared file.
#[test]
fn second_opener_is_refused() {
    let dir = TempDir::new("lock");
    let _first = RedbStore::open(dir.path()).unwrap();
    let err = RedbStore::open(dir.path()).unwrap_err();
    assert!(err.to_string().contains("already open"), "{err}");
}

// Proves: a damaged latest snapshot (a flipped bit fails its CRC, a frame cut short its length
// check) is refused at its LSN, and recovery does not fall back: the commit that wrote it pruned
// the snapshot before it and the events both cover, so nothing older is left to start from.
// Refusing writes nothing: the same error comes back after a reopen, the events after the
// snapshot are still stored, and with the frame restored the store recovers in full.
#[test]
fn a_damaged_latest_snapshot_is_refused_not_skipped() {
    let dir = TempDir::new("bad-snapshot");
    let mut store = RedbStore::open(dir.path()).unwrap();
    store
        .commit(&Batch::of_events(sample_events(1, 4)))
        .unwrap();
    store.put_snapshot(2, b"the first snapshot").unwrap();
    store
        .commit(&Batch::of_events(sample_events(5, 4)))
        .unwrap();
    store.put_snapshot(6, b"the second snapshot").unwrap();
    store
        .commit(&Batch::of_events(sample_events(9, 2)))
        .unwrap();
    assert_eq!(store.stored_event_count().unwrap(), 4, "events 7 to 10");
    drop(store);

    let mut original = None;
    RedbStore::tamper(dir.path(), 6, true, |frame| {
        original = Some(frame.clone());
        Some(frame)
    })
    .unwrap();
    let original = original.expect("the snapshot at LSN 6");
    for cut in [false, true] {
        let mut damaged = original.clone();
        if cut {
            damaged.truncate(damaged.len() / 2);
        } else {
            let middle = damaged.len() / 2;
            damaged[middle] ^= 0x10;
        }
        assert!(RedbStore::tamper(dir.path(), 6, true, |_| Some(damaged)).unwrap());
        for _ in 0..2 {
            let mut store = RedbStore::open(dir.path()).unwrap();
            assert_eq!(store.last_lsn(), 10);
            match store.recover() {
                Err(StoreError::CorruptSnapshot { lsn: 6, reason }) => assert!(
                    matches!(
                        (cut, &reason),
                        (false, CodecError::Checksum { .. })
                            | (true, CodecError::LengthMismatch { .. })
                    ),
                    "{reason:?}"
                ),
                other => panic!("a damaged snapshot was not refused at LSN 6: {other:?}"),
            }
            assert_eq!(store.stored_event_count().unwrap(), 4);
        }
    }
    assert!(RedbStore::tamper(dir.path(), 6, true, |_| Some(original)).unwrap());
    let mut store = RedbStore::open(dir.path()).unwrap();
    let recovered = store.recover().unwrap();
    assert_eq!(
        recovered.snapshot,
        Some((6, b"the second snapshot".to_vec()))
    );
    let lsns: Vec<_> = recovered.events.iter().map(|(lsn, _)| *lsn).collect();
    assert_eq!(lsns, vec![7, 8, 9, 10]);
}
