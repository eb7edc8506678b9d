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

use crash_support::{Child, kill_and_check, write_until_killed};
use fairway_store::RedbStore;
use fairway_store::conformance::TempDir;
use std::path::Path;
use std::time::Duration;

/// Set only in the child: the data directory to write to.
const CHILD_ENV: &str = "FAIRWAY_STORE_CRASH_CHILD_DIR";
/// Kill-and-recover rounds on one directory. A commit split into two transactions is caught
/// in about three rounds of four, so five rounds miss it about once in a thousand runs.
const ROUNDS: u32 = 5;

/// The child's writer loop. As an ordinary test (no env var) it does nothing; the parent runs
/// the test binary again with only this test selected and the env var set.
#[test]
fn crash_child_writer() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let mut store = RedbStore::open(Path::new(&dir)).expect("child: open");
    write_until_killed(&mut store);
}

// Proves: after SIGKILL at an arbitrary point of a commit loop, every acknowledged LSN is
// recovered with its exact event (from the log or covered by the snapshot), no batch is
// partially visible (the log ends on a batch boundary and that batch's payload is present),
// payload deletes are as durable as puts, and a recovered store accepts more commits.
#[test]
fn kill_9_mid_load_loses_nothing_acknowledged() {
    let dir = TempDir::new("crash");
    let child = Child {
        test: "crash_child_writer",
        env: CHILD_ENV,
        value: dir.path().as_os_str(),
        settle: Duration::from_millis(200),
    };
    kill_and_check(
        ROUNDS,
        &child,
        || RedbStore::open(dir.path()).expect("reopen after the crash"),
        |_| String::new(),
    );
}
