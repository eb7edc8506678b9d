//! The crash matrix (issue 9, item 5): `fairway serve` killed with SIGKILL at random, seeded
//! points under load, round after round, on the embedded store and on PostgreSQL. After every
//! restart an audit checks, over everything acknowledged in every round so far:
//!
//! - every acknowledged submission exists, in a legal state: `succeeded` when a success was
//!   acknowledged, else `queued`, `running`, (when a completion was sent but its answer was
//!   lost with the process) `succeeded`, or `deferred` (a lease granted as the server died
//!   expired, and the job waits out its retry backoff); never `failed`, `canceled` or
//!   `expired`, and never a success nobody reported;
//! - no job completed twice: the workers record every acknowledged success with its epoch, and
//!   no job has two; a job acknowledged as succeeded is never leased again;
//! - the books balance: for each tenant, what it was charged for attempts that succeeded
//!   (`charged_ws - failed_ws` of `GET /v1/tenants/{id}`) is exactly the usage the workers
//!   reported for its succeeded jobs, and `attempts` counts at least those.
//!
//! Leases held at a kill are completed after the restart under their epoch (or found expired,
//! 409). At the end the load stops and every acknowledged job is driven to success: each
//! succeeded exactly once. On PostgreSQL the log itself is checked too: no job has two success
//! events.
//!
//! CI form: 20 rounds per backend. `FAIRWAY_CRASH_ROUNDS` runs more, `FAIRWAY_CRASH_SEED` picks
//! the kill points (the seed is printed). PostgreSQL runs when `FAIRWAY_TEST_POSTGRES` holds a
//! server URL (a database of its own per test, dropped at the end); it prints "skipped"
//! otherwise.

mod serve_support;

use fairway_core::Event;
use fairway_core::event::AttemptEnd;
use fairway_sim::rng::Rng;
use fairway_store::postgres::testing::TestDb;
use serde_json::json;
use serve_support::{Served, TempDir, client, events_in, get, post, serve};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const DEFAULT_ROUNDS: usize = 20;
const DEFAULT_SEED: u64 = 0x5eed_0009;
const TENANTS: [&str; 2] = ["t0", "t1"];
const PRODUCERS: usize = 2;
const WORKERS: usize = 2;
/// The usage every worker reports for a success: the books must add up to it exactly.
const USAGE_MS: u64 = 40;
/// Leases outlast a restart, so that leases held at a kill are completed after it; a lease
/// granted in the instant of the kill, whose answer was lost, expires and is retried.
const LEASE_MS: &str = "4000";

/// What the clients saw, across every round.
#[derive(Clone, Default)]
struct Books {
    /// Submissions sent (tenant), answered or not.
    sent: BTreeMap<String, &'static str>,
    /// Submissions acknowledged (201).
    acked: BTreeSet<String>,
    /// Leases delivered and not yet completed: job → epoch.
    held: BTreeMap<String, u64>,
    /// Completions sent whose answer was lost: job → epoch.
    in_doubt: BTreeMap<String, u64>,
    /// Acknowledged successes: job → the epochs they were acknowledged under.
    succeeded: BTreeMap<String, BTreeSet<u64>>,
    /// Violations seen by the clients during the load.
    violations: Vec<String>,
}

impl Books {
    fn record_success(&mut self, job: &str, epoch: u64) {
        self.held.remove(job);
        self.in_doubt.remove(job);
        let epochs = self.succeeded.entry(job.to_string()).or_default();
        epochs.insert(epoch);
        if epochs.len() > 1 {
            self.violations
                .push(format!("{job} completed twice, under epochs {epochs:?}"));
        }
    }
}

fn rounds() -> usize {
    std::env::var("FAIRWAY_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_ROUNDS)
}

fn seed() -> u64 {
    std::env::var("FAIRWAY_CRASH_SEED")
        .ok()
        .and_then(|v| {
            let v = v.trim();
            match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => v.parse().ok(),
            }
        })
        .unwrap_or(DEFAULT_SEED)
        .max(1)
}

/// Where the state lives between rounds.
enum Backend<'a> {
    Embedded,
    Postgres(&'a TestDb),
}

fn start(backend: &Backend, dir: &TempDir, snapshot_every: u64) -> Served {
    let snapshot_every = snapshot_every.to_string();
    let mut args = vec![
        "--lease-ms",
        LEASE_MS,
        "--snapshot-every-events",
        snapshot_every.as_str(),
    ];
    if let Backend::Postgres(db) = backend {
        // A restarted replica waits out its dead predecessor's lease on the leader row.
        // Long enough that a replica starved of CPU by the test itself renews in time.
        args.extend(["--store", db.url(), "--leader-lease-ms", "2000"]);
    }
    serve(dir.path(), &args, &[])
}

/// One round's load: producers submit, workers lease and complete, until the server dies.
async fn load(url: String, round: usize, books: Arc<Mutex<Books>>) {
    let http = client();
    let mut tasks = Vec::new();
    for p in 0..PRODUCERS {
        let (http, url, books) = (http.clone(), url.clone(), books.clone());
        tasks.push(tokio::spawn(async move {
            let tenant = TENANTS[p % TENANTS.len()];
            let mut i = 0;
            loop {
                let id = format!("r{round}-p{p}-{i}");
                books.lock().unwrap().sent.insert(id.clone(), tenant);
                let body = json!({"id": id, "tenant": tenant, "payload": {"round": round}});
                match post(&http, format!("{url}/v1/jobs"), body).await {
                    Ok((201, _)) => {
                        books.lock().unwrap().acked.insert(id);
                        i += 1;
                    }
                    // The outcome is unknown: the same id again.
                    Ok((503, _)) => tokio::time::sleep(Duration::from_millis(50)).await,
                    Ok((code, body)) => panic!("submit {id}: {code} {body}"),
                    Err(_) => break,
                }
            }
        }));
    }
    for w in 0..WORKERS {
        let (http, url, books) = (http.clone(), url.clone(), books.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let body = json!({"worker": format!("w{w}"), "capacity": {"cpu": 64},
                                  "max_jobs": 8, "wait_ms": 50});
                let leases = match post(&http, format!("{url}/v1/leases"), body).await {
                    Ok((200, r)) => r["leases"].as_array().cloned().unwrap_or_default(),
                    Ok((503, _)) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                    Ok((code, r)) => panic!("lease: {code} {r}"),
                    Err(_) => return,
                };
                let mut completions = Vec::new();
                {
                    let mut b = books.lock().unwrap();
                    for l in &leases {
                        let job = l["job_id"].as_str().unwrap().to_string();
                        let epoch = l["epoch"].as_u64().unwrap();
                        if b.succeeded.contains_key(&job) {
                            b.violations.push(format!(
                                "{job} leased again (epoch {epoch}) after its success"
                            ));
                        }
                        b.held.insert(job.clone(), epoch);
                        completions.push(json!({"job_id": job, "epoch": epoch,
                                                "outcome": "succeeded", "usage_ms": USAGE_MS}));
                    }
                }
                if completions.is_empty() {
                    continue;
                }
                let body = json!({ "completions": completions });
                match post(&http, format!("{url}/v1/leases/complete"), body).await {
                    Ok((200, r)) => {
                        let mut b = books.lock().unwrap();
                        for (c, result) in completions.iter().zip(r["results"].as_array().unwrap())
                        {
                            let job = c["job_id"].as_str().unwrap();
                            let epoch = c["epoch"].as_u64().unwrap();
                            match result["status"].as_u64() {
                                Some(200) if result["state"] == "succeeded" => {
                                    b.record_success(job, epoch)
                                }
                                // The lease expired meanwhile: nothing changed; it runs again.
                                Some(409) => {
                                    b.held.remove(job);
                                }
                                _ => b.violations.push(format!("completing {job}: {result}")),
                            }
                        }
                    }
                    Ok((code, r)) if code != 503 => panic!("complete: {code} {r}"),
                    // 503 or no answer: the outcome is unknown.
                    _ => {
                        let mut b = books.lock().unwrap();
                        for c in &completions {
                            let job = c["job_id"].as_str().unwrap().to_string();
                            let epoch = c["epoch"].as_u64().unwrap();
                            b.in_doubt.insert(job, epoch);
                        }
                        return;
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("a client task failed");
    }
}

/// The audit after a restart. Returns the number of jobs checked.
async fn audit(url: &str, books: &Books, charge_per_success: f64, label: &str) -> usize {
    let http = client();
    assert!(
        books.violations.is_empty(),
        "{label}: {:?}",
        books.violations
    );
    // The state of every job ever sent, eight requests at a time.
    let ids: Vec<String> = books.sent.keys().cloned().collect();
    let mut states: BTreeMap<String, Option<String>> = BTreeMap::new();
    for chunk in ids.chunks(8) {
        let answers = futures_join(chunk.iter().map(|id| {
            let (http, url, id) = (http.clone(), url.to_string(), id.clone());
            async move {
                let (code, status) = get_retrying(&http, format!("{url}/v1/jobs/{id}")).await;
                let state = match code {
                    200 => Some(status["state"].as_str().unwrap().to_string()),
                    404 => None,
                    _ => panic!("{id}: {code} {status}"),
                };
                (id, state)
            }
        }))
        .await;
        states.extend(answers);
    }
    let mut succeeded_per_tenant: BTreeMap<&str, u64> = BTreeMap::new();
    for (id, state) in &states {
        let acked = books.acked.contains(id);
        let Some(state) = state else {
            assert!(!acked, "{label}: acknowledged job {id} is lost");
            continue;
        };
        match state.as_str() {
            "succeeded" => {
                assert!(
                    books.succeeded.contains_key(id) || books.in_doubt.contains_key(id),
                    "{label}: {id} succeeded, but no worker reported it"
                );
                *succeeded_per_tenant.entry(books.sent[id]).or_default() += 1;
            }
            // `deferred`: a lease granted as the server died, whose answer was lost, expired;
            // the job waits out its retry backoff (charged as a failed attempt).
            "queued" | "running" | "deferred" => assert!(
                !books.succeeded.contains_key(id),
                "{label}: {id} is {state} after its success was acknowledged"
            ),
            other => panic!("{label}: {id} is {other}"),
        }
    }
    for tenant in TENANTS {
        let (code, report) = get_retrying(&http, format!("{url}/v1/tenants/{tenant}")).await;
        if code == 404 {
            assert_eq!(succeeded_per_tenant.get(tenant), None, "{label}: {tenant}");
            continue;
        }
        assert_eq!(code, 200, "{label}: {report}");
        let ledger = &report["ledger"];
        let charged = ledger["charged_ws"].as_f64().unwrap();
        let failed = ledger["failed_ws"].as_f64().unwrap();
        let attempts = ledger["attempts"].as_u64().unwrap();
        let successes = succeeded_per_tenant.get(tenant).copied().unwrap_or(0);
        let expected = successes as f64 * charge_per_success;
        assert!(
            (charged - failed - expected).abs() < 1e-6 * (1.0 + expected),
            "{label}: {tenant} was charged {charged} ws ({failed} for failed or expired \
             attempts) for {successes} successes of {charge_per_success} ws each: {report}"
        );
        for part in ["preempted_ws", "canceled_ws"] {
            assert_eq!(ledger[part].as_f64(), Some(0.0), "{label}: {report}");
        }
        assert!(
            attempts >= successes,
            "{label}: {tenant}: {attempts} attempts for {successes} successes"
        );
        assert!(
            failed > 0.0 || attempts == successes,
            "{label}: {tenant}: {attempts} attempts ended, {successes} succeeded, none charged \
             as failed: {report}"
        );
    }
    states.len()
}

/// A GET, sent again while the answer is 503 (a replica between terms), for up to 20 s.
async fn get_retrying(http: &reqwest::Client, url: String) -> (u16, serde_json::Value) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, body) = get(http, url.clone()).await.unwrap();
        if code != 503 || Instant::now() > deadline {
            return (code, body);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A POST that is safe to repeat (a completion carries its epoch), sent again while the answer
/// is 503, for up to 20 s.
async fn post_retrying(
    http: &reqwest::Client,
    url: String,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, answer) = post(http, url.clone(), body.clone()).await.unwrap();
        if code != 503 || Instant::now() > deadline {
            return (code, answer);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs futures concurrently and collects their outputs in order.
async fn futures_join<F: std::future::Future + Send + 'static>(
    futs: impl Iterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futs.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.expect("an audit request failed"));
    }
    out
}

/// Completes the leases held at the kill under their epoch, and settles the completions whose
/// answer was lost (repeating one answers the job's final state).
async fn settle_held(url: &str, books: &Arc<Mutex<Books>>) {
    let http = client();
    let held: Vec<(String, u64)> = {
        let b = books.lock().unwrap();
        b.held
            .iter()
            .chain(b.in_doubt.iter())
            .map(|(j, e)| (j.clone(), *e))
            .collect()
    };
    for (job, epoch) in held {
        let body = json!({"epoch": epoch, "outcome": "succeeded", "usage_ms": USAGE_MS});
        let (code, r) = post_retrying(&http, format!("{url}/v1/leases/{job}/complete"), body).await;
        let mut b = books.lock().unwrap();
        match code {
            200 if r["state"] == "succeeded" => b.record_success(&job, epoch),
            409 => {
                // Expired while the server was down (or the lease was never durable): the job
                // runs again under a new epoch; nothing was charged to this one's success.
                b.held.remove(&job);
                b.in_doubt.remove(&job);
            }
            404 if !b.acked.contains(&job) => {
                b.held.remove(&job);
                b.in_doubt.remove(&job);
            }
            _ => panic!("completing {job} (epoch {epoch}) after the restart: {code} {r}"),
        }
    }
}

/// What one success is charged: one job run and completed before the first kill.
async fn calibrate(url: &str) -> f64 {
    let http = client();
    let (code, r) = post(
        &http,
        format!("{url}/v1/jobs"),
        json!({"id": "calibrate", "tenant": "calibration"}),
    )
    .await
    .unwrap();
    assert_eq!(code, 201, "{r}");
    let body = json!({"worker": "w0", "capacity": {"cpu": 64}, "max_jobs": 1});
    let (_, r) = post(&http, format!("{url}/v1/leases"), body).await.unwrap();
    let lease = &r["leases"][0];
    assert_eq!(lease["job_id"], "calibrate", "{r}");
    let body = json!({"epoch": lease["epoch"], "outcome": "succeeded", "usage_ms": USAGE_MS});
    let (code, r) = post(&http, format!("{url}/v1/leases/calibrate/complete"), body)
        .await
        .unwrap();
    assert_eq!(code, 200, "{r}");
    let (_, report) = get(&http, format!("{url}/v1/tenants/calibration"))
        .await
        .unwrap();
    let charged = report["ledger"]["charged_ws"].as_f64().unwrap();
    assert!(charged > 0.0, "{report}");
    charged
}

async fn crash_matrix(backend: Backend<'_>, name: &str) {
    let rounds = rounds();
    let seed = seed();
    let mut rng = Rng::new(seed);
    let mut between = |lo: u64, hi: u64| lo + rng.next_u64() % (hi - lo + 1);
    let started = Instant::now();
    let dir = TempDir::new(name);
    let books = Arc::new(Mutex::new(Books::default()));
    let mut served = start(&backend, &dir, 50);
    let http = client();
    served.ready(&http).await;
    let charge_per_success = calibrate(&served.url).await;
    let mut checked = 0;
    let mut kill_points = Vec::new();
    for round in 0..rounds {
        // Where this round's kill falls, and how often this run of the server snapshots (so
        // that kills land before, during and after snapshots).
        let kill_after = Duration::from_millis(between(50, 700));
        let snapshot_every = between(10, 400);
        kill_points.push(kill_after.as_millis() as u64);
        let url = served.url.clone();
        let running = tokio::spawn(load(url, round, books.clone()));
        tokio::time::sleep(kill_after).await;
        served.kill_9();
        running.await.expect("the load failed");

        served = start(&backend, &dir, snapshot_every);
        served.ready(&http).await;
        let label = format!("{name} round {round} (seed {seed:#x}, kill after {kill_after:?})");
        let seen = books.lock().unwrap().clone();
        checked = audit(&served.url, &seen, charge_per_success, &label).await;
        settle_held(&served.url, &books).await;
    }

    // The end: no more load; every acknowledged job runs to success, exactly once.
    let url = served.url.clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let body =
            json!({"worker": "drain", "capacity": {"cpu": 64}, "max_jobs": 64, "wait_ms": 200});
        let (code, r) = post_retrying(&http, format!("{url}/v1/leases"), body).await;
        assert_eq!(code, 200, "{r}");
        for l in r["leases"].as_array().unwrap() {
            let job = l["job_id"].as_str().unwrap().to_string();
            let epoch = l["epoch"].as_u64().unwrap();
            assert!(
                !books.lock().unwrap().succeeded.contains_key(&job),
                "{name}: {job} leased again after its success"
            );
            let body = json!({"epoch": epoch, "outcome": "succeeded", "usage_ms": USAGE_MS});
            let (code, r) =
                post_retrying(&http, format!("{url}/v1/leases/{job}/complete"), body).await;
            assert_eq!(code, 200, "{r}");
            books.lock().unwrap().record_success(&job, epoch);
        }
        let pending = {
            let b = books.lock().unwrap();
            b.acked
                .iter()
                .filter(|id| !b.succeeded.contains_key(*id))
                .count()
        };
        if pending == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: {pending} acknowledged jobs never succeeded"
        );
    }
    let label = format!("{name} after the drain (seed {seed:#x})");
    let seen = books.lock().unwrap().clone();
    audit(&url, &seen, charge_per_success, &label).await;
    let b = books.lock().unwrap();
    for id in &b.acked {
        assert_eq!(b.succeeded[id].len(), 1, "{name}: {id}");
    }
    let (exit, _) = served.terminate();
    assert!(exit.success(), "{exit:?}");
    if let Backend::Postgres(db) = &backend {
        let mut successes: BTreeMap<String, usize> = BTreeMap::new();
        for (_, _, event) in events_in(db) {
            if let Event::AttemptEnded {
                job,
                end: AttemptEnd::Succeeded,
                ..
            } = event
            {
                *successes.entry(job).or_default() += 1;
            }
        }
        // Snapshots prune the log, so older successes live in the latest snapshot: what is
        // left of the log holds at most one success per job.
        let twice: Vec<_> = successes.iter().filter(|(_, n)| **n > 1).collect();
        assert!(twice.is_empty(), "{name}: successes in the log: {twice:?}");
    }
    println!(
        "{name}: {rounds} rounds (seed {seed:#x}, kills after {kill_points:?} ms), {} jobs \
         submitted, {} acknowledged, {} succeeded, {checked} audited in the last round; nothing \
         lost, none completed twice, the books balanced; {:.1} s",
        b.sent.len(),
        b.acked.len(),
        b.succeeded.len(),
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_points_embedded() {
    crash_matrix(Backend::Embedded, "crash-matrix-embedded").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_points_postgres() {
    let Some(db) = TestDb::create("kill_9_at_random_points_postgres") else {
        return;
    };
    crash_matrix(Backend::Postgres(&db), "crash-matrix-postgres").await;
}
