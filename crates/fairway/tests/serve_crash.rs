//! `fairway serve` killed with SIGKILL in the middle of a load loses nothing it acknowledged.

mod serve_support;

use serde_json::json;
use serve_support::{Served, TempDir, client, get, post, serve};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the server acknowledged before it died.
#[derive(Default)]
struct Acks {
    /// Jobs whose submission got 201.
    submitted: BTreeSet<String>,
    /// Leases delivered (job → epoch), not yet completed.
    leased: BTreeMap<String, u64>,
    /// Jobs whose completion was sent but not answered yet.
    completing: BTreeSet<String>,
    /// Jobs whose completion (succeeded) got 200.
    completed: BTreeSet<String>,
}

const SUBMITTERS: usize = 4;
const JOBS_PER_SUBMITTER: usize = 100;
/// The kill comes once this many submissions and completions were acknowledged: mid-load.
const KILL_AFTER_SUBMITS: usize = 250;
const KILL_AFTER_COMPLETIONS: usize = 40;
/// Small, so that the kill comes after several snapshots and the restart restores one and
/// replays the log after it.
const SNAPSHOT_EVERY: &str = "50";

/// Producers submit a few hundred jobs and a worker leases and completes some, concurrently,
/// with snapshots every few dozen events; the server is killed with SIGKILL mid-load and
/// restarted on the same data directory (from its latest snapshot and the log after it). Every
/// acknowledged submission is there in the right state, nothing is duplicated, and the leases
/// held at the crash still heartbeat and complete with their epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_load_loses_nothing_acknowledged() {
    let dir = TempDir::new("crash");
    let args = ["--snapshot-every-events", SNAPSHOT_EVERY];
    let logs = [("RUST_LOG", "info")];
    let served = serve(dir.path(), &args, &logs);
    let http = client();
    served.ready(&http).await;
    let url = served.url.clone();
    let acks = Arc::new(Mutex::new(Acks::default()));

    let mut tasks = Vec::new();
    for s in 0..SUBMITTERS {
        let (http, url, acks) = (http.clone(), url.clone(), acks.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..JOBS_PER_SUBMITTER {
                let id = format!("s{s}-{i}");
                let job = json!({"id": id, "tenant": format!("t{}", s % 2), "payload": {"i": i}});
                match post(&http, format!("{url}/v1/jobs"), job).await {
                    Ok((201, _)) => {
                        acks.lock().unwrap().submitted.insert(id);
                    }
                    Ok((code, body)) => panic!("submit {id}: {code} {body}"),
                    Err(_) => return, // the server is gone
                }
            }
        }));
    }
    {
        // A worker: leases, and completes every other job it gets.
        let (http, url, acks) = (http.clone(), url.clone(), acks.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let body = json!({"worker": "w1", "capacity": {"cpu": 1000}, "max_jobs": 8, "wait_ms": 100});
                let leases = match post(&http, format!("{url}/v1/leases"), body).await {
                    Ok((200, r)) => r["leases"].as_array().cloned().unwrap_or_default(),
                    Ok((code, r)) => panic!("lease: {code} {r}"),
                    Err(_) => return,
                };
                let mut completions = Vec::new();
                for l in &leases {
                    let job = l["job_id"].as_str().unwrap().to_string();
                    let epoch = l["epoch"].as_u64().unwrap();
                    let i = l["payload"]["i"].as_u64().unwrap();
                    acks.lock().unwrap().leased.insert(job.clone(), epoch);
                    if i % 2 == 0 {
                        acks.lock().unwrap().completing.insert(job.clone());
                        completions.push(
                            json!({"job_id": job, "epoch": epoch, "outcome": "succeeded"}),
                        );
                    }
                }
                if completions.is_empty() {
                    continue;
                }
                let body = json!({ "completions": completions });
                match post(&http, format!("{url}/v1/leases/complete"), body).await {
                    Ok((200, r)) => {
                        let mut acks = acks.lock().unwrap();
                        for result in r["results"].as_array().unwrap() {
                            assert_eq!(result["status"], 200, "{result}");
                            let job = result["job_id"].as_str().unwrap().to_string();
                            acks.leased.remove(&job);
                            acks.completing.remove(&job);
                            acks.completed.insert(job);
                        }
                    }
                    Ok((code, r)) => panic!("complete: {code} {r}"),
                    Err(_) => return,
                }
            }
        }));
    }

    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        {
            let acks = acks.lock().unwrap();
            if acks.submitted.len() >= KILL_AFTER_SUBMITS
                && acks.completed.len() >= KILL_AFTER_COMPLETIONS
            {
                break;
            }
        }
        assert!(Instant::now() < deadline, "the load never got going");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let snapshots_before_kill = served
        .stderr
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(" snapshot "))
        .count();
    served.kill_9();
    for t in tasks {
        t.await.expect("a client task failed");
    }
    let acks = std::mem::take(&mut *acks.lock().unwrap());
    assert!(acks.submitted.len() >= KILL_AFTER_SUBMITS);
    assert!(
        acks.submitted.len() < SUBMITTERS * JOBS_PER_SUBMITTER,
        "the kill came after the load"
    );
    assert!(
        !acks.completed.is_empty(),
        "the worker completed nothing before the kill"
    );
    assert!(snapshots_before_kill > 0, "no snapshot before the kill");

    let (served, recovered) = restart(dir.path(), &args, &http).await;
    assert!(
        recovered.contains("snapshot_lsn="),
        "the restart did not start from a snapshot: {recovered}"
    );
    let url = served.url.clone();
    for id in &acks.submitted {
        let (code, status) = get(&http, format!("{url}/v1/jobs/{id}")).await.unwrap();
        assert_eq!(code, 200, "acknowledged job {id} is lost: {status}");
        let state = status["state"].as_str().unwrap();
        if acks.completed.contains(id) {
            assert_eq!(state, "succeeded", "{id}: {status}");
        } else if let Some(epoch) = acks.leased.get(id) {
            // A completion in flight at the kill may or may not have been made durable.
            if !(acks.completing.contains(id) && state == "succeeded") {
                assert_eq!(state, "running", "{id}: {status}");
            }
            assert_eq!(status["epoch"], *epoch, "{id}: {status}");
        } else {
            assert!(state == "queued" || state == "running", "{id}: {status}");
        }
        // The same id again creates nothing.
        let (code, again) = post(
            &http,
            format!("{url}/v1/jobs"),
            json!({"id": id, "tenant": status["tenant"]}),
        )
        .await
        .unwrap();
        assert_eq!(code, 201, "{again}");
        assert_eq!(again["duplicate"], true, "{id}: {again}");
    }
    // Completions acknowledged for jobs whose submission ack was lost in flight still hold.
    for id in &acks.completed {
        let (_, status) = get(&http, format!("{url}/v1/jobs/{id}")).await.unwrap();
        assert_eq!(status["state"], "succeeded", "{id}: {status}");
    }
    // The leases held at the crash go on under their epoch (a completion that became durable
    // without its answer is answered again).
    for (id, epoch) in &acks.leased {
        let (_, status) = get(&http, format!("{url}/v1/jobs/{id}")).await.unwrap();
        if status["state"] == "running" {
            let (code, hb) = post(
                &http,
                format!("{url}/v1/leases/{id}/heartbeat"),
                json!({ "epoch": epoch }),
            )
            .await
            .unwrap();
            assert_eq!(code, 200, "{id}: {hb}");
            assert_eq!(hb["action"], "continue");
        }
        let (code, done) = post(
            &http,
            format!("{url}/v1/leases/{id}/complete"),
            json!({"epoch": epoch, "outcome": "succeeded"}),
        )
        .await
        .unwrap();
        assert_eq!(code, 200, "{id}: {done}");
        assert_eq!(done["state"], "succeeded");
    }
    // What is left runs once each: no job is handed out twice, and no finished job again.
    let mut seen = BTreeSet::new();
    loop {
        let body = json!({"worker": "w2", "capacity": {"cpu": 1000}, "max_jobs": 1000});
        let (code, r) = post(&http, format!("{url}/v1/leases"), body).await.unwrap();
        assert_eq!(code, 200, "{r}");
        let leases = r["leases"].as_array().unwrap();
        if leases.is_empty() {
            break;
        }
        for l in leases {
            let id = l["job_id"].as_str().unwrap().to_string();
            assert!(
                !acks.completed.contains(&id),
                "{id} ran again after it succeeded"
            );
            assert!(!acks.leased.contains_key(&id), "{id} was handed out twice");
            assert!(seen.insert(id.clone()), "{id} leased twice");
            let (code, _) = post(
                &http,
                format!("{url}/v1/leases/{id}/complete"),
                json!({"epoch": l["epoch"], "outcome": "succeeded"}),
            )
            .await
            .unwrap();
            assert_eq!(code, 200);
        }
    }
    let (code, _) = get(&http, format!("{url}/readyz")).await.unwrap();
    assert_eq!(code, 200);
    let (exit, _) = served.terminate();
    assert!(exit.success(), "{exit:?}");
}

/// A server started again on `dir` (logging at `info`), once ready, and its log line that
/// tells how it recovered (empty if none).
async fn restart(dir: &std::path::Path, args: &[&str], http: &reqwest::Client) -> (Served, String) {
    let served = serve(dir, args, &[("RUST_LOG", "info")]);
    served.ready(http).await;
    let recovered = served
        .stderr
        .lock()
        .unwrap()
        .iter()
        .find(|l| l.contains(" recovered "))
        .cloned()
        .unwrap_or_default();
    (served, recovered)
}

/// The number after `key=` in `line`, if any.
fn field(line: &str, key: &str) -> Option<u64> {
    let at = line.find(&format!("{key}="))? + key.len() + 1;
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A server that goes quiet after its last snapshot puts it in force without any further
/// commit (the embedded store writes a snapshot's file while commits go on and records it at a
/// later call): killed with SIGKILL then, it restarts from that snapshot, replaying nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_servers_last_snapshot_is_in_force_before_a_kill() {
    let dir = TempDir::new("idle-snapshot");
    let args = ["--snapshot-every-events", "20"];
    let logs = [("RUST_LOG", "info")];
    let served = serve(dir.path(), &args, &logs);
    let http = client();
    served.ready(&http).await;
    let url = served.url.clone();
    let snapshots = || {
        let lines = served.stderr.lock().unwrap();
        let taken: Vec<u64> = lines
            .iter()
            .filter(|l| l.contains(" snapshot "))
            .filter_map(|l| field(l, "lsn"))
            .collect();
        taken
    };
    // Submitted one by one until a snapshot follows a submission: then nothing more is sent,
    // so no commit comes after that snapshot.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut i = 0;
    let snapshot_lsn = loop {
        assert!(Instant::now() < deadline, "no snapshot came");
        let before = snapshots().len();
        let job = json!({"id": format!("j{i}"), "tenant": "t"});
        let (code, body) = post(&http, format!("{url}/v1/jobs"), job).await.unwrap();
        assert_eq!(code, 201, "{body}");
        i += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
        let after = snapshots();
        if after.len() > before {
            break *after.last().unwrap();
        }
    };
    // Quiet: the store side puts the snapshot in force by itself once its file is written.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    served.kill_9();

    let (served, recovered) = restart(dir.path(), &args, &http).await;
    assert_eq!(
        field(&recovered, "snapshot_lsn"),
        Some(snapshot_lsn),
        "{recovered}"
    );
    assert_eq!(field(&recovered, "replayed"), Some(0), "{recovered}");
    let (code, status) = get(&http, format!("{}/v1/jobs/j0", served.url))
        .await
        .unwrap();
    assert_eq!((code, status["state"].as_str()), (200, Some("queued")));
}
