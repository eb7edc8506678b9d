//! Fairway's simulator: a simulated clock and worker fleet driving the engine.

pub mod rlscheduler;
pub mod swf;
