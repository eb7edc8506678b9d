//! Fairway's Rust SDK: a typed client of the HTTP API v1 and a worker loop.
//!
//! Producers submit jobs and follow them:
//!
//! ```no_run
//! # async fn example() -> Result<(), fairway_client::Error> {
//! use fairway_client::{Client, JobSpec, RetryPolicy};
//! use serde_json::json;
//!
//! let client = Client::builder("http://127.0.0.1:7700").token("t0ken").build()?;
//! let job = JobSpec::new("acme").demand("cpu", 2.0).payload(json!({"video": 42}));
//! // The id is fixed before the first try, so retries cannot create a second job.
//! let submitted = client.submit_with_retry(job, &RetryPolicy::default()).await?;
//! let status = client.status(submitted.job_id()).await?;
//! println!("{} is {:?}", status.job_id, status.state);
//! # Ok(()) }
//! ```
//!
//! Workers run jobs through a handler that watches its stop signal:
//!
//! ```no_run
//! # async fn example() -> Result<(), fairway_client::Error> {
//! use fairway_client::{Client, JobOutcome, Worker, WorkerConfig};
//!
//! let client = Client::new("http://127.0.0.1:7700")?;
//! let config = WorkerConfig {
//!     capacity: [("cpu".to_string(), 4.0)].into(),
//!     max_jobs: 4,
//!     ..WorkerConfig::default()
//! };
//! let worker = Worker::new(client, config);
//! let shutdown = worker.shutdown_handle();
//! tokio::spawn(async move {
//!     let _ = tokio::signal::ctrl_c().await;
//!     shutdown.stop();
//! });
//! worker
//!     .run(|job| async move {
//!         tokio::select! {
//!             _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => JobOutcome::Succeeded,
//!             _ = job.stop.stopped() => JobOutcome::Stopped { progress_ms: None },
//!         }
//!     })
//!     .await
//! # }
//! ```
//!
//! **Architecture Invariant: this crate knows only the wire protocol.** It does not depend on
//! the engine or the server; [`types`] is the contract written down on the client's side.

#![warn(missing_docs)]

mod client;
mod coalesce;
mod error;
pub mod observe;
pub mod types;
pub mod worker;

pub use client::{
    Client, ClientBuilder, DEFAULT_CONNECT_TIMEOUT, DEFAULT_FAILOVER, DEFAULT_TIMEOUT, RetryPolicy,
    Submitted, new_job_id,
};
pub use coalesce::DEFAULT_COALESCE;
pub use error::Error;
pub use observe::{DecisionFilter, DecisionPage, Explanation, Overview, TenantReport};
pub use types::{
    Action, AttemptOutcome, BatchItem, BatchResult, CompleteRequest, Completion, CompletionResult,
    ErrorBody, HeartbeatReply, JobSpec, JobState, JobStateReply, JobStatus, LeaderInfo, Lease,
    LeaseRequest, MAX_BATCH, PolicyError, PolicyReply, PolicyVersion, SubmitReply,
};
pub use worker::{
    JobContext, JobOutcome, ShutdownHandle, StopReason, StopSignal, Worker, WorkerConfig,
};
