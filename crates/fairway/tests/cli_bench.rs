//! `fairway bench engine`, `e2e`, `memory` and `restart` at tiny sizes, as a user runs them:
//! `engine` drives the engine's decision rig, the others start real servers and run their
//! scenarios; each prints well-formed JSON lines (for e2e, of the peer harness's shape). The numbers themselves are not checked (a debug build on a shared machine measures
//! nothing); that every job was worked, and that each line carries its scenario's fields, is.

use serde_json::Value;
use std::process::Command;

/// Runs `fairway bench ARGS..` and returns its stdout lines parsed as JSON.
fn bench(args: &[&str]) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_fairway"))
        .arg("bench")
        .args(args)
        .output()
        .expect("run the fairway binary");
    assert!(
        out.status.success(),
        "fairway bench {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("UTF-8 output")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn line<'a>(lines: &'a [Value], scenario: &str, variant: Option<&str>) -> &'a Value {
    lines
        .iter()
        .find(|l| l["scenario"] == scenario && l.get("variant").and_then(Value::as_str) == variant)
        .unwrap_or_else(|| panic!("no {scenario} {variant:?} line in {lines:#?}"))
}

#[test]
fn e2e_runs_every_scenario_and_prints_the_harness_shape() {
    let lines = bench(&[
        "e2e",
        "--n",
        "500",
        "--single-n",
        "20",
        "--single-conc-n",
        "100",
        "--fair-a",
        "300",
        "--fair-b",
        "20",
        "--prio-window-s",
        "1",
        "--prio-high-water",
        "200",
        "--prio-low-water",
        "100",
        "--prio-low",
        "10",
        "--workers",
        "2",
        "--batch",
        "50",
        "--sdk-concurrency",
        "16",
    ]);
    // enqueue, e2e x 3 variants, fair x 2, prio x 2.
    assert_eq!(lines.len(), 8, "{lines:#?}");
    for l in &lines {
        assert_eq!(l["peer"], "fairway");
        assert!(l["ts"].is_string() && l["nproc"].as_u64().is_some_and(|n| n >= 1));
    }
    let enqueue = line(&lines, "enqueue", None);
    assert_eq!(enqueue["bulk"]["jobs"], 500);
    assert!(enqueue["bulk"]["jobs_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(enqueue["single_sequential"]["jobs"], 20);
    assert_eq!(enqueue["single_concurrent"]["jobs"], 100);
    for variant in ["batched", "sdk-worker", "single"] {
        let e2e = line(&lines, "e2e", Some(variant));
        assert_eq!(e2e["complete"], true, "{e2e}");
        assert_eq!(e2e["jobs_done"], 500, "{e2e}");
        assert_eq!(e2e["enqueue_to_start"]["n"], 500);
        assert!(e2e["e2e_jobs_per_s"].as_f64().unwrap() > 0.0);
        // Every sampled job reads back as succeeded.
        assert_eq!(
            e2e["verified"]["sampled"], e2e["verified"]["succeeded"],
            "{e2e}"
        );
    }
    assert_eq!(
        line(&lines, "e2e", Some("batched"))["completions_acknowledged"],
        500
    );
    for variant in ["batched", "sdk-worker"] {
        let fair = line(&lines, "fair", Some(variant));
        assert_eq!(fair["total_completions"], 320, "{fair}");
        assert_eq!(fair["b_done"], 20);
        assert_eq!(fair["b_wait_enqueue_to_start"]["n"], 20);
        assert!(fair["b_last_completion_position"].as_u64().unwrap() <= 320);
        let prio = line(&lines, "prio", Some(variant));
        assert_eq!(prio["low_jobs"], 10, "{prio}");
        assert_eq!(prio["low_done_total"], 10, "{prio}");
        assert!(prio["low_started_in_window"].as_u64().is_some());
        assert_eq!(prio["low_band_floor"], 0.5);
    }
}

#[test]
fn memory_and_restart_report_per_job_resident_memory_and_time_to_ready() {
    let memory = bench(&["memory", "--jobs", "2000", "--payloads", "small"]);
    assert_eq!(memory.len(), 1, "{memory:#?}");
    assert_eq!(memory[0]["scenario"], "memory");
    assert_eq!(memory[0]["jobs"], 2000);
    assert!(memory[0]["rss_bytes_settled"].as_u64().unwrap() > 0);
    assert!(memory[0]["rss_bytes_per_job"].is_number());

    let restart = bench(&[
        "restart",
        "--jobs",
        "2000",
        "--variants",
        "no-snapshot,clean",
    ]);
    assert_eq!(restart.len(), 2, "{restart:#?}");
    for (l, variant) in restart.iter().zip(["no-snapshot", "clean"]) {
        assert_eq!(l["variant"], variant);
        assert!(l["start_to_ready_seconds"].as_f64().unwrap() > 0.0);
        // The restarted server recovered every queued job.
        assert_eq!(l["recovered"]["live_jobs"], 2000, "{l}");
    }
    // Without a snapshot the whole log is replayed; after a clean stop, none of it.
    assert!(restart[0]["recovered"]["replayed_events"].as_u64().unwrap() >= 2000);
    assert_eq!(
        restart[1]["recovered"]["replayed_events"], 0,
        "{}",
        restart[1]
    );
}

// Proves: `fairway bench engine` measures every configuration of its grid, the idle-tenant
// comparison and seed 002's, with sequential ids too, and that the rig kept each backlog (every
// timed decision dispatched a job: the p50 is a positive time and memory per job was counted).
#[test]
fn engine_measures_its_grid_and_comparisons() {
    let lines = bench(&[
        "engine",
        "--policies",
        "fair,fifo",
        "--max-queued",
        "10000",
        "--max-tenants",
        "100",
        "--decisions",
        "200",
        "--warmup",
        "20",
        "--job-ids",
        "sequential",
    ]);
    let grid: Vec<&Value> = lines.iter().filter(|l| l["bench"] == "engine").collect();
    // Per policy: 10^3 and 10^4 queued, by 10 and 100 tenants.
    assert_eq!(grid.len(), 2 * 2 * 2, "{lines:#?}");
    for l in &grid {
        assert_eq!(l["job_ids"], "sequential");
        assert_eq!(l["decisions"], 200);
        assert!(l["ns_per_decision_p50"].as_u64().unwrap() > 0, "{l}");
        assert!(l["bytes_per_queued_job"].as_f64().unwrap() > 0.0, "{l}");
    }
    let idle = lines
        .iter()
        .filter(|l| l["bench"] == "engine_idle_tenants")
        .count();
    assert_eq!(idle, 2 * 2, "{lines:#?}");
    let seed002 = lines.iter().filter(|l| l["bench"] == "seed002_pop").count();
    assert_eq!(seed002, 2, "one per tenant count: {lines:#?}");

    let out = Command::new(env!("CARGO_BIN_EXE_fairway"))
        .args(["bench", "engine", "--job-ids", "guid"])
        .output()
        .expect("run the fairway binary");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--job-ids"));
}

// Proves: `--decision-ring` gives the rig's engine the server's ring of decision records, the
// lines say so, and a decision with a full ring allocates about what one without a ring does
// (the ring refills its oldest record rather than allocating a new one's strings).
#[test]
fn engine_measures_with_a_ring_of_decision_records() {
    let cell = |ring: &str| {
        let lines = bench(&[
            "engine",
            "--policies",
            "fair",
            "--max-queued",
            "1000",
            "--max-tenants",
            "10",
            "--decisions",
            "300",
            "--warmup",
            "50",
            "--no-idle",
            "--no-seed002",
            "--decision-ring",
            ring,
        ]);
        assert_eq!(lines.len(), 1, "{lines:#?}");
        lines[0].clone()
    };
    let without = cell("0");
    let with = cell("16");
    assert_eq!(without["decision_ring"], 0);
    assert_eq!(with["decision_ring"], 16);
    assert!(with["ns_per_decision_p50"].as_u64().unwrap() > 0, "{with}");
    let allocs = |l: &Value| l["allocs_per_decision"].as_f64().unwrap();
    assert!(
        allocs(&with) <= allocs(&without) + 0.5,
        "a full ring allocates per decision: {} against {} without",
        allocs(&with),
        allocs(&without)
    );
}

#[test]
fn bad_arguments_exit_2_naming_the_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_fairway"))
        .args(["bench", "e2e", "--batch", "0", "--scenarios", "e2e"])
        .output()
        .expect("run the fairway binary");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--batch"));
}
