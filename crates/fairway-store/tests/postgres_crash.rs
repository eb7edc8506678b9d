//! Crash test of the PostgreSQL backend, as `crash.rs` is for redb (`crash_support`): a child
//! process commits batches to a `PgStore` in a loop and prints each acknowledged LSN; the
//! parent kills it with SIGKILL mid-load, takes the leader term itself, and checks that
//! everything acknowledged is there, intact, and that no batch is half-visible. Four rounds on
//! one database, each child taking over from the last one's term, as a restarted replica does.
//!
//! SIGKILL ends the client process mid-transaction: PostgreSQL rolls back whatever it had not
//! committed. Durability of what it committed rests on PostgreSQL's WAL flush
//! (`synchronous_commit = on`; docs/store.md). Needs `FAIRWAY_TEST_POSTGRES`; says "skipped"
//! without it.

mod crash_support;

use crash_support::{Child, kill_and_check, write_until_killed};
use fairway_store::PgStore;
use fairway_store::postgres::testing::TestDb;
use std::ffi::OsStr;
use std::time::Duration;

/// Set only in the child: the database URL to write to.
const CHILD_ENV: &str = "FAIRWAY_STORE_PG_CRASH_CHILD_URL";
const ROUNDS: u32 = 4;
/// Every child and the checker share one holder id, so each takes the term from the last (a
/// holder may always take its own row, raising the term).
const HOLDER: &str = "crash";

/// The child's writer loop; as an ordinary test (no env var) it does nothing.
#[test]
fn pg_crash_child_writer() {
    let Some(url) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let url = url.into_string().expect("child: URL");
    let mut store =
        PgStore::open_leading(&url, HOLDER, "http://crash.invalid", 60_000).expect("child: open");
    write_until_killed(&mut store);
}

// Proves: after SIGKILL at an arbitrary point of a commit loop, every acknowledged LSN is
// recovered with its exact event (from the log or covered by the snapshot), no batch is
// partially visible (the log ends on a batch boundary and that batch's payload put and delete
// are both there), and a later term continues the log.
#[test]
fn postgres_kill_9_mid_load_loses_nothing_acknowledged() {
    let Some(db) = TestDb::create("postgres_kill_9_mid_load_loses_nothing_acknowledged") else {
        return;
    };
    let child = Child {
        test: "pg_crash_child_writer",
        env: CHILD_ENV,
        value: OsStr::new(db.url()),
        settle: Duration::from_millis(300),
    };
    kill_and_check(
        ROUNDS,
        &child,
        || {
            PgStore::open_leading(db.url(), HOLDER, "http://checker.invalid", 60_000)
                .expect("take the term after the crash")
        },
        |store| format!(", term {}", store.fence_of().term),
    );
}
