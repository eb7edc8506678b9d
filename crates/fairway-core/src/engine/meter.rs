//! How fast queued work leaves its queue, measured for admission's predictions.
//!
//! Admission predicts a job's wait as the work queued ahead of it over the rate at which that
//! queue is served. The rate is *measured*, in the same unit as the backlog (estimated cost of
//! the jobs dispatched), and only over windows during which the queue never emptied: then it is
//! the service the queue gets while it waits for capacity, whatever shares that capacity with
//! it (other tenants under the fair policies, other classes, the time workers spend between
//! jobs). A queue that is dispatched from as fast as work arrives gives no sample, and needs
//! none: nothing waits in it. Two queues are measured: each leaf (a tenant's band under `fair`,
//! a tenant under the flat policies) and each shape (its class and placement), the latter kept
//! by the shape's description after its last job is gone so that the next busy period starts
//! measured.

use super::Engine;
use crate::ids::{NodeIdx, ShapeId};
use crate::time::{Dur, Time};

/// The shortest window a rate is measured over.
pub(crate) const METER_WINDOW: Dur = Dur::from_millis(500);

/// How many shapes' meters outlive their shapes (beyond it the archive restarts).
pub(crate) const METER_ARCHIVE_MAX: usize = 4096;

/// The service rate of one queue while it is backlogged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct RateMeter {
    /// Start of the current window.
    pub window_start: Time,
    /// Cost dispatched from the queue in the current window.
    pub window_cost: u128,
    /// The queue has stayed backlogged since `window_start`.
    pub clean: bool,
    /// Smoothed rate, cost units per second.
    pub smoothed: u128,
    /// The last window's rate, cost units per second.
    pub last: u128,
    /// Windows measured.
    pub samples: u32,
}

impl RateMeter {
    /// Before a change at `now` to the queue: a queue that was empty starts a window; one that
    /// stayed backlogged for a whole window closes it as a sample.
    pub fn touch(&mut self, now: Time, was_backlogged: bool) {
        if !was_backlogged || !self.clean {
            *self = RateMeter {
                window_start: now,
                window_cost: 0,
                clean: true,
                ..*self
            };
            return;
        }
        if let Some(rate) = self.window_rate(now) {
            self.smoothed = if self.samples == 0 {
                rate
            } else {
                (self.smoothed * 3 + rate) / 4
            };
            self.last = rate;
            self.samples = self.samples.saturating_add(1);
            self.window_start = now;
            self.window_cost = 0;
        }
    }

    /// The queue emptied: the window in progress measures nothing.
    pub fn emptied(&mut self) {
        self.clean = false;
    }

    /// A job costing `cost` left the queue for a worker.
    ///
    /// Service has resumed, so a last window in which nothing was served (no worker for the
    /// queue yet, say) no longer describes the queue: it is forgotten, the smoothed rate
    /// standing in for it, or, when every window so far was unserved, no sample at all
    /// (predictions then fall back as for a queue never measured) until the next window
    /// measures the queue again. Kept, it read as a queue nobody serves (the longest wait,
    /// an hour's retry hint) for as long as the queue's backlog kept draining within a
    /// window, since only a window backlogged throughout is a sample: a queue whose workers
    /// came a second late refused nearly every job after they came.
    pub fn dispatched(&mut self, cost: u128) {
        if self.samples > 0 && self.last == 0 {
            if self.smoothed > 0 {
                self.last = self.smoothed;
            } else {
                self.samples = 0;
            }
        }
        self.window_cost = self.window_cost.saturating_add(cost);
    }

    /// The rate of the window in progress, once it is long enough to be a sample.
    fn window_rate(&self, now: Time) -> Option<u128> {
        let elapsed = now.since(self.window_start);
        (self.clean && elapsed >= METER_WINDOW)
            .then(|| self.window_cost.saturating_mul(1_000_000_000) / elapsed.0 as u128)
    }

    /// The rate to predict with at `now`, if measured: the lower of the smoothed rate and the
    /// latest window (a slowdown counts at once, a speed-up once it lasts), and of the window
    /// in progress, so that a queue nobody serves any more shows it before its next event.
    pub fn rate(&self, now: Time) -> Option<u128> {
        let closed = (self.samples > 0).then(|| self.smoothed.min(self.last));
        match (closed, self.window_rate(now)) {
            (Some(c), Some(w)) => Some(c.min(w)),
            (c, w) => c.or(w),
        }
    }
}

impl Engine {
    /// Before job of shape `shape` enters leaf `leaf` (not on a trial re-entry, nor while
    /// restoring: meters are restored as they were).
    pub(crate) fn meter_enqueue(&mut self, leaf: NodeIdx, shape: ShapeId) {
        let now = self.applying_at;
        let node = &mut self.nodes[leaf.ix()];
        node.meter.touch(now, node.queued_work.jobs > 0);
        let backlogged = self
            .backlog
            .get(&(self.shapes.get(shape).class, shape))
            .is_some_and(|b| b.queued_jobs > 0);
        self.meters.entry(shape).or_default().touch(now, backlogged);
    }

    /// After a job of shape `shape` left leaf `leaf`, with `dispatched` its cost when it left
    /// for a worker (not for a cancellation or a drop); `leaf_empty` and `shape_empty` say
    /// whether the two queues are now empty.
    pub(crate) fn meter_dequeue(
        &mut self,
        leaf: NodeIdx,
        shape: ShapeId,
        dispatched: Option<u128>,
        leaf_empty: bool,
        shape_empty: bool,
    ) {
        let now = self.applying_at;
        let node = &mut self.nodes[leaf.ix()];
        node.meter.touch(now, true);
        if let Some(cost) = dispatched {
            node.meter.dispatched(cost);
        }
        if leaf_empty {
            node.meter.emptied();
        }
        let m = self.meters.entry(shape).or_default();
        m.touch(now, true);
        if let Some(cost) = dispatched {
            m.dispatched(cost);
        }
        if shape_empty {
            m.emptied();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Time {
        Time(ms * 1_000_000)
    }

    #[test]
    fn a_queue_that_empties_gives_no_sample() {
        let mut m = RateMeter::default();
        // Busy periods of 100 ms, each ended by the dispatch that empties the queue.
        for i in 0..20 {
            m.touch(at(i * 200), false);
            m.touch(at(i * 200 + 100), true);
            m.dispatched(7);
            m.emptied();
        }
        assert_eq!(m.rate(at(4_000)), None);
        assert_eq!(m.samples, 0);
    }

    #[test]
    fn a_backlogged_window_is_a_sample_in_cost_per_second() {
        let mut m = RateMeter::default();
        m.touch(at(0), false);
        // 10 dispatches of cost 100 in 500 ms, the queue never empty: 2,000 per second.
        for i in 1..=10 {
            m.dispatched(100);
            m.touch(at(i * 50), true);
        }
        assert_eq!(m.samples, 1);
        assert_eq!(m.rate(at(500)), Some(2_000));
        // The next window has just begun: the sample stands.
        m.dispatched(100);
        m.touch(at(550), true);
        assert_eq!(m.rate(at(550)), Some(2_000));
    }

    #[test]
    fn an_unserved_window_is_forgotten_once_service_resumes() {
        // Backlogged from 0 with no worker: the dispatch at 1 s closes a window of nothing.
        let mut m = RateMeter::default();
        m.touch(at(0), false);
        m.touch(at(1_000), true);
        assert_eq!(m.rate(at(1_000)), Some(0), "unserved until the dispatch");
        m.dispatched(100);
        assert_eq!(m.rate(at(1_000)), None, "never served before: no sample");
        // A queue measured before its stall falls back to its smoothed rate.
        let mut m = RateMeter::default();
        m.touch(at(0), false);
        m.dispatched(1_000);
        m.touch(at(500), true);
        assert_eq!(m.rate(at(500)), Some(2_000));
        m.touch(at(1_000), true);
        assert_eq!(
            m.rate(at(1_000)),
            Some(0),
            "a window of nothing counts at once"
        );
        m.dispatched(100);
        assert_eq!(
            m.rate(at(1_000)),
            Some(1_500),
            "the smoothed rate stands in"
        );
        // The next backlogged window is a sample again.
        m.dispatched(400);
        m.touch(at(1_500), true);
        assert_eq!(m.rate(at(1_500)), Some(1_000));
    }

    #[test]
    fn a_slowdown_counts_at_once_and_a_stall_before_the_next_event() {
        let mut m = RateMeter::default();
        m.touch(at(0), false);
        // Fast: 1,000 per window of 500 ms.
        for w in 0..4u64 {
            m.dispatched(1_000);
            m.touch(at((w + 1) * 500), true);
        }
        assert_eq!(m.rate(at(2_000)), Some(2_000));
        // Slow: a quarter of that. The smoothed rate lags; the prediction does not.
        m.dispatched(250);
        m.touch(at(2_500), true);
        assert_eq!(m.rate(at(2_500)), Some(500));
        // Nothing dispatched since: once a window has passed, the queue reads as unserved.
        assert_eq!(m.rate(at(2_999)), Some(500));
        assert_eq!(m.rate(at(3_000)), Some(0));
    }
}
