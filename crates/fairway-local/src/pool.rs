//! A small pool of worker threads that pop closures from a [`Scheduler`] and run them.

use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::{self, JoinHandle};

use crate::scheduler::Scheduler;

/// A task for the [`WorkerPool`]: an opaque closure, run once.
pub type Task = Box<dyn FnOnce() + Send + 'static>;

/// Worker threads that run the tasks of one [`Scheduler`] until it is closed and drained.
///
/// A task that panics is counted and the worker carries on, so one bad task cannot shrink the
/// pool. Dropping the pool (or calling [`shutdown`](WorkerPool::shutdown)) closes the scheduler,
/// lets the workers run every task already queued, and joins them.
pub struct WorkerPool {
    scheduler: Scheduler<Task>,
    workers: Vec<JoinHandle<()>>,
    tasks_panicked: Arc<AtomicU64>,
}

impl WorkerPool {
    /// Starts `threads` workers popping from `scheduler`.
    ///
    /// # Errors
    ///
    /// If the operating system refuses a thread; the workers already started are shut down
    /// (which closes `scheduler`).
    ///
    /// # Panics
    ///
    /// If `threads` is zero.
    pub fn start(scheduler: Scheduler<Task>, threads: usize) -> io::Result<WorkerPool> {
        assert!(threads > 0, "a worker pool needs at least one thread");
        let mut pool = WorkerPool {
            scheduler,
            workers: Vec::with_capacity(threads),
            tasks_panicked: Arc::new(AtomicU64::new(0)),
        };
        for index in 0..threads {
            let scheduler = pool.scheduler.clone();
            let tasks_panicked = Arc::clone(&pool.tasks_panicked);
            let worker = thread::Builder::new()
                .name(format!("fairway-local-{index}"))
                .spawn(move || run_worker(&scheduler, &tasks_panicked))?;
            pool.workers.push(worker);
        }
        Ok(pool)
    }

    /// The scheduler the workers pop from; push tasks through it.
    pub fn scheduler(&self) -> &Scheduler<Task> {
        &self.scheduler
    }

    /// How many tasks have panicked so far.
    pub fn tasks_panicked(&self) -> u64 {
        self.tasks_panicked.load(Ordering::Relaxed)
    }

    /// Closes the scheduler, waits until every queued task has run, and joins the workers.
    /// Returns how many tasks panicked over the pool's life.
    pub fn shutdown(mut self) -> u64 {
        self.stop();
        self.tasks_panicked()
    }

    fn stop(&mut self) {
        self.scheduler.close();
        for worker in self.workers.drain(..) {
            // Task panics are caught inside the worker, so a join error is a bug in this module.
            worker
                .join()
                .expect("worker thread panicked outside a task");
        }
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run_worker(scheduler: &Scheduler<Task>, tasks_panicked: &AtomicU64) {
    while let Some(task) = scheduler.pop() {
        if panic::catch_unwind(AssertUnwindSafe(task)).is_err() {
            tasks_panicked.fetch_add(1, Ordering::Relaxed);
        }
    }
}
