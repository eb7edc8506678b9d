//! Fuzz target `batch_json`: see `fairway_fuzz::batch_json` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fairway_fuzz::batch_json::run(data));
