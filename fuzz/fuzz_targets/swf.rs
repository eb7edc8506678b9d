//! Fuzz target `swf`: see `fairway_fuzz::swf` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fairway_fuzz::swf::run(data));
