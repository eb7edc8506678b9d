//! Runs the real `fairway serve` binary on a temporary data directory and an ephemeral port,
//! and talks to it over HTTP.

#![allow(dead_code)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        TempDir(std::env::temp_dir().join(format!(
            "fairway-serve-{tag}-{}-{n}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        )))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `fairway serve`.
pub struct Served {
    pub child: Child,
    pub url: String,
    /// Everything it printed on stdout so far.
    pub stdout: Arc<Mutex<Vec<String>>>,
    /// Everything it logged on stderr so far (also passed on to the test's stderr).
    pub stderr: Arc<Mutex<Vec<String>>>,
}

/// Starts `fairway serve --data DIR --listen 127.0.0.1:0 ARGS..` and waits for its address.
pub fn serve(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Served {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fairway"));
    cmd.arg("serve")
        .arg("--data")
        .arg(dir)
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("fairway serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let lines = lines.clone();
        // Keep reading, so that the server never writes into a full or closed pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let url = rest
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    let _ = tx.send(url);
                }
                lines.lock().unwrap().push(line);
            }
        });
    }
    let stderr = child.stderr.take().expect("stderr");
    let logs = Arc::new(Mutex::new(Vec::new()));
    {
        let logs = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("[fairway serve] {line}");
                logs.lock().unwrap().push(line);
            }
        });
    }
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("fairway serve prints where it listens");
    Served {
        child,
        url,
        stdout: lines,
        stderr: logs,
    }
}

impl Served {
    /// Waits until `/readyz` answers 200.
    pub async fn ready(&self, http: &reqwest::Client) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = http.get(format!("{}/readyz", self.url)).send().await
                && r.status() == 200
            {
                return;
            }
            assert!(Instant::now() < deadline, "the server never became ready");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(self) -> (ExitStatus, Vec<String>) {
        self.stop_with("TERM")
    }

    /// Sends `signal` (`TERM`, `INT`) and waits for the exit; returns it and the stdout lines.
    pub fn stop_with(mut self, signal: &str) -> (ExitStatus, Vec<String>) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        let exit = wait_with_timeout(&mut self.child, Duration::from_secs(30));
        // The reader thread sees EOF once the process is gone.
        std::thread::sleep(Duration::from_millis(50));
        let lines = self.stdout.lock().unwrap().clone();
        (exit, lines)
    }

    /// SIGKILL: the process dies wherever it is.
    pub fn kill_9(mut self) {
        self.child.kill().expect("SIGKILL");
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits for `child` to exit, killing it after `timeout`.
pub fn wait_with_timeout(child: &mut Child, timeout: Duration) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the process did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// A request; `Err` when the server could not be reached (it died).
pub async fn call(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    body: Option<Value>,
) -> Result<(u16, Value), reqwest::Error> {
    let mut rb = http.request(method, url);
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let r = rb.send().await?;
    let code = r.status().as_u16();
    let text = r.text().await?;
    Ok((code, serde_json::from_str(&text).unwrap_or(json!(text))))
}

pub async fn post(
    http: &reqwest::Client,
    url: String,
    body: Value,
) -> Result<(u16, Value), reqwest::Error> {
    call(http, reqwest::Method::POST, url, Some(body)).await
}

pub async fn get(http: &reqwest::Client, url: String) -> Result<(u16, Value), reqwest::Error> {
    call(http, reqwest::Method::GET, url, None).await
}

/// Every event in a PostgreSQL test database, in LSN order: (LSN, term, event).
pub fn events_in(
    db: &fairway_store::postgres::testing::TestDb,
) -> Vec<(u64, u64, fairway_core::Event)> {
    db.query("SELECT lsn, term, encode(record, 'hex') FROM fairway_events ORDER BY lsn")
        .into_iter()
        .map(|row| {
            let lsn: u64 = row[0].as_deref().unwrap().parse().unwrap();
            let term: u64 = row[1].as_deref().unwrap().parse().unwrap();
            let hex = row[2].as_deref().unwrap();
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            let event = fairway_store::decode_event(&bytes)
                .unwrap_or_else(|e| panic!("event at LSN {lsn}: {e}"));
            (lsn, term, event)
        })
        .collect()
}
