//! Fuzz target `engine_ops`: see `fairway_fuzz::engine_ops` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fairway_fuzz::engine_ops::run(data));
