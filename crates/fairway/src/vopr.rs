//! `fairway vopr`: the deterministic simulation of the server loop over many seeds
//! (`fairway_server::vopr`; docs/reliability.md, "Deterministic simulation").
//!
//! Exit codes: 0 every seed passed; 1 a seed failed (its timeline and the command that replays
//! it are printed on stderr).

use fairway_server::vopr;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `fairway vopr`.
#[derive(clap::Args)]
pub struct VoprArgs {
    /// How many seeds to run, from `--first`.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    first: u64,
    /// Run this one seed only (FAIRWAY_VOPR_TRACE=1 prints its timeline as it runs).
    #[arg(long)]
    seed: Option<u64>,
    /// Steps per seed.
    #[arg(long, default_value_t = vopr::DEFAULT_STEPS)]
    steps: usize,
    /// Go on after a failing seed (and report every one at the end).
    #[arg(long)]
    keep_going: bool,
}

/// Runs the seeds.
pub fn run(args: VoprArgs) -> ExitCode {
    let seeds = match args.seed {
        Some(seed) => seed..seed + 1,
        None => args.first..args.first.saturating_add(args.seeds),
    };
    let started = Instant::now();
    let mut total = vopr::Report::default();
    let mut failed = Vec::new();
    let (mut ran, count) = (0u64, seeds.end - seeds.start);
    for seed in seeds {
        match vopr::run(seed, args.steps) {
            Ok(report) => total.add(&report),
            Err(failure) => {
                eprintln!("{failure}");
                failed.push(seed);
                if !args.keep_going {
                    break;
                }
            }
        }
        ran += 1;
        if ran % 100 == 0 && ran < count {
            eprintln!(
                "vopr: {ran}/{count} seeds, {} failed, {:.0}s",
                failed.len(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "vopr: {ran} seeds, {} failed{}; {} ({:.1}s)",
        failed.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(" ({failed:?})")
        },
        total.summary(),
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
