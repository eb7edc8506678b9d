//! Load and abuse on loopback (issue 9, item 4): the real `fairway serve`, real sockets.
//!
//! One server, with a token file and a policy whose classes promise a maximum queue age, takes
//! all of this at once for about fifteen seconds:
//!
//! - **Overload.** Producers offer work far above what the workers drain. Admission refuses the
//!   excess, retryable, with a hint (429, `Retry-After`, `retry_after_ms`); the work it accepts
//!   starts within its class's maximum age (p99, measured from the acknowledgement to the
//!   lease); the server's resident memory (`VmRSS`) stays bounded.
//! - **Idle long polls.** 500 workers park long polls for work that never fits them; producers
//!   are served all the same, and every parked poll is answered, empty, when its wait ends.
//! - **Slow clients.** A client that sends its headers a byte at a time, and connections that
//!   send nothing, are cut off by the header timeout; a body that trickles in is cut off by the
//!   request timeout.
//!
//! Then, one at a time: oversized requests (413 with a JSON error naming the limit), too many
//! headers (431), too many connections (429 `busy`, and the server serves again once they are
//! gone), and a tenant's token trying another tenant's jobs, reports, classes and the
//! operators' routes: every refusal is checked, and the other tenant's job is untouched.

mod serve_support;

use serde_json::{Value, json};
use serve_support::{TempDir, serve};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ADMIN: &str = "abuse-test-admin-token-0001";
const ACME: &str = "abuse-test-tenant-acme-0001";
const GLOBEX: &str = "abuse-test-tenant-globex-001";
const WORKER: &str = "abuse-test-worker-token-0001";
const GPU_WORKER: &str = "abuse-test-gpu-worker-00001";

/// `batch` promises a two-second maximum queue age; globex may not use `urgent`.
const POLICY: &str = r#"
[policy]
name = "fair"
lease = "30s"

[[class]]
name = "batch"
max_age = "2s"
default_estimate = "100ms"
max_estimate = "10s"

[[class]]
name = "urgent"
priority = 10
max_age = "1s"
default_estimate = "100ms"

[[tenant]]
name = "acme"
classes = ["batch", "urgent"]

[[tenant]]
name = "globex"
classes = ["batch"]
"#;

const MAX_AGE: Duration = Duration::from_secs(2);
/// First the workers are kept busy without overload, long enough for the engine to measure
/// the drain (one 10-second window of completions): until then admission predicts waits from
/// the workers' nominal capacity, which knows nothing of the time workers spend between jobs
/// (docs/reliability.md, "Load and abuse").
const WARMUP: Duration = Duration::from_secs(12);
/// Then the producers offer work as fast as they are answered.
const OVERLOAD: Duration = Duration::from_secs(10);
/// Producers: the first half submit one job every `SINGLE_EVERY`, the others a batch of
/// `BATCH` every `BATCH_EVERY`: about 2,000 jobs a second offered, fifty times the drain, in
/// requests cheap enough that the flood does not starve the workers of the shared cores.
const PRODUCERS: usize = 4;
const SINGLE_EVERY: Duration = Duration::from_millis(10);
const BATCH: usize = 200;
const BATCH_EVERY: Duration = Duration::from_millis(200);
/// The drain: workers × slots × 1 / job time = 4 × 2 / 0.1 s = 80 jobs per second.
const WORKERS: usize = 4;
const SLOTS: u32 = 2;
const JOB_TIME: Duration = Duration::from_millis(100);
const IDLE_POLLS: usize = 500;
const HEADER_TIMEOUT_MS: u64 = 1000;
const REQUEST_TIMEOUT_MS: u64 = 3000;
const MAX_CONNECTIONS: usize = 800;
const MAX_PAYLOAD: usize = 64 << 10;
const MAX_BODY: usize = 256 << 10;
/// Resident memory the server may reach under all of this (it starts near 10 MiB).
const RSS_BOUND_KIB: u64 = 256 << 10;

fn http(token: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// A response: status, `Retry-After`, JSON body (or the text as a string).
struct Answer {
    status: u16,
    retry_after: Option<String>,
    body: Value,
}

async fn send(rb: reqwest::RequestBuilder) -> Answer {
    let r = rb.send().await.expect("the server answers");
    let status = r.status().as_u16();
    let retry_after = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let text = r.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Answer {
        status,
        retry_after,
        body,
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn host(url: &str) -> String {
    url.trim_start_matches("http://").to_string()
}

/// Reads until the server closes the connection (or `within` passes); returns what it sent
/// and whether it closed.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> (String, bool) {
    let mut got = Vec::new();
    let closed = tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .is_ok();
    (String::from_utf8_lossy(&got).into_owned(), closed)
}

#[derive(Default)]
struct Offered {
    accepted: u64,
    rejected: BTreeMap<String, u64>,
    /// Job → when its acceptance was acknowledged.
    acked: BTreeMap<String, Instant>,
    /// Submission round trips (single submissions), for the service producers got.
    latencies: Vec<Duration>,
}

/// This test and the server it starts (which inherits the limit) each hold over a thousand
/// sockets: raise the soft limit on open files where it is lower, as far as the hard limit.
fn raise_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < 4096 {
            limit.rlim_cur = limit.rlim_max.min(4096);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn overload_slow_clients_idle_polls_and_other_tenants() {
    raise_open_files_limit();
    let started = Instant::now();
    let dir = TempDir::new("abuse");
    std::fs::create_dir_all(dir.path()).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap();
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        format!(
            "[[token]]\nsecret = \"{ADMIN}\"\nrole = \"admin\"\n\n\
             [[token]]\nsecret = \"{ACME}\"\nrole = \"tenant\"\ntenant = \"acme\"\n\n\
             [[token]]\nsecret = \"{GLOBEX}\"\nrole = \"tenant\"\ntenant = \"globex\"\n\n\
             [[token]]\nsecret = \"{WORKER}\"\nrole = \"worker\"\n\n\
             [[token]]\nsecret = \"{GPU_WORKER}\"\nrole = \"worker\"\npool = \"gpu\"\n"
        ),
    )
    .unwrap();
    let args = [
        "--policy".to_string(),
        policy.display().to_string(),
        "--tokens".into(),
        tokens.display().to_string(),
        "--header-timeout-ms".into(),
        HEADER_TIMEOUT_MS.to_string(),
        "--request-timeout-ms".into(),
        REQUEST_TIMEOUT_MS.to_string(),
        "--max-connections".into(),
        MAX_CONNECTIONS.to_string(),
        "--max-payload-bytes".into(),
        MAX_PAYLOAD.to_string(),
        "--max-body-bytes".into(),
        MAX_BODY.to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let served = serve(dir.path(), &args, &[]);
    let admin = http(ADMIN);
    served.ready(&admin).await;
    let url = served.url.clone();
    let pid = served.child.id();
    let rss_start = rss_kib(pid);

    tenants_cannot_reach_each_other(&url).await;

    // Memory, sampled all along.
    let stop_sampling = Arc::new(AtomicBool::new(false));
    let rss_samples = Arc::new(Mutex::new(Vec::<(Duration, u64)>::new()));
    let sampler = {
        let (stop, samples) = (stop_sampling.clone(), rss_samples.clone());
        let t0 = Instant::now();
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                samples.lock().unwrap().push((t0.elapsed(), rss_kib(pid)));
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };

    // 500 idle long polls: workers whose capacity fits no job (every job needs cpu).
    let idle_wait = WARMUP + OVERLOAD + Duration::from_secs(1);
    let idle: Vec<_> = (0..IDLE_POLLS)
        .map(|i| {
            let (http, url) = (http(WORKER), url.clone());
            tokio::spawn(async move {
                let body = json!({"worker": format!("idle-{i}"), "capacity": {"gpu": 1},
                                  "wait_ms": idle_wait.as_millis() as u64});
                send(http.post(format!("{url}/v1/leases")).json(&body)).await
            })
        })
        .collect();

    // Slow clients, at the same time.
    let loris = tokio::spawn(slow_clients(url.clone()));

    // Workers: lease up to two jobs, run each for JOB_TIME, complete them in one batch.
    let stop_workers = Arc::new(AtomicBool::new(false));
    let leased_at = Arc::new(Mutex::new(BTreeMap::<String, Instant>::new()));
    let completed = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (http, url) = (http(WORKER), url.clone());
            let (stop, leased_at, completed) =
                (stop_workers.clone(), leased_at.clone(), completed.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let body = json!({"worker": format!("w{w}"), "capacity": {"cpu": SLOTS},
                                      "max_jobs": SLOTS, "wait_ms": 200});
                    let a = send(http.post(format!("{url}/v1/leases")).json(&body)).await;
                    assert_eq!(a.status, 200, "lease: {}", a.body);
                    let leases = a.body["leases"].as_array().cloned().unwrap_or_default();
                    if leases.is_empty() {
                        continue;
                    }
                    let now = Instant::now();
                    {
                        let mut at = leased_at.lock().unwrap();
                        for l in &leases {
                            at.insert(l["job_id"].as_str().unwrap().to_string(), now);
                        }
                    }
                    tokio::time::sleep(JOB_TIME).await;
                    let completions: Vec<Value> = leases
                        .iter()
                        .map(|l| {
                            json!({"job_id": l["job_id"], "epoch": l["epoch"],
                                        "outcome": "succeeded",
                                        "usage_ms": JOB_TIME.as_millis() as u64})
                        })
                        .collect();
                    let a = send(
                        http.post(format!("{url}/v1/leases/complete"))
                            .json(&json!({ "completions": completions })),
                    )
                    .await;
                    assert_eq!(a.status, 200, "complete: {}", a.body);
                    for r in a.body["results"].as_array().unwrap() {
                        assert_eq!(r["status"], 200, "{r}");
                    }
                    completed.fetch_add(leases.len() as u64, Ordering::Relaxed);
                }
            })
        })
        .collect();

    // Producers: as fast as they are answered, half single submissions, half batches.
    let offered = Arc::new(Mutex::new(Offered::default()));
    // The warm-up: keep about 16 jobs queued, so that the workers are busy and nothing waits
    // long.
    let warmup_start = Instant::now();
    {
        let (http, offered, leased_at) = (http(ACME), offered.clone(), leased_at.clone());
        let mut n = 0;
        while warmup_start.elapsed() < WARMUP {
            let queued = {
                let o = offered.lock().unwrap();
                let at = leased_at.lock().unwrap();
                o.acked.keys().filter(|id| !at.contains_key(*id)).count()
            };
            if queued >= 16 {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            let id = format!("warmup-{n}");
            n += 1;
            let a = send(
                http.post(format!("{url}/v1/jobs"))
                    .json(&json!({"id": id, "class": "batch"})),
            )
            .await;
            if a.status == 429 && completed.load(Ordering::Relaxed) == 0 {
                // No worker has asked for work yet: admission sees no capacity at all.
                assert_eq!(a.body["reason"], "predicted_too_old", "{}", a.body);
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            assert_eq!(a.status, 201, "warm-up {id}: {}", a.body);
            let mut o = offered.lock().unwrap();
            o.accepted += 1;
            o.acked.insert(id, Instant::now());
        }
    }
    let warmed_up = offered.lock().unwrap().accepted;
    let overload_start = Instant::now();
    let overload_end = overload_start + OVERLOAD;
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            // One tenant floods: with two, `fair` serves each its share, and the one with the
            // longer queue waits longer than the class-wide prediction (docs/reliability.md).
            let (tenant, token) = ("acme", ACME);
            let (http, url, offered) = (http(token), url.clone(), offered.clone());
            tokio::spawn(async move {
                let mut n = 0;
                let mut next = Instant::now();
                while Instant::now() < overload_end {
                    next += if p < PRODUCERS / 2 {
                        SINGLE_EVERY
                    } else {
                        BATCH_EVERY
                    };
                    tokio::time::sleep_until(next.into()).await;
                    if p < PRODUCERS / 2 {
                        let id = format!("{tenant}-p{p}-{n}");
                        n += 1;
                        let sent = Instant::now();
                        let a = send(
                            http.post(format!("{url}/v1/jobs"))
                                .json(&json!({"id": id, "class": "batch"})),
                        )
                        .await;
                        let now = Instant::now();
                        let mut o = offered.lock().unwrap();
                        o.latencies.push(now - sent);
                        match a.status {
                            201 => {
                                o.accepted += 1;
                                o.acked.insert(id, now);
                            }
                            429 => {
                                check_retryable(&a.body, a.retry_after.as_deref());
                                let reason = a.body["reason"].as_str().unwrap_or("busy");
                                *o.rejected.entry(reason.to_string()).or_default() += 1;
                            }
                            s => panic!("submit {id}: {s} {}", a.body),
                        }
                    } else {
                        let jobs: Vec<Value> = (0..BATCH)
                            .map(|k| json!({"id": format!("{tenant}-p{p}-{n}-{k}"), "class": "batch"}))
                            .collect();
                        n += 1;
                        let a = send(
                            http.post(format!("{url}/v1/jobs/batch"))
                                .json(&json!({ "jobs": jobs })),
                        )
                        .await;
                        let now = Instant::now();
                        let mut o = offered.lock().unwrap();
                        match a.status {
                            200 => {
                                for r in a.body["results"].as_array().unwrap() {
                                    match r["status"].as_u64().unwrap() {
                                        201 => {
                                            o.accepted += 1;
                                            let id = r["job_id"].as_str().unwrap().to_string();
                                            o.acked.insert(id, now);
                                        }
                                        429 => {
                                            check_retryable(r, None);
                                            let reason = r["reason"].as_str().unwrap().to_string();
                                            *o.rejected.entry(reason).or_default() += 1;
                                        }
                                        s => panic!("batch item: {s} {r}"),
                                    }
                                }
                            }
                            429 => {
                                check_retryable(&a.body, a.retry_after.as_deref());
                                *o.rejected.entry("busy".into()).or_default() += BATCH as u64;
                            }
                            s => panic!("batch: {s} {}", a.body),
                        }
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.await.expect("a producer failed");
    }
    let rss_overload_end = rss_kib(pid);
    // Let the accepted work drain: at most the maximum age, and a margin.
    let drain_deadline = Instant::now() + MAX_AGE + Duration::from_secs(3);
    loop {
        let pending = {
            let o = offered.lock().unwrap();
            let at = leased_at.lock().unwrap();
            o.acked.keys().filter(|id| !at.contains_key(*id)).count()
        };
        if pending == 0 || Instant::now() > drain_deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop_workers.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.expect("a worker failed");
    }

    // Every idle long poll was answered, empty, when its wait ended: none refused, none lost.
    let mut idle_answered = 0;
    for task in idle {
        let a = task.await.expect("an idle poll failed");
        assert_eq!(a.status, 200, "idle long poll: {}", a.body);
        assert_eq!(a.body["leases"], json!([]), "{}", a.body);
        idle_answered += 1;
    }
    loris.await.expect("the slow clients' checks failed");
    stop_sampling.store(true, Ordering::Relaxed);
    sampler.await.unwrap();

    // The figures.
    let o = std::mem::take(&mut *offered.lock().unwrap());
    let at = leased_at.lock().unwrap().clone();
    let mut waits: Vec<Duration> = o
        .acked
        .iter()
        .map(|(id, acked)| {
            let leased = at
                .get(id)
                .unwrap_or_else(|| panic!("accepted job {id} never started"));
            leased.saturating_duration_since(*acked)
        })
        .collect();
    waits.sort();
    let mut latencies = o.latencies.clone();
    latencies.sort();
    let rejected: u64 = o.rejected.values().sum();
    let samples = rss_samples.lock().unwrap().clone();
    let rss_max = samples.iter().map(|(_, k)| *k).max().unwrap_or(0);
    let half = samples.len() / 2;
    let rss_first_half = samples[..half].iter().map(|(_, k)| *k).max().unwrap_or(0);
    let rss_second_half = samples[half..].iter().map(|(_, k)| *k).max().unwrap_or(0);
    println!(
        "overload: {warmed_up} accepted in the {WARMUP:?} warm-up; then {} offered in {:.1} s, \
         {} accepted ({:.0}/s), {} refused {:?}; {} completed",
        o.accepted - warmed_up + rejected,
        OVERLOAD.as_secs_f64(),
        o.accepted - warmed_up,
        (o.accepted - warmed_up) as f64 / OVERLOAD.as_secs_f64(),
        rejected,
        o.rejected,
        completed.load(Ordering::Relaxed),
    );
    println!(
        "overload: wait from acknowledgement to lease, all accepted work: p50 {:?} p99 {:?} max \
         {:?} (max age {MAX_AGE:?})",
        percentile(&waits, 0.5),
        percentile(&waits, 0.99),
        waits.last().copied().unwrap_or_default(),
    );
    println!(
        "overload: single submissions answered in p50 {:?} p99 {:?} with {IDLE_POLLS} idle long \
         polls parked ({idle_answered} answered empty at the end of their wait)",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
    );
    println!(
        "memory: VmRSS {} MiB at start, {} MiB at most ({} MiB in the first half of the run, {} \
         MiB in the second), {} MiB when the producers stopped",
        rss_start / 1024,
        rss_max / 1024,
        rss_first_half / 1024,
        rss_second_half / 1024,
        rss_overload_end / 1024
    );
    assert!(o.accepted > 200, "too little work accepted: {}", o.accepted);
    assert!(
        rejected > 5 * (o.accepted - warmed_up),
        "the offered load was not far above the drain: {} accepted, {rejected} refused",
        o.accepted - warmed_up
    );
    assert!(
        o.rejected.get("predicted_too_old").copied().unwrap_or(0) > 0,
        "admission never refused for the maximum age: {:?}",
        o.rejected
    );
    // Admission predicts each job's wait from the work queued ahead of it and the service its
    // queue was measured to get while backlogged (the warm-up measured it), and fills 80% of
    // the maximum age: accepted work starts within it (docs/reliability.md, "Load and abuse").
    let p99 = percentile(&waits, 0.99);
    assert!(
        p99 <= MAX_AGE,
        "accepted work waited {p99:?} at p99, beyond the class's maximum age {MAX_AGE:?}"
    );
    assert!(
        percentile(&latencies, 0.99) < Duration::from_secs(2),
        "producers were served slowly beside the idle long polls: p99 {:?}",
        percentile(&latencies, 0.99)
    );
    assert!(rss_max < RSS_BOUND_KIB, "VmRSS reached {rss_max} KiB");
    assert!(
        rss_second_half <= rss_first_half + rss_first_half / 2 + 16 * 1024,
        "memory kept growing under a steady overload: {rss_first_half} KiB, then \
         {rss_second_half} KiB"
    );

    oversized_requests(&url).await;
    too_many_connections(&url).await;

    let a = send(admin.get(format!("{url}/readyz"))).await;
    assert_eq!(a.status, 200);
    let (exit, _) = served.terminate();
    assert!(exit.success(), "{exit:?}");
    println!("abuse: {:.1} s in all", started.elapsed().as_secs_f64());
}

/// A retryable refusal carries its hint: `Retry-After` in whole seconds (for a whole request)
/// and `retry_after_ms` (for an admission refusal).
fn check_retryable(body: &Value, retry_after: Option<&str>) {
    let code = body["error"].as_str().unwrap_or_default();
    assert!(!code.is_empty(), "a refusal without `error`: {body}");
    if code != "busy" {
        assert_eq!(body["outcome"], "rejected_retryable", "{body}");
        assert!(
            body["retry_after_ms"].as_u64().is_some_and(|ms| ms > 0),
            "a retryable refusal without retry_after_ms: {body}"
        );
    }
    if let Some(s) = retry_after {
        assert!(
            s.parse::<u64>().is_ok_and(|s| s >= 1),
            "Retry-After {s:?}: {body}"
        );
    } else if body.get("status").is_none() {
        panic!("a 429 without Retry-After: {body}");
    }
}

/// Slow-loris: headers a byte at a time, connections that say nothing, and a body that trickles
/// in; each is cut off by its timeout, while everything else goes on.
async fn slow_clients(url: String) {
    let addr = host(&url);
    let header = format!(
        "POST /v1/jobs HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {ACME}\r\n\
         content-type: application/json\r\ncontent-length: 2\r\n\r\n{{}}"
    );
    // A byte every 100 ms: the headers would take seconds; the server cuts them off.
    let dribble = {
        let (addr, header) = (addr.clone(), header.clone());
        tokio::spawn(async move {
            let mut stream = TcpStream::connect(&addr).await.unwrap();
            let t0 = Instant::now();
            let mut sent = 0;
            for b in header.as_bytes() {
                if stream.write_all(&[*b]).await.is_err() {
                    break;
                }
                sent += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
                if t0.elapsed() > Duration::from_secs(10) {
                    break;
                }
            }
            let (answer, closed) = read_until_closed(&mut stream, Duration::from_secs(5)).await;
            (t0.elapsed(), sent, answer, closed)
        })
    };
    // Connections that send nothing at all.
    let mut silent = Vec::new();
    for _ in 0..100 {
        let addr = addr.clone();
        silent.push(tokio::spawn(async move {
            let mut stream = TcpStream::connect(&addr).await.unwrap();
            let t0 = Instant::now();
            let (answer, closed) = read_until_closed(&mut stream, Duration::from_secs(5)).await;
            (t0.elapsed(), answer, closed)
        }));
    }
    // Headers in full, then a body that never arrives.
    let trickle = {
        let addr = addr.clone();
        tokio::spawn(async move {
            let mut stream = TcpStream::connect(&addr).await.unwrap();
            let head = format!(
                "POST /v1/jobs HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {ACME}\r\n\
                 content-type: application/json\r\ncontent-length: 100000\r\n\r\n{{\"id\""
            );
            stream.write_all(head.as_bytes()).await.unwrap();
            let t0 = Instant::now();
            let (answer, closed) = read_until_closed(&mut stream, Duration::from_secs(10)).await;
            (t0.elapsed(), answer, closed)
        })
    };

    let (took, sent, answer, closed) = dribble.await.unwrap();
    println!(
        "slow-loris: headers a byte per 100 ms: cut off after {took:?} and {sent} of {} bytes",
        header.len()
    );
    assert!(closed, "the dribbling client was never cut off: {answer:?}");
    assert!(sent < header.len(), "the dribbling client sent everything");
    assert!(
        took < Duration::from_millis(HEADER_TIMEOUT_MS * 3),
        "cut off only after {took:?}"
    );
    assert!(
        !answer.contains("201"),
        "a dribbled submission was accepted: {answer}"
    );
    let mut longest = Duration::ZERO;
    for task in silent {
        let (took, answer, closed) = task.await.unwrap();
        assert!(closed, "a silent connection stayed open: {answer:?}");
        longest = longest.max(took);
    }
    println!("slow-loris: 100 silent connections closed within {longest:?}");
    assert!(longest < Duration::from_millis(HEADER_TIMEOUT_MS * 3));
    let (took, answer, closed) = trickle.await.unwrap();
    println!(
        "slow body: cut off after {took:?}: {}",
        answer.lines().next().unwrap_or_default()
    );
    assert!(closed, "a trickling body kept its connection: {answer:?}");
    assert!(
        answer.starts_with("HTTP/1.1 503"),
        "a trickling body got: {answer:?}"
    );
    assert!(answer.contains("\"unavailable\""), "{answer}");
    assert!(took < Duration::from_millis(REQUEST_TIMEOUT_MS + 3000));
}

/// Bodies, payloads, batches and headers over their limits: each is refused with its code.
async fn oversized_requests(url: &str) {
    let acme = http(ACME);
    // A body over --max-body-bytes.
    let big = json!({"id": "big-body", "payload": "x".repeat(MAX_BODY + 1)});
    let a = send(acme.post(format!("{url}/v1/jobs")).json(&big)).await;
    assert_eq!(a.status, 413, "{}", a.body);
    assert_eq!(a.body["error"], "too_large", "{}", a.body);
    assert!(
        a.body["message"]
            .as_str()
            .unwrap()
            .contains(&MAX_BODY.to_string()),
        "{}",
        a.body
    );
    // A declared length far over the limit is refused before the body is read.
    let mut stream = TcpStream::connect(host(url)).await.unwrap();
    let head = format!(
        "POST /v1/jobs HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ACME}\r\n\
         content-length: 1000000000000\r\n\r\n{{"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let (answer, _) = read_until_closed(&mut stream, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("too_large"), "{answer}");
    // A payload over --max-payload-bytes, inside a body within its limit.
    let payload = json!({"id": "big-payload", "payload": "x".repeat(MAX_PAYLOAD + 1)});
    let a = send(acme.post(format!("{url}/v1/jobs")).json(&payload)).await;
    assert_eq!(a.status, 413, "{}", a.body);
    assert_eq!(a.body["reason"], "too_large", "{}", a.body);
    assert_eq!(a.body["outcome"], "rejected_final", "{}", a.body);
    let a = send(acme.get(format!("{url}/v1/jobs/big-payload"))).await;
    assert_eq!(a.status, 404, "a refused job exists: {}", a.body);
    // A batch over 1000 jobs.
    let jobs: Vec<Value> = (0..1001).map(|i| json!({"id": format!("b{i}")})).collect();
    let a = send(
        acme.post(format!("{url}/v1/jobs/batch"))
            .json(&json!({ "jobs": jobs })),
    )
    .await;
    assert_eq!(a.status, 413, "{}", a.body);
    assert_eq!(a.body["error"], "too_large", "{}", a.body);
    // Too many headers.
    let mut rb = acme.get(format!("{url}/v1/jobs/x"));
    for i in 0..200 {
        rb = rb.header(format!("x-h{i}"), "v");
    }
    match rb.send().await {
        Ok(r) => assert_eq!(r.status().as_u16(), 431),
        Err(e) => panic!("too many headers: {e}"),
    }
    println!("oversized: body, declared length, payload, batch and headers refused (413, 431)");
}

/// Connections beyond --max-connections get 429 `busy`; once they are gone, service resumes.
async fn too_many_connections(url: &str) {
    let addr = host(url);
    // Each held connection parks a long poll (no header timeout applies while it waits).
    let mut held = Vec::new();
    for i in 0..MAX_CONNECTIONS {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        let body = format!(
            "{{\"worker\": \"held-{i}\", \"capacity\": {{\"gpu\": 1}}, \"wait_ms\": 10000}}"
        );
        let request = format!(
            "POST /v1/leases HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {WORKER}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        // A connection refused for the limit may already be closed: that is fine.
        let _ = s.write_all(request.as_bytes()).await;
        held.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut over = TcpStream::connect(&addr).await.unwrap();
    let _ = over
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await;
    let (answer, closed) = read_until_closed(&mut over, Duration::from_secs(5)).await;
    assert!(closed, "{answer}");
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer:?}");
    assert!(answer.contains("\"busy\""), "{answer}");
    assert!(answer.to_lowercase().contains("retry-after: 1"), "{answer}");
    // Closing the held connections withdraws their polls and frees the slots.
    drop(held);
    let admin = http(ADMIN);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match admin.get(format!("{url}/healthz")).send().await {
            Ok(r) if r.status() == 200 => break,
            _ => assert!(Instant::now() < deadline, "the server never served again"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "connections: beyond {MAX_CONNECTIONS}, 429 busy with Retry-After; served again once \
         they closed"
    );
}

/// A tenant's token against another tenant's jobs and reports, a class it may not use, and the
/// operators' routes: every refusal checked, and nothing changed.
async fn tenants_cannot_reach_each_other(url: &str) {
    let acme = http(ACME);
    let globex = http(GLOBEX);
    let worker = http(WORKER);
    let gpu = http(GPU_WORKER);
    let policy_before = send(http(ADMIN).get(format!("{url}/v1/policy"))).await.body;
    let a = send(acme.post(format!("{url}/v1/jobs")).json(
        &json!({"id": "acme-secret", "class": "urgent", "payload": {"k": "TOPSECRET-PAYLOAD"}}),
    ))
    .await;
    assert_eq!(a.status, 201, "{}", a.body);

    let mut refusals = 0;
    let mut expect = |what: &str, a: Answer, status: u16, code: &str| {
        assert_eq!(a.status, status, "{what}: {}", a.body);
        assert_eq!(a.body["error"], code, "{what}: {}", a.body);
        assert!(
            !a.body.to_string().contains("TOPSECRET"),
            "{what} leaked the payload: {}",
            a.body
        );
        refusals += 1;
    };
    let job = format!("{url}/v1/jobs/acme-secret");
    expect(
        "another tenant's job",
        send(globex.get(&job)).await,
        404,
        "unknown_job",
    );
    expect(
        "cancel another tenant's job",
        send(globex.post(format!("{job}/cancel"))).await,
        404,
        "unknown_job",
    );
    expect(
        "explain another tenant's job",
        send(globex.get(format!("{job}/explain"))).await,
        404,
        "unknown_job",
    );
    expect(
        "another tenant's report",
        send(globex.get(format!("{url}/v1/tenants/acme"))).await,
        403,
        "forbidden",
    );
    expect(
        "submit as another tenant",
        send(
            globex
                .post(format!("{url}/v1/jobs"))
                .json(&json!({"id": "g1", "tenant": "acme"})),
        )
        .await,
        403,
        "tenant_mismatch",
    );
    expect(
        "a class the tenant may not use",
        send(
            globex
                .post(format!("{url}/v1/jobs"))
                .json(&json!({"id": "g2", "class": "urgent"})),
        )
        .await,
        403,
        "class_not_permitted",
    );
    expect(
        "another tenant's job id",
        send(
            globex
                .post(format!("{url}/v1/jobs"))
                .json(&json!({"id": "acme-secret", "class": "urgent"})),
        )
        .await,
        422,
        "id_reused",
    );
    expect(
        "another tenant's job id, in a batch",
        {
            let mut a = send(
                globex
                    .post(format!("{url}/v1/jobs/batch"))
                    .json(&json!({"jobs": [{"id": "acme-secret", "tenant": "acme"}]})),
            )
            .await;
            assert_eq!(a.status, 200);
            let r = a.body["results"][0].clone();
            a.status = r["status"].as_u64().unwrap() as u16;
            a.body = r;
            a
        },
        403,
        "tenant_mismatch",
    );
    for (what, rb) in [
        ("read the policy", globex.get(format!("{url}/v1/policy"))),
        (
            "publish a policy",
            globex
                .put(format!("{url}/v1/policy"))
                .body("[policy]\nname = \"fifo\"\n"),
        ),
        ("the overview", globex.get(format!("{url}/v1/overview"))),
        ("the metrics", globex.get(format!("{url}/metrics"))),
        (
            "lease as a tenant",
            globex
                .post(format!("{url}/v1/leases"))
                .json(&json!({"worker": "g", "capacity": {"cpu": 1}})),
        ),
        (
            "heartbeat as a tenant",
            globex
                .post(format!("{url}/v1/leases/acme-secret/heartbeat"))
                .json(&json!({"epoch": 1})),
        ),
        (
            "complete as a tenant",
            globex
                .post(format!("{url}/v1/leases/acme-secret/complete"))
                .json(&json!({"epoch": 1, "outcome": "succeeded"})),
        ),
        (
            "complete a batch as a tenant",
            globex
                .post(format!("{url}/v1/leases/complete"))
                .json(&json!({"completions": []})),
        ),
        (
            "submit as a worker",
            worker
                .post(format!("{url}/v1/jobs"))
                .json(&json!({"id": "w1", "tenant": "acme"})),
        ),
        ("read a job as a worker", worker.get(&job)),
        (
            "read the policy as a worker",
            worker.get(format!("{url}/v1/policy")),
        ),
        (
            "lease from another pool",
            gpu.post(format!("{url}/v1/leases"))
                .json(&json!({"worker": "g", "pool": "default", "capacity": {"cpu": 1}})),
        ),
    ] {
        expect(what, send(rb).await, 403, "forbidden");
    }
    let anonymous = reqwest::Client::new();
    for (what, rb) in [
        ("no token", anonymous.get(&job)),
        (
            "an unknown token",
            anonymous
                .get(&job)
                .bearer_auth("not-a-token-of-this-server"),
        ),
        (
            "a token in the wrong scheme",
            anonymous.get(&job).header("authorization", ACME),
        ),
        (
            "no token, submit",
            anonymous
                .post(format!("{url}/v1/jobs"))
                .json(&json!({"id": "anon", "tenant": "acme"})),
        ),
    ] {
        expect(what, send(rb).await, 401, "unauthorized");
    }
    // The decisions globex may read say nothing of acme's job.
    let a = send(globex.get(format!("{url}/v1/decisions?job=acme-secret"))).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["decisions"], json!([]), "{}", a.body);
    // Nothing changed: acme's job is still queued, with its payload; nothing else exists.
    let a = send(acme.get(&job)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["state"], "queued", "{}", a.body);
    for id in ["g1", "g2", "w1", "anon"] {
        let a = send(http(ADMIN).get(format!("{url}/v1/jobs/{id}"))).await;
        assert_eq!(a.status, 404, "{id} exists: {}", a.body);
    }
    let a = send(http(ADMIN).get(format!("{url}/v1/policy"))).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body, policy_before, "the policy changed");
    // The acme job would sit in the overload's way: cancel it.
    let a = send(acme.post(format!("{job}/cancel"))).await;
    assert_eq!(a.body["state"], "canceled", "{}", a.body);
    println!("tenants: {refusals} refusals, each checked; nothing changed");
}
