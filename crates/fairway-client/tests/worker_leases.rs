//! The worker loop against a scripted server on loopback, for an order of events a real server
//! gives only by chance: leases the reporter gets with its completions while the loop has a
//! long poll out must start at once, not when the poll ends.

use fairway_client::{Client, JobOutcome, Worker, WorkerConfig};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// How long the scripted server holds a long poll, and how long the test waits for job C.
const POLL_HELD: Duration = Duration::from_secs(20);
const PATIENCE: Duration = Duration::from_secs(5);

fn lease(job: &str) -> Value {
    json!({
        "job_id": job, "attempt": 1, "epoch": 1, "expires_at": "2030-01-01T00:00:00Z",
        "lease_ms": 300, "members": 1, "progress_ms": 0, "tenant": "acme", "class": "default",
        "demand": {"cpu": 1.0}, "payload": null
    })
}

/// The script: the first poll gets jobs A and B; later polls are held `POLL_HELD` and get
/// nothing. B's heartbeats answer `stale_epoch` (B is lost, its slot freed without a report,
/// so the loop polls while A's completion is out). A completion call that asks for leases is
/// answered after 300 ms, with job C.
async fn answer(method: &str, path: &str, body: &Value, poll: u32) -> (u16, Value) {
    match (method, path) {
        ("POST", "/v1/leases") => {
            if poll == 1 {
                return (200, json!({"leases": [lease("A"), lease("B")]}));
            }
            tokio::time::sleep(POLL_HELD).await;
            (200, json!({"leases": []}))
        }
        ("POST", "/v1/leases/B/heartbeat") => (
            409,
            json!({"error": "stale_epoch", "message": "lost", "current_epoch": 2}),
        ),
        ("POST", p) if p.ends_with("/heartbeat") => (
            200,
            json!({"action": "continue", "expires_at": "2030-01-01T00:00:00Z"}),
        ),
        ("POST", "/v1/leases/complete") => {
            let results: Vec<Value> = body["completions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| json!({"job_id": c["job_id"], "status": 200, "state": "succeeded"}))
                .collect();
            let next = body.get("next").is_some();
            let first_a = results.iter().any(|r| r["job_id"] == "A");
            if next && first_a {
                tokio::time::sleep(Duration::from_millis(300)).await;
                return (200, json!({"results": results, "leases": [lease("C")]}));
            }
            let leases = next.then(|| json!([]));
            (200, json!({"results": results, "leases": leases}))
        }
        _ => (404, json!({"error": "not_found", "message": path})),
    }
}

/// Serves one connection's requests (HTTP/1.1, bodies by Content-Length) one after another.
async fn serve(stream: TcpStream, polls: Arc<AtomicU32>) {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    loop {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if read.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let mut words = head.split_whitespace();
        let (method, path) = (
            words.next().unwrap_or("").to_string(),
            words.next().unwrap_or("").to_string(),
        );
        let length: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap_or(0))
            })
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        if read.read_exact(&mut body).await.is_err() {
            return;
        }
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let poll = if path == "/v1/leases" {
            polls.fetch_add(1, Ordering::SeqCst) + 1
        } else {
            0
        };
        let (status, reply) = answer(&method, &path, &body, poll).await;
        let text = reply.to_string();
        let response = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
            text.len()
        );
        if write.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Job C, leased with A's completion while the loop's second poll is held, starts within
/// the patience (before the fix it started when the held poll ended, 20 s later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_got_with_completions_start_while_a_poll_is_out() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let polls = Arc::new(AtomicU32::new(0));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, polls.clone()));
        }
    });

    let config = WorkerConfig {
        worker: "scripted".into(),
        capacity: [("cpu".to_string(), 2.0)].into(),
        max_jobs: 2,
        wait_ms: POLL_HELD.as_millis() as u64,
        ..WorkerConfig::default()
    };
    let worker = Worker::new(Client::new(&url).unwrap(), config);
    let shutdown = worker.shutdown_handle();
    let (started, mut starts) = mpsc::unbounded_channel();
    let began = Instant::now();
    let running = tokio::spawn(worker.run(move |job| {
        let started = started.clone();
        async move {
            let _ = started.send(job.job_id.clone());
            if job.job_id == "B" {
                job.stop.stopped().await;
            }
            JobOutcome::Succeeded
        }
    }));
    let mut seen = Vec::new();
    while !seen.iter().any(|j| j == "C") {
        let job = tokio::time::timeout(PATIENCE, starts.recv())
            .await
            .unwrap_or_else(|_| panic!("job C did not start within {PATIENCE:?}; started {seen:?}"))
            .unwrap();
        seen.push(job);
    }
    assert!(began.elapsed() < PATIENCE, "{:?}", began.elapsed());
    shutdown.stop();
    tokio::time::timeout(PATIENCE, running)
        .await
        .expect("the worker stops")
        .unwrap()
        .expect("the loop ends cleanly");
}
