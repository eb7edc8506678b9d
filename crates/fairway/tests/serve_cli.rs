//! `fairway serve` as a user meets it: what it prints, what it refuses, how it stops.

mod serve_support;

use fairway_store::{EventStore, RedbStore};
use serde_json::{Value, json};
use serve_support::{Served, TempDir, client, get, post, serve, wait_with_timeout};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn serve_fails(args: &[&str]) -> (i32, String) {
    let dir = TempDir::new("refused");
    let out = Command::new(env!("CARGO_BIN_EXE_fairway"))
        .arg("serve")
        .arg("--data")
        .arg(dir.path())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("fairway runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// Starts a server on `dir`, waits until it is ready, and submits `job` (accepted).
async fn serve_with_job(dir: &Path, http: &reqwest::Client, job: Value) -> Served {
    let served = serve(dir, &[], &[]);
    served.ready(http).await;
    let (code, r) = post(http, format!("{}/v1/jobs", served.url), job)
        .await
        .unwrap();
    assert_eq!(code, 201, "{r}");
    served
}

/// An open server (no token file) refuses a non-loopback address, and bad files are named with
/// their line: each is bad input, exit 2.
#[test]
fn serve_refuses_bad_input_with_exit_2() {
    let (code, stderr) = serve_fails(&["--listen", "0.0.0.0:0"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("without a token file"), "{stderr}");

    let (code, stderr) = serve_fails(&["--idle-spin-us", "10001"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--idle-spin-us 10001: at most 10000"),
        "{stderr}"
    );

    let dir = TempDir::new("files");
    std::fs::create_dir_all(dir.path()).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[policy]\nname = \"fair\"\nlease = 30\n").unwrap();
    let (code, stderr) = serve_fails(&["--policy", policy.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("policy.toml: line 3"), "{stderr}");

    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, "[[token]]\nsecret = \"short\"\nrole = \"admin\"\n").unwrap();
    let (code, stderr) = serve_fails(&["--tokens", tokens.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("tokens.toml:1: key `secret`"), "{stderr}");
}

/// With no token file the server says it runs open; SIGTERM stops it cleanly (exit 0), and a
/// restart on the same directory has the job, with the lease length from `FAIRWAY_LEASE_MS`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_says_it_runs_open_and_stops_cleanly_on_sigterm() {
    let dir = TempDir::new("sigterm");
    let http = client();
    let served = serve_with_job(
        dir.path(),
        &http,
        json!({"id": "kept", "tenant": "acme", "payload": [1, 2, 3]}),
    )
    .await;
    let url = served.url.clone();
    // A parked long poll is answered (empty) when the server stops.
    let poll = {
        let (http, url) = (http.clone(), url.clone());
        tokio::spawn(async move {
            post(
                &http,
                format!("{url}/v1/leases"),
                json!({"worker": "gpu-box", "capacity": {"gpu": 1}, "wait_ms": 30000}),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (exit, stdout) = tokio::task::spawn_blocking(move || served.terminate())
        .await
        .unwrap();
    assert!(exit.success(), "{exit:?}");
    let stdout = stdout.join("\n");
    assert!(
        stdout.contains("listening on http://127.0.0.1:"),
        "{stdout}"
    );
    assert!(stdout.contains("OPEN"), "{stdout}");
    assert!(stdout.contains("stopped cleanly"), "{stdout}");
    let (code, r) = poll.await.unwrap().expect("the poll is answered");
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["leases"], json!([]));

    let served = serve(dir.path(), &[], &[("FAIRWAY_LEASE_MS", "1234")]);
    served.ready(&http).await;
    let url = served.url.clone();
    let (code, status) = get(&http, format!("{url}/v1/jobs/kept")).await.unwrap();
    assert_eq!(code, 200, "{status}");
    assert_eq!(status["state"], "queued");
    let (_, r) = post(
        &http,
        format!("{url}/v1/leases"),
        json!({"worker": "w", "capacity": {"cpu": 1}}),
    )
    .await
    .unwrap();
    assert_eq!(r["leases"][0]["job_id"], "kept", "{r}");
    assert_eq!(r["leases"][0]["lease_ms"], 1234, "{r}");
    assert_eq!(r["leases"][0]["payload"], json!([1, 2, 3]));
    let (_, policy) = get(&http, format!("{url}/v1/policy")).await.unwrap();
    assert_eq!(
        policy["version"], 2,
        "the lease override is a new version: {policy}"
    );
    let (exit, _) = tokio::task::spawn_blocking(move || served.stop_with("INT"))
        .await
        .unwrap();
    assert!(exit.success(), "Ctrl-C stops cleanly too: {exit:?}");
}

/// A damaged snapshot is refused loudly: the server does not start (exit 1) and names the
/// snapshot's LSN and what is wrong with it. It cannot fall back on anything older, because
/// the snapshot's commit pruned the events it covers (docs/store.md, "Snapshots and pruning").
/// Refusing writes nothing: once the frame is restored, the server starts with the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_a_damaged_snapshot() {
    let dir = TempDir::new("bad-snapshot");
    let http = client();
    let served = serve_with_job(dir.path(), &http, json!({"id": "kept", "tenant": "acme"})).await;
    // A clean stop snapshots the engine.
    let (exit, _) = tokio::task::spawn_blocking(move || served.terminate())
        .await
        .unwrap();
    assert!(exit.success(), "{exit:?}");
    let lsn = {
        let mut store = RedbStore::open(dir.path()).unwrap();
        let recovered = store.recover().unwrap();
        assert!(
            recovered.events.is_empty(),
            "the stop snapshotted everything"
        );
        recovered.snapshot.expect("a snapshot at the clean stop").0
    };
    let mut original = None;
    let found = RedbStore::tamper(dir.path(), lsn, true, |mut frame| {
        original = Some(frame.clone());
        let middle = frame.len() / 2;
        frame[middle] ^= 0x10;
        Some(frame)
    })
    .unwrap();
    assert!(found);

    let mut child = Command::new(env!("CARGO_BIN_EXE_fairway"))
        .arg("serve")
        .arg("--data")
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fairway runs");
    let exit = wait_with_timeout(&mut child, Duration::from_secs(30));
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(exit.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("snapshot at LSN {lsn}: checksum mismatch")),
        "{stderr}"
    );

    RedbStore::tamper(dir.path(), lsn, true, |_| original).unwrap();
    let served = serve(dir.path(), &[], &[]);
    served.ready(&http).await;
    let (code, status) = get(&http, format!("{}/v1/jobs/kept", served.url))
        .await
        .unwrap();
    assert_eq!(code, 200, "{status}");
    assert_eq!(status["state"], "queued");
}
