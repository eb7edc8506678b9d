//! Fuzz target `engine_restore`: see `fairway_fuzz::engine_restore` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fairway_fuzz::engine_restore::run(data));
