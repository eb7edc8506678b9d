//! Crash test of the PostgreSQL backend, as `crash.rs` is for redb: a child process commits
//! batches to a `PgStore` in a loop and prints each acknowledged LSN; the parent kills it with
//! SIGKILL mid-load, takes the leader term itself, and checks that everything acknowledged is
//! there, intact, and that no batch is half-visible. Four rounds on one database, each child
//! taking over from the last one's term, as a restarted replica does.
//!
//! SIGKILL ends the client process mid-transaction: PostgreSQL rolls back whatever it had not
//! committed. Durability of what it committed rests on PostgreSQL's WAL flush
//! (`synchronous_commit = on`; docs/store.md). Needs `FAIRWAY_TEST_POSTGRES`; says "skipped"
//! without it.

use fairway_store::conformance::{sample_event, sample_events};
use fairway_store::postgres::testing::TestDb;
use fairway_store::{Batch, EventStore, Lsn, PgStore};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Set only in the child: the database URL to write to.
const CHILD_ENV: &str = "FAIRWAY_STORE_PG_CRASH_CHILD_URL";
/// Events per commit; every batch boundary is a multiple of it.
const BATCH: u64 = 25;
const ROUNDS: u32 = 4;
/// The child snapshots after every this many batches.
const SNAPSHOT_EVERY: u64 = 20;
/// Every child and the checker share one holder id, so each takes the term from the last (a
/// holder may always take its own row, raising the term).
const HOLDER: &str = "crash";

fn payload_key(first: Lsn) -> String {
    format!("batch-{first}")
}

fn payload_bytes(first: Lsn) -> Vec<u8> {
    first.to_le_bytes().repeat(8)
}

fn snapshot_bytes(lsn: Lsn) -> Vec<u8> {
    format!("snapshot@{lsn}").into_bytes()
}

/// The child's writer loop; as an ordinary test (no env var) it does nothing.
#[test]
fn pg_crash_child_writer() {
    let Some(url) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let url = url.into_string().expect("child: URL");
    let mut store =
        PgStore::open_leading(&url, HOLDER, "http://crash.invalid", 60_000).expect("child: open");
    let mut out = std::io::stdout().lock();
    loop {
        let first = store.last_lsn() + 1;
        let batch = Batch {
            events: sample_events(first, BATCH),
            put_payloads: vec![(payload_key(first), payload_bytes(first))],
            delete_payloads: vec![payload_key(first.saturating_sub(2 * BATCH))],
        };
        let lsn = store.commit(&batch).expect("child: commit");
        writeln!(out, "ACK {lsn}").expect("child: stdout");
        out.flush().expect("child: flush");
        if (lsn / BATCH).is_multiple_of(SNAPSHOT_EVERY) {
            store
                .put_snapshot(lsn, &snapshot_bytes(lsn))
                .expect("child: snapshot");
        }
    }
}

/// Runs the child until ~300 ms after its first acknowledgement, kills it with SIGKILL, and
/// returns every LSN it acknowledged.
fn run_and_kill(url: &str) -> Vec<Lsn> {
    let exe = std::env::current_exe().expect("test binary path");
    let mut child = Command::new(exe)
        .args([
            "pg_crash_child_writer",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, url)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the child writer");
    let stdout = child.stdout.take().expect("child stdout");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(lsn) = line.strip_prefix("ACK ") {
                let lsn: Lsn = lsn.parse().expect("ACK line");
                if tx.send(lsn).is_err() {
                    break;
                }
            }
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(60));
    if first.is_ok() {
        std::thread::sleep(Duration::from_millis(300));
    }
    child.kill().expect("kill -9 the child");
    child.wait().expect("reap the child");
    reader.join().expect("reader thread");
    let first = first.expect("the child acknowledged nothing within 60 s");
    std::iter::once(first).chain(rx.iter()).collect()
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
    let mut acked_before = 0;
    for round in 0..ROUNDS {
        let acks = run_and_kill(db.url());
        assert!(
            acks.windows(2).all(|w| w[0] < w[1]),
            "round {round}: acks increase"
        );
        assert!(acks[0] > acked_before, "round {round}: continues the log");
        let acked = *acks.last().expect("at least one ack");

        let mut store = PgStore::open_leading(db.url(), HOLDER, "http://checker.invalid", 60_000)
            .expect("take the term after the crash");
        let last = store.last_lsn();
        assert!(
            last >= acked,
            "round {round}: acknowledged LSN {acked} lost (store ends at {last})"
        );
        assert_eq!(
            last % BATCH,
            0,
            "round {round}: the log ends inside a batch (half-visible commit)"
        );
        let recovered = store.recover().expect("recover after the crash");
        let from = match &recovered.snapshot {
            Some((lsn, bytes)) => {
                assert_eq!(bytes, &snapshot_bytes(*lsn), "snapshot at {lsn} intact");
                lsn + 1
            }
            None => 1,
        };
        let expected: Vec<_> = (from..=last).map(|n| (n, sample_event(n))).collect();
        assert!(
            recovered.events == expected,
            "round {round}: recovered events differ from those committed"
        );
        let newest = last - BATCH + 1;
        assert_eq!(
            store.payload(&payload_key(newest)).unwrap(),
            Some(payload_bytes(newest))
        );
        if newest > 2 * BATCH {
            assert_eq!(
                store.payload(&payload_key(newest - 2 * BATCH)).unwrap(),
                None,
                "the last batch's delete is durable with it"
            );
        }
        println!(
            "round {round}: {} acks, last acked {acked}, recovered up to {last}, snapshot {:?}, term {}",
            acks.len(),
            recovered.snapshot.as_ref().map(|(lsn, _)| *lsn),
            store.fence_of().term
        );
        acked_before = acked;
    }
}
