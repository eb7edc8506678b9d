//! Submission throughput over loopback HTTP with durability on: single submissions at several
//! concurrencies against batches, and whole lifecycles (submit, lease, complete) in batches.
//!
//! Not part of the suite (it measures, it does not check): run it in release mode with
//! `cargo test --release -p fairway-server --test throughput -- --ignored --nocapture`.

mod common;

use common::{TempDir, TestServer};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const RUN: Duration = Duration::from_secs(3);

/// Runs `clients` tasks calling `work` (which returns how many jobs it got acknowledged) until
/// `RUN` has passed; returns jobs per second.
async fn rate<F, Fut>(server: &TestServer, clients: usize, work: F) -> f64
where
    F: Fn(TestServer, u64) -> Fut + Send + Sync + 'static + Clone,
    Fut: std::future::Future<Output = u64> + Send,
{
    let done = Arc::new(AtomicU64::new(0));
    let seq = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (s, done, seq, work) = (server.client(), done.clone(), seq.clone(), work.clone());
        tasks.push(tokio::spawn(async move {
            while started.elapsed() < RUN {
                let n = seq.fetch_add(1, Ordering::Relaxed);
                done.fetch_add(work(s.client(), n).await, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement: run in release with --ignored --nocapture"]
async fn submit_throughput() {
    let dir = TempDir::new("throughput");
    let server = TestServer::start(dir.path(), |_| {}).await;
    let mut rows = Vec::new();
    for clients in [1, 16, 64] {
        let r = rate(&server, clients, move |s, n| async move {
            let (code, _) = s
                .submit(json!({"id": format!("single-{clients}-{n}"), "tenant": "acme"}))
                .await;
            u64::from(code == 201)
        })
        .await;
        rows.push((format!("single submit, {clients} clients"), r));
    }
    for (clients, batch) in [(1, 100), (4, 100), (4, 1000)] {
        let r = rate(&server, clients, move |s, n| async move {
            let jobs: Vec<Value> = (0..batch)
                .map(
                    |i| json!({"id": format!("batch-{clients}-{batch}-{n}-{i}"), "tenant": "acme"}),
                )
                .collect();
            let (code, reply) = s.post("/v1/jobs/batch", json!({ "jobs": jobs })).await;
            assert_eq!(code, 200);
            reply["results"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["status"] == 201)
                .count() as u64
        })
        .await;
        rows.push((format!("batch submit of {batch}, {clients} clients"), r));
    }
    // Drain the queue first, so that lifecycles lease their own jobs.
    loop {
        let leases = server.lease("drain", 1000, 0).await;
        if leases.is_empty() {
            break;
        }
        let completions: Vec<Value> = leases
            .iter()
            .map(|l| json!({"job_id": l["job_id"], "epoch": l["epoch"], "outcome": "succeeded"}))
            .collect();
        server
            .post("/v1/leases/complete", json!({ "completions": completions }))
            .await;
    }
    let steps = Arc::new(std::sync::Mutex::new([Duration::ZERO; 3]));
    let steps_in = steps.clone();
    let r = rate(&server, 4, move |s, n| {
        let steps = steps_in.clone();
        async move {
            let t0 = Instant::now();
            let jobs: Vec<Value> = (0..100)
                .map(|i| json!({"id": format!("life-{n}-{i}"), "tenant": "acme"}))
                .collect();
            s.post("/v1/jobs/batch", json!({ "jobs": jobs })).await;
            let t1 = Instant::now();
            let leases = s.lease(&format!("w{}", n % 4), 100, 0).await;
            let t2 = Instant::now();
            let completions: Vec<Value> = leases
                .iter()
                .map(
                    |l| json!({"job_id": l["job_id"], "epoch": l["epoch"], "outcome": "succeeded"}),
                )
                .collect();
            let (_, reply) = s
                .post("/v1/leases/complete", json!({ "completions": completions }))
                .await;
            let t3 = Instant::now();
            let mut st = steps.lock().unwrap();
            st[0] += t1 - t0;
            st[1] += t2 - t1;
            st[2] += t3 - t2;
            reply["results"].as_array().map(|r| r.len()).unwrap_or(0) as u64
        }
    })
    .await;
    let st = *steps.lock().unwrap();
    println!(
        "lifecycle time split: submit {:?}, lease {:?}, complete {:?}",
        st[0], st[1], st[2]
    );
    rows.push(("lifecycles in batches of 100, 4 clients".to_string(), r));
    let base = rows[0].1;
    println!("\n{:<44} {:>12} {:>10}", "workload", "jobs/s", "vs first");
    for (name, r) in &rows {
        println!("{name:<44} {r:>12.0} {:>9.1}x", r / base);
    }
}
