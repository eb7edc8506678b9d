//! The cost of one dispatch decision, against the number of queued jobs and of tenants.
//!
//! One decision is one `schedule` call that grants one lease (one worker of capacity cpu = 1,
//! polling without limit) followed by the `finish` of that lease, which frees the capacity for
//! the next decision. That pair is the steady-state work the engine does per job dispatched.
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

use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use fairway_core::{Admission, Dur, Engine, EngineConfig, JobSpec, Outcome, Policy, Time};
use fairway_core::{Lease, WorkerOffer};

const POLICIES: [&str; 3] = ["fair", "drf", "fifo"];
const QUEUED: [usize; 4] = [1_000, 10_000, 100_000, 1_000_000];
const TENANTS: [usize; 4] = [10, 1_000, 10_000, 100_000];
/// Declared (and actual) run time of every job: `now` advances by this much per decision, so
/// that usage equals the estimate and the fair policy's charges are never reconciled.
const ESTIMATE: Dur = Dur::from_millis(10);

/// An engine with one worker and a fixed backlog, driven one decision at a time.
struct Rig {
    engine: Engine,
    now: Time,
    tenant_names: Vec<String>,
    /// Tenant number by name, to find whom a lease's job belonged to.
    tenant_index: HashMap<String, usize>,
    next_job: u64,
    job_ids: JobIds,
}

/// How job ids are formed. Producers choose ids, and the engine keys its job tables by them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JobIds {
    /// 16 hex digits, a bijective mix of a counter: spread like random UUIDs.
    Random,
    /// The counter in decimal (`1`, `2`, ...), as many producers number their jobs.
    Sequential,
}

impl JobIds {
    fn name(self) -> &'static str {
        match self {
            JobIds::Random => "random",
            JobIds::Sequential => "sequential",
        }
    }
}

/// SplitMix64's finalizer: a bijection on u64 that spreads a counter over all bits.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rig {
    /// An engine running `policy` with one polling worker of capacity cpu = 1, room for
    /// `max_jobs` live jobs, and no job yet.
    fn new(policy: &str, max_jobs: usize, job_ids: JobIds) -> Rig {
        let policy = Policy::from_text(&format!("[policy]\nname = \"{policy}\"\n"))
            .unwrap_or_else(|e| panic!("policy {policy}: {e:?}"));
        let config = EngineConfig {
            capture_events: false,
            decision_ring: 0,
            max_jobs,
            ..Default::default()
        };
        let mut engine = Engine::new(Time::ZERO, policy, config);
        let offer = WorkerOffer {
            worker: "w0".into(),
            pool: "default".into(),
            capacity: [("cpu".into(), 1.0)].into(),
            labels: Default::default(),
            max_jobs: u32::MAX,
        };
        engine.worker_ready(Time::ZERO, &offer).expect("worker");
        Rig {
            engine,
            now: Time::ZERO,
            tenant_names: Vec::new(),
            tenant_index: HashMap::new(),
            next_job: 0,
            job_ids,
        }
    }

    /// A rig with `queued` jobs spread round-robin over `tenants` tenants.
    fn filled(policy: &str, queued: usize, tenants: usize, job_ids: JobIds) -> Rig {
        let mut rig = Rig::new(policy, queued + 1_024, job_ids);
        rig.add_tenants("tenant", tenants);
        for k in 0..queued {
            rig.submit(k % tenants);
        }
        rig
    }

    /// Names `count` more tenants `{prefix}-{i}`; they exist in the engine once they submit.
    fn add_tenants(&mut self, prefix: &str, count: usize) -> std::ops::Range<usize> {
        let first = self.tenant_names.len();
        for i in 0..count {
            let name = format!("{prefix}-{i}");
            self.tenant_index.insert(name.clone(), first + i);
            self.tenant_names.push(name);
        }
        first..self.tenant_names.len()
    }

    /// Submits one job for tenant number `tenant`.
    fn submit(&mut self, tenant: usize) {
        self.next_job += 1;
        let id = match self.job_ids {
            JobIds::Random => format!("{:016x}", mix(self.next_job)),
            JobIds::Sequential => self.next_job.to_string(),
        };
        let spec = JobSpec {
            estimate: Some(ESTIMATE),
            ..JobSpec::new(id, &self.tenant_names[tenant])
        };
        let admission = self.engine.submit(self.now, spec);
        assert!(
            matches!(admission, Admission::Accepted { .. }),
            "{admission:?}"
        );
    }

    /// One decision: a scheduling pass that grants exactly one lease, and its completion.
    fn decide(&mut self) -> Lease {
        let mut leases = self.engine.schedule(self.now);
        assert_eq!(leases.len(), 1, "one worker, one free slot: one lease");
        let lease = leases.pop().expect("one lease");
        self.now = self.now.plus(ESTIMATE);
        self.engine
            .finish(
                self.now,
                &lease.job,
                lease.epoch,
                Outcome::Succeeded,
                None,
                None,
            )
            .expect("finish a live lease");
        lease
    }

    /// Submits a job for the tenant whose job `lease` ran, keeping the backlog's shape.
    fn replace(&mut self, lease: &Lease) {
        let status = self
            .engine
            .status(&lease.job)
            .expect("finished jobs are remembered");
        let tenant = self.tenant_index[&status.tenant];
        self.submit(tenant);
    }

    /// Times `iters` decisions, replacing each dispatched job outside the timed region.
    fn time_decisions(&mut self, iters: u64) -> Duration {
        let mut timed = Duration::ZERO;
        for _ in 0..iters {
            let start = Instant::now();
            let lease = black_box(self.decide());
            timed += start.elapsed();
            self.replace(&lease);
        }
        timed
    }
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
                    let rig = rig.get_or_insert_with(|| {
                        Rig::filled(policy, queued, tenants, JobIds::Random)
                    });
                    b.iter_custom(|iters| rig.time_decisions(iters));
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
                    let mut rig = Rig::new(policy, ACTIVE_QUEUED + idle + 1_024, JobIds::Random);
                    // Each idle tenant submits one job and sees it run to completion.
                    for t in rig.add_tenants("idle", idle) {
                        rig.submit(t);
                        rig.decide();
                    }
                    let active = rig.add_tenants("tenant", ACTIVE_TENANTS);
                    for k in 0..ACTIVE_QUEUED {
                        rig.submit(active.start + k % ACTIVE_TENANTS);
                    }
                    rig
                });
                b.iter_custom(|iters| rig.time_decisions(iters));
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
            let rig = rig.get_or_insert_with(|| Rig::filled("fair", queued, tenants, ids));
            b.iter_custom(|iters| rig.time_decisions(iters));
        });
    }
    group.finish();
}

criterion_group!(benches, decision, idle_tenants, job_ids);
criterion_main!(benches);
