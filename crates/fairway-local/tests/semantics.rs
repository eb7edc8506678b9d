//! Single-threaded semantics of the scheduler: pop order under both policies, the lifecycle of
//! minor sources, limits, closing, and the blocking pops.
//!
//! Tasks are labels: `M<n>` for major tasks, `<source letter><n>` for minor ones, so an
//! expected pop order reads as a timeline.

use std::thread;
use std::time::{Duration, Instant};

use fairway_core::Weight;
use fairway_local::{
    Config, MinorSource, PopTimeoutError, PushError, Scheduler, SourceError, Stats, Task,
    WorkerPool,
};

fn units(n: u64) -> Weight {
    Weight::from_units(n).unwrap()
}

fn push_major(scheduler: &Scheduler<String>, labels: &[&str]) {
    for label in labels {
        scheduler.push_major(label.to_string()).unwrap();
    }
}

fn push_minor(source: &MinorSource<String>, prefix: &str, count: usize) {
    for n in 1..=count {
        source.push(format!("{prefix}{n}")).unwrap();
    }
}

/// Pops until empty and returns the labels joined by spaces.
fn drain(scheduler: &Scheduler<String>) -> String {
    let mut order = Vec::new();
    while let Some(label) = scheduler.try_pop() {
        order.push(label);
    }
    order.join(" ")
}

fn pop_n(scheduler: &Scheduler<String>, n: usize) -> String {
    (0..n)
        .map(|_| scheduler.try_pop().expect("a task is queued"))
        .collect::<Vec<_>>()
        .join(" ")
}

// ---- Policy::Absolute: seed 002's semantics ----

#[test]
fn absolute_pops_major_first_even_when_minor_was_queued_first() {
    // Seed 002's own demonstration: a minor task queued before a major one still runs after it.
    let scheduler = Scheduler::new(Config::absolute());
    let low = scheduler.minor_source(Weight::ONE).unwrap();
    push_minor(&low, "a", 2);
    push_major(&scheduler, &["M1", "M2", "M3"]);
    assert_eq!(drain(&scheduler), "M1 M2 M3 a1 a2");
}

#[test]
fn absolute_returns_to_major_as_soon_as_a_major_task_arrives() {
    // Minor tasks are served only while the major queue is empty, one pop at a time.
    let scheduler = Scheduler::new(Config::absolute());
    let low = scheduler.minor_source(Weight::ONE).unwrap();
    push_minor(&low, "a", 3);
    push_major(&scheduler, &["M1"]);
    assert_eq!(pop_n(&scheduler, 2), "M1 a1");
    push_major(&scheduler, &["M2"]);
    assert_eq!(drain(&scheduler), "M2 a2 a3");
}

#[test]
fn absolute_starves_minor_while_major_is_refilled() {
    // The cost the Weighted policy exists to remove, kept on purpose under Absolute.
    let scheduler = Scheduler::new(Config::absolute());
    let low = scheduler.minor_source(Weight::ONE).unwrap();
    push_minor(&low, "a", 1);
    scheduler.push_major("M".to_string()).unwrap();
    for _ in 0..1_000 {
        assert_eq!(scheduler.try_pop().as_deref(), Some("M"));
        scheduler.push_major("M".to_string()).unwrap();
    }
    assert_eq!(low.len(), 1);
}

#[test]
fn minor_sources_are_served_round_robin_in_proportion_to_weight() {
    // DRR with quantum = weight tasks per round: weights 1, 2, 3 give the pattern a bb ccc.
    let scheduler = Scheduler::new(Config::absolute());
    let a = scheduler.minor_source(units(1)).unwrap();
    let b = scheduler.minor_source(units(2)).unwrap();
    let c = scheduler.minor_source(units(3)).unwrap();
    push_minor(&a, "a", 3);
    push_minor(&b, "b", 6);
    push_minor(&c, "c", 9);
    assert_eq!(
        drain(&scheduler),
        "a1 b1 b2 c1 c2 c3 a2 b3 b4 c4 c5 c6 a3 b5 b6 c7 c8 c9"
    );
}

#[test]
fn fractional_weights_accumulate_deficit_across_rounds() {
    // Weight 0.5 earns half a task per visit: a is served every other round, b every round.
    let scheduler = Scheduler::new(Config::absolute());
    let a = scheduler
        .minor_source(Weight::from_f64(0.5).unwrap())
        .unwrap();
    let b = scheduler.minor_source(units(1)).unwrap();
    push_minor(&a, "a", 2);
    push_minor(&b, "b", 4);
    assert_eq!(drain(&scheduler), "b1 a1 b2 b3 a2 b4");
}

#[test]
fn a_source_that_empties_forfeits_its_deficit_and_rejoins_at_the_back() {
    // Classic DRR: an idle source banks no credit, so it cannot burst when it returns.
    let scheduler = Scheduler::new(Config::absolute());
    let a = scheduler.minor_source(units(3)).unwrap();
    let b = scheduler.minor_source(units(1)).unwrap();
    push_minor(&a, "a", 1); // a earns 3 but uses 1; the unused 2 are dropped when it empties
    push_minor(&b, "b", 3);
    assert_eq!(pop_n(&scheduler, 2), "a1 b1");
    // b has used its quantum, so a is visited next with a fresh quantum of 3, not 3 + 2 = 5:
    // had it kept its deficit, x1..x4 would all run before b2.
    push_minor(&a, "x", 4);
    assert_eq!(drain(&scheduler), "x1 x2 x3 b2 x4 b3");
}

#[test]
fn each_source_and_the_major_queue_are_fifo() {
    let scheduler = Scheduler::new(Config::absolute());
    let a = scheduler.minor_source(units(1000)).unwrap();
    push_minor(&a, "a", 5);
    push_major(&scheduler, &["M1", "M2", "M3"]);
    assert_eq!(drain(&scheduler), "M1 M2 M3 a1 a2 a3 a4 a5");
}

// ---- Policy::Weighted: bands with a floor ----

#[test]
fn weighted_gives_the_minor_band_one_pop_in_ten_at_9_to_1() {
    // With both bands backlogged, every run of 10 pops holds exactly one minor task.
    let scheduler = Scheduler::new(Config::weighted(units(9), units(1)));
    let a = scheduler.minor_source(Weight::ONE).unwrap();
    push_minor(&a, "a", 20);
    for n in 0..180 {
        scheduler.push_major(format!("M{n}")).unwrap();
    }
    for block in 0..20 {
        let ten = pop_n(&scheduler, 10);
        let minor = ten
            .split(' ')
            .filter(|label| label.starts_with('a'))
            .count();
        assert_eq!(minor, 1, "block {block}: {ten}");
    }
}

#[test]
fn weighted_splits_the_minor_floor_across_sources_by_weight() {
    // Band split first (1:1 here), then DRR inside the minor band (a:b = 1:2).
    let scheduler = Scheduler::new(Config::weighted(units(1), units(1)));
    let a = scheduler.minor_source(units(1)).unwrap();
    let b = scheduler.minor_source(units(2)).unwrap();
    push_minor(&a, "a", 2);
    push_minor(&b, "b", 4);
    push_major(&scheduler, &["M1", "M2", "M3", "M4", "M5", "M6"]);
    assert_eq!(drain(&scheduler), "M1 a1 M2 b1 M3 b2 M4 a2 M5 b3 M6 b4");
}

#[test]
fn weighted_is_work_conserving_when_one_band_is_empty() {
    // The floor is a minimum, not a cap: a lone band takes every pop, and credit is not banked
    // while alone, so the 9:1 pattern resumes from scratch when both bands are busy again.
    let scheduler = Scheduler::new(Config::weighted(units(9), units(1)));
    let a = scheduler.minor_source(Weight::ONE).unwrap();
    push_minor(&a, "a", 3);
    assert_eq!(drain(&scheduler), "a1 a2 a3");
    push_major(&scheduler, &["M1", "M2", "M3"]);
    assert_eq!(drain(&scheduler), "M1 M2 M3");
    push_minor(&a, "b", 2);
    for n in 1..=10 {
        scheduler.push_major(format!("N{n}")).unwrap();
    }
    assert_eq!(drain(&scheduler), "N1 N2 N3 N4 N5 b1 N6 N7 N8 N9 N10 b2");
}

#[test]
fn weighted_banks_no_credit_across_a_phase_where_one_band_is_alone() {
    // At 9:1 the minor band's turn comes at the 6th pop of a cycle. Cut the cycle after 5
    // major pops by emptying the major band: the minor band runs alone, and when major work
    // returns the cycle starts over (5 majors first) rather than paying the minor band's
    // half-earned turn out of the next cycle.
    let scheduler = Scheduler::new(Config::weighted(units(9), units(1)));
    let a = scheduler.minor_source(Weight::ONE).unwrap();
    push_minor(&a, "a", 3);
    push_major(&scheduler, &["M1", "M2", "M3", "M4", "M5"]);
    assert_eq!(pop_n(&scheduler, 6), "M1 M2 M3 M4 M5 a1");
    push_major(&scheduler, &["N1", "N2", "N3", "N4", "N5", "N6"]);
    assert_eq!(drain(&scheduler), "N1 N2 N3 N4 N5 a2 N6 a3");
}

// ---- Source lifecycle: no registry, no sweep ----

#[test]
fn only_sources_with_tasks_are_on_the_active_list() {
    // 1,000 idle sources, two busy ones: the active list holds the two, so pops never see the
    // idle ones (the O(1) claim rests on this).
    let scheduler = Scheduler::new(Config::absolute());
    let sources: Vec<_> = (0..1_000)
        .map(|_| scheduler.minor_source(Weight::ONE).unwrap())
        .collect();
    push_minor(&sources[17], "a", 2);
    push_minor(&sources[923], "b", 1);
    let stats = scheduler.stats();
    assert_eq!((stats.sources_active, stats.sources_live), (2, 1_000));
    assert_eq!(drain(&scheduler), "a1 b1 a2");
    assert_eq!(scheduler.stats().sources_active, 0);
}

#[test]
fn dropping_an_empty_source_retires_it_at_once() {
    let scheduler: Scheduler<String> = Scheduler::new(Config::absolute());
    let a = scheduler.minor_source(Weight::ONE).unwrap();
    let _b = scheduler.minor_source(Weight::ONE).unwrap();
    assert_eq!(scheduler.stats().sources_live, 2);
    drop(a);
    assert_eq!(scheduler.stats().sources_live, 1);
}

#[test]
fn a_dropped_sources_remaining_tasks_still_run_then_it_retires() {
    // The producer may go away before its work is done; its tasks are not lost, and the source
    // is freed by the pop of its last task, not by a sweep.
    let scheduler = Scheduler::new(Config::weighted(units(1), units(1)));
    let a = scheduler.minor_source(Weight::ONE).unwrap();
    push_minor(&a, "a", 3);
    push_major(&scheduler, &["M1", "M2", "M3"]);
    drop(a);
    assert_eq!(
        scheduler.stats(),
        Stats {
            major_tasks: 3,
            minor_tasks: 3,
            sources_active: 1,
            sources_live: 1
        }
    );
    assert_eq!(pop_n(&scheduler, 5), "M1 a1 M2 a2 M3");
    assert_eq!(scheduler.stats().sources_live, 1);
    assert_eq!(drain(&scheduler), "a3");
    assert_eq!(scheduler.stats(), Stats::default());
}

// ---- Limits ----

#[test]
fn a_full_major_queue_hands_the_task_back() {
    let scheduler = Scheduler::new(Config {
        major_tasks_max: 2,
        ..Config::absolute()
    });
    push_major(&scheduler, &["M1", "M2"]);
    assert_eq!(
        scheduler.push_major("M3".to_string()),
        Err(PushError::Full("M3".to_string()))
    );
    assert_eq!(pop_n(&scheduler, 1), "M1");
    scheduler.push_major("M3".to_string()).unwrap();
    assert_eq!(drain(&scheduler), "M2 M3");
}

#[test]
fn a_full_source_hands_the_task_back_without_affecting_others() {
    let scheduler = Scheduler::new(Config {
        source_tasks_max: 2,
        ..Config::absolute()
    });
    let a = scheduler.minor_source(Weight::ONE).unwrap();
    let b = scheduler.minor_source(Weight::ONE).unwrap();
    push_minor(&a, "a", 2);
    let refused = a.push("a3".to_string()).unwrap_err();
    assert!(matches!(refused, PushError::Full(_)));
    assert_eq!(refused.into_task(), "a3");
    push_minor(&b, "b", 2);
    assert_eq!(drain(&scheduler), "a1 b1 a2 b2");
}

#[test]
fn the_number_of_live_sources_is_bounded_and_draining_ones_count() {
    let scheduler = Scheduler::new(Config {
        sources_max: 2,
        ..Config::absolute()
    });
    let a = scheduler.minor_source(Weight::ONE).unwrap();
    let _b = scheduler.minor_source(Weight::ONE).unwrap();
    assert_eq!(
        scheduler.minor_source(Weight::ONE).unwrap_err(),
        SourceError::Limit { sources_max: 2 }
    );
    push_minor(&a, "a", 1);
    drop(a); // retired but still draining: still counts
    assert!(scheduler.minor_source(Weight::ONE).is_err());
    assert_eq!(drain(&scheduler), "a1");
    assert!(scheduler.minor_source(Weight::ONE).is_ok());
}

// ---- Closing and blocking pops ----

#[test]
fn close_refuses_new_work_but_queued_tasks_still_pop() {
    let scheduler = Scheduler::new(Config::absolute());
    let a = scheduler.minor_source(Weight::ONE).unwrap();
    push_minor(&a, "a", 1);
    push_major(&scheduler, &["M1"]);
    scheduler.close();
    assert!(scheduler.is_closed());
    assert!(matches!(
        scheduler.push_major("M2".to_string()),
        Err(PushError::Closed(_))
    ));
    assert!(matches!(
        a.push("a2".to_string()),
        Err(PushError::Closed(_))
    ));
    assert_eq!(
        scheduler.minor_source(Weight::ONE).unwrap_err(),
        SourceError::Closed
    );
    assert_eq!(scheduler.pop().as_deref(), Some("M1"));
    assert_eq!(
        scheduler.pop_timeout(Duration::from_secs(5)).as_deref(),
        Ok("a1")
    );
    assert_eq!(scheduler.pop(), None);
    assert_eq!(
        scheduler.pop_timeout(Duration::from_secs(5)),
        Err(PopTimeoutError::Closed)
    );
}

#[test]
fn pop_timeout_waits_about_the_timeout_when_nothing_is_queued() {
    let scheduler: Scheduler<String> = Scheduler::new(Config::absolute());
    let started = Instant::now();
    assert_eq!(
        scheduler.pop_timeout(Duration::from_millis(50)),
        Err(PopTimeoutError::Timeout)
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(50),
        "returned early: {waited:?}"
    );
    assert!(waited < Duration::from_secs(5), "returned late: {waited:?}");
}

#[test]
fn a_waiting_pop_wakes_for_a_push_from_another_thread() {
    // Both blocking pops, on the major band and on a minor source; a lost wakeup would make
    // this hang until the 10 s timeout and fail.
    let scheduler = Scheduler::new(Config::absolute());
    let source = scheduler.minor_source(Weight::ONE).unwrap();
    let waiter = {
        let scheduler = scheduler.clone();
        thread::spawn(move || {
            let first = scheduler.pop();
            let second = scheduler.pop_timeout(Duration::from_secs(10));
            (first, second)
        })
    };
    thread::sleep(Duration::from_millis(20));
    scheduler.push_major("M1".to_string()).unwrap();
    thread::sleep(Duration::from_millis(20));
    source.push("a1".to_string()).unwrap();
    let (first, second) = waiter.join().unwrap();
    assert_eq!(first.as_deref(), Some("M1"));
    assert_eq!(second.as_deref(), Ok("a1"));
}

#[test]
fn close_wakes_every_waiting_pop() {
    let scheduler: Scheduler<String> = Scheduler::new(Config::absolute());
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let scheduler = scheduler.clone();
            thread::spawn(move || scheduler.pop())
        })
        .collect();
    thread::sleep(Duration::from_millis(20));
    scheduler.close();
    for waiter in waiters {
        assert_eq!(waiter.join().unwrap(), None);
    }
}

// ---- Worker pool ----

#[test]
fn the_worker_pool_runs_every_closure_and_survives_panics() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let pool = WorkerPool::start(Scheduler::new(Config::absolute()), 2).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let source = pool.scheduler().minor_source(Weight::ONE).unwrap();
    for n in 0..100 {
        let ran = Arc::clone(&ran);
        let task: Task = Box::new(move || {
            ran.fetch_add(1, Ordering::Relaxed);
            assert!(n % 25 != 0, "task {n} fails on purpose");
        });
        if n % 2 == 0 {
            pool.scheduler().push_major(task).unwrap();
        } else {
            source.push(task).unwrap();
        }
    }
    drop(source);
    // Shutdown runs what is queued before joining.
    let panicked = pool.shutdown();
    assert_eq!(ran.load(Ordering::Relaxed), 100);
    assert_eq!(panicked, 4);
}
