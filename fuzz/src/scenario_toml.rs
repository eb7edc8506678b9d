//! `scenario_toml`: [`Scenario::from_text`] on arbitrary text (bytes decoded lossily as UTF-8),
//! with no path and no overrides.
//!
//! Checks: parsing and validation never panic. For a scenario that validates, the policy it
//! hands to the engine re-validates from its own source, as replaying its `PolicyPublished`
//! event requires (a policy that does not would make replay panic).
//!
//! Bounds (so that each input is cheap, as libFuzzer needs): inputs whose streams ask for more
//! than [`MAX_JOBS`] jobs in all are skipped (a scenario may legitimately expand to 20 million
//! jobs), and so is a `[trace] swf` path that names something other than a missing path or a
//! regular file of at most [`MAX_TRACE_BYTES`] bytes (`/dev/zero` or a FIFO would never end).

use fairway_core::Policy;
use fairway_sim::{Overrides, Scenario};

/// The most jobs an input's streams may ask for before it is skipped.
pub const MAX_JOBS: i64 = 10_000;
/// The largest trace file an input's `[trace]` may name before it is skipped.
pub const MAX_TRACE_BYTES: u64 = 256 * 1024;

/// Whether the scenario is cheap enough to parse: bounded job count and trace file.
fn bounded(text: &str) -> bool {
    // A text that is not TOML is refused by the parser at once: nothing to bound.
    let Ok(table) = toml::from_str::<toml::Table>(text) else {
        return true;
    };
    let counts: i64 = ["stream", "job"]
        .iter()
        .filter_map(|k| table.get(*k)?.as_array())
        .flatten()
        .filter_map(|s| s.get("count")?.as_integer())
        .map(|c| c.max(0))
        .fold(0i64, i64::saturating_add);
    if counts > MAX_JOBS {
        return false;
    }
    if let Some(swf) = table
        .get("trace")
        .and_then(|t| t.get("swf"))
        .and_then(|s| s.as_str())
    {
        // `from_text` with no path resolves the trace against the working directory.
        if let Ok(meta) = std::fs::metadata(swf)
            && !(meta.is_file() && meta.len() <= MAX_TRACE_BYTES)
        {
            return false;
        }
    }
    true
}

/// Runs one input.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if !bounded(&text) {
        return;
    }
    let Ok(scenario) = Scenario::from_text(&text, None, &Overrides::default()) else {
        return;
    };
    if let Err(errors) = Policy::from_text(&scenario.policy.source) {
        panic!(
            "a valid scenario's policy does not re-validate from its source: {errors:?}\n--- source:\n{}",
            scenario.policy.source
        );
    }
}
