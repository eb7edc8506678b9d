//! SWF traces through the engine: hand-checked EASY start times on tiny synthetic traces (the
//! shadow-time rule, the extra-processors rule, and what user estimates change), the trace
//! metrics of a whole real log (KTH) under FCFS+EASY, and the replayed schedule of the logs.

use fairway_core::{Backfill, PolicyName};
use fairway_sim::scenario::Overrides;
use fairway_sim::swf::{parse_swf, parse_swf_file};
use fairway_sim::trace_metrics::TraceReport;
use fairway_sim::traces::{TraceOptions, set_estimates};
use fairway_sim::{Metrics, RunOptions, Scenario};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The shared traces directory: `$FAIRWAY_TRACES`, or `shared/traces` beside the repository.
/// A missing directory fails the test: the real-log checks must not pass by being skipped.
fn traces_dir() -> PathBuf {
    let dir = match std::env::var_os("FAIRWAY_TRACES") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces"),
    };
    assert!(
        dir.is_dir(),
        "the traces directory {} does not exist: set FAIRWAY_TRACES to the directory holding \
         the SWF traces",
        dir.display()
    );
    dir
}

/// Writes `swf` to a fresh file of the system's temporary directory and returns its path.
fn write_swf(name: &str, swf: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fairway-sim-traces-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, swf).expect("write trace");
    path
}

/// One SWF line: job, submit, run, processors, requested time, user (other fields unknown).
fn line(job: u32, submit: u64, run: u64, procs: u32, requested: u64, user: u32) -> String {
    format!(
        "{job} {submit} -1 {run} {procs} -1 -1 {procs} {requested} -1 1 {user} 1 -1 -1 -1 -1 -1\n"
    )
}

/// Runs `scenario_text` (whose `[trace] swf` is relative to `dir`) under `policy` + `backfill`.
fn run(
    scenario_text: &str,
    dir: &Path,
    policy: PolicyName,
    backfill: Backfill,
) -> (Scenario, Metrics) {
    let overrides = Overrides {
        policy: Some(policy),
        backfill: Some(backfill),
        ..Overrides::default()
    };
    let scenario = Scenario::from_text(scenario_text, Some(&dir.join("scenario.toml")), &overrides)
        .unwrap_or_else(|e| panic!("{e}"));
    let metrics = fairway_sim::run(&scenario, RunOptions::default());
    (scenario, metrics)
}

/// First start (s) of every job, by SWF job number.
fn starts(scenario: &Scenario, metrics: &Metrics) -> BTreeMap<u32, f64> {
    scenario
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let number =
                j.id.strip_prefix("swf-")
                    .expect("trace id")
                    .parse()
                    .expect("number");
            let start = metrics.first_start(i).expect("every job starts");
            (number, start.as_secs_f64())
        })
        .collect()
}

fn trace_section(name: &str, extra: &str) -> String {
    format!("[trace]\nswf = {name:?}\n{extra}")
}

/// A 4-processor machine. Job 2 needs the whole machine, so from t=10 it holds a reservation
/// at t=100 (job 1's estimated end) with no processors to spare; later jobs may start only if
/// their *estimated* end is at or before 100.
fn shadow_trace(job3_requested: u64) -> String {
    [
        "; MaxProcs: 4\n".to_string(),
        line(1, 0, 100, 2, 100, 1),
        line(2, 10, 50, 4, 50, 2),
        line(3, 20, 50, 2, job3_requested, 3),
        line(4, 30, 10, 1, 10, 1),
        line(5, 40, 200, 1, 200, 2),
    ]
    .concat()
}

#[test]
fn fcfs_easy_backfills_only_jobs_estimated_to_end_by_the_shadow_time() {
    // Job 3 asks for 200 s (it runs 50): 20 + 200 > 100, so it may not backfill and waits
    // for job 2 (100..150). Job 4 (30 + 10 <= 100) backfills at once; job 5 (200 s) waits.
    let path = write_swf("shadow.swf", &shadow_trace(200));
    let dir = path.parent().expect("dir");
    let (sc, m) = run(
        &trace_section("shadow.swf", ""),
        dir,
        PolicyName::Fifo,
        Backfill::Easy,
    );
    let expected = BTreeMap::from([(1, 0.0), (2, 100.0), (3, 150.0), (4, 30.0), (5, 150.0)]);
    assert_eq!(starts(&sc, &m), expected);
}

#[test]
fn actual_run_times_as_estimates_let_the_overestimated_job_backfill() {
    // The same trace with perfect estimates: job 3 (20 + 50 <= 100) backfills at 20, which
    // takes the two free processors, so job 4 now waits for job 3 to end at 70 (70 + 10 <=
    // 100). Job 2 still starts at 100: backfilling never delays the reservation.
    let path = write_swf("shadow_actual.swf", &shadow_trace(200));
    let dir = path.parent().expect("dir");
    let expected = BTreeMap::from([(1, 0.0), (2, 100.0), (3, 20.0), (4, 70.0), (5, 150.0)]);
    let (sc, m) = run(
        &trace_section("shadow_actual.swf", "estimate = \"actual\"\n"),
        dir,
        PolicyName::Fifo,
        Backfill::Easy,
    );
    assert_eq!(starts(&sc, &m), expected, "[trace] estimate = \"actual\"");

    // `set_estimates` (what `fairway sim --estimates` uses) gives the same schedule from a
    // scenario loaded with requested times, and back.
    let trace = parse_swf_file(&path).expect("trace");
    let overrides = Overrides {
        policy: Some(PolicyName::Fifo),
        backfill: Some(Backfill::Easy),
        ..Overrides::default()
    };
    let text = trace_section("shadow_actual.swf", "");
    let mut sc = Scenario::from_text(&text, Some(&dir.join("s.toml")), &overrides).expect("sc");
    assert_eq!(
        set_estimates(&mut sc.jobs, &trace, &TraceOptions::default(), true),
        5
    );
    let m = fairway_sim::run(&sc, RunOptions::default());
    assert_eq!(starts(&sc, &m), expected, "set_estimates(actual)");
    set_estimates(&mut sc.jobs, &trace, &TraceOptions::default(), false);
    let m = fairway_sim::run(&sc, RunOptions::default());
    assert_eq!(starts(&sc, &m)[&3], 150.0, "set_estimates(requested)");
}

#[test]
fn easy_lets_a_long_job_use_the_processors_the_reservation_leaves_spare() {
    // An 8-processor machine. Job 1 holds 4 until 100; job 2 (6 processors) reserves t=100,
    // when 8 will be free: 2 "extra" processors. Job 3 (3 processors, 500 s) fits now but
    // would take more than the extra and end after 100: it waits. Job 4 (2 processors,
    // 500 s) fits in the extra: it starts. Job 5 (1 processor, 50 s) ends before 100: it
    // starts although the extra is used up. Job 2 starts at 100 on the 6 left; job 3 when
    // job 2 ends at 110.
    let swf = [
        "; MaxProcs: 8\n".to_string(),
        line(1, 0, 100, 4, 100, 1),
        line(2, 1, 10, 6, 10, 2),
        line(3, 2, 500, 3, 500, 3),
        line(4, 3, 500, 2, 500, 4),
        line(5, 4, 50, 1, 50, 5),
    ]
    .concat();
    let path = write_swf("extra.swf", &swf);
    let (sc, m) = run(
        &trace_section("extra.swf", ""),
        path.parent().expect("dir"),
        PolicyName::Fifo,
        Backfill::Easy,
    );
    let expected = BTreeMap::from([(1, 0.0), (2, 100.0), (3, 110.0), (4, 3.0), (5, 4.0)]);
    assert_eq!(starts(&sc, &m), expected);
}

#[test]
fn conservative_backfilling_protects_the_second_queued_job_that_easy_lets_a_backfill_delay() {
    // A 4-processor machine. Job 1 holds 3 until 100; job 2 (2 processors) reserves t=100 with
    // 2 processors to spare; job 3 (the whole machine) is second in line. Job 4 (1 processor,
    // 500 s) fits now and in job 2's spare. EASY reserves for job 2 only, so job 4 starts at
    // 3 and pushes job 3 back to 503. Conservative also reserves t=200 for job 3, which job 4
    // would overlap, so job 4 waits until job 3 is done at 300.
    let swf = [
        "; MaxProcs: 4\n".to_string(),
        line(1, 0, 100, 3, 100, 1),
        line(2, 1, 100, 2, 100, 2),
        line(3, 2, 100, 4, 100, 3),
        line(4, 3, 500, 1, 500, 4),
    ]
    .concat();
    let path = write_swf("conservative.swf", &swf);
    let dir = path.parent().expect("dir");
    let text = trace_section("conservative.swf", "");
    let (sc, m) = run(&text, dir, PolicyName::Fifo, Backfill::Easy);
    let easy = BTreeMap::from([(1, 0.0), (2, 100.0), (3, 503.0), (4, 3.0)]);
    assert_eq!(starts(&sc, &m), easy, "EASY");
    let (sc, m) = run(&text, dir, PolicyName::Fifo, Backfill::Conservative);
    let conservative = BTreeMap::from([(1, 0.0), (2, 100.0), (3, 200.0), (4, 300.0)]);
    assert_eq!(starts(&sc, &m), conservative, "conservative");
}

#[test]
fn the_trace_report_of_a_tiny_run_matches_its_schedule() {
    // Starts 0, 100, 150, 30, 150 (first test): waits 0, 90, 130, 0, 110.
    let path = write_swf("report.swf", &shadow_trace(200));
    let trace = parse_swf_file(&path).expect("trace");
    let (sc, m) = run(
        &trace_section("report.swf", ""),
        path.parent().expect("dir"),
        PolicyName::Fifo,
        Backfill::Easy,
    );
    let report = TraceReport::from_run(&sc, &m, &trace, &TraceOptions::default());
    assert_eq!((report.jobs, report.started), (5, 5));
    assert_eq!(report.wait_s.mean, (90.0 + 130.0 + 110.0) / 5.0);
    assert_eq!(report.wait_s.max, 130.0);
    // Work 200 + 200 + 100 + 10 + 200 = 710 processor-seconds over 4 x (350 - 0).
    assert!((report.utilization - 710.0 / 1400.0).abs() < 1e-12);
    // Bounded slowdowns: 1, (90+50)/50, (130+50)/50, 1, (110+200)/200.
    let bsld = (1.0 + 2.8 + 3.6 + 1.0 + 1.55) / 5.0;
    assert!((report.bounded_slowdown.mean - bsld).abs() < 1e-12);
    // The engine-run JSON carries the same over all jobs.
    let doc = m.to_json();
    assert_eq!(doc["wait_s"]["max"], 130.0);
    assert!((doc["bounded_slowdown"]["mean"].as_f64().unwrap() - bsld).abs() < 1e-6);
    assert_eq!(report.tenants["u2"].jobs, 2);
    assert_eq!(report.tenants["u2"].wait_s.max, 110.0);
}

#[test]
fn kth_under_fcfs_easy_runs_end_to_end_with_sane_metrics() {
    let path = traces_dir().join("KTH-SP2-1996-2.1-cln.swf");
    let trace = parse_swf_file(&path).expect("KTH");
    let overrides = Overrides {
        policy: Some(PolicyName::Fifo),
        backfill: Some(Backfill::Easy),
        swf: Some(path.clone()),
        ..Overrides::default()
    };
    let sc = Scenario::from_text("", None, &overrides).unwrap_or_else(|e| panic!("{e}"));
    // 28,476 records; one has no processor count (job 27313) and cannot be simulated.
    assert_eq!(sc.jobs.len(), 28_475);
    let m = fairway_sim::run(
        &sc,
        RunOptions {
            events: true,
            ..RunOptions::default()
        },
    );
    let doc = m.to_json();
    assert_eq!(doc["jobs"]["completed"], 28_475, "every job completes");
    let report = TraceReport::from_run(&sc, &m, &trace, &TraceOptions::default());
    assert_eq!(report.started, 28_475);
    assert!(report.utilization > 0.0 && report.utilization <= 1.0);
    assert!(report.utilization_backlogged > 0.0 && report.utilization_backlogged <= 1.0);
    let u = doc["utilization"].as_f64().expect("utilization");
    assert!(u > 0.0 && u <= 1.0, "utilization {u}");
    assert!(report.bounded_slowdown.mean >= 1.0);
    assert!(report.bounded_slowdown.p50 >= 1.0);
    assert!(report.wait_s.p50 <= report.wait_s.p99 && report.wait_s.p99 <= report.wait_s.max);
    assert_eq!(report.tenants.len(), 214, "KTH has 214 users");

    // The 100 processors are never oversubscribed: sweep the attempts of the run.
    let procs: BTreeMap<&str, f64> = sc
        .jobs
        .iter()
        .map(|j| (j.id.as_str(), j.demand["cpu"]))
        .collect();
    let mut changes: Vec<(f64, f64)> = Vec::new();
    for a in doc["attempts"].as_array().expect("attempts") {
        let p = procs[a["job"].as_str().expect("job")];
        changes.push((a["start"].as_f64().expect("start"), p));
        changes.push((a["end"].as_f64().expect("end"), -p));
    }
    // Releases before acquisitions at the same instant.
    changes.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut busy = 0.0;
    for (t, d) in changes {
        busy += d;
        assert!(busy <= 100.0, "{busy} processors busy at {t} s");
    }
}

#[test]
fn estimates_change_the_schedule_of_a_real_log() {
    // The first 3,000 KTH jobs, FCFS+EASY, with the users' requested times and with the
    // actual run times: the reservations differ, so the waits do.
    let path = traces_dir().join("KTH-SP2-1996-2.1-cln.swf");
    let trace = parse_swf_file(&path).expect("KTH");
    let mut mean_wait = Vec::new();
    for estimate in ["requested", "actual"] {
        let text = format!(
            "[trace]\nswf = {:?}\nlimit = 3000\nestimate = {estimate:?}\n",
            path.display().to_string()
        );
        let overrides = Overrides {
            policy: Some(PolicyName::Fifo),
            backfill: Some(Backfill::Easy),
            ..Overrides::default()
        };
        let sc = Scenario::from_text(&text, None, &overrides).unwrap_or_else(|e| panic!("{e}"));
        let options = TraceOptions {
            limit: Some(3000),
            ..TraceOptions::default()
        };
        let m = fairway_sim::run(&sc, RunOptions::default());
        let report = TraceReport::from_run(&sc, &m, &trace, &options);
        assert_eq!(report.started, report.jobs);
        mean_wait.push(report.wait_s.mean);
    }
    assert_ne!(
        mean_wait[0], mean_wait[1],
        "estimates must matter: {mean_wait:?}"
    );
}

#[test]
fn the_replayed_schedule_reports_the_recorded_waits() {
    // The replay report averages over the simulated jobs. On LANL those are exactly the
    // records with a known wait (the 3 left out have neither size nor wait), so its mean wait
    // is the published 1,846 s and its bounded slowdown 9.35.
    let trace = parse_swf_file(&traces_dir().join("LANL-CM5-1994-4.1-cln.swf")).expect("LANL");
    let report = TraceReport::replay(&trace, &TraceOptions::default());
    assert_eq!((report.jobs, report.started), (122_057, 122_057));
    assert_eq!(format!("{:.0}", report.wait_s.mean), "1846");
    assert_eq!(format!("{:.2}", report.bounded_slowdown.mean), "9.35");
}

#[test]
fn a_scenario_trace_with_a_malformed_line_names_the_file_and_line() {
    let swf = format!("; MaxProcs: 4\n{}1 2 3\n", line(1, 0, 10, 1, 10, 1));
    let path = write_swf("bad.swf", &swf);
    let err = Scenario::from_text(
        &trace_section("bad.swf", ""),
        Some(&path.parent().expect("dir").join("s.toml")),
        &Overrides::default(),
    )
    .expect_err("malformed trace");
    let text = err.to_string();
    assert!(
        text.contains(&format!("{}:3:", path.display())),
        "names file and line: {text}"
    );
    assert!(parse_swf("1 2 3\n").is_err());
}
