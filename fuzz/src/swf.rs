//! `swf`: [`parse_swf`] on arbitrary text (bytes decoded lossily as UTF-8, as
//! `parse_swf_file` does), then every consumer of a parsed trace on whatever parses: the
//! recorded metrics, the import into engine jobs, and the RLScheduler compatibility simulator
//! under each of its five policies, with and without backfilling.
//!
//! Checks: nothing panics (an arithmetic overflow is a panic here: the fuzz build keeps
//! overflow checks on). Work is bounded: the compatibility runs simulate one sequence of at
//! most [`SEQ_LEN_MAX`] jobs from index 0.

use fairway_sim::rlscheduler::{CompatOptions, CompatPolicy, run_compat, schedule_sequence};
use fairway_sim::swf::{parse_swf, recorded_metrics};
use fairway_sim::traces::{TraceOptions, trace_jobs};

/// The longest simulated sequence.
pub const SEQ_LEN_MAX: usize = 32;

/// Runs one input.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(trace) = parse_swf(&text) else {
        return;
    };
    let _ = recorded_metrics(&trace);
    let _ = trace_jobs(&trace, &TraceOptions::default());
    let seq_len = trace.jobs.len().clamp(1, SEQ_LEN_MAX);
    for policy in CompatPolicy::ALL {
        for backfill in [false, true] {
            let options = CompatOptions {
                policy,
                backfill,
                starts: vec![0],
                seq_len,
            };
            let _ = run_compat(&trace, &options);
        }
    }
    let _ = schedule_sequence(&trace, CompatPolicy::Fcfs, true, 0, seq_len);
}
