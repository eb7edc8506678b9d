//! Fuzz target `store_record`: see `fairway_fuzz::store_record` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fairway_fuzz::store_record::run(data));
