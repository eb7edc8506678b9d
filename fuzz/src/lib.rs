//! Fairway's fuzz targets, as plain functions: each `run(data)` is what one libFuzzer target
//! executes for one input (the files in `fuzz_targets/` only wrap them), so the same checks can
//! be called from a test, a debugger or the seed-corpus generator.
//!
//! Every target must return normally on any input. A parser refusing its input with an error is
//! fine; a panic, an abort, a failed property (`assert!`) or a run past the time or memory limit
//! is a finding. See README.md for how to run them and docs/reliability.md for what they found.

pub mod batch_json;
pub mod engine_ops;
pub mod engine_restore;
pub mod policy_toml;
pub mod scenario_toml;
pub mod store_record;
pub mod swf;

/// Whether `FAIRWAY_FUZZ_TRACE` is set: the engine_ops driver then prints every command to
/// stderr as it runs it, so a crashing input reads as a timeline.
pub fn trace_enabled() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("FAIRWAY_FUZZ_TRACE").is_some())
}
