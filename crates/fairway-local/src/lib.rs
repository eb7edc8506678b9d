//! An in-process two-tier task scheduler: seed 002's design, without its three costs.
//!
//! Worker threads pop tasks from a **major band** (one queue, for the critical path) and a
//! **minor band** made of any number of [`MinorSource`]s that come and go (one per connection or
//! background job). Seed 002 gives the major band absolute priority and, when it is empty,
//! scans every minor source for a task. That design has three costs, and this crate answers
//! each:
//!
//! | seed 002's cost | here |
//! | --- | --- |
//! | minor sources starve under continuous major load | [`Policy::Weighted`] gives the minor band a floor (major 9, minor 1: 10% of pops) while both bands have work, and DRR gives every backlogged source its weighted part of that floor |
//! | a pop with an empty major queue scans all N sources, O(N) | only sources with tasks are on the *active list*; a pop looks at its head, O(1) amortized whatever the number of sources |
//! | the scheduler tracks source lifecycles and sweeps closed ones | dropping a [`MinorSource`] retires it: freed at once if empty, else by the pop that takes its last task; nothing is scanned or swept |
//!
//! [`Policy::Absolute`] keeps seed 002's semantics (major first, minor only when major is empty)
//! for callers who truly want them; it still has the O(1) pop and the handle-owned lifecycle.
//!
//! # Vocabulary
//!
//! Weights are [`fairway_core::Weight`]. The policies mirror the engine's: [`Policy::Absolute`]
//! is the engine's `strict` policy (seed 002's absolute two-tier priority), and
//! [`Policy::Weighted`] is its `fair` policy over two bands, with `drr` (deficit round robin)
//! across the minor sources. A task costs one unit of DRR credit; a source of weight one earns
//! one task per round.
//!
//! # Architecture invariants
//!
//! **Every queue is bounded.** The major queue, each source and the number of sources have
//! limits in [`Config`]; a push at a limit returns [`PushError::Full`] with the task, and never
//! blocks.
//!
//! **A source is on the active list exactly when it has tasks.** Pops never visit an empty
//! source, so idle sources cost nothing but their memory.
//!
//! **The scheduler holds no registry of sources to iterate.** A source's slot is reached only
//! from its handle or from the active list; the scheduler does not know how many idle sources
//! exist except as a count.
//!
//! **No task runs under the scheduler's lock.** Tasks are values handed to the caller; the
//! [`WorkerPool`] runs them after the pop returns.
//!
//! [`seed002`] is the baseline, a faithful port of the seed's Go code, kept public so that
//! benchmarks and tests can compare against it.
//!
//! # Example
//!
//! ```
//! use fairway_core::Weight;
//! use fairway_local::{Config, Scheduler};
//!
//! let weight = |units| Weight::from_units(units).unwrap();
//! let scheduler: Scheduler<&str> = Scheduler::new(Config::weighted(weight(9), weight(1)));
//! let background = scheduler.minor_source(weight(1)).unwrap();
//! background.push("compact logs").unwrap();
//! for _ in 0..20 {
//!     scheduler.push_major("serve request").unwrap();
//! }
//! // Under continuous major load the minor band still gets one pop in ten.
//! let first_ten: Vec<_> = (0..10).map(|_| scheduler.try_pop().unwrap()).collect();
//! assert!(first_ten.contains(&"compact logs"));
//! // Dropping the handle retires the source; its queued tasks would still have run.
//! drop(background);
//! assert_eq!(scheduler.stats().sources_live, 0);
//! ```

#![warn(missing_docs)]

mod pool;
mod scheduler;
pub mod seed002;

pub use pool::{Task, WorkerPool};
pub use scheduler::{
    Config, MinorSource, Policy, PopTimeoutError, PushError, Scheduler, SourceError, Stats,
};
