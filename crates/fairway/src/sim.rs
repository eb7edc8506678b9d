//! `fairway sim`: scenarios, traces and the RLScheduler compatibility mode.

use clap::{Args, ValueEnum};
use fairway_core::{Backfill, PolicyName};
use fairway_sim::rlscheduler::{CompatOptions, CompatPolicy, run_compat};
use fairway_sim::scenario::Overrides;
use fairway_sim::{RunOptions, Scenario};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Format {
    /// A readable report.
    Text,
    /// One JSON document (the contract in DESIGN.md).
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Compat {
    /// The decision rules of the RLScheduler (SC'20) simulator.
    Rlscheduler,
}

#[derive(Args, Debug)]
pub struct SimArgs {
    /// The scenario file.
    pub file: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Add every attempt to the JSON output.
    #[arg(long)]
    pub events: bool,
    /// Override the scenario's policy (with --compat: fcfs, wfp3, unicep, sjf or f1).
    #[arg(long)]
    pub policy: Option<String>,
    /// Override the backfill mode: none, easy or conservative.
    #[arg(long)]
    pub backfill: Option<String>,
    /// Override the seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run jobs from an SWF trace (alone, or with the scenario's pools, tenants and policy).
    #[arg(long)]
    pub swf: Option<PathBuf>,
    /// Reproduce another simulator's rules (needs --swf).
    #[arg(long, value_enum)]
    pub compat: Option<Compat>,
    /// Compat mode: start indices of the job sequences (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub starts: Option<Vec<usize>>,
    /// Compat mode: jobs per sequence.
    #[arg(long)]
    pub seq_len: Option<usize>,
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("fairway sim: {message}");
    ExitCode::from(2)
}

pub fn run(args: SimArgs) -> ExitCode {
    if let Some(Compat::Rlscheduler) = args.compat {
        return run_rlscheduler(&args);
    }
    let mut overrides = Overrides {
        seed: args.seed,
        swf: args.swf.clone(),
        ..Overrides::default()
    };
    if let Some(p) = &args.policy {
        match PolicyName::parse(p) {
            Ok(p) => overrides.policy = Some(p),
            Err(e) => return fail(e),
        }
    }
    if let Some(b) = &args.backfill {
        match Backfill::parse(b) {
            Ok(b) => overrides.backfill = Some(b),
            Err(e) => return fail(e),
        }
    }
    let scenario = match (&args.file, &args.swf) {
        (Some(file), _) => Scenario::from_path(file, &overrides),
        (None, Some(_)) => Scenario::from_text("", None, &overrides),
        (None, None) => return fail("give a scenario file, or --swf FILE"),
    };
    let scenario = match scenario {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let metrics = fairway_sim::run(
        &scenario,
        RunOptions {
            events: args.events,
            progress: None,
        },
    );
    match args.format {
        Format::Json => {
            let doc = metrics.to_json();
            println!(
                "{}",
                serde_json::to_string_pretty(&doc).expect("JSON serializes")
            );
        }
        Format::Text => print!("{}", metrics.to_text()),
    }
    ExitCode::SUCCESS
}

fn run_rlscheduler(args: &SimArgs) -> ExitCode {
    let Some(swf) = &args.swf else {
        return fail("--compat rlscheduler needs --swf FILE");
    };
    let trace = match fairway_sim::swf::parse_swf_file(swf) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let mut options = CompatOptions::default();
    if let Some(p) = &args.policy {
        match p.parse::<CompatPolicy>() {
            Ok(p) => options.policy = p,
            Err(e) => return fail(e),
        }
    }
    options.backfill = match args.backfill.as_deref() {
        None | Some("none") => false,
        Some("easy") => true,
        Some(other) => {
            return fail(format!(
                "--compat rlscheduler supports --backfill none or easy, not {other:?}"
            ));
        }
    };
    if let Some(starts) = &args.starts {
        options.starts = starts.clone();
    }
    if let Some(n) = args.seq_len {
        options.seq_len = n;
    }
    match run_compat(&trace, &options) {
        Ok(report) => {
            match args.format {
                Format::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&report.to_json()).expect("JSON")
                ),
                Format::Text => {
                    println!(
                        "{} backfill={}: avg bounded slowdown {:.2}, utilization {:.3}, avg wait {:.1} s",
                        report.policy,
                        report.backfill,
                        report.avg_bounded_slowdown,
                        report.utilization,
                        report.avg_wait_s
                    );
                    for s in &report.sequences {
                        println!(
                            "  start {:>6}: bsld {:>10.2}  util {:.3}  wait {:>10.1} s",
                            s.start_index, s.avg_bounded_slowdown, s.utilization, s.avg_wait_s
                        );
                    }
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}
