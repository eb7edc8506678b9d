//! Fairway's simulator: a simulated clock and worker fleet driving the engine.
//!
//! [`Scenario`] reads a scenario file (the format of DESIGN.md), [`run`] drives the engine
//! through it, and [`Metrics`] reports what happened as JSON (a contract other tools read) or as
//! text; [`report`] draws it (SVG plots in an HTML page, several runs side by side). SWF traces
//! come in through [`swf`] and [`traces`] and are measured by [`trace_metrics`];
//! [`rlscheduler`] reproduces the decision rules of the RLScheduler simulator exactly.

#![warn(missing_docs)]

pub mod driver;
pub mod metrics;
pub mod report;
pub mod rlscheduler;
pub mod rng;
pub mod scenario;
pub mod swf;
pub mod trace_metrics;
pub mod traces;

pub use driver::{RunOptions, run};
pub use metrics::Metrics;
pub use scenario::{Overrides, Scenario, ScenarioErrors};
