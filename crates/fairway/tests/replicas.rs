//! Three `fairway serve` replicas on one PostgreSQL database, under load from SDK producers
//! and SDK workers that know all three URLs. The leader fails in the middle of the load:
//!
//! - `kill_9_the_leader_loses_nothing`: SIGKILL;
//! - `a_stopped_leader_is_fenced_when_it_resumes`: SIGSTOP until another replica has taken
//!   over, then SIGCONT, with requests already queued on its sockets.
//!
//! Both check: every acknowledged submission runs to success; no job is completed twice (one
//! `AttemptEnded { Succeeded }` event per job in the database); attempts that were running
//! across the failover complete under the epoch they started with (their leases stayed valid
//! on the new leader); the tenants' books carry over (acceptances and charged work); terms
//! never decrease along the log; and the time from the fault to a new leader serving is
//! printed. The second also checks
//! that the old leader acknowledges nothing once it resumes: the requests it held get no 2xx,
//! none of their jobs exists, and its later answers are redirects.
//!
//! The first runs with a token file, so the SDK's redirects and failover carry the token
//! across ports. They need PostgreSQL: `FAIRWAY_TEST_POSTGRES` names the server (each test creates and drops
//! a database of its own); without it they print "skipped".

mod serve_support;

use fairway_client::{Client, Error, JobOutcome, JobSpec, JobState, Worker, WorkerConfig};
use fairway_core::Event;
use fairway_core::event::AttemptEnd;
use fairway_store::postgres::testing::TestDb;
use serve_support::{Served, TempDir, events_in, serve};
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The leader lease: short, so that a failover takes about a second.
const LEADER_LEASE_MS: &str = "1000";
/// Job leases outlast a failover (about 1.5 s here), so that attempts running at the fault
/// complete; short, because a lease granted in the instant the leader died, whose answer never
/// reached its worker, is reclaimed only when it expires.
const JOB_LEASE_MS: &str = "5000";
const PRODUCERS: usize = 3;
const JOBS_PER_PRODUCER: usize = 60;
/// The fault comes once this many submissions were acknowledged.
const FAULT_AFTER_ACKS: usize = 60;
/// One job in this many runs long enough to span the failover.
const LONG_JOB_EVERY: usize = 12;
const LONG_JOB: Duration = Duration::from_millis(2_500);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Kill9,
    StopThenContinue,
}

struct Replicas {
    servers: Vec<Served>,
    _dirs: Vec<TempDir>,
}

impl Replicas {
    fn start(db: &TestDb, n: usize, token: Option<&str>) -> Replicas {
        let mut servers = Vec::new();
        let mut dirs = Vec::new();
        for i in 0..n {
            let dir = TempDir::new(&format!("replica{i}"));
            let mut args = vec![
                "--store".to_string(),
                db.url().to_string(),
                "--leader-lease-ms".into(),
                LEADER_LEASE_MS.into(),
                "--lease-ms".into(),
                JOB_LEASE_MS.into(),
                "--snapshot-every-events".into(),
                "1000000".into(),
            ];
            if let Some(secret) = token {
                std::fs::create_dir_all(dir.path()).unwrap();
                let file = dir.path().join("tokens.toml");
                std::fs::write(
                    &file,
                    format!("[[token]]\nsecret = \"{secret}\"\nrole = \"admin\"\n"),
                )
                .unwrap();
                args.push("--tokens".into());
                args.push(file.display().to_string());
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            servers.push(serve(dir.path(), &args, &[]));
            dirs.push(dir);
        }
        Replicas {
            servers,
            _dirs: dirs,
        }
    }

    fn urls(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.url.clone()).collect()
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The replica at `url` says it leads and is ready.
async fn leads(http: &reqwest::Client, url: &str) -> bool {
    let Ok(r) = http.get(format!("{url}/v1/leader")).send().await else {
        return false;
    };
    let Ok(view) = r.json::<serde_json::Value>().await else {
        return false;
    };
    if view["is_leader"] != true {
        return false;
    }
    http.get(format!("{url}/readyz"))
        .send()
        .await
        .is_ok_and(|r| r.status() == 200)
}

/// Waits until one of `urls` leads and is ready; returns its index.
async fn wait_for_leader(http: &reqwest::Client, urls: &[String], within: Duration) -> usize {
    let deadline = Instant::now() + within;
    loop {
        for (i, url) in urls.iter().enumerate() {
            if leads(http, url).await {
                return i;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no replica led within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn signal(served: &Served, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &served.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{name}");
}

#[derive(Default)]
struct Load {
    /// Job id → when its last try was sent, and when it was acknowledged.
    acked: BTreeMap<String, (Instant, Instant)>,
    /// Handler runs: (job, epoch).
    runs: Vec<(String, u64)>,
    /// Finished handler runs: (job, epoch, started, ended).
    finished: Vec<(String, u64, Instant, Instant)>,
}

async fn run_failover(test: &str, fault: Fault, token: Option<&str>) {
    let Some(db) = TestDb::create(test) else {
        return;
    };
    let mut replicas = Replicas::start(&db, 3, token);
    let urls = replicas.urls();
    let probe = http();
    let first = wait_for_leader(&probe, &urls, Duration::from_secs(30)).await;
    // Followers are ready once they have reached the leader.
    for url in &urls {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !probe
            .get(format!("{url}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            assert!(Instant::now() < deadline, "{url} never became ready");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // A follower redirects to the leader.
    let follower = (first + 1) % urls.len();
    let r = probe
        .post(format!("{}/v1/jobs", urls[follower]))
        .json(&serde_json::json!({"id": "probe", "tenant": "t0"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 307);
    assert_eq!(
        r.headers()["location"].to_str().unwrap(),
        format!("{}/v1/jobs", urls[first])
    );

    let mut builder = Client::builder(urls.join(","))
        .timeout(Duration::from_secs(2))
        .failover(Duration::from_secs(30));
    if let Some(secret) = token {
        builder = builder.token(secret);
    }
    let client = builder.build().unwrap();
    assert_eq!(
        client.leader().await.unwrap().leader.as_deref(),
        Some(urls[first].as_str())
    );
    let load = Arc::new(Mutex::new(Load::default()));

    // Workers: run every job briefly.
    let mut workers = Vec::new();
    let mut shutdowns = Vec::new();
    for w in 0..2 {
        let config = WorkerConfig {
            worker: format!("w{w}"),
            capacity: [("cpu".to_string(), 4.0)].into(),
            max_jobs: 4,
            wait_ms: 500,
            heartbeat_interval: Some(Duration::from_millis(500)),
            ..WorkerConfig::default()
        };
        let worker = Worker::new(client.clone(), config);
        shutdowns.push(worker.shutdown_handle());
        let load = load.clone();
        workers.push(tokio::spawn(worker.run(move |job| {
            let load = load.clone();
            async move {
                let started = Instant::now();
                load.lock()
                    .unwrap()
                    .runs
                    .push((job.job_id.clone(), job.epoch));
                let i: usize = job
                    .job_id
                    .rsplit('-')
                    .next()
                    .and_then(|i| i.parse().ok())
                    .unwrap_or(1);
                let long = i.is_multiple_of(LONG_JOB_EVERY);
                tokio::time::sleep(if long {
                    LONG_JOB
                } else {
                    Duration::from_millis(30)
                })
                .await;
                let ended = Instant::now();
                load.lock()
                    .unwrap()
                    .finished
                    .push((job.job_id.clone(), job.epoch, started, ended));
                JobOutcome::Succeeded
            }
        })));
    }

    // Producers: submit with fixed ids, each retried until acknowledged.
    let mut producers = Vec::new();
    for p in 0..PRODUCERS {
        let (client, load) = (client.clone(), load.clone());
        producers.push(tokio::spawn(async move {
            for i in 0..JOBS_PER_PRODUCER {
                let id = format!("p{p}-{i}");
                let deadline = Instant::now() + Duration::from_secs(60);
                loop {
                    let spec = JobSpec::new(format!("t{p}")).id(id.clone());
                    let sent = Instant::now();
                    match client.submit(spec).await {
                        Ok(_) => {
                            let acked = Instant::now();
                            load.lock().unwrap().acked.insert(id.clone(), (sent, acked));
                            break;
                        }
                        Err(e) if e.is_retryable() && Instant::now() < deadline => {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        Err(e) => panic!("submit {id}: {e}"),
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }));
    }

    let deadline = Instant::now() + Duration::from_secs(60);
    while load.lock().unwrap().acked.len() < FAULT_AFTER_ACKS {
        assert!(Instant::now() < deadline, "the load never got going");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // The books before the fault.
    let books_before = client.tenant("t0").await.unwrap();

    // The fault.
    let old = first;
    let old_url = urls[old].clone();
    let faulted = Instant::now();
    let mut late = Vec::new();
    match fault {
        Fault::Kill9 => {
            replicas.servers[old].child.kill().expect("SIGKILL");
            let _ = replicas.servers[old].child.wait();
        }
        Fault::StopThenContinue => {
            signal(&replicas.servers[old], "STOP");
            // Requests that reach the stopped leader wait in its sockets until it resumes.
            for i in 0..4 {
                let (http, url) = (http(), old_url.clone());
                late.push(tokio::spawn(async move {
                    let id = format!("late-{i}");
                    let r = http
                        .post(format!("{url}/v1/jobs"))
                        .json(&serde_json::json!({"id": id, "tenant": "late"}))
                        .send()
                        .await;
                    match r {
                        Ok(r) => (id, Some(r.status().as_u16()), r.text().await.ok()),
                        Err(_) => (id, None, None),
                    }
                }));
            }
        }
    }
    let others: Vec<String> = (0..urls.len())
        .filter(|i| *i != old)
        .map(|i| urls[i].clone())
        .collect();
    let new = wait_for_leader(&probe, &others, Duration::from_secs(30)).await;
    let recovered = faulted.elapsed();
    println!(
        "failover ({fault:?}): new leader {} serving after {:.2} s",
        others[new],
        recovered.as_secs_f64()
    );
    assert!(
        recovered < Duration::from_secs(10),
        "failover took {recovered:?}"
    );

    if fault == Fault::StopThenContinue {
        tokio::time::sleep(Duration::from_millis(300)).await;
        signal(&replicas.servers[old], "CONT");
        for task in late {
            let (id, status, body) = task.await.unwrap();
            assert!(
                !status.is_some_and(|s| (200..300).contains(&s)),
                "the deposed leader acknowledged {id}: {status:?} {body:?}"
            );
            println!("late request to the deposed leader: {id}: {status:?} {body:?}");
        }
        // Once it has noticed, it redirects to the new leader.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = probe
                .post(format!("{old_url}/v1/jobs"))
                .json(&serde_json::json!({"id": "late-after", "tenant": "late"}))
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            assert!(
                !(200..300).contains(&status),
                "the deposed leader acknowledged a submission: {status}"
            );
            if status == 307 {
                assert_eq!(r.headers()["fairway-leader"].to_str().unwrap(), others[new]);
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the old leader never stepped down"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let view: serde_json::Value = probe
            .get(format!("{old_url}/v1/leader"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(view["is_leader"], false, "{view}");
        assert_eq!(view["leader"], others[new].as_str(), "{view}");
    }

    for p in producers {
        p.await.expect("a producer failed");
    }
    // Of the submissions sent after the fault, the first acknowledged: what a producer sees.
    let first_ack_after = load
        .lock()
        .unwrap()
        .acked
        .values()
        .filter(|(sent, _)| *sent > faulted)
        .map(|(_, acked)| *acked)
        .min()
        .map(|t| t.duration_since(faulted));
    println!(
        "failover ({fault:?}): the first submission sent after the fault was acknowledged \
         {:.2} s after it",
        first_ack_after.unwrap_or_default().as_secs_f64()
    );

    // Every acknowledged job runs to success.
    let acked: BTreeSet<String> = load.lock().unwrap().acked.keys().cloned().collect();
    assert_eq!(acked.len(), PRODUCERS * JOBS_PER_PRODUCER);
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut pending: BTreeSet<String> = acked.clone();
    while !pending.is_empty() {
        let mut still = BTreeSet::new();
        for id in &pending {
            match client.status(id).await {
                Ok(s) if s.state == JobState::Succeeded => {}
                Ok(_) => {
                    still.insert(id.clone());
                }
                Err(Error::NotFound { .. }) => panic!("acknowledged job {id} is lost"),
                Err(_) => {
                    still.insert(id.clone());
                }
            }
        }
        pending = still;
        assert!(
            Instant::now() < deadline,
            "{} acknowledged jobs never succeeded: {:?}",
            pending.len(),
            pending.iter().take(5).collect::<Vec<_>>()
        );
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    for s in &shutdowns {
        s.stop();
    }
    for w in workers {
        w.await.unwrap().expect("a worker failed");
    }
    if fault == Fault::StopThenContinue {
        for i in 0..4 {
            assert!(
                matches!(
                    client.status(&format!("late-{i}")).await,
                    Err(Error::NotFound { .. })
                ),
                "late-{i}, sent only to the deposed leader, exists"
            );
        }
    }

    // Attempts running across the failover kept their leases: each completed the job under the
    // epoch it started with.
    let finished = load.lock().unwrap().finished.clone();
    let spanning: Vec<_> = finished
        .iter()
        .filter(|(_, _, started, ended)| *started < faulted && *ended > faulted + recovered)
        .collect();
    assert!(!spanning.is_empty(), "no attempt ran across the failover");
    for (job, epoch, _, _) in &spanning {
        let status = client.status(job).await.unwrap();
        assert_eq!(
            (status.state, status.epoch),
            (JobState::Succeeded, *epoch),
            "{job} ran across the failover under epoch {epoch}"
        );
    }
    // The books carried over: all of t0's acceptances, and no charged work forgotten.
    let books_after = client.tenant("t0").await.unwrap();
    assert_eq!(books_after.accepted, JOBS_PER_PRODUCER as u64);
    assert!(
        books_after.ledger.charged_ws >= books_before.ledger.charged_ws,
        "t0's charged work went from {} to {}",
        books_before.ledger.charged_ws,
        books_after.ledger.charged_ws
    );
    assert!(books_after.ledger.attempts >= JOBS_PER_PRODUCER as u64);

    // The database: terms never decrease along the log; one success per job.
    let events = events_in(&db);
    let mut succeeded: BTreeMap<String, usize> = BTreeMap::new();
    let mut last_term = 0;
    let mut terms = BTreeSet::new();
    for (lsn, term, event) in &events {
        assert!(
            *term >= last_term,
            "LSN {lsn} written by term {term} after term {last_term}: a late write"
        );
        last_term = *term;
        terms.insert(*term);
        if let Event::AttemptEnded {
            job,
            end: AttemptEnd::Succeeded,
            ..
        } = event
        {
            *succeeded.entry(job.clone()).or_default() += 1;
        }
        if let Event::JobAccepted { spec, .. } = event {
            assert!(
                !spec.id.starts_with("late-"),
                "{} was accepted from a request held by the deposed leader",
                spec.id
            );
        }
    }
    assert!(terms.len() >= 2, "terms in the log: {terms:?}");
    for id in &acked {
        assert_eq!(
            succeeded.get(id),
            Some(&1),
            "{id} succeeded {:?} times",
            succeeded.get(id)
        );
    }
    let runs = load.lock().unwrap().runs.len();
    println!(
        "failover ({fault:?}): {} jobs, {runs} handler runs ({} across the failover), {} events \
         in terms {terms:?}",
        acked.len(),
        spanning.len(),
        events.len()
    );
    drop(replicas);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_the_leader_loses_nothing() {
    run_failover(
        "kill_9_the_leader_loses_nothing",
        Fault::Kill9,
        Some("replicas-test-admin-token"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_leader_is_fenced_when_it_resumes() {
    run_failover(
        "a_stopped_leader_is_fenced_when_it_resumes",
        Fault::StopThenContinue,
        None,
    )
    .await;
}

/// Without PostgreSQL, `fairway serve` is the only writer: `GET /v1/leader` says it leads,
/// alone (`standalone`, term 0), with its own URL as the leader's. A `--store` that is not a
/// PostgreSQL URL is bad input (exit 2), and so is a replica listening on every address without
/// `--advertise`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_server_leads_alone() {
    let dir = TempDir::new("standalone");
    let served = serve(dir.path(), &[], &[]);
    let probe = http();
    served.ready(&probe).await;
    let view: serde_json::Value = probe
        .get(format!("{}/v1/leader", served.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(view["is_leader"], true, "{view}");
    assert_eq!(view["role"], "standalone", "{view}");
    assert_eq!(view["term"], 0, "{view}");
    assert_eq!(view["leader"], served.url.as_str(), "{view}");
    assert_eq!(view["self"], served.url.as_str(), "{view}");

    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        "[[token]]\nsecret = \"an-admin-token-for-the-test\"\nrole = \"admin\"\n",
    )
    .unwrap();
    let tokens = tokens.display().to_string();
    for (args, needle) in [
        (
            vec!["serve", "--store", "mysql://x"],
            "expected a postgres:// URL",
        ),
        (
            vec![
                "serve",
                "--store",
                "postgres://postgres@127.0.0.1:1/x",
                "--listen",
                "0.0.0.0:7700",
                "--tokens",
                &tokens,
            ],
            "needs --advertise",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_fairway"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
