//! Behaviour specific to the embedded backend: the data directory and the format version.

use fairway_store::conformance::{TempDir, sample_events};
use fairway_store::{
    Batch, DB_FILE_NAME, EventStore, FORMAT_VERSION, RedbStore, StoreError,
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
