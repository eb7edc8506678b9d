//! `fairway sim`: scenarios, traces and the RLScheduler compatibility mode.
//!
//! With a trace (`--swf FILE`, or a scenario's `[trace]` section) the output gains a `trace`
//! section: the parallel-workload metrics of [`fairway_sim::trace_metrics`] over the trace's
//! jobs. `--policy replay` runs no scheduler at all: it starts every job at submit + its
//! recorded wait, which checks the importer against the averages the log recorded.
//!
//! `--compare fifo,fair` (and `--compare-backfill none,easy`) runs the scenario once per policy
//! (and backfill mode) and puts the runs side by side: a table of the headline numbers in text,
//! `{"compare": {"<run>": <the run's document>}}` in JSON. `--report DIR` writes an HTML page
//! with SVG plots of the run or runs ([`fairway_sim::report`]). Long runs show a progress bar
//! on stderr, unless stderr is not a terminal, the output is JSON, or `--quiet` is given.
//!
//! Exit codes: 0 success; 1 the report could not be written; 2 bad input (an unreadable or
//! malformed scenario or trace, an unknown option value or policy), with a message naming the
//! file and line, or the value.

use clap::{Args, ValueEnum};
use fairway_core::{Backfill, PolicyName};
use fairway_sim::report::{self, ReportDir};
use fairway_sim::rlscheduler::{CompatOptions, CompatPolicy, run_compat};
use fairway_sim::scenario::Overrides;
use fairway_sim::swf::{SwfTrace, parse_swf_file, recorded_metrics};
use fairway_sim::trace_metrics::TraceReport;
use fairway_sim::traces::{TenantKey, TraceOptions, imported_records, set_estimates, trace_source};
use fairway_sim::{RunOptions, Scenario};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Map, Value, json};
use std::io::IsTerminal;
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
    /// Run the scenario under each of these policies (comma-separated) and compare them.
    #[arg(long, value_delimiter = ',', conflicts_with = "policy")]
    pub compare: Option<Vec<String>>,
    /// Run the scenario under each of these backfill modes (comma-separated) and compare them.
    #[arg(long, value_delimiter = ',', conflicts_with = "backfill")]
    pub compare_backfill: Option<Vec<String>>,
    /// Write an HTML report with plots to this directory (DIR/index.html).
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// No progress bar, and no note of where the report went.
    #[arg(long, short)]
    pub quiet: bool,
}

/// One run of a comparison: its label, and the policy and backfill it overrides.
struct Variant {
    label: String,
    policy: Option<PolicyName>,
    backfill: Option<Backfill>,
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("fairway sim: {message}");
    ExitCode::from(2)
}

/// The runs the options ask for: one, or one per policy (and backfill mode) compared.
fn variants(args: &SimArgs) -> Result<Vec<Variant>, String> {
    let policy = match &args.policy {
        // `replay` is no engine policy; `run` hands it to `run_replay`.
        Some(p) if p == REPLAY => None,
        Some(p) => {
            Some(PolicyName::parse(p).map_err(|e| format!("{e}, or {REPLAY} with a trace"))?)
        }
        None => None,
    };
    let backfill = match &args.backfill {
        Some(b) => Some(Backfill::parse(b)?),
        None => None,
    };
    let mut policies = vec![(None, policy)];
    if let Some(names) = &args.compare {
        policies.clear();
        for name in names {
            let p = PolicyName::parse(name).map_err(|e| format!("--compare: {e}"))?;
            if policies.iter().any(|(_, q)| *q == Some(p)) {
                return Err(format!("--compare: policy {name:?} is named twice"));
            }
            policies.push((Some(p.as_str()), Some(p)));
        }
        if policies.is_empty() {
            return Err("--compare: give at least one policy".to_string());
        }
    }
    let mut backfills = vec![(None, backfill)];
    if let Some(names) = &args.compare_backfill {
        backfills.clear();
        for name in names {
            let b = Backfill::parse(name).map_err(|e| format!("--compare-backfill: {e}"))?;
            if backfills.iter().any(|(_, c)| *c == Some(b)) {
                return Err(format!("--compare-backfill: mode {name:?} is named twice"));
            }
            backfills.push((Some(b.as_str()), Some(b)));
        }
        if backfills.is_empty() {
            return Err("--compare-backfill: give at least one mode".to_string());
        }
    }
    let mut out = Vec::new();
    for (p_label, policy) in &policies {
        for (b_label, backfill) in &backfills {
            // With --compare-backfill alone, the label still starts with the policy, which is
            // known only once the scenario is read: `run` fills it in.
            let label = match (p_label, b_label) {
                (Some(p), Some(b)) => format!("{p}+{b}"),
                (Some(p), None) => p.to_string(),
                (None, Some(b)) => format!("+{b}"),
                (None, None) => String::new(),
            };
            out.push(Variant {
                label,
                policy: *policy,
                backfill: *backfill,
            });
        }
    }
    Ok(out)
}

/// A progress bar on stderr, hidden when nobody would see it or it would mix with JSON.
fn progress_bar(args: &SimArgs) -> ProgressBar {
    let hidden = args.quiet || args.format == Format::Json || !std::io::stderr().is_terminal();
    let target = if hidden {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr()
    };
    let bar = ProgressBar::with_draw_target(None, target);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len} jobs done ({elapsed})")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar
}

/// The command line, for the report page.
fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quoted: Vec<String> = args
        .iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=,:+".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect();
    format!("fairway {}", quoted.join(" "))
}

pub fn run(args: SimArgs) -> ExitCode {
    if let Some(Compat::Rlscheduler) = args.compat {
        if args.compare.is_some() || args.compare_backfill.is_some() || args.report.is_some() {
            return fail(
                "--compat rlscheduler does not run the engine: --compare, --compare-backfill and --report do not apply",
            );
        }
        return run_rlscheduler(&args);
    }
    let variants = match variants(&args) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let comparing = args.compare.is_some() || args.compare_backfill.is_some();
    let text = match &args.file {
        Some(file) => match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) => return fail(format!("{}: cannot read: {e}", file.display())),
        },
        None if args.swf.is_some() => String::new(),
        None => return fail("give a scenario file, or --swf FILE"),
    };
    if args.policy.as_deref() == Some(REPLAY) {
        if args.report.is_some() {
            return fail("--policy replay runs no scheduler: --report does not apply");
        }
        return run_replay(&args, &text);
    }
    // Found writable before the runs, which may be long.
    let report_dir = match &args.report {
        Some(dir) => match ReportDir::create(dir) {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!(
                    "fairway sim: --report {}: cannot write there: {e}",
                    dir.display()
                );
                return ExitCode::from(1);
            }
        },
        None => None,
    };
    let bar = progress_bar(&args);
    let mut runs = Vec::new();
    for variant in &variants {
        let (scenario, traced) = match prepare(&args, &text, variant) {
            Ok(p) => p,
            Err(code) => return code,
        };
        let label = if variant.label.is_empty() || variant.label.starts_with('+') {
            format!("{}{}", scenario.policy.name, variant.label)
        } else {
            variant.label.clone()
        };
        bar.set_length(scenario.jobs.len() as u64);
        bar.set_position(0);
        bar.set_prefix(label.clone());
        let mut progress = |done: u64, total: u64| {
            bar.set_length(total);
            bar.set_position(done);
        };
        let metrics = fairway_sim::run(
            &scenario,
            RunOptions {
                events: args.events,
                progress: Some(&mut progress),
                ..RunOptions::default()
            },
        );
        let trace_report = traced
            .as_ref()
            .map(|(_, options, trace)| TraceReport::from_run(&scenario, &metrics, trace, options));
        let mut doc = metrics.to_json();
        if let (Some((path, options, trace)), Some(report)) = (&traced, &trace_report) {
            doc["trace"] = trace_json(report, path, options, trace);
        }
        let text = match (&trace_report, comparing) {
            (_, true) => String::new(),
            (Some(report), false) => format!("{}\n{}", metrics.to_text(), report.to_text()),
            (None, false) => metrics.to_text(),
        };
        runs.push((
            report::Run {
                label,
                metrics,
                doc,
            },
            text,
        ));
    }
    bar.finish_and_clear();
    let (runs, texts): (Vec<report::Run>, Vec<String>) = runs.into_iter().unzip();
    match (args.format, comparing) {
        (Format::Json, false) => println!(
            "{}",
            serde_json::to_string_pretty(&runs[0].doc).expect("JSON serializes")
        ),
        (Format::Json, true) => {
            let docs: Map<String, Value> = runs
                .iter()
                .map(|r| (r.label.clone(), r.doc.clone()))
                .collect();
            println!(
                "{}",
                serde_json::to_string_pretty(&json!({ "compare": docs })).expect("JSON serializes")
            );
        }
        (Format::Text, false) => print!("{}", texts[0]),
        (Format::Text, true) => print!("{}", report::compare_text(&runs)),
    }
    if let (Some(dir), Some(path)) = (report_dir, &args.report) {
        let title = match (&args.file, &args.swf) {
            (Some(f), _) => format!("Fairway simulation: {}", f.display()),
            (None, Some(swf)) => format!("Fairway simulation: {}", swf.display()),
            (None, None) => "Fairway simulation".to_string(),
        };
        match dir.write(&title, &command_line(), &runs) {
            Ok(index) => {
                if !args.quiet {
                    eprintln!("fairway sim: wrote {}", index.display());
                }
            }
            Err(e) => {
                eprintln!(
                    "fairway sim: --report {}: cannot write the report: {e}",
                    path.display()
                );
                return ExitCode::from(1);
            }
        }
    }
    ExitCode::SUCCESS
}

/// A scenario under a variant's overrides, with its trace when it has one.
type Prepared = (Scenario, Option<(PathBuf, TraceOptions, SwfTrace)>);

/// Reads the scenario (and its trace) for one run.
fn prepare(args: &SimArgs, text: &str, variant: &Variant) -> Result<Prepared, ExitCode> {
    // An SWF given on the command line is read first, so that its errors name its own file
    // and line rather than a scenario.
    let mut trace = match &args.swf {
        Some(swf) => Some(parse_swf_file(swf).map_err(fail)?),
        None => None,
    };
    let overrides = Overrides {
        seed: args.seed,
        swf: args.swf.clone(),
        policy: variant.policy,
        backfill: variant.backfill,
    };
    let mut scenario = Scenario::from_text(text, args.file.as_deref(), &overrides).map_err(fail)?;
    // The scenario loaded, so its trace (if any) did too.
    let source = trace_source(text, args.file.as_deref(), args.swf.as_deref()).map_err(fail)?;
    let traced = match source {
        Some((path, mut options)) => {
            let trace = match trace.take() {
                Some(t) => t,
                None => parse_swf_file(&path).map_err(fail)?,
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
            return Err(fail(
                "--estimates applies to a trace: give --swf FILE or a [trace] section",
            ));
        }
        None => None,
    };
    Ok((scenario, traced))
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
