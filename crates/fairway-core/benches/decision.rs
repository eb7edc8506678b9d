//! The cost of one dispatch decision, against the number of queued jobs and of tenants.
//!
//! One decision is one `schedule` call that grants one lease (one worker of capacity cpu = 1,
//! polling without limit) followed by the `finish` of that lease, which frees the capacity for
//! the next decision. That pair is the steady-state work the engine does per job dispatched.
//!
//! The rig is `fairway_core::bench_rig` (feature `bench-rig`), which `fairway bench engine`
//! drives too.
//!
//! 1. `decision_{policy}/{queued}_queued/{tenants}_tenants`: `queued` jobs spread round-robin
//!    over `tenants` tenants are submitted before measuring. After each timed decision a
//!    replacement job for the tenant just served is submitted **outside** the timed region, so
//!    that the queue and every tenant's backlog stay exactly the same size throughout and the
//!    number is the decision alone, not decision plus admission. (Admission is a separate cost
//!    with its own code path; folding it in would hide which of the two grows with size.)
//!    Each decision is timed with `Instant` (a TSC read, about 20 ns here), the same method as
//!    `fairway bench engine`, which also reports percentiles and memory.
//! 2. `idle_tenants_{policy}/{idle}`: 10^4 queued jobs from 10 active tenants, with 0 or 10^5
//!    idle tenants that each submitted one job, saw it finish, and now exist with empty queues.
//!    The engine indexes only tenants with queued work, so the two should cost the same.
//!
//! 3. `job_ids_fair/{random,sequential}`: the target configuration (10^6 queued, 10^4 tenants)
//!    with random job ids (the default everywhere else) and with sequential ones (`1`, `2`, ...).
//!
//! Run with `cargo bench -p fairway-core --bench decision`. The largest configurations fill
//! 10^6 jobs (a few seconds each) and use criterion's minimum of 10 samples. Without `--bench`
//! (as under `cargo test --benches`) criterion runs each benchmark once; then only queues up to
//! 10^4 jobs are built, as a smoke test.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use fairway_core::bench_rig::{JobIds, Rig, policy};

const POLICIES: [&str; 3] = ["fair", "drf", "fifo"];
const QUEUED: [usize; 4] = [1_000, 10_000, 100_000, 1_000_000];
const TENANTS: [usize; 4] = [10, 1_000, 10_000, 100_000];

/// A rig running `policy` with `queued` jobs spread round-robin over `tenants` tenants.
fn filled(policy_name: &str, queued: usize, tenants: usize, job_ids: JobIds) -> Rig {
    let policy = policy(policy_name).unwrap_or_else(|e| panic!("policy {policy_name}: {e:?}"));
    let mut rig = Rig::new(policy, queued + 1_024, job_ids, false);
    let tenants = rig.add_tenants("tenant", tenants);
    rig.fill(tenants, queued);
    rig
}

/// Times `iters` decisions, replacing each dispatched job outside the timed region.
fn time_decisions(rig: &mut Rig, iters: u64) -> Duration {
    let mut timed = Duration::ZERO;
    for _ in 0..iters {
        let start = Instant::now();
        let lease = black_box(rig.decide());
        timed += start.elapsed();
        rig.replace(&lease);
    }
    timed
}

/// Whether criterion measures (`cargo bench`) rather than smoke-tests (`cargo test --benches`).
fn measuring() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn decision(c: &mut Criterion) {
    let max_queued = if measuring() { usize::MAX } else { 10_000 };
    for policy in POLICIES {
        let mut group = c.benchmark_group(format!("decision_{policy}"));
        for queued in QUEUED.into_iter().filter(|&q| q <= max_queued) {
            // Few, short samples for the big queues: a decision there costs microseconds, so
            // even 10 samples hold thousands of decisions; filling the queue is the slow part.
            let (samples, seconds) = if queued >= 100_000 { (10, 2) } else { (20, 2) };
            group.sample_size(samples);
            group.warm_up_time(Duration::from_millis(500));
            group.measurement_time(Duration::from_secs(seconds));
            for tenants in TENANTS.into_iter().filter(|&t| t <= queued) {
                let id = BenchmarkId::new(format!("{queued}_queued"), format!("{tenants}_tenants"));
                // Filled on first use, so that a filtered-out benchmark builds nothing, and
                // outside `iter_custom`, so that the fill is not counted as warm-up.
                let mut rig: Option<Rig> = None;
                group.bench_function(id, |b| {
                    let rig =
                        rig.get_or_insert_with(|| filled(policy, queued, tenants, JobIds::Random));
                    b.iter_custom(|iters| time_decisions(rig, iters));
                });
            }
        }
        group.finish();
    }
}

/// Active tenants and their backlog in the idle-tenant comparison.
const ACTIVE_TENANTS: usize = 10;
const ACTIVE_QUEUED: usize = 10_000;

fn idle_tenants(c: &mut Criterion) {
    let idle_counts: &[usize] = if measuring() {
        &[0, 100_000]
    } else {
        &[0, 100]
    };
    for policy in POLICIES {
        let mut group = c.benchmark_group(format!("idle_tenants_{policy}"));
        group.sample_size(20);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
        for &idle in idle_counts {
            let mut rig: Option<Rig> = None;
            group.bench_function(BenchmarkId::from_parameter(idle), |b| {
                let rig = rig.get_or_insert_with(|| {
                    let policy = fairway_core::bench_rig::policy(policy).expect("policy");
                    let mut rig =
                        Rig::new(policy, ACTIVE_QUEUED + idle + 1_024, JobIds::Random, false);
                    // Each idle tenant submits one job and sees it run to completion.
                    let idle = rig.add_tenants("idle", idle);
                    rig.idle(idle);
                    let active = rig.add_tenants("tenant", ACTIVE_TENANTS);
                    rig.fill(active, ACTIVE_QUEUED);
                    rig
                });
                b.iter_custom(|iters| time_decisions(rig, iters));
            });
        }
        group.finish();
    }
}

/// Job ids as producers often write them (`1`, `2`, ...) against random ones, at the target
/// configuration of 10^6 queued jobs and 10^4 tenants under `fair`. The engine keys its job
/// tables by id, so how well their hash spreads such ids is part of every decision.
fn job_ids(c: &mut Criterion) {
    let (queued, tenants) = if measuring() {
        (1_000_000, 10_000)
    } else {
        (10_000, 100)
    };
    let mut group = c.benchmark_group("job_ids_fair");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    for ids in [JobIds::Random, JobIds::Sequential] {
        let mut rig: Option<Rig> = None;
        group.bench_function(BenchmarkId::from_parameter(ids.name()), |b| {
            let rig = rig.get_or_insert_with(|| filled("fair", queued, tenants, ids));
            b.iter_custom(|iters| time_decisions(rig, iters));
        });
    }
    group.finish();
}

criterion_group!(benches, decision, idle_tenants, job_ids);
criterion_main!(benches);
