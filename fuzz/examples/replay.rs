//! Replays inputs of a fuzz target without libFuzzer, in a plain build: for debugging a
//! finding with the usual tools, and on machines without cargo-fuzz.
//!
//! `cargo run --manifest-path fuzz/Cargo.toml --example replay -- TARGET FILE...` for any
//! target (`FAIRWAY_FUZZ_TRACE=1` prints each engine command of `engine_ops` as it runs), or
//! `... --example replay -- engine_ops --random RUNS SEED` for uniformly random inputs (a
//! crashing one is left in `random-input-N`).

fn main() {
    let mut args = std::env::args().skip(1);
    let target = args.next().unwrap_or_default();
    let run: fn(&[u8]) = match target.as_str() {
        "batch_json" => fairway_fuzz::batch_json::run,
        "engine_ops" => fairway_fuzz::engine_ops::run,
        "engine_restore" => fairway_fuzz::engine_restore::run,
        "policy_toml" => fairway_fuzz::policy_toml::run,
        "scenario_toml" => fairway_fuzz::scenario_toml::run,
        "store_record" => fairway_fuzz::store_record::run,
        "swf" => fairway_fuzz::swf::run,
        other => {
            eprintln!(
                "error: unknown target {other:?}; targets: batch_json, engine_ops, \
                 engine_restore, policy_toml, scenario_toml, store_record, swf"
            );
            std::process::exit(2);
        }
    };
    let args: Vec<String> = args.collect();
    if let [flag, runs, seed] = args.as_slice()
        && flag == "--random"
    {
        let runs: u64 = runs.parse().expect("--random RUNS SEED: RUNS is a number");
        let mut state: u64 = seed.parse().expect("--random RUNS SEED: SEED is a number");
        for i in 0..runs {
            // splitmix64: inputs of 64 to 2,048 bytes, reproducible from the seed.
            let mut next = || {
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^ (z >> 31)
            };
            let len = 64 + (next() % 1985) as usize;
            let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let path = format!("random-input-{i}");
            std::fs::write(&path, &data).expect("write the input");
            run(&data);
            std::fs::remove_file(&path).expect("remove the input");
        }
        println!("ok: {runs} random inputs");
        return;
    }
    for path in args {
        let data = std::fs::read(&path).unwrap_or_else(|e| {
            eprintln!("error: cannot read {path}: {e}");
            std::process::exit(2);
        });
        println!("replaying {path} ({} bytes)", data.len());
        run(&data);
        println!("ok: {path}");
    }
}
