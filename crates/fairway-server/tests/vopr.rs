//! The deterministic simulation of the server loop (`fairway_server::vopr`), bounded for CI.
//!
//! - `FAIRWAY_VOPR_SEED=<n>` runs that one seed (printing its timeline with
//!   `FAIRWAY_VOPR_TRACE=1`), to replay a failure exactly;
//! - `FAIRWAY_VOPR_SEEDS=<n>` runs `n` seeds (default 12) from `FAIRWAY_VOPR_FIRST_SEED`
//!   (default 0), `FAIRWAY_VOPR_STEPS=<n>` steps each (default `vopr::DEFAULT_STEPS`); longer
//!   runs: `fairway vopr --seeds N`.
//!
//! Seeds that once failed are pinned in `PINNED` and run first, every time.

use fairway_server::vopr;

/// Seeds that found bugs, with what they found (docs/reliability.md, "Deterministic simulation").
const PINNED: &[(u64, &str)] = &[];

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn run_seed(seed: u64, steps: usize) -> vopr::Report {
    match vopr::run(seed, steps) {
        Ok(report) => report,
        Err(failure) => panic!("{failure}"),
    }
}

#[test]
fn pinned_seeds_pass() {
    let steps = env("FAIRWAY_VOPR_STEPS").map_or(vopr::DEFAULT_STEPS, |s| s as usize);
    for (seed, why) in PINNED {
        eprintln!("pinned seed {seed}: {why}");
        run_seed(*seed, steps);
    }
}

#[test]
fn random_seeds_pass() {
    let steps = env("FAIRWAY_VOPR_STEPS").map_or(vopr::DEFAULT_STEPS, |s| s as usize);
    let seeds: Vec<u64> = match env("FAIRWAY_VOPR_SEED") {
        Some(seed) => vec![seed],
        None => {
            let first = env("FAIRWAY_VOPR_FIRST_SEED").unwrap_or(0);
            (first..first + env("FAIRWAY_VOPR_SEEDS").unwrap_or(12)).collect()
        }
    };
    let mut total = vopr::Report::default();
    for seed in seeds {
        total.add(&run_seed(seed, steps));
    }
    eprintln!("vopr: {}", total.summary());
    assert!(
        total.events > 0 && total.acked_jobs > 0,
        "the simulation did nothing: {total:?}"
    );
    assert!(
        env("FAIRWAY_VOPR_SEED").is_some() || total.parted_batches > 0,
        "no batch came in parts: {total:?}"
    );
}

/// The same seed gives the same run, to the event.
#[test]
fn a_seed_replays_exactly() {
    let a = vopr::run(7, 120).unwrap_or_else(|f| panic!("{f}"));
    let b = vopr::run(7, 120).unwrap_or_else(|f| panic!("{f}"));
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}
