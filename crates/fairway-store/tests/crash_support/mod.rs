//! The kill -9 crash test's scaffolding, for every backend (`crash.rs` for redb,
//! `postgres_crash.rs` for PostgreSQL): a child process commits batches in a loop and prints
//! each acknowledged LSN; the parent kills it with SIGKILL mid-load, reopens the store and
//! checks that everything acknowledged is there, intact, and that no batch is half-visible.
//! Round after round on one store, so that recovery after a crash is followed by more writes
//! and another crash.

use fairway_store::conformance::{sample_event, sample_events};
use fairway_store::{Batch, EventStore, Lsn};
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Events per commit; every batch boundary is a multiple of it.
const BATCH: u64 = 25;
/// The child snapshots after every this many batches.
const SNAPSHOT_EVERY: u64 = 20;

fn payload_key(first: Lsn) -> String {
    format!("batch-{first}")
}

fn payload_bytes(first: Lsn) -> Vec<u8> {
    first.to_le_bytes().repeat(8)
}

fn snapshot_bytes(lsn: Lsn) -> Vec<u8> {
    format!("snapshot@{lsn}").into_bytes()
}

/// The child's writer loop, until it is killed: a batch of events with a payload put (and the
/// delete of the payload two batches back) per commit, `ACK <lsn>` on stdout once the commit
/// returned, and a snapshot every [`SNAPSHOT_EVERY`] batches, stored at once
/// ([`EventStore::put_snapshot`]).
pub fn write_until_killed(store: &mut impl EventStore) -> ! {
    write_loop(store, |store, lsn| {
        store
            .put_snapshot(lsn, &snapshot_bytes(lsn))
            .expect("child: snapshot")
    })
}

/// [`write_until_killed`], with each snapshot staged ([`EventStore::stage_snapshot`]): its
/// file written and put in force while the commits go on, as the server does. For the redb
/// store's test (`crash.rs`): the PostgreSQL store stages nothing, it stores at once.
#[allow(dead_code)]
pub fn write_until_killed_staging(store: &mut impl EventStore) -> ! {
    write_loop(store, |store, lsn| {
        // One staged at a time: the store waits for the one before, as the server's does.
        store
            .stage_snapshot(lsn, Box::new(snapshot_bytes(lsn)))
            .expect("child: snapshot")
    })
}

fn write_loop<S: EventStore>(store: &mut S, mut snapshot: impl FnMut(&mut S, Lsn)) -> ! {
    let mut out = std::io::stdout().lock();
    loop {
        let first = store.last_lsn() + 1;
        let batch = Batch {
            events: sample_events(first, BATCH),
            put_payloads: vec![(payload_key(first), payload_bytes(first))],
            // Keep the last two batches' payloads; delete the one before them.
            delete_payloads: vec![payload_key(first.saturating_sub(2 * BATCH))],
        };
        let lsn = store.commit(&batch).expect("child: commit");
        // Only now is the batch acknowledged.
        writeln!(out, "ACK {lsn}").expect("child: stdout");
        out.flush().expect("child: flush");
        if (lsn / BATCH).is_multiple_of(SNAPSHOT_EVERY) {
            snapshot(store, lsn);
        }
    }
}

/// How to run the child: the test binary again, with only `test` selected and `env` set to
/// `value` (the store to write to); it is killed `settle` after its first acknowledgement.
pub struct Child<'a> {
    pub test: &'a str,
    pub env: &'a str,
    pub value: &'a OsStr,
    pub settle: Duration,
}

/// Runs the child, kills it with SIGKILL, and returns every LSN it acknowledged.
fn run_and_kill(child: &Child) -> Vec<Lsn> {
    let exe = std::env::current_exe().expect("test binary path");
    let mut process = Command::new(exe)
        .args([child.test, "--exact", "--nocapture", "--test-threads=1"])
        .env(child.env, child.value)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the child writer");
    let stdout = process.stdout.take().expect("child stdout");
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
        std::thread::sleep(child.settle);
    }
    process.kill().expect("kill -9 the child");
    process.wait().expect("reap the child");
    reader.join().expect("reader thread");
    let first = first.expect("the child acknowledged nothing within 60 s");
    std::iter::once(first).chain(rx.iter()).collect()
}

/// `rounds` times: runs and kills the child, reopens the store with `reopen`, and checks that
/// every acknowledged LSN is recovered with its exact event (from the log or covered by the
/// snapshot), that no batch is partially visible (the log ends on a batch boundary and that
/// batch's payload put and delete are both there), and that each round continues the log.
/// Prints a line per round, ending with `note` of the reopened store.
pub fn kill_and_check<S: EventStore>(
    rounds: u32,
    child: &Child,
    mut reopen: impl FnMut() -> S,
    note: impl Fn(&S) -> String,
) {
    let mut acked_before = 0;
    for round in 0..rounds {
        let acks = run_and_kill(child);
        assert!(
            acks.windows(2).all(|w| w[0] < w[1]),
            "round {round}: acks increase"
        );
        assert!(acks[0] > acked_before, "round {round}: continues the log");
        let acked = *acks.last().expect("at least one ack");

        let mut store = reopen();
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
        assert_eq!(
            recovered.events.len(),
            expected.len(),
            "round {round}: events after the snapshot"
        );
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
            "round {round}: {} acks, last acked {acked}, recovered up to {last}, snapshot {:?}{}",
            acks.len(),
            recovered.snapshot.as_ref().map(|(lsn, _)| *lsn),
            note(&store)
        );
        acked_before = acked;
    }
}
