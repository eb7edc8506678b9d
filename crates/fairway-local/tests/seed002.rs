//! The baseline port reproduces seed 002's behaviour, including the costs the crate removes.
//! If these stop holding, the benchmarks no longer compare against the seed.

use fairway_local::seed002::PriorityTaskScheduler;

#[test]
fn seed_main_runs_the_major_task_before_the_earlier_minor_one() {
    // The seed's `main`: a minor task queued first, a major one second; Pop returns the major
    // one, then the minor one, then nil.
    let scheduler = PriorityTaskScheduler::new(10);
    let low_priority = scheduler.new_minor_queue(5);
    low_priority.send("minor").unwrap();
    scheduler.push_major("major");
    assert_eq!(scheduler.pop(), Some("major"));
    assert_eq!(scheduler.pop(), Some("minor"));
    assert_eq!(scheduler.pop(), None);
}

#[test]
fn seed_starves_minor_queues_while_major_is_refilled() {
    let scheduler = PriorityTaskScheduler::new(10);
    let low_priority = scheduler.new_minor_queue(5);
    low_priority.send("minor").unwrap();
    scheduler.push_major("major");
    for _ in 0..1_000 {
        assert_eq!(scheduler.pop(), Some("major"));
        scheduler.push_major("major");
    }
    assert_eq!(scheduler.pop(), Some("major"));
    assert_eq!(scheduler.pop(), Some("minor"));
}

#[test]
fn seed_finds_a_task_in_any_of_many_empty_queues() {
    // The scan reaches whichever registered queue holds a task, however many empty ones there
    // are: the behaviour whose O(N) cost the pop benchmark measures.
    let scheduler = PriorityTaskScheduler::new(10);
    let queues: Vec<_> = (0..1_000).map(|_| scheduler.new_minor_queue(4)).collect();
    for index in [0, 499, 999] {
        queues[index].send(index).unwrap();
        assert_eq!(scheduler.pop(), Some(index));
        assert_eq!(scheduler.pop(), None);
    }
}

#[test]
fn seed_sweeps_a_closed_queue_only_when_a_scan_finds_it_drained() {
    // The lifecycle burden: closing a queue (dropping its sender) leaves it registered; its
    // tasks still come out, and only a later scan that finds it closed and empty deletes it.
    let scheduler = PriorityTaskScheduler::new(10);
    let queue = scheduler.new_minor_queue(5);
    queue.send(1).unwrap();
    queue.send(2).unwrap();
    drop(queue);
    assert_eq!(scheduler.minors_registered(), 1);
    assert_eq!(scheduler.pop(), Some(1));
    assert_eq!(scheduler.pop(), Some(2));
    assert_eq!(scheduler.minors_registered(), 1);
    assert_eq!(scheduler.pop(), None);
    assert_eq!(scheduler.minors_registered(), 0);
}
