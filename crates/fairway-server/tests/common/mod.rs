//! A real server in the test process: its own temporary data directory, an ephemeral port on
//! 127.0.0.1, real HTTP through reqwest.

#![allow(dead_code)]

use fairway_server::{Server, ServerConfig, ServerError};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "fairway-server-{tag}-{}-{n}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        TempDir(dir)
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

/// A running server.
pub struct TestServer {
    pub url: String,
    pub http: reqwest::Client,
    pub token: Option<String>,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<Result<(), ServerError>>>,
}

impl TestServer {
    /// Starts a server on `dir` with the defaults changed by `configure`, and waits until it is
    /// ready.
    pub async fn start(dir: &Path, configure: impl FnOnce(&mut ServerConfig)) -> TestServer {
        let mut config = ServerConfig::new(dir);
        config.listen = "127.0.0.1:0".parse().unwrap();
        configure(&mut config);
        let server = Server::bind(config).await.expect("the server binds");
        let url = format!("http://{}", server.local_addr());
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(90))
            .build()
            .unwrap();
        let server = TestServer {
            url,
            http,
            token: None,
            stop: Some(stop),
            handle: Some(handle),
        };
        server.wait_ready().await;
        server
    }

    pub async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = self.http.get(format!("{}/readyz", self.url)).send().await
                && r.status() == 200
            {
                return;
            }
            assert!(Instant::now() < deadline, "the server never became ready");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the server gracefully and returns how it ended.
    pub async fn stop(mut self) -> Result<(), ServerError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.handle.take().unwrap().await.expect("the server task")
    }

    /// Another handle on the same server (for a concurrent task); it does not stop it.
    pub fn client(&self) -> TestServer {
        TestServer {
            url: self.url.clone(),
            http: self.http.clone(),
            token: self.token.clone(),
            stop: None,
            handle: None,
        }
    }

    /// The same server, calling with `token`.
    pub fn with_token(&self, token: &str) -> TestServer {
        TestServer {
            url: self.url.clone(),
            http: self.http.clone(),
            token: Some(token.to_string()),
            stop: None,
            handle: None,
        }
    }

    /// `rb` with this handle's token (also for a request whose reply a test reads as text).
    pub fn auth(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        }
    }

    /// POST a JSON body; returns the status and the JSON reply.
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .auth(self.http.post(format!("{}{path}", self.url)))
            .json(&body)
            .send()
            .await
            .expect("request");
        reply(r).await
    }

    /// POST raw bytes.
    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
        let r = self
            .auth(self.http.post(format!("{}{path}", self.url)))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request");
        reply(r).await
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .auth(self.http.get(format!("{}{path}", self.url)))
            .send()
            .await
            .expect("request");
        reply(r).await
    }

    pub async fn put_text(&self, path: &str, text: &str) -> (u16, Value) {
        let r = self
            .auth(self.http.put(format!("{}{path}", self.url)))
            .body(text.to_string())
            .send()
            .await
            .expect("request");
        reply(r).await
    }

    pub async fn submit(&self, job: Value) -> (u16, Value) {
        self.post("/v1/jobs", job).await
    }

    pub async fn status(&self, id: &str) -> (u16, Value) {
        self.get(&format!("/v1/jobs/{id}")).await
    }

    pub async fn lease(&self, worker: &str, max_jobs: u32, wait_ms: u64) -> Vec<Value> {
        let (code, body) = self
            .post(
                "/v1/leases",
                serde_json::json!({
                    "worker": worker, "capacity": {"cpu": 64},
                    "max_jobs": max_jobs, "wait_ms": wait_ms
                }),
            )
            .await;
        assert_eq!(code, 200, "{body}");
        body["leases"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn reply(r: reqwest::Response) -> (u16, Value) {
    let code = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (code, value)
}
