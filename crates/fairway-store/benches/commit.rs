//! Group-commit throughput: events per second at 1, 100 and 1000 events per durable commit.
//!
//! `RedbStore` pays one fsync per commit (`Durability::Immediate`); `MemStore` runs the same
//! encoding and bookkeeping with no disk, so the ratio between the two at each batch size is the
//! share of the cost that is the flush. Every 100,000 events the bench snapshots (untimed), as
//! the server will, so the log and the file stay bounded however many iterations criterion runs.
//!
//! Run: `cargo bench -p fairway-store --bench commit`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use fairway_store::conformance::{TempDir, sample_events};
use fairway_store::{Batch, EventStore, Lsn, MemStore, RedbStore};
use std::time::{Duration, Instant};

/// Events between two (untimed) snapshots.
const SNAPSHOT_EVERY_EVENTS: Lsn = 100_000;

/// Times `iters` commits of `batch`, snapshotting outside the timed part.
fn timed_commits(store: &mut impl EventStore, batch: &Batch, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let start = Instant::now();
        let lsn = store.commit(batch).expect("commit");
        total += start.elapsed();
        if lsn % SNAPSHOT_EVERY_EVENTS < batch.events.len() as Lsn {
            store.put_snapshot(lsn, b"bench").expect("snapshot");
        }
    }
    total
}

fn commit(c: &mut Criterion) {
    let mut group = c.benchmark_group("commit");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    for size in [1u64, 100, 1000] {
        let batch = Batch::of_events(sample_events(1, size));
        group.throughput(Throughput::Elements(size));

        let dir = TempDir::new("bench");
        let mut redb = RedbStore::open(dir.path()).expect("open a bench store");
        group.bench_with_input(BenchmarkId::new("redb", size), &batch, |b, batch| {
            b.iter_custom(|iters| timed_commits(&mut redb, batch, iters))
        });
        drop(redb);

        let mut mem = MemStore::new();
        group.bench_with_input(BenchmarkId::new("mem", size), &batch, |b, batch| {
            b.iter_custom(|iters| timed_commits(&mut mem, batch, iters))
        });
    }
    group.finish();
}

criterion_group!(benches, commit);
criterion_main!(benches);
