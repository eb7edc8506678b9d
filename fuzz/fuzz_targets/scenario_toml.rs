//! Fuzz target `scenario_toml`: see `fairway_fuzz::scenario_toml` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fairway_fuzz::scenario_toml::run(data));
