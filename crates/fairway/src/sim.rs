//! `fairway sim`: scenarios, traces and the RLScheduler compatibility mode.
//!
//! With a trace (`--swf FILE`, or a scenario's `[trace]` section) the output gains a `trace`
//! section: the parallel-workload metrics of [`fairway_sim::trace_metrics`] over the trace's
//! jobs. `--policy replay` runs no scheduler at all: it starts every job at submit + its
//! recorded wait, which checks the importer against the averages the log recorded.
//!
//! Exit codes: 0 success; 2 bad input (an unreadable or malformed scenario or trace, an
//! unknown option value), with a message naming the file and line.

use clap::{Args, ValueEnum};
use fairway_core::{Backfill, PolicyName};
use fairway_sim::rlscheduler::{CompatOptions, CompatPolicy, run_compat};
use fairway_sim::scenario::Overrides;
use fairway_sim::swf::{SwfTrace, parse_swf_file, recorded_metrics};
use fairway_sim::trace_metrics::TraceReport;
use fairway_sim::traces::{TenantKey, TraceOptions, imported_records, set_estimates, trace_source};
use fairway_sim::{RunOptions, Scenario};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
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

/// Which runtime estimates the engine sees for trace jobs.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Estimates {
    /// The users' requested times (SWF field 9; the run time where a record has none).
    Requested,
    /// The actual run times: perfect estimates.
    Actual,
}

/// The name of the pseudo-policy that replays a trace's recorded starts.
const REPLAY: &str = "replay";

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
    /// Override the scenario's policy (with --compat: fcfs, wfp3, unicep, sjf or f1). With a
    /// trace, `replay` starts every job at submit + its recorded wait instead of scheduling.
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
    /// With a trace: the estimates the engine sees (overrides the `[trace] estimate` key).
    #[arg(long, value_enum)]
    pub estimates: Option<Estimates>,
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
    let text = match &args.file {
        Some(file) => match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) => return fail(format!("{}: cannot read: {e}", file.display())),
        },
        None if args.swf.is_some() => String::new(),
        None => return fail("give a scenario file, or --swf FILE"),
    };
    if args.policy.as_deref() == Some(REPLAY) {
        return run_replay(&args, &text);
    }
    // An SWF given on the command line is read first, so that its errors name its own file
    // and line rather than a scenario.
    let mut trace = match &args.swf {
        Some(swf) => match parse_swf_file(swf) {
            Ok(t) => Some(t),
            Err(e) => return fail(e),
        },
        None => None,
    };
    let mut overrides = Overrides {
        seed: args.seed,
        swf: args.swf.clone(),
        ..Overrides::default()
    };
    if let Some(p) = &args.policy {
        match PolicyName::parse(p) {
            Ok(p) => overrides.policy = Some(p),
            Err(e) => return fail(format!("{e}, or {REPLAY} with a trace")),
        }
    }
    if let Some(b) = &args.backfill {
        match Backfill::parse(b) {
            Ok(b) => overrides.backfill = Some(b),
            Err(e) => return fail(e),
        }
    }
    let mut scenario = match Scenario::from_text(&text, args.file.as_deref(), &overrides) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    // The scenario loaded, so its trace (if any) did too.
    let source = match trace_source(&text, args.file.as_deref(), args.swf.as_deref()) {
        Ok(source) => source,
        Err(e) => return fail(e),
    };
    let traced = match source {
        Some((path, mut options)) => {
            let trace = match trace.take() {
                Some(t) => t,
                None => match parse_swf_file(&path) {
                    Ok(t) => t,
                    Err(e) => return fail(e),
                },
            };
            if let Some(e) = args.estimates {
                options.actual_estimates = e == Estimates::Actual;
                set_estimates(
                    &mut scenario.jobs,
                    &trace,
                    &options,
                    options.actual_estimates,
                );
            }
            Some((path, options, trace))
        }
        None if args.estimates.is_some() => {
            return fail("--estimates applies to a trace: give --swf FILE or a [trace] section");
        }
        None => None,
    };
    let metrics = fairway_sim::run(
        &scenario,
        RunOptions {
            events: args.events,
            ..RunOptions::default()
        },
    );
    let report = traced
        .as_ref()
        .map(|(_, options, trace)| TraceReport::from_run(&scenario, &metrics, trace, options));
    match args.format {
        Format::Json => {
            let mut doc = metrics.to_json();
            if let (Some((path, options, trace)), Some(report)) = (&traced, &report) {
                doc["trace"] = trace_json(report, path, options, trace);
            }
            println!(
                "{}",
                serde_json::to_string_pretty(&doc).expect("JSON serializes")
            );
        }
        Format::Text => {
            print!("{}", metrics.to_text());
            if let Some(report) = &report {
                print!("\n{}", report.to_text());
            }
        }
    }
    ExitCode::SUCCESS
}

/// `--policy replay`: the log's own schedule, and the averages it recorded.
fn run_replay(args: &SimArgs, text: &str) -> ExitCode {
    if args.backfill.is_some() || args.estimates.is_some() {
        return fail(
            "--policy replay follows the log's recorded starts: --backfill and --estimates do not apply",
        );
    }
    let (path, options) = match trace_source(text, args.file.as_deref(), args.swf.as_deref()) {
        Ok(Some(source)) => source,
        Ok(None) => {
            return fail("--policy replay needs a trace: give --swf FILE or a [trace] section");
        }
        Err(e) => return fail(e),
    };
    let trace = match parse_swf_file(&path) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    // The recorded averages are over every record of the log (the published rule); the trace
    // section is over the jobs an engine run would simulate, for comparison with one.
    let recorded = recorded_metrics(&trace);
    let report = TraceReport::replay(&trace, &options);
    match args.format {
        Format::Json => {
            let doc = json!({
                "policy": REPLAY,
                "avg_wait_s": recorded.avg_wait_s,
                "avg_bounded_slowdown": recorded.avg_bounded_slowdown,
                "recorded": {
                    "jobs": recorded.jobs,
                    "skipped_unknown": recorded.skipped_unknown,
                },
                "trace": trace_json(&report, &path, &options, &trace),
            });
            println!("{}", serde_json::to_string_pretty(&doc).expect("JSON"));
        }
        Format::Text => {
            println!(
                "replay of {} (each job at submit + its recorded wait): avg_wait_s {:.1}, avg_bounded_slowdown {:.2} over {} records ({} with an unknown wait or run time left out)\n",
                path.display(),
                recorded.avg_wait_s,
                recorded.avg_bounded_slowdown,
                recorded.jobs,
                recorded.skipped_unknown
            );
            print!("{}", report.to_text());
        }
    }
    ExitCode::SUCCESS
}

/// The `trace` section: where the jobs came from, then the report.
fn trace_json(
    report: &TraceReport,
    path: &Path,
    options: &TraceOptions,
    trace: &SwfTrace,
) -> Value {
    let mut doc = report.to_json();
    let selected = trace.jobs.len().min(options.limit.unwrap_or(usize::MAX));
    let imported = imported_records(trace, options).count();
    doc["file"] = json!(path.display().to_string());
    doc["records"] = json!(trace.jobs.len());
    doc["left_out"] = json!(selected - imported);
    doc["estimates"] = json!(if options.actual_estimates {
        "actual"
    } else {
        "requested"
    });
    doc["tenant_key"] = json!(match options.tenant {
        TenantKey::User => "user",
        TenantKey::Group => "group",
        TenantKey::None => "none",
    });
    doc
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
