//! Fuzz target `policy_toml`: see `fairway_fuzz::policy_toml` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fairway_fuzz::policy_toml::run(data));
