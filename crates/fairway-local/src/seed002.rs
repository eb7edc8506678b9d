//! The baseline: a faithful port of seed 002's `PriorityTaskScheduler` (Go).
//!
//! This module exists to be measured against, not used. It keeps the seed's structure and its
//! costs, one for one:
//!
//! | Go (seed 002)                               | this port                                        |
//! | ------------------------------------------- | ------------------------------------------------ |
//! | `major chan Task` (buffered)                | `std::sync::mpsc::sync_channel(buffer)`          |
//! | `PushMajor`: `s.major <- t` (blocks if full) | [`push_major`](PriorityTaskScheduler::push_major) blocks if full |
//! | `minors sync.Map` of `chan Task`            | `RwLock<Vec<(i64, receiver)>>`: concurrent reads, like `sync.Map` |
//! | `NewMinorQueue`: store, return the chan     | [`new_minor_queue`](PriorityTaskScheduler::new_minor_queue) returns the sending half |
//! | closing the chan                            | dropping the returned `SyncSender`               |
//! | `Pop`: `select` on major with `default`     | `try_recv` on major, else `steal_from_minors`    |
//! | `stealFromMinors`: `Range` + `select default` on every chan, `Delete` closed ones | the same scan: `try_recv` on every receiver, from a random starting point, until one yields; disconnected (closed and drained) ones are deleted |
//!
//! It differs in three details, each forced by Rust's standard library:
//!
//! - std's stable channels are single-consumer, so each receiver sits behind a `Mutex`: one
//!   uncontended lock per probed queue, where Go's `select` reads an empty channel's count
//!   without locking. Measured against the Go original (`benches/seed002_go`, see the README),
//!   the port's cost per probed queue is 1.25x to 1.6x Go's.
//! - Ranging over a Go map starts at a random position on every call and visits the entries in
//!   a fixed cyclic order. A `HashMap` cannot start mid-way, and a fixed start would make the
//!   cost depend on where one process's hash seed happens to put the busy queues, so the
//!   registry is a vector in insertion order, scanned cyclically from a random start per call:
//!   the same visiting pattern, with positions the caller controls.
//! - Deletions found during the scan are applied after it, under the write lock, because the
//!   scan holds the read lock (`sync.Map` allows `Delete` inside `Range`). Removing by id from
//!   the vector is O(N), paid only when a closed queue is found.
//!
//! Its three costs, which [`Scheduler`](crate::Scheduler) avoids: minor queues starve while the
//! major channel has tasks; every pop with an empty major channel probes minor queues one by one
//! until one yields, all of them when none does (O(N) in the number of registered queues, empty
//! or not); and the scheduler tracks its sources' lifecycles, finding closed queues only by
//! scanning them.

use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::sync::{Mutex, PoisonError, RwLock};

/// Seed 002's two-tier scheduler: a major channel with absolute priority and a registry of minor
/// channels scanned in full when the major channel is empty.
pub struct PriorityTaskScheduler<T> {
    major_tx: SyncSender<T>,
    major_rx: Mutex<Receiver<T>>,
    /// `sync.Map` of `id -> chan Task`, in insertion order.
    minors: RwLock<Vec<(i64, Mutex<Receiver<T>>)>>,
    minors_count: AtomicI64,
}

impl<T> PriorityTaskScheduler<T> {
    /// `NewPriorityTaskScheduler(buffer)`: a major channel of `buffer` tasks.
    pub fn new(buffer: usize) -> PriorityTaskScheduler<T> {
        let (major_tx, major_rx) = mpsc::sync_channel(buffer);
        PriorityTaskScheduler {
            major_tx,
            major_rx: Mutex::new(major_rx),
            minors: RwLock::new(Vec::new()),
            minors_count: AtomicI64::new(0),
        }
    }

    /// `PushMajor`: sends `task` on the major channel, blocking while it is full.
    pub fn push_major(&self, task: T) {
        // The scheduler owns the receiver, so the channel cannot be disconnected here.
        self.major_tx
            .send(task)
            .unwrap_or_else(|_| unreachable!("major receiver is owned by the scheduler"));
    }

    /// `NewMinorQueue(buffer)`: registers a new minor channel and returns its sending half.
    /// Dropping every clone of the sender closes the queue; the scheduler deletes it when a
    /// scan finds it closed and drained.
    pub fn new_minor_queue(&self, buffer: usize) -> SyncSender<T> {
        let (tx, rx) = mpsc::sync_channel(buffer);
        let id = self.minors_count.fetch_add(1, Ordering::Relaxed) + 1;
        self.minors
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push((id, Mutex::new(rx)));
        tx
    }

    /// `Pop`: a major task if one is queued, otherwise whatever `steal_from_minors` finds, or
    /// `None` (Go's `nil`). Never blocks; the seed's workers call it in a loop.
    pub fn pop(&self) -> Option<T> {
        let major = self
            .major_rx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .try_recv();
        match major {
            Ok(task) => Some(task),
            Err(_) => self.steal_from_minors(),
        }
    }

    /// `stealFromMinors`: probes every registered minor channel, cyclically from a random
    /// start as Go's map `Range` does, and returns the first task found, deleting channels found
    /// closed and drained on the way.
    fn steal_from_minors(&self) -> Option<T> {
        let mut found = None;
        let mut closed = Vec::new();
        {
            let minors = self.minors.read().unwrap_or_else(PoisonError::into_inner);
            let start = range_start(minors.len());
            let (tail, head) = minors.split_at(start);
            for (key, rx) in head.iter().chain(tail) {
                match rx.lock().unwrap_or_else(PoisonError::into_inner).try_recv() {
                    Ok(task) => {
                        found = Some(task);
                        break;
                    }
                    Err(TryRecvError::Empty) => continue,
                    Err(TryRecvError::Disconnected) => closed.push(*key),
                }
            }
        }
        if !closed.is_empty() {
            let mut minors = self.minors.write().unwrap_or_else(PoisonError::into_inner);
            minors.retain(|(key, _)| !closed.contains(key));
        }
        found
    }

    /// How many minor queues the registry holds, closed ones not yet swept included.
    pub fn minors_registered(&self) -> usize {
        self.minors
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// A random index below `len` (0 when empty), like the random start of Go's map iteration.
/// A per-thread SplitMix64 stream: no shared state between workers, and no dependency.
fn range_start(len: usize) -> usize {
    static STREAMS: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static STATE: Cell<u64> = Cell::new(
            STREAMS.fetch_add(1, Ordering::Relaxed).wrapping_mul(0xD1B5_4A32_D192_ED03),
        );
    }
    if len == 0 {
        return 0;
    }
    let mut z = STATE.with(|state| {
        let next = state.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        state.set(next);
        next
    });
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z % len as u64) as usize
}
