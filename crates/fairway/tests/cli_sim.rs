//! `fairway sim` end to end, as a user runs it: traces in, JSON or text out, exit codes.
//!
//! The replay checks reproduce the averages the KTH-SP2 and LANL-CM5 logs recorded (published
//! numbers); the other expectations are worked out by hand from tiny synthetic traces.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The shared traces directory: `$FAIRWAY_TRACES`, or `shared/traces` beside the repository.
/// A missing directory fails the test: the replay checks must not pass by being skipped.
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

fn fairway(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fairway"))
        .args(args)
        .output()
        .expect("run the fairway binary")
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "fairway failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document on stdout")
}

/// Writes `text` to a fresh file of the system's temporary directory.
fn write_temp(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fairway-cli-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

/// One SWF line: job, submit, run, processors, requested time, user (other fields unknown).
fn line(job: u32, submit: u64, run: u64, procs: u32, requested: u64, user: u32) -> String {
    format!(
        "{job} {submit} -1 {run} {procs} -1 -1 {procs} {requested} -1 1 {user} 1 -1 -1 -1 -1 -1\n"
    )
}

/// A 4-processor machine where job 2 (the whole machine) reserves t=100 from t=10, and job 3
/// asks for 200 s but runs 50: with requested times it cannot backfill (20 + 200 > 100), with
/// actual run times it can (20 + 50 <= 100).
fn shadow_trace() -> String {
    [
        "; MaxProcs: 4\n".to_string(),
        line(1, 0, 100, 2, 100, 1),
        line(2, 10, 50, 4, 50, 2),
        line(3, 20, 50, 2, 200, 3),
        line(4, 30, 10, 1, 10, 1),
        line(5, 40, 200, 1, 200, 2),
    ]
    .concat()
}

/// Job id -> first start (s) from the `attempts` of a `--events` run.
fn starts(doc: &Value) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = doc["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .map(|a| {
            (
                a["job"].as_str().expect("job").to_string(),
                a["start"].as_f64().expect("start"),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn expect(pairs: &[(&str, f64)]) -> Vec<(String, f64)> {
    pairs.iter().map(|(j, s)| (j.to_string(), *s)).collect()
}

fn replay(name: &str) -> Value {
    let path = traces_dir().join(name);
    json_of(&fairway(&[
        "sim",
        "--swf",
        path.to_str().expect("utf-8 path"),
        "--policy",
        "replay",
        "--format",
        "json",
    ]))
}

#[test]
fn replay_reproduces_the_recorded_kth_averages() {
    let doc = replay("KTH-SP2-1996-2.1-cln.swf");
    // Published: average wait 15,296 s, average bounded slowdown 193.4.
    assert_eq!(
        format!("{:.0}", doc["avg_wait_s"].as_f64().unwrap()),
        "15296"
    );
    assert_eq!(
        format!("{:.1}", doc["avg_bounded_slowdown"].as_f64().unwrap()),
        "193.4"
    );
    assert_eq!(doc["recorded"]["jobs"], 28_476);
    assert_eq!(doc["policy"], "replay");
}

#[test]
fn replay_reproduces_the_recorded_lanl_averages() {
    let doc = replay("LANL-CM5-1994-4.1-cln.swf");
    // Published: average wait 1,846 s, average bounded slowdown 9.35.
    assert_eq!(
        format!("{:.0}", doc["avg_wait_s"].as_f64().unwrap()),
        "1846"
    );
    assert_eq!(
        format!("{:.2}", doc["avg_bounded_slowdown"].as_f64().unwrap()),
        "9.35"
    );
    assert_eq!(doc["trace"]["machine_procs"], 1024.0);
    assert_eq!(doc["trace"]["left_out"], 3);
}

#[test]
fn estimates_flag_changes_the_schedule_as_worked_out_by_hand() {
    let path = write_temp("shadow.swf", &shadow_trace());
    let run = |estimates: &str| {
        json_of(&fairway(&[
            "sim",
            "--swf",
            path.to_str().unwrap(),
            "--policy",
            "fifo",
            "--backfill",
            "easy",
            "--estimates",
            estimates,
            "--events",
            "--format",
            "json",
        ]))
    };
    let requested = run("requested");
    assert_eq!(
        starts(&requested),
        expect(&[
            ("swf-1", 0.0),
            ("swf-2", 100.0),
            ("swf-3", 150.0),
            ("swf-4", 30.0),
            ("swf-5", 150.0)
        ])
    );
    assert_eq!(requested["trace"]["estimates"], "requested");
    let actual = run("actual");
    assert_eq!(
        starts(&actual),
        expect(&[
            ("swf-1", 0.0),
            ("swf-2", 100.0),
            ("swf-3", 20.0),
            ("swf-4", 70.0),
            ("swf-5", 150.0)
        ])
    );
    assert_eq!(actual["trace"]["estimates"], "actual");
    // Waits 0, 90, 130, 0, 110 against 0, 90, 0, 40, 110.
    assert_eq!(requested["wait_s"]["mean"], 66.0);
    assert_eq!(actual["wait_s"]["mean"], 48.0);
    assert_eq!(requested["trace"]["wait_s"]["mean"], 66.0);
}

#[test]
fn estimates_flag_overrides_the_trace_section_of_a_scenario_file() {
    let swf = write_temp("shadow_file.swf", &shadow_trace());
    let scenario = write_temp(
        "shadow_file.toml",
        "[policy]\nname = \"fifo\"\nbackfill = \"easy\"\n\n[trace]\nswf = \"shadow_file.swf\"\nestimate = \"actual\"\n",
    );
    assert!(swf.exists());
    let job3 = |extra: &[&str]| {
        let mut args = vec![
            "sim",
            scenario.to_str().unwrap(),
            "--events",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let doc = json_of(&fairway(&args));
        starts(&doc)[2].1
    };
    assert_eq!(job3(&[]), 20.0, "[trace] estimate = \"actual\"");
    assert_eq!(
        job3(&["--estimates", "requested"]),
        150.0,
        "--estimates wins"
    );
}

#[test]
fn a_trace_run_reports_wait_and_bounded_slowdown_in_json_and_text() {
    let path = write_temp("report.swf", &shadow_trace());
    let doc = json_of(&fairway(&[
        "sim",
        "--swf",
        path.to_str().unwrap(),
        "--policy",
        "fifo",
        "--backfill",
        "easy",
        "--format",
        "json",
    ]));
    // Bounded slowdowns 1, 140/50, 180/50, 1, 310/200.
    let bsld = doc["bounded_slowdown"]["mean"].as_f64().unwrap();
    assert!((bsld - (1.0 + 2.8 + 3.6 + 1.0 + 1.55) / 5.0).abs() < 1e-6);
    assert_eq!(doc["trace"]["records"], 5);
    assert_eq!(doc["trace"]["tenants"]["u2"]["jobs"], 2);
    assert_eq!(doc["tenants"]["u2"]["wait_s"]["max"], 110.0);
    let text = fairway(&[
        "sim",
        "--swf",
        path.to_str().unwrap(),
        "--policy",
        "fifo",
        "--backfill",
        "easy",
    ]);
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).expect("utf-8");
    assert!(
        text.contains("trace: 5 jobs (5 started) on 4 processors"),
        "{text}"
    );
}

#[test]
fn a_malformed_swf_line_exits_2_naming_file_and_line() {
    let swf = format!("; MaxProcs: 4\n{}1 2 3\n", line(1, 0, 10, 1, 10, 1));
    let path = write_temp("bad.swf", &swf);
    for policy in ["fifo", "replay"] {
        let out = fairway(&["sim", "--swf", path.to_str().unwrap(), "--policy", policy]);
        assert_eq!(out.status.code(), Some(2), "--policy {policy}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("{}:3:", path.display())),
            "names file and line: {stderr}"
        );
        assert!(out.stdout.is_empty(), "nothing half-written");
    }
}

#[test]
fn missing_files_exit_2() {
    let missing = Path::new(env!("CARGO_MANIFEST_DIR")).join("no-such-scenario.toml");
    let out = fairway(&["sim", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-scenario.toml"));
    let out = fairway(&["sim", "--swf", "/no/such/trace.swf"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/trace.swf"));
}

#[test]
fn replay_and_estimates_need_a_trace() {
    let scenario = write_temp(
        "plain.toml",
        "[[tenant]]\nname = \"a\"\n[[pool]]\nname = \"p\"\ncapacity = { cpu = 1 }\n[[job]]\nid = \"j\"\ntenant = \"a\"\nduration = \"1s\"\n",
    );
    let out = fairway(&["sim", scenario.to_str().unwrap(), "--policy", "replay"]);
    assert_eq!(out.status.code(), Some(2));
    let out = fairway(&["sim", scenario.to_str().unwrap(), "--estimates", "actual"]);
    assert_eq!(out.status.code(), Some(2));
    let out = fairway(&["sim", scenario.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
