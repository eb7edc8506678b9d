//! Crash test: a child process commits batches to a `RedbStore` in a loop and prints each
//! acknowledged LSN; the parent kills it with SIGKILL mid-load, reopens the directory and
//! checks that everything acknowledged is there, intact, and that no batch is half-visible
//! (`crash_support`). Five rounds on one directory, so recovery after a crash is also followed
//! by more writes and another crash.
//!
//! SIGKILL ends the process, not the machine: the OS page cache survives, so this proves redb's
//! atomicity and our recovery path, while durability across power loss rests on the fsync that
//! `Durability::Immediate` performs (docs/store.md, "Assumptions about the disk").

mod crash_support;

use crash_support::{Child, kill_and_check, write_until_killed, write_until_killed_staging};
use fairway_store::RedbStore;
use fairway_store::conformance::TempDir;
use std::path::Path;
use std::time::Duration;

/// Set only in the child: the data directory to write to.
const CHILD_ENV: &str = "FAIRWAY_STORE_CRASH_CHILD_DIR";
/// The same, for the child that stages its snapshots.
const STAGING_CHILD_ENV: &str = "FAIRWAY_STORE_CRASH_STAGING_CHILD_DIR";
/// Kill-and-recover rounds on one directory. A commit split into two transactions is caught
/// in about three rounds of four, so five rounds miss it about once in a thousand runs.
const ROUNDS: u32 = 5;

/// A child's side: as an ordinary test (`env` unset) nothing; in the child the parent runs
/// (the test binary again, with only that test selected and `env` set to the data directory),
/// `write` on the store there until killed.
fn child(env: &str, write: fn(&mut RedbStore) -> !) {
    let Some(dir) = std::env::var_os(env) else {
        return;
    };
    let mut store = RedbStore::open(Path::new(&dir)).expect("child: open");
    write(&mut store);
}

/// The parent's side: [`ROUNDS`] of running the child `test` on a directory of its own,
/// killing it and checking the store (`crash_support::kill_and_check`); returns the directory.
fn kill_rounds(label: &str, test: &str, env: &str) -> TempDir {
    let dir = TempDir::new(label);
    let child = Child {
        test,
        env,
        value: dir.path().as_os_str(),
        settle: Duration::from_millis(200),
    };
    kill_and_check(
        ROUNDS,
        &child,
        || RedbStore::open(dir.path()).expect("reopen after the crash"),
        |_| String::new(),
    );
    dir
}

/// The child's writer loop (snapshots stored at once).
#[test]
fn crash_child_writer() {
    child(CHILD_ENV, |store| write_until_killed(store));
}

// Proves: after SIGKILL at an arbitrary point of a commit loop, every acknowledged LSN is
// recovered with its exact event (from the log or covered by the snapshot), no batch is
// partially visible (the log ends on a batch boundary and that batch's payload is present),
// payload deletes are as durable as puts, and a recovered store accepts more commits.
#[test]
fn kill_9_mid_load_loses_nothing_acknowledged() {
    kill_rounds("crash", "crash_child_writer", CHILD_ENV);
}

/// The child's writer loop with staged snapshots.
#[test]
fn crash_child_writer_staging() {
    child(STAGING_CHILD_ENV, |store| write_until_killed_staging(store));
}

// Proves: the same with the snapshots staged, as the server stores them: each put in force by
// the applier thread while commits go on, the log moving between its two files at those
// durable points; a SIGKILL anywhere in that loses nothing acknowledged.
#[test]
fn kill_9_with_snapshots_put_in_force_beside_commits_loses_nothing() {
    let dir = kill_rounds(
        "crash-staging",
        "crash_child_writer_staging",
        STAGING_CHILD_ENV,
    );
    assert!(
        dir.path().join(fairway_store::WAL_FILE_NAME_2).exists(),
        "the log never moved to its second file"
    );
}
