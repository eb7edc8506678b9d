//! The whole LANL-CM5 trace (122,057 simulated jobs, 1,024 processors) through the engine.
//!
//! `lanl_easy/{policy}/{jobs}` (criterion) simulates the first quarter, half and all of the log
//! under FCFS+EASY (`fifo`) and `fair`+EASY, from a scenario built once (parsing is not timed).
//! Throughput is in jobs, so the curve over the three sizes shows whether the cost per job
//! stays flat as the log (and its queue) grows, and the two policies compare as a ratio at each
//! size. Issue 8 asks for the whole log under fair+EASY "in a few seconds" in release.
//!
//! Run with `cargo bench -p fairway-sim --bench lanl`. Without `--bench` (as under `cargo test
//! --benches`, in a debug build) it simulates only the first 2,000 jobs once, as a smoke test.
//! The trace comes from `$FAIRWAY_TRACES`, or `shared/traces` beside the repository; a missing
//! trace is an error.

use criterion::{BenchmarkId, Criterion, Throughput};
use fairway_core::{Backfill, PolicyName};
use fairway_sim::scenario::Overrides;
use fairway_sim::{RunOptions, Scenario};
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

const LANL: &str = "LANL-CM5-1994-4.1-cln.swf";
const LANL_RECORDS: usize = 122_060;

fn lanl_path() -> PathBuf {
    let dir = match std::env::var_os("FAIRWAY_TRACES") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces"),
    };
    let path = dir.join(LANL);
    assert!(
        path.is_file(),
        "{} does not exist: set FAIRWAY_TRACES to the directory holding the SWF traces",
        path.display()
    );
    path
}

/// The first `records` records of LANL under `policy` + EASY.
fn scenario(records: usize, policy: PolicyName) -> Scenario {
    let text = format!(
        "[trace]\nswf = {:?}\nlimit = {records}\n",
        lanl_path().display().to_string()
    );
    let overrides = Overrides {
        policy: Some(policy),
        backfill: Some(Backfill::Easy),
        ..Overrides::default()
    };
    Scenario::from_text(&text, None, &overrides).unwrap_or_else(|e| panic!("{e}"))
}

fn lanl_easy(c: &mut Criterion) {
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let sizes: Vec<usize> = if bench_mode {
        vec![LANL_RECORDS / 4, LANL_RECORDS / 2, LANL_RECORDS]
    } else {
        vec![2_000]
    };
    let mut group = c.benchmark_group("lanl_easy");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    for policy in [PolicyName::Fifo, PolicyName::Fair] {
        for &records in &sizes {
            let sc = scenario(records, policy);
            group.throughput(Throughput::Elements(sc.jobs.len() as u64));
            group.bench_with_input(
                BenchmarkId::new(policy.as_str(), sc.jobs.len()),
                &sc,
                |b, sc| {
                    b.iter(|| {
                        let metrics = fairway_sim::run(black_box(sc), RunOptions::default());
                        black_box(metrics.closed_jobs())
                    })
                },
            );
        }
    }
    group.finish();
}

criterion::criterion_group!(benches, lanl_easy);
criterion::criterion_main!(benches);
