//! `fairway-local` against a faithful port of seed 002 (`fairway_local::seed002`).
//!
//! 1. `pop_4_busy_of_n/{impl}/{n}` (criterion): the major queue is empty and `n` minor sources
//!    exist, of which only 4 have tasks, spread evenly over the creation order (the seed's scan
//!    starts at a random position, so it probes about n/8 idle queues before a busy one). One
//!    iteration pops a task and pushes it back into the source it came from, so the same 4 stay
//!    busy; the push is O(1) in both implementations.
//! 2. `pop_all_idle_of_n/{impl}/{n}` (criterion): nothing is queued anywhere; the cost of a pop
//!    that finds nothing, which is what the seed's idle workers pay on every spin.
//! 3. Minor throughput under continuous major load (timed windows, printed as a table after
//!    criterion's output): two worker threads, 64 major tasks and 4 x 16 minor tasks in
//!    circulation, each task re-submitting itself when it runs, so neither band ever empties.
//!    The load is closed-loop rather than fed by a producer thread because a producer would
//!    compete with the two workers for a two-core machine and let the major queue run dry,
//!    which would hand the seed minor work it does not get under truly continuous load. It
//!    counts how many minor tasks run in the window.
//!
//! Run with `cargo bench -p fairway-local`. Without `--bench` (as under `cargo test
//! --benches`), criterion runs each benchmark once and the window is shortened to a smoke test.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use fairway_core::Weight;
use fairway_local::seed002::PriorityTaskScheduler;
use fairway_local::{Config, MinorSource, Scheduler, Task, WorkerPool};

const SOURCE_COUNTS: [usize; 4] = [10, 100, 1_000, 10_000];
const BUSY_SOURCES: usize = 4;
const TASKS_PER_BUSY_SOURCE: usize = 8;

fn units(n: u64) -> Weight {
    Weight::from_units(n).unwrap()
}

/// The busy sources, spread over the creation order.
fn busy_indices(n: usize) -> Vec<usize> {
    (0..BUSY_SOURCES).map(|k| k * n / BUSY_SOURCES).collect()
}

fn seed_with_sources(
    n: usize,
    busy: bool,
) -> (PriorityTaskScheduler<usize>, Vec<SyncSender<usize>>) {
    let scheduler = PriorityTaskScheduler::new(1_024);
    let senders: Vec<_> = (0..n).map(|_| scheduler.new_minor_queue(16)).collect();
    if busy {
        for index in busy_indices(n) {
            for _ in 0..TASKS_PER_BUSY_SOURCE {
                senders[index].try_send(index).unwrap();
            }
        }
    }
    (scheduler, senders)
}

fn ours_with_sources(
    config: Config,
    n: usize,
    busy: bool,
) -> (Scheduler<usize>, Vec<MinorSource<usize>>) {
    let scheduler = Scheduler::new(config);
    let sources: Vec<_> = (0..n)
        .map(|_| scheduler.minor_source(Weight::ONE).unwrap())
        .collect();
    if busy {
        for index in busy_indices(n) {
            for _ in 0..TASKS_PER_BUSY_SOURCE {
                sources[index].push(index).unwrap();
            }
        }
    }
    (scheduler, sources)
}

fn ours_configs() -> [(&'static str, Config); 2] {
    [
        ("absolute", Config::absolute()),
        ("weighted_9_1", Config::weighted(units(9), units(1))),
    ]
}

fn pop_4_busy_of_n(c: &mut Criterion) {
    let mut group = c.benchmark_group("pop_4_busy_of_n");
    for n in SOURCE_COUNTS {
        let (seed, senders) = seed_with_sources(n, true);
        group.bench_with_input(BenchmarkId::new("seed002", n), &n, |b, _| {
            b.iter(|| {
                let index = seed.pop().expect("4 sources are busy");
                senders[index].try_send(black_box(index)).unwrap();
            })
        });
        for (name, config) in ours_configs() {
            let (ours, sources) = ours_with_sources(config, n, true);
            group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter(|| {
                    let index = ours.try_pop().expect("4 sources are busy");
                    sources[index].push(black_box(index)).unwrap();
                })
            });
        }
    }
    group.finish();
}

fn pop_all_idle_of_n(c: &mut Criterion) {
    let mut group = c.benchmark_group("pop_all_idle_of_n");
    for n in SOURCE_COUNTS {
        let (seed, _senders) = seed_with_sources(n, false);
        group.bench_with_input(BenchmarkId::new("seed002", n), &n, |b, _| {
            b.iter(|| assert!(black_box(seed.pop()).is_none()))
        });
        for (name, config) in ours_configs() {
            let (ours, _sources) = ours_with_sources(config, n, false);
            group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter(|| assert!(black_box(ours.try_pop()).is_none()))
            });
        }
    }
    group.finish();
}

// ---- Minor throughput under continuous major load ----

const WORKERS: usize = 2;
const MAJOR_IN_FLIGHT: usize = 64;
const MINOR_SOURCES: usize = 4;
const MINOR_IN_FLIGHT_PER_SOURCE: usize = 16;

#[derive(Default)]
struct Counters {
    major: AtomicU64,
    minor: [AtomicU64; MINOR_SOURCES],
    stop: AtomicBool,
}

/// A little CPU work per task (a few hundred nanoseconds), so a run is not only queue overhead.
fn work() {
    let mut x = 0u64;
    for i in 0..500u64 {
        x = black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    black_box(x);
}

fn seed_major(s: Arc<PriorityTaskScheduler<Task>>, c: Arc<Counters>) -> Task {
    Box::new(move || {
        work();
        c.major.fetch_add(1, Ordering::Relaxed);
        if !c.stop.load(Ordering::Relaxed) {
            s.push_major(seed_major(Arc::clone(&s), Arc::clone(&c)));
        }
    })
}

fn seed_minor(q: SyncSender<Task>, index: usize, c: Arc<Counters>) -> Task {
    Box::new(move || {
        work();
        c.minor[index].fetch_add(1, Ordering::Relaxed);
        if !c.stop.load(Ordering::Relaxed) {
            q.send(seed_minor(q.clone(), index, Arc::clone(&c)))
                .unwrap();
        }
    })
}

fn ours_major(s: Scheduler<Task>, c: Arc<Counters>) -> Task {
    Box::new(move || {
        work();
        c.major.fetch_add(1, Ordering::Relaxed);
        if !c.stop.load(Ordering::Relaxed) {
            // Only fails once the pool is closing, after `stop` is set.
            let _ = s.push_major(ours_major(s.clone(), Arc::clone(&c)));
        }
    })
}

fn ours_minor(q: Arc<MinorSource<Task>>, index: usize, c: Arc<Counters>) -> Task {
    Box::new(move || {
        work();
        c.minor[index].fetch_add(1, Ordering::Relaxed);
        if !c.stop.load(Ordering::Relaxed) {
            let _ = q.push(ours_minor(Arc::clone(&q), index, Arc::clone(&c)));
        }
    })
}

struct Throughput {
    major: u64,
    minor: [u64; MINOR_SOURCES],
    elapsed: Duration,
}

fn snapshot(c: &Counters) -> (u64, [u64; MINOR_SOURCES]) {
    (
        c.major.load(Ordering::Relaxed),
        std::array::from_fn(|i| c.minor[i].load(Ordering::Relaxed)),
    )
}

/// Counts the tasks run between a warm-up and the end of `window`.
fn measure(counters: &Counters, window: Duration) -> Throughput {
    thread::sleep(window / 4);
    let (major_0, minor_0) = snapshot(counters);
    let started = Instant::now();
    thread::sleep(window);
    let (major_1, minor_1) = snapshot(counters);
    let elapsed = started.elapsed();
    counters.stop.store(true, Ordering::Relaxed);
    Throughput {
        major: major_1 - major_0,
        minor: std::array::from_fn(|i| minor_1[i] - minor_0[i]),
        elapsed,
    }
}

fn throughput_seed(window: Duration) -> Throughput {
    let scheduler = Arc::new(PriorityTaskScheduler::<Task>::new(1_024));
    let counters = Arc::new(Counters::default());
    for _ in 0..MAJOR_IN_FLIGHT {
        scheduler.push_major(seed_major(Arc::clone(&scheduler), Arc::clone(&counters)));
    }
    for index in 0..MINOR_SOURCES {
        let queue = scheduler.new_minor_queue(MINOR_IN_FLIGHT_PER_SOURCE * 2);
        for _ in 0..MINOR_IN_FLIGHT_PER_SOURCE {
            queue
                .send(seed_minor(queue.clone(), index, Arc::clone(&counters)))
                .unwrap();
        }
    }
    // The seed's workers: `for { if t := s.Pop(); t != nil { t() } }`, yielding when idle.
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (scheduler, counters) = (Arc::clone(&scheduler), Arc::clone(&counters));
            thread::spawn(move || {
                loop {
                    match scheduler.pop() {
                        Some(task) => task(),
                        None if counters.stop.load(Ordering::Relaxed) => break,
                        None => thread::yield_now(),
                    }
                }
            })
        })
        .collect();
    let result = measure(&counters, window);
    for worker in workers {
        worker.join().unwrap();
    }
    result
}

fn throughput_ours(config: Config, window: Duration) -> Throughput {
    let pool = WorkerPool::start(Scheduler::new(config), WORKERS).unwrap();
    let counters = Arc::new(Counters::default());
    let scheduler = pool.scheduler().clone();
    for _ in 0..MAJOR_IN_FLIGHT {
        scheduler
            .push_major(ours_major(scheduler.clone(), Arc::clone(&counters)))
            .unwrap();
    }
    for index in 0..MINOR_SOURCES {
        let source = Arc::new(scheduler.minor_source(Weight::ONE).unwrap());
        for _ in 0..MINOR_IN_FLIGHT_PER_SOURCE {
            source
                .push(ours_minor(
                    Arc::clone(&source),
                    index,
                    Arc::clone(&counters),
                ))
                .unwrap();
        }
    }
    let result = measure(&counters, window);
    pool.shutdown(); // runs what is left; tasks stop re-submitting once `stop` is set
    result
}

/// Runs each scheduler `repeats` times and reports the run with the median minor throughput:
/// the machine is shared, so single windows vary; the share does not.
fn minor_throughput_under_major_load(window: Duration, repeats: usize) {
    // (name, configured minor floor, None for the seed port or our scheduler's config)
    let runs = [
        ("seed002", "0% (none)", None),
        ("absolute", "0% (none)", Some(Config::absolute())),
        (
            "weighted_9_1",
            "10%",
            Some(Config::weighted(units(9), units(1))),
        ),
        (
            "weighted_19_1",
            "5%",
            Some(Config::weighted(units(19), units(1))),
        ),
    ];
    println!();
    println!(
        "minor throughput under continuous major load: {WORKERS} workers, median of {repeats} \
         windows of {} s",
        window.as_secs_f64()
    );
    println!();
    println!(
        "| scheduler | major tasks/s | minor tasks/s | minor share | configured floor | \
         minor tasks per source |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | --- |");
    for (name, floor, config) in runs {
        let mut results: Vec<Throughput> = (0..repeats)
            .map(|_| match config {
                None => throughput_seed(window),
                Some(config) => throughput_ours(config, window),
            })
            .collect();
        let rate = |t: &Throughput| t.minor.iter().sum::<u64>() as f64 / t.elapsed.as_secs_f64();
        let major_rate = |t: &Throughput| t.major as f64 / t.elapsed.as_secs_f64();
        results.sort_by(|a, b| {
            (rate(a), major_rate(a))
                .partial_cmp(&(rate(b), major_rate(b)))
                .unwrap()
        });
        let t = &results[repeats / 2];
        let minor: u64 = t.minor.iter().sum();
        let share = minor as f64 / (minor + t.major).max(1) as f64;
        println!(
            "| {name} | {:.0} | {:.0} | {:.2}% | {floor} | {:?} |",
            major_rate(t),
            rate(t),
            share * 100.0,
            t.minor,
        );
    }
}

fn main() {
    let bench_mode = std::env::args().any(|arg| arg == "--bench");
    let mut criterion = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args();
    pop_4_busy_of_n(&mut criterion);
    pop_all_idle_of_n(&mut criterion);
    criterion.final_summary();

    if bench_mode {
        minor_throughput_under_major_load(Duration::from_secs(1), 3);
    } else {
        minor_throughput_under_major_load(Duration::from_millis(50), 1);
    }
}
