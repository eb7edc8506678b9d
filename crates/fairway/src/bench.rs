//! `fairway bench engine`: the cost of one dispatch decision against queue size and tenant
//! count, outside criterion, with percentiles and memory per queued job.
//!
//! The measurement is the one of `crates/fairway-core/benches/decision.rs`, on the same rig
//! (`fairway_core::bench_rig`, feature `bench-rig`): an engine with one polling worker of
//! capacity cpu = 1 and `queued` jobs spread round-robin over `tenants` tenants; one decision is
//! a `schedule` that grants one lease plus the `finish` of that lease, timed individually with
//! `Instant`; after each, a replacement job for the tenant just served is submitted outside the
//! timed region, so the backlog keeps its exact size and shape.
//!
//! Memory per queued job comes from a counting wrapper around the allocator (mimalloc; this
//! binary's `#[global_allocator]`): bytes allocated and still live after the fill minus before
//! it, divided by the number of jobs. It counts only while a fill is measured, so timed
//! decisions pay one relaxed load per allocation and nothing more. Each submission of the fill
//! is timed too, and the slowest reported (`ns_per_fill_submit_max`): a table that grows all
//! at once stalls one submission.
//!
//! Output: one JSON line per configuration on stdout (progress on stderr). Exit codes: 0, or 2
//! for an invalid argument.

use clap::{Args, Subcommand};
use fairway_core::Policy;
use fairway_core::bench_rig::{JobIds, Rig};
use fairway_local::seed002::PriorityTaskScheduler;
use mimalloc::MiMalloc;
use serde_json::json;
use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub target: BenchTarget,
}

#[derive(Subcommand, Debug)]
pub enum BenchTarget {
    /// Time one dispatch decision (schedule one job, finish it) against 10^3..10^7 queued
    /// jobs and 10..10^5 tenants per policy, measure bytes per queued job, and compare seed
    /// 002's two-tier pop. Prints one JSON line per configuration.
    Engine(EngineArgs),
    /// Run the peer harness's scenarios (enqueue, e2e, fair, prio) against a real `fairway
    /// serve` through the Rust SDK over loopback HTTP, durability on; one JSON line per
    /// scenario and variant, in the harness's shape.
    E2e(Box<crate::bench_e2e::E2eArgs>),
    /// Resident memory of a server holding 10^6 queued jobs, per job.
    Memory(crate::bench_e2e::MemoryArgs),
    /// Time from process start to ready with 10^6 queued jobs in the store, with and without
    /// snapshots.
    Restart(crate::bench_e2e::RestartArgs),
}

#[derive(Args, Debug)]
pub struct EngineArgs {
    /// Policies to measure, comma-separated: fifo, strict, round-robin, drr, wfq, drf, sjf, fair.
    #[arg(long, value_delimiter = ',', default_value = "fair,drf,fifo")]
    pub policies: Vec<String>,
    /// Smallest queue measured; sizes are the powers of ten from here to --max-queued.
    #[arg(long, default_value_t = 1_000)]
    pub min_queued: usize,
    /// Largest queue measured. 10^7 needs several GB of memory and about a minute per fill.
    #[arg(long, default_value_t = 1_000_000)]
    pub max_queued: usize,
    /// Smallest tenant count measured; counts are the powers of ten from here to --max-tenants.
    #[arg(long, default_value_t = 10)]
    pub min_tenants: usize,
    /// Largest tenant count measured (counts above the queue size are skipped).
    #[arg(long, default_value_t = 100_000)]
    pub max_tenants: usize,
    /// Timed decisions (or seed-002 pops) per configuration.
    #[arg(long, default_value_t = 20_000)]
    pub decisions: usize,
    /// Untimed decisions run first, so that every tenant's state has settled.
    #[arg(long, default_value_t = 2_000)]
    pub warmup: usize,
    /// How job ids are formed: random (16 hex digits, spread like UUIDs), sequential (1, 2,
    /// ...) or uuid (a UUIDv7's text, as the Rust SDK makes them).
    #[arg(long, default_value = "random")]
    pub job_ids: JobIds,
    /// Skip the comparison with seed 002's two-tier pop.
    #[arg(long)]
    pub no_seed002: bool,
    /// Skip the idle-tenant comparison.
    #[arg(long)]
    pub no_idle: bool,
    /// Let the engine capture its events, as the server's does (each decision then also
    /// builds its events, and the rig drops them as the server's writer takes them). Without
    /// it, the engine applies the effects directly, as an embedder that needs no log would.
    #[arg(long)]
    pub capture_events: bool,
    /// Decision records the engine keeps (the server keeps 4,096, for `explain` and the
    /// decisions API; each decision then also writes one). 0: none.
    #[arg(long, default_value_t = 0)]
    pub decision_ring: usize,
}

pub fn run(args: BenchArgs) -> ExitCode {
    match args.target {
        BenchTarget::Engine(args) => engine(args),
        BenchTarget::E2e(args) => crate::bench_e2e::e2e(*args),
        BenchTarget::Memory(args) => crate::bench_e2e::memory(args),
        BenchTarget::Restart(args) => crate::bench_e2e::restart(args),
    }
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("fairway bench: {message}");
    ExitCode::from(2)
}

// ---- Counting allocator ----------------------------------------------------------------------

/// The binary's allocator: mimalloc (glibc's malloc and free were a quarter of the server's CPU
/// under load; BENCHMARKS.md), counting live bytes while [`COUNTING`] is on.
struct CountingAlloc;

/// Whether allocations are being counted (only while a fill is measured).
static COUNTING: AtomicBool = AtomicBool::new(false);
/// Bytes allocated minus bytes freed while counting.
static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

/// Allocation calls (alloc, alloc_zeroed, realloc) while counting.
static ALLOC_CALLS: AtomicUsize = AtomicUsize::new(0);

fn count(delta: isize, call: bool) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE_BYTES.fetch_add(delta, Ordering::Relaxed);
        if call {
            ALLOC_CALLS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

// SAFETY: every call is forwarded unchanged to `MiMalloc`; the wrapper only adds bookkeeping.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        let p = unsafe { MiMalloc.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize, true);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { MiMalloc.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize, true);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `MiMalloc` with `layout` (we allocate only through it).
        unsafe { MiMalloc.dealloc(ptr, layout) };
        count(-(layout.size() as isize), false);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; `new_size` is the caller's, checked by its contract.
        let p = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize, true);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: CountingAlloc = CountingAlloc;

/// Runs `f` and returns the bytes it left allocated and the allocation calls it made.
fn allocations(f: impl FnOnce()) -> (isize, usize) {
    let before = (
        LIVE_BYTES.load(Ordering::Relaxed),
        ALLOC_CALLS.load(Ordering::Relaxed),
    );
    COUNTING.store(true, Ordering::Relaxed);
    f();
    COUNTING.store(false, Ordering::Relaxed);
    (
        LIVE_BYTES.load(Ordering::Relaxed) - before.0,
        ALLOC_CALLS.load(Ordering::Relaxed) - before.1,
    )
}

// ---- Timing the rig ------------------------------------------------------------------------

/// Runs `warmup` decisions, then times `decisions` of them one by one; also times the
/// replacement submissions, separately.
fn measure(rig: &mut Rig, warmup: usize, decisions: usize) -> Timings {
    for _ in 0..warmup {
        let lease = rig.decide();
        rig.replace(&lease);
    }
    let mut decide_ns = Vec::with_capacity(decisions);
    let mut submit_ns = Vec::with_capacity(decisions);
    for _ in 0..decisions {
        let start = Instant::now();
        let lease = black_box(rig.decide());
        let decided = Instant::now();
        rig.replace(&lease);
        let submitted = Instant::now();
        decide_ns.push(ns(decided - start));
        submit_ns.push(ns(submitted - decided));
    }
    Timings {
        decide: Percentiles::of(decide_ns),
        submit: Percentiles::of(submit_ns),
    }
}

fn ns(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

struct Timings {
    decide: Percentiles,
    submit: Percentiles,
}

/// Nearest-rank percentiles of a sample of durations in ns.
struct Percentiles {
    sorted: Vec<u64>,
    sum: u128,
}

impl Percentiles {
    fn of(mut sample: Vec<u64>) -> Percentiles {
        assert!(!sample.is_empty(), "percentiles of an empty sample");
        sample.sort_unstable();
        let sum = sample.iter().map(|&x| x as u128).sum();
        Percentiles {
            sorted: sample,
            sum,
        }
    }

    fn p(&self, q: f64) -> u64 {
        let rank = (q * self.sorted.len() as f64).ceil() as usize;
        self.sorted[rank.clamp(1, self.sorted.len()) - 1]
    }

    fn mean(&self) -> f64 {
        self.sum as f64 / self.sorted.len() as f64
    }

    /// Events per second if they ran back to back at the measured mean.
    fn per_s(&self) -> f64 {
        (1e9 / self.mean()).round()
    }
}

// ---- The command ------------------------------------------------------------------------------

/// Powers of ten from `min` (rounded up to one) to `max`.
fn powers_of_ten(min: usize, max: usize) -> Vec<usize> {
    std::iter::successors(Some(1usize), |&x| x.checked_mul(10))
        .skip_while(|&x| x < min)
        .take_while(|&x| x <= max)
        .collect()
}

fn engine(args: EngineArgs) -> ExitCode {
    let mut policies = Vec::new();
    for name in &args.policies {
        match fairway_core::bench_rig::policy(name) {
            Ok(p) => policies.push((name.as_str(), p)),
            Err(_) => {
                return fail(format!(
                    "--policies: unknown policy {name:?} (fifo, strict, round-robin, drr, wfq, \
                     drf, sjf or fair)"
                ));
            }
        }
    }
    if args.decisions == 0 {
        return fail("--decisions must be at least 1");
    }
    let queued_sizes = powers_of_ten(args.min_queued.max(1_000), args.max_queued);
    let tenant_counts = powers_of_ten(args.min_tenants.max(10), args.max_tenants);
    if queued_sizes.is_empty() && args.no_seed002 && args.no_idle {
        return fail("--min-queued/--max-queued leave no queue size (at least 1000) to measure");
    }
    for (name, policy) in &policies {
        for &queued in &queued_sizes {
            for &tenants in tenant_counts.iter().filter(|&&t| t <= queued) {
                eprintln!("fairway bench: {name}, {queued} queued, {tenants} tenants");
                decision_line(name, policy, queued, tenants, &args);
            }
        }
    }
    if !args.no_idle {
        for (name, policy) in &policies {
            for idle in [0, args.max_tenants] {
                eprintln!(
                    "fairway bench: {name}, {IDLE_ACTIVE_QUEUED} queued, {idle} idle tenants"
                );
                idle_line(name, policy, idle, &args);
            }
        }
    }
    if !args.no_seed002 {
        let fair = fairway_core::bench_rig::policy("fair").expect("fair policy");
        for sources in tenant_counts {
            eprintln!("fairway bench: seed 002 pop and fair engine, {sources} sources");
            seed002_line(&fair, sources, &args);
        }
    }
    ExitCode::SUCCESS
}

/// One configuration of the main grid.
fn decision_line(name: &str, policy: &Policy, queued: usize, tenants: usize, args: &EngineArgs) {
    let mut rig = Rig::with_decision_ring(
        policy.clone(),
        queued + 1_024,
        args.job_ids,
        args.capture_events,
        args.decision_ring,
    );
    let tenants_range = rig.add_tenants("tenant", tenants);
    let fill_start = Instant::now();
    // `Rig::fill`, one submission at a time, keeping the slowest: a table that grows all at
    // once shows there.
    let mut slowest_submit = Duration::ZERO;
    let (bytes, _) = allocations(|| {
        for t in Rig::fill_order(tenants_range, queued) {
            let started = Instant::now();
            rig.submit(t);
            slowest_submit = slowest_submit.max(started.elapsed());
        }
    });
    let fill_s = fill_start.elapsed().as_secs_f64();
    let t = measure(&mut rig, args.warmup, args.decisions);
    // Allocation calls of the decisions alone, the replacement submissions not counted.
    let mut calls = 0;
    for _ in 0..ALLOC_SAMPLE_DECISIONS {
        let mut lease = None;
        calls += allocations(|| lease = Some(rig.decide())).1;
        rig.replace(&lease.expect("a decision"));
    }
    let allocs_per_decision = calls as f64 / ALLOC_SAMPLE_DECISIONS as f64;
    let line = json!({
        "bench": "engine",
        "policy": name,
        "job_ids": args.job_ids.name(),
        "events_captured": args.capture_events,
        "decision_ring": args.decision_ring,
        "queued": queued,
        "tenants": tenants,
        "decisions": args.decisions,
        "decisions_per_s": t.decide.per_s(),
        "ns_per_decision_p50": t.decide.p(0.50),
        "ns_per_decision_p99": t.decide.p(0.99),
        "ns_per_decision_p999": t.decide.p(0.999),
        "ns_per_decision_max": t.decide.p(1.0),
        "ns_per_decision_mean": t.decide.mean().round(),
        "ns_per_submit_p50": t.submit.p(0.50),
        "allocs_per_decision": (allocs_per_decision * 10.0).round() / 10.0,
        "bytes_per_queued_job": (bytes as f64 / queued as f64 * 10.0).round() / 10.0,
        "fill_s": (fill_s * 100.0).round() / 100.0,
        "ns_per_fill_submit_max": ns(slowest_submit),
    });
    println!("{line}");
    drop_timed(rig);
}

/// Decisions over which allocation calls are counted (after the timed ones).
const ALLOC_SAMPLE_DECISIONS: usize = 1_000;

/// Active tenants and their backlog in the idle-tenant comparison.
const IDLE_ACTIVE_TENANTS: usize = 10;
const IDLE_ACTIVE_QUEUED: usize = 10_000;

/// 10^4 jobs of 10 active tenants, with `idle` tenants that each ran one job and are now empty.
fn idle_line(name: &str, policy: &Policy, idle: usize, args: &EngineArgs) {
    let mut rig = Rig::new(
        policy.clone(),
        IDLE_ACTIVE_QUEUED + idle + 1_024,
        args.job_ids,
        args.capture_events,
    );
    let idle_tenants = rig.add_tenants("idle", idle);
    rig.idle(idle_tenants);
    let active = rig.add_tenants("tenant", IDLE_ACTIVE_TENANTS);
    rig.fill(active, IDLE_ACTIVE_QUEUED);
    let t = measure(&mut rig, args.warmup, args.decisions);
    let line = json!({
        "bench": "engine_idle_tenants",
        "policy": name,
        "job_ids": args.job_ids.name(),
        "events_captured": args.capture_events,
        "queued": IDLE_ACTIVE_QUEUED,
        "active_tenants": IDLE_ACTIVE_TENANTS,
        "idle_tenants": idle,
        "ns_per_decision_p50": t.decide.p(0.50),
        "ns_per_decision_p99": t.decide.p(0.99),
    });
    println!("{line}");
    drop_timed(rig);
}

/// Sources with tasks in the seed-002 comparison, and tasks each keeps queued.
const BUSY_SOURCES: usize = 4;
const TASKS_PER_BUSY_SOURCE: usize = 8;
/// Timed work per seed-002 configuration at most: at 10^5 sources one pop scans thousands of
/// queues, and a few thousand pops already give a stable p99.
const SEED002_BUDGET: Duration = Duration::from_secs(5);

/// Seed 002's pop with `sources` minor queues of which 4 hold tasks (spread over the creation
/// order; the major channel empty), against the fair engine with `sources` tenants of which 4
/// have queued jobs and the rest ran one job each and are empty.
fn seed002_line(fair: &Policy, sources: usize, args: &EngineArgs) {
    let busy: Vec<usize> = (0..BUSY_SOURCES.min(sources))
        .map(|k| k * sources / BUSY_SOURCES.min(sources))
        .collect();
    let seed = PriorityTaskScheduler::<usize>::new(1_024);
    let senders: Vec<SyncSender<usize>> = (0..sources).map(|_| seed.new_minor_queue(16)).collect();
    for &index in &busy {
        for _ in 0..TASKS_PER_BUSY_SOURCE {
            senders[index]
                .try_send(index)
                .expect("room in a busy queue");
        }
    }
    // One pop takes a task and the push that follows, untimed, returns it to its source, so the
    // same queues stay busy, as the engine's replacement submission does.
    let mut pop_ns = Vec::with_capacity(args.decisions);
    let mut spent = Duration::ZERO;
    for _ in 0..args.decisions {
        let start = Instant::now();
        let index = black_box(seed.pop()).expect("busy sources have tasks");
        let took = start.elapsed();
        senders[index].try_send(index).expect("room to push back");
        pop_ns.push(ns(took));
        spent += took;
        if spent > SEED002_BUDGET && pop_ns.len() >= 100 {
            break;
        }
    }
    let pops = Percentiles::of(pop_ns);
    drop(senders);

    let max_jobs = sources + busy.len() * TASKS_PER_BUSY_SOURCE + 1_024;
    let mut rig = Rig::new(fair.clone(), max_jobs, args.job_ids, args.capture_events);
    for t in rig.add_tenants("tenant", sources) {
        if !busy.contains(&t) {
            rig.submit(t);
            rig.decide();
        }
    }
    for &t in &busy {
        for _ in 0..TASKS_PER_BUSY_SOURCE {
            rig.submit(t);
        }
    }
    let engine = measure(&mut rig, args.warmup, args.decisions);
    let line = json!({
        "bench": "seed002_pop",
        "minor_sources": sources,
        "busy_sources": busy.len(),
        "job_ids": args.job_ids.name(),
        "events_captured": args.capture_events,
        "pops": pops.sorted.len(),
        "ns_per_pop_p50": pops.p(0.50),
        "ns_per_pop_p99": pops.p(0.99),
        "fair_tenants": sources,
        "fair_ns_per_decision_p50": engine.decide.p(0.50),
        "fair_ns_per_decision_p99": engine.decide.p(0.99),
        "pop_over_decision_p50": (pops.p(0.50) as f64 / engine.decide.p(0.50) as f64 * 100.0)
            .round()
            / 100.0,
    });
    println!("{line}");
    drop_timed(rig);
}

/// Drops a rig, saying how long it took when that is noticeable (10^7 jobs take seconds).
fn drop_timed(rig: Rig) {
    let start = Instant::now();
    drop(rig);
    let took = start.elapsed();
    if took > Duration::from_secs(1) {
        eprintln!(
            "fairway bench: freeing the engine took {:.1} s",
            took.as_secs_f64()
        );
    }
}
