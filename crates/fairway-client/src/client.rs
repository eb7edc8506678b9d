//! [`Client`]: one typed method per call of the HTTP API v1.

use crate::coalesce::{Coalescer, DEFAULT_COALESCE};
use crate::error::Error;
use crate::observe::{DecisionFilter, DecisionPage, Explanation, Overview, TenantReport};
use crate::types::*;
use reqwest::{Method, RequestBuilder, Url};
use serde::de::DeserializeOwned;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use time::OffsetDateTime;

/// The default time a call may take, connection included (long polls get their wait on top).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The default time to establish a connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The default failover window of a client of several servers (see [`ClientBuilder::failover`]).
pub const DEFAULT_FAILOVER: Duration = Duration::from_secs(30);
/// The most redirects to a leader one try follows before it counts as a failed try (leaders
/// changing under it).
const MAX_REDIRECTS: u32 = 4;
/// The longest wait between two rounds of tries over the servers.
const FAILOVER_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A fresh job id: a UUID v7, so ids sort by creation time and never collide across producers.
pub fn new_job_id() -> String {
    // Encoded straight into its text, the form `Display` gives, without the formatter.
    let id = uuid::Uuid::now_v7();
    id.hyphenated()
        .encode_lower(&mut uuid::Uuid::encode_buffer())
        .to_owned()
}

impl JobSpec {
    /// Gives the job a generated id (a UUID v7) unless it has one, and returns the id.
    ///
    /// Submitting the same id twice creates the job once, so call this before a retry loop of
    /// your own: every try then names the same job.
    pub fn ensure_id(&mut self) -> &str {
        self.id.get_or_insert_with(new_job_id)
    }
}

/// A submission the server took: accepted now, or accepted for later.
#[derive(Clone, Debug, PartialEq)]
pub enum Submitted {
    /// Queued (201).
    Accepted {
        /// The job's id.
        job_id: String,
        /// Whether the id had been submitted before; nothing new was created.
        duplicate: bool,
    },
    /// Accepted but not eligible before `not_before` (202).
    Deferred {
        /// The job's id.
        job_id: String,
        /// When it becomes eligible.
        not_before: OffsetDateTime,
        /// Whether the id had been submitted before.
        duplicate: bool,
    },
}

impl Submitted {
    /// The job's id.
    pub fn job_id(&self) -> &str {
        match self {
            Submitted::Accepted { job_id, .. } | Submitted::Deferred { job_id, .. } => job_id,
        }
    }

    /// Whether the id had been submitted before (the first outcome was returned again).
    pub fn duplicate(&self) -> bool {
        match self {
            Submitted::Accepted { duplicate, .. } | Submitted::Deferred { duplicate, .. } => {
                *duplicate
            }
        }
    }
}

impl From<Submitted> for SubmitReply {
    fn from(s: Submitted) -> SubmitReply {
        match s {
            Submitted::Accepted { job_id, duplicate } => {
                SubmitReply::Accepted { job_id, duplicate }
            }
            Submitted::Deferred {
                job_id,
                not_before,
                duplicate,
            } => SubmitReply::Deferred {
                job_id,
                not_before,
                duplicate,
            },
        }
    }
}

impl SubmitReply {
    /// The reply as a `Result`: accepted and deferred are `Ok`, rejections are
    /// [`Error::Rejected`].
    pub fn into_result(self) -> Result<Submitted, Error> {
        match self {
            SubmitReply::Accepted { job_id, duplicate } => {
                Ok(Submitted::Accepted { job_id, duplicate })
            }
            SubmitReply::Deferred {
                job_id,
                not_before,
                duplicate,
            } => Ok(Submitted::Deferred {
                job_id,
                not_before,
                duplicate,
            }),
            SubmitReply::RejectedRetryable {
                reason,
                message,
                retry_after_ms,
            } => Err(Error::Rejected {
                retryable: true,
                reason,
                message,
                retry_after: Some(Duration::from_millis(retry_after_ms)),
            }),
            SubmitReply::RejectedFinal { reason, message } => Err(Error::Rejected {
                retryable: false,
                reason,
                message,
                retry_after: None,
            }),
        }
    }
}

impl BatchResult {
    /// The result as the same `Result` a single [`Client::submit`] would have returned.
    pub fn into_result(self) -> Result<Submitted, Error> {
        match self.body {
            BatchItem::Reply(reply) => reply.into_result(),
            BatchItem::Error(body) => Err(Error::from_body(self.status, body, None)),
        }
    }
}

impl BatchSubmitReply {
    /// One result per job of a request of `count` jobs, in order, whether the server listed
    /// every result or left out (`omit=accepted`) those of the jobs accepted as new under the
    /// ids the request gave: `id(i)` is job `i`'s id, called for those only. A reply that
    /// does not account for each job exactly once is refused with what is wrong with it (for
    /// an [`Error::Protocol`]).
    pub(crate) fn into_results(
        self,
        count: usize,
        mut id: impl FnMut(usize) -> String,
    ) -> Result<Vec<Result<Submitted, Error>>, String> {
        let listed = self.results.len();
        let Some(omitted) = self.omitted else {
            if listed != count {
                return Err(format!("{listed} results for {count} jobs"));
            }
            return Ok(self
                .results
                .into_iter()
                .map(BatchResult::into_result)
                .collect());
        };
        if listed.checked_add(omitted) != Some(count) {
            return Err(format!(
                "{listed} results and {omitted} left out for {count} jobs"
            ));
        }
        let mut results = self.results.into_iter().peekable();
        let mut all = Vec::with_capacity(count);
        for i in 0..count {
            match results.next_if(|r| r.index == Some(i)) {
                Some(result) => all.push(result.into_result()),
                None => all.push(Ok(Submitted::Accepted {
                    job_id: id(i),
                    duplicate: false,
                })),
            }
        }
        match results.next() {
            None => Ok(all),
            Some(stray) => Err(format!(
                "a result's index ({:?}) missing, repeated, out of order or past the {count} jobs",
                stray.index
            )),
        }
    }
}

/// How [`Client::submit_with_retry`] retries: bounded attempts, exponential backoff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries in all, the first included (at least 1).
    pub max_attempts: u32,
    /// Wait after the first failed try; doubles per try.
    pub initial_backoff: Duration,
    /// The longest wait between tries (a server's `Retry-After` may ask for longer, and is
    /// honoured).
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// Five tries, waiting 100 ms, 200 ms, 400 ms, 800 ms between them.
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
        }
    }
}

impl RetryPolicy {
    /// The wait before try `attempt + 1` after try `attempt` (1-based) failed with `error`.
    fn wait(&self, attempt: u32, error: &Error) -> Duration {
        let backoff = self
            .initial_backoff
            .saturating_mul(1u32 << (attempt - 1).min(20))
            .min(self.max_backoff);
        backoff.max(error.retry_after().unwrap_or_default())
    }
}

/// A client of a Fairway server, or of several replicas of one.
///
/// Cheap to clone (the connection pool, and what it learned about the leader, are shared).
///
/// **Replicas.** A replica that follows answers `307` with the leader's URL: the client sends
/// the call again there, and sends later calls there directly. Given several servers
/// (`http://a:7700,http://b:7700`), a call that cannot reach the one it tried, or gets `503`
/// from it, goes on to the next, for up to the failover window
/// ([`ClientBuilder::failover`]), so that a change of leader costs a pause, not an error.
/// Only calls that are safe to repeat are sent again after an unknown outcome (a timeout, a
/// dropped connection, `503 unavailable`): submissions carry their job id, heartbeats and
/// completions their epoch, reads change nothing. `PUT /v1/policy` is sent again only when it
/// surely was not applied (the connection was refused, or `503 not_ready` / `no_leader`).
/// With one server and no failover window, a call is a single try (redirects aside), and none
/// retries on its own except [`Client::submit_with_retry`].
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
    token: Option<String>,
    timeout: Duration,
    /// Every server given, `base` first.
    servers: Arc<[Url]>,
    /// Where calls go now: the leader learned from a redirect, or the server in turn.
    route: Arc<Route>,
    /// How long a call keeps trying other servers.
    failover: Duration,
    /// Where concurrent [`Client::submit`] calls share requests; `None` when turned off.
    coalesce: Option<Arc<Coalescer>>,
}

/// Where a client's calls go: the leader it learned of, if any, else `servers[next]`.
#[derive(Debug, Default)]
struct Route {
    leader: std::sync::Mutex<Option<Url>>,
    next: AtomicUsize,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The token stays out of logs.
        f.debug_struct("Client")
            .field("base", &self.base.as_str())
            .field("servers", &self.servers.len())
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Builds a [`Client`]: base URL (or several, comma-separated), bearer token, timeouts.
#[derive(Clone, Debug)]
pub struct ClientBuilder {
    base: String,
    token: Option<String>,
    timeout: Duration,
    connect_timeout: Duration,
    failover: Option<Duration>,
    coalesce: usize,
}

impl ClientBuilder {
    /// Sends `Authorization: Bearer <token>` with every call.
    pub fn token(mut self, token: impl Into<String>) -> ClientBuilder {
        self.token = Some(token.into());
        self
    }

    /// The time a call may take (default [`DEFAULT_TIMEOUT`]); a lease's long poll gets its
    /// `wait_ms` on top.
    pub fn timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.timeout = timeout;
        self
    }

    /// The time to establish a connection (default [`DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.connect_timeout = timeout;
        self
    }

    /// How long one call keeps trying the other servers when the one it tried cannot be
    /// reached or answers `503` (a leader failing over). Default: [`DEFAULT_FAILOVER`] with
    /// several servers, none with one.
    pub fn failover(mut self, window: Duration) -> ClientBuilder {
        self.failover = Some(window);
        self
    }

    /// How many requests at most carry concurrent [`Client::submit`] calls at once (default
    /// [`DEFAULT_COALESCE`]); `0` sends every call as a request of its own.
    ///
    /// Calls that overlap in time share `POST /v1/jobs/batch` requests, each caller still
    /// getting its own job's answer, exactly as `submit` alone would have had it; a call that
    /// finds no request under way is sent at once, alone, so a sequential producer waits no
    /// longer. Ordering between calls that overlap is not defined either way. When a shared
    /// request gets no answer at all (a transport failure) or `413` (a server whose limits are
    /// below this client's batches), each of its jobs is sent again alone, once: submissions
    /// are idempotent by id.
    pub fn coalesce(mut self, requests: usize) -> ClientBuilder {
        self.coalesce = requests;
        self
    }

    /// The client. Fails when a base URL is not an `http://` URL: this SDK is built without
    /// TLS, so put a TLS-terminating proxy in front of a server reached over a network.
    /// Several URLs, separated by commas, name replicas of one server.
    pub fn build(self) -> Result<Client, Error> {
        let servers = self
            .base
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(parse_base)
            .collect::<Result<Vec<Url>, Error>>()?;
        let Some(base) = servers.first().cloned() else {
            return Err(Error::Invalid(format!(
                "server URL `{}`: expected http://HOST[:PORT][/PREFIX]",
                self.base
            )));
        };
        let http = reqwest::Client::builder()
            .timeout(self.timeout)
            .connect_timeout(self.connect_timeout)
            // Redirects to the leader are followed here, with the token (reqwest would drop
            // it on a change of host or port).
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(Error::Transport)?;
        let failover = self.failover.unwrap_or(if servers.len() > 1 {
            DEFAULT_FAILOVER
        } else {
            Duration::ZERO
        });
        Ok(Client {
            http,
            base,
            token: self.token,
            timeout: self.timeout,
            servers: servers.into(),
            route: Arc::new(Route::default()),
            failover,
            coalesce: (self.coalesce > 0).then(|| Arc::new(Coalescer::new(self.coalesce))),
        })
    }
}

/// One server URL: `http://HOST[:PORT][/PREFIX]`, without a trailing slash.
fn parse_base(text: &str) -> Result<Url, Error> {
    let mut base =
        Url::parse(text).map_err(|e| Error::Invalid(format!("server URL `{text}`: {e}")))?;
    if base.scheme() != "http" {
        return Err(Error::Invalid(format!(
            "server URL `{text}`: only http:// is supported (this client is built without TLS)"
        )));
    }
    if base.cannot_be_a_base() || base.query().is_some() || base.fragment().is_some() {
        return Err(Error::Invalid(format!(
            "server URL `{text}`: expected http://HOST[:PORT][/PREFIX]"
        )));
    }
    // A trailing slash would otherwise add an empty path segment before `v1`.
    if base.path().ends_with('/') {
        let trimmed = base.path().trim_end_matches('/').to_string();
        base.set_path(&trimmed);
    }
    Ok(base)
}

impl Client {
    /// A client of the server at `base_url` (`http://127.0.0.1:7700`) with default timeouts
    /// and no token.
    pub fn new(base_url: impl Into<String>) -> Result<Client, Error> {
        Client::builder(base_url).build()
    }

    /// A builder for a client of the server at `base_url`.
    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base: base_url.into(),
            token: None,
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            failover: None,
            coalesce: DEFAULT_COALESCE,
        }
    }

    /// The server's base URL (the first one given).
    pub fn base_url(&self) -> &str {
        self.base.as_str()
    }

    /// Every server URL given, the first one first.
    pub fn server_urls(&self) -> Vec<String> {
        self.servers.iter().map(|u| u.to_string()).collect()
    }

    /// Who leads (`GET /v1/leader`), as the replica this call reaches sees it.
    pub async fn leader(&self) -> Result<LeaderInfo, Error> {
        self.call(self.request(Method::GET, &["v1", "leader"]))
            .await
    }

    /// Submits one job (`POST /v1/jobs`).
    ///
    /// A job without an id gets a UUID v7 first, returned in [`Submitted::job_id`]. `Ok` means
    /// the job is durably accepted (or deferred); a refusal is [`Error::Rejected`]. To retry a
    /// submission yourself, reuse the id (see [`JobSpec::ensure_id`]), or use
    /// [`Client::submit_with_retry`].
    ///
    /// Calls that overlap in time share requests (see [`ClientBuilder::coalesce`]); each gets
    /// its own job's answer. Dropping the future before it is answered leaves the job's
    /// outcome unknown, as with any request already sent.
    pub async fn submit(&self, mut spec: JobSpec) -> Result<Submitted, Error> {
        spec.ensure_id();
        let json = serde_json::to_string(&spec)
            .map_err(|e| Error::Invalid(format!("the job cannot be encoded as JSON: {e}")))?;
        match &self.coalesce {
            Some(coalescer) if json.len() <= crate::coalesce::ALONE_BYTES => {
                let id = spec.id.take().unwrap_or_default();
                coalescer.submit(self, id, json).await
            }
            _ => self.submit_json(json).await,
        }
    }

    /// `POST /v1/jobs` with a job's JSON (its id set).
    pub(crate) async fn submit_json(&self, json: String) -> Result<Submitted, Error> {
        let request = self
            .request(Method::POST, &["v1", "jobs"])
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(json);
        let reply: SubmitReply = self.call(request).await?;
        reply.into_result()
    }

    /// `POST /v1/jobs/batch?omit=accepted` with a body already encoded, its jobs' ids set:
    /// the reply lists only the results that say more than "accepted under that id"
    /// ([`BatchSubmitReply::into_results`] puts the others back).
    pub(crate) async fn submit_batch_json(
        &self,
        body: impl Into<reqwest::Body>,
    ) -> Result<BatchSubmitReply, Error> {
        let mut url = self.url(&["v1", "jobs", "batch"]);
        url.set_query(Some("omit=accepted"));
        let request = self
            .authorized(self.http.request(Method::POST, url))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        self.call(request).await
    }

    /// Submits one job, retrying transport failures, 429s and 503s up to
    /// `retry.max_attempts` tries with exponential backoff (at least the server's
    /// `Retry-After`).
    ///
    /// Retrying is safe because submission is idempotent by job id: the id is fixed before
    /// the first try (a UUID v7 when the spec has none), and a server that already accepted
    /// it (say, the reply was lost to a timeout) answers the retry with the first outcome and
    /// `duplicate: true`, creating nothing. Final rejections and other errors are returned at
    /// once.
    pub async fn submit_with_retry(
        &self,
        mut spec: JobSpec,
        retry: &RetryPolicy,
    ) -> Result<Submitted, Error> {
        spec.ensure_id();
        let mut attempt = 1;
        loop {
            match self.submit(spec.clone()).await {
                Err(e) if e.is_retryable() && attempt < retry.max_attempts.max(1) => {
                    let wait = retry.wait(attempt, &e);
                    tracing::debug!(job_id = spec.id.as_deref(), attempt, error = %e, wait_ms = wait.as_millis() as u64, "submit failed; retrying the same id");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    /// Submits up to [`MAX_BATCH`] jobs in one request (`POST /v1/jobs/batch`); jobs without
    /// an id get one. The outer `Result` is the request's; the inner ones are each job's, in
    /// order, as [`Client::submit`] would have returned them.
    pub async fn submit_batch(
        &self,
        mut jobs: Vec<JobSpec>,
    ) -> Result<Vec<Result<Submitted, Error>>, Error> {
        if jobs.len() > MAX_BATCH {
            return Err(Error::Invalid(format!(
                "a batch holds at most {MAX_BATCH} jobs, not {}",
                jobs.len()
            )));
        }
        for job in &mut jobs {
            job.ensure_id();
        }
        let body = batch_json(&jobs)
            .map_err(|e| Error::Invalid(format!("the jobs cannot be encoded as JSON: {e}")))?;
        let reply = self.submit_batch_json(body).await?;
        reply
            .into_results(jobs.len(), |i| jobs[i].id.take().unwrap_or_default())
            .map_err(|message| Error::Protocol {
                status: 200,
                message,
            })
    }

    /// A job's state (`GET /v1/jobs/{id}`); [`Error::NotFound`] for an unknown id.
    pub async fn status(&self, job_id: &str) -> Result<JobStatus, Error> {
        self.call(self.request(Method::GET, &["v1", "jobs", job_id]))
            .await
    }

    /// Cancels a job (`POST /v1/jobs/{id}/cancel`) and returns its state after. A running
    /// attempt is told to stop at its next heartbeat.
    pub async fn cancel(&self, job_id: &str) -> Result<JobStateReply, Error> {
        self.call(self.request(Method::POST, &["v1", "jobs", job_id, "cancel"]))
            .await
    }

    /// The policy in force and its version (`GET /v1/policy`).
    pub async fn get_policy(&self) -> Result<PolicyReply, Error> {
        self.call(self.request(Method::GET, &["v1", "policy"]))
            .await
    }

    /// Replaces the policy with the TOML `text` (`PUT /v1/policy`) and returns the new
    /// version. A malformed policy is [`Error::InvalidPolicy`] with every error, and the prior
    /// version stays in force.
    pub async fn put_policy(&self, text: impl Into<String>) -> Result<PolicyVersion, Error> {
        let request = self
            .request(Method::PUT, &["v1", "policy"])
            .header(reqwest::header::CONTENT_TYPE, "application/toml")
            .body(text.into());
        self.call(request).await
    }

    /// Asks for work (`POST /v1/leases`), waiting up to `request.wait_ms` for some; an empty
    /// list means the wait ran out. Polling also tells the server the worker is alive.
    pub async fn lease(&self, request: &LeaseRequest) -> Result<Vec<Lease>, Error> {
        let wait = Duration::from_millis(request.wait_ms.unwrap_or(0));
        let request = self
            .request(Method::POST, &["v1", "leases"])
            .timeout(self.timeout.saturating_add(wait))
            .json(request);
        let reply: LeaseReply = self.call(request).await?;
        Ok(reply.leases)
    }

    /// Reports that the attempt of `job_id` under `epoch` is alive
    /// (`POST /v1/leases/{job_id}/heartbeat`), with its progress for checkpointable jobs. The
    /// reply says whether to continue, or to stop for a preemption or a cancel.
    /// [`Error::StaleEpoch`] means the attempt is no longer the caller's: stop it.
    pub async fn heartbeat(
        &self,
        job_id: &str,
        epoch: u64,
        progress_ms: Option<u64>,
    ) -> Result<HeartbeatReply, Error> {
        let request = self
            .request(Method::POST, &["v1", "leases", job_id, "heartbeat"])
            .json(&HeartbeatRequest { epoch, progress_ms });
        self.call(request).await
    }

    /// Reports how the attempt of `job_id` ended (`POST /v1/leases/{job_id}/complete`) and
    /// returns the job's state after. [`Error::StaleEpoch`] means it was no longer the caller's
    /// attempt, and nothing changed.
    pub async fn complete(
        &self,
        job_id: &str,
        completion: &CompleteRequest,
    ) -> Result<JobStateReply, Error> {
        let request = self
            .request(Method::POST, &["v1", "leases", job_id, "complete"])
            .json(completion);
        self.call(request).await
    }

    /// Reports many completions in one request (`POST /v1/leases/complete`); one result each,
    /// in order.
    pub async fn complete_batch(
        &self,
        completions: Vec<Completion>,
    ) -> Result<Vec<CompletionResult>, Error> {
        Ok(self.complete_and_lease(completions, None).await?.0)
    }

    /// Reports completions and, with `next`, asks for the next work in the same request
    /// (`POST /v1/leases/complete` with `next`): what [`Client::complete_batch`] and then
    /// [`Client::lease`] do, in one round trip and one commit instead of two. The server
    /// applies the completions first, so the capacity they free is offered to `next`, and
    /// answers at once with what that scheduling pass granted: `next.wait_ms` is not sent
    /// (the completions' answers would wait too), so an empty list means no work right now:
    /// long-poll with [`Client::lease`]. The inner error is the lease request's alone (a busy
    /// server, say): the completions' results stand. Without `next`, no lease is asked for and
    /// the inner list is empty.
    pub async fn complete_and_lease(
        &self,
        completions: Vec<Completion>,
        next: Option<&LeaseRequest>,
    ) -> Result<(Vec<CompletionResult>, Result<Vec<Lease>, Error>), Error> {
        let count = completions.len();
        let asked = next.is_some();
        let next = next.map(|next| LeaseRequest {
            wait_ms: None,
            ..next.clone()
        });
        let request = self
            .request(Method::POST, &["v1", "leases", "complete"])
            .json(&BatchCompleteRequest { completions, next });
        let reply: BatchCompleteReply = self.call(request).await?;
        if reply.results.len() != count {
            return Err(Error::Protocol {
                status: 200,
                message: format!("{} results for {count} completions", reply.results.len()),
            });
        }
        let leases = match (reply.leases, reply.lease_error) {
            (_, Some(problem)) => {
                let body = serde_json::json!({"error": problem.error, "message": problem.message});
                Err(Error::from_reply(
                    problem.status,
                    body.to_string().as_bytes(),
                    None,
                ))
            }
            (Some(leases), None) => Ok(leases),
            (None, None) if !asked => Ok(Vec::new()),
            (None, None) => Err(Error::Protocol {
                status: 200,
                message: "a completion call with `next` answered no `leases`".to_string(),
            }),
        };
        Ok((reply.results, leases))
    }

    /// Why a job is (not) running (`GET /v1/jobs/{id}/explain`): its waiting reasons with
    /// stable codes, the workers running it, how it ended, and the decisions that started its
    /// attempts. [`Error::NotFound`] for an unknown job (or another tenant's).
    pub async fn explain(&self, job_id: &str) -> Result<Explanation, Error> {
        self.call(self.request(Method::GET, &["v1", "jobs", job_id, "explain"]))
            .await
    }

    /// What a tenant has, is owed and owes (`GET /v1/tenants/{id}`): exact backlog per class,
    /// usage, guarantee, entitlement, balance, books. A tenant token sees its own tenant and
    /// its descendants only.
    pub async fn tenant(&self, tenant: &str) -> Result<TenantReport, Error> {
        self.call(self.request(Method::GET, &["v1", "tenants", tenant]))
            .await
    }

    /// Decision records (`GET /v1/decisions`): the latest ones, or pages forward from
    /// `filter.since` / `filter.after` (pass the reply's `next_after` as the next `after`).
    pub async fn decisions(&self, filter: &DecisionFilter) -> Result<DecisionPage, Error> {
        let mut query: Vec<(&str, String)> = Vec::new();
        if let Some(job) = &filter.job {
            query.push(("job", job.clone()));
        }
        if let Some(since) = filter.since {
            let text = since
                .format(&time::format_description::well_known::Rfc3339)
                .map_err(|e| Error::Invalid(format!("since: {e}")))?;
            query.push(("since", text));
        }
        if let Some(after) = filter.after {
            query.push(("after", after.to_string()));
        }
        if let Some(limit) = filter.limit {
            query.push(("limit", limit.to_string()));
        }
        let mut url = self.url(&["v1", "decisions"]);
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (k, v) in &query {
                pairs.append_pair(k, v);
            }
        }
        self.call(self.authorized(self.http.request(Method::GET, url)))
            .await
    }

    /// The whole picture (`GET /v1/overview`, admin): tenants against their entitlement,
    /// classes, pools, workers and their leases, recent decisions, admission outcomes.
    pub async fn overview(&self) -> Result<Overview, Error> {
        self.call(self.request(Method::GET, &["v1", "overview"]))
            .await
    }

    /// `Ok` when the server process is up (`GET /healthz`).
    pub async fn health(&self) -> Result<(), Error> {
        self.send(self.request(Method::GET, &["healthz"]))
            .await
            .map(drop)
    }

    /// `Ok` when the server is ready to take calls (`GET /readyz`): its state is recovered.
    pub async fn ready(&self) -> Result<(), Error> {
        self.send(self.request(Method::GET, &["readyz"]))
            .await
            .map(drop)
    }

    /// A request to the base URL plus `segments`, each percent-encoded (job ids may hold any
    /// character), with the bearer token.
    fn request(&self, method: Method, segments: &[&str]) -> RequestBuilder {
        self.authorized(self.http.request(method, self.url(segments)))
    }

    /// The base URL plus `segments`, each percent-encoded.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .expect("checked in build: the base URL can be a base")
            .pop_if_empty()
            .extend(segments);
        url
    }

    /// `request` with the bearer token, if any.
    fn authorized(&self, request: RequestBuilder) -> RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Sends `request` and decodes a success reply as `T`.
    async fn call<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T, Error> {
        let (status, body) = self.send(request).await?;
        serde_json::from_slice(&body).map_err(|e| Error::Protocol {
            status,
            message: format!("the reply does not match the contract: {e}"),
        })
    }

    /// Sends `request`; a 2xx reply's status and body, or the error the reply stands for.
    ///
    /// Follows a follower's redirect to the leader (and remembers the leader); within the
    /// failover window, tries the other servers after a transport error or a `503` (see
    /// [`Client`] for which calls are sent again).
    async fn send(&self, request: RequestBuilder) -> Result<(u16, Vec<u8>), Error> {
        let (http, template) = request.build_split();
        let template = template?;
        let repeatable =
            !(template.method() == Method::PUT && template.url().path().ends_with("/v1/policy"));
        let started = tokio::time::Instant::now();
        let mut backoff = Duration::from_millis(50);
        let mut redirects = 0;
        let mut failed_in_round = 0;
        loop {
            let target = self.target();
            let mut request = template.try_clone().ok_or_else(|| {
                Error::Invalid("the request's body cannot be sent twice".to_string())
            })?;
            // Built on `base`: a call to it goes as built (most calls, with one server and
            // no leader learned), without taking its URL apart and setting it again.
            if target != self.base {
                *request.url_mut() = self.rebase(template.url(), &target);
            }
            let (error, may_repeat) = match http.execute(request).await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let header = |name| {
                        response
                            .headers()
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_string)
                    };
                    let retry_after = header(reqwest::header::RETRY_AFTER.as_str())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    let leader = header(LEADER_HEADER).and_then(|l| parse_base(&l).ok());
                    let body = response.bytes().await?.to_vec();
                    if (200..300).contains(&status) {
                        return Ok((status, body));
                    }
                    if status == 307 || status == 308 {
                        if let Some(leader) = leader
                            && redirects < MAX_REDIRECTS
                        {
                            tracing::debug!(leader = %leader, "following the redirect to the leader");
                            self.set_leader(Some(leader));
                            redirects += 1;
                            continue;
                        }
                        // Replicas disagree on who leads (a change under way): try again.
                        let error = Error::Http {
                            status: 503,
                            code: "no_leader".into(),
                            message: format!(
                                "redirected {redirects} times without reaching the leader"
                            ),
                        };
                        (error, true)
                    } else {
                        let error = Error::from_reply(status, &body, retry_after);
                        if status != 503 {
                            return Err(error);
                        }
                        // Answered before reaching a writer: nothing was applied.
                        let not_applied = matches!(&error, Error::Http { code, .. } if code == "no_leader" || code == "not_ready");
                        (error, repeatable || not_applied)
                    }
                }
                Err(e) => {
                    let not_sent = e.is_connect();
                    (Error::Transport(e), repeatable || not_sent)
                }
            };
            // This server failed the call: forget the leader it was, go on to the next one.
            self.set_leader(None);
            self.route.next.fetch_add(1, Ordering::Relaxed);
            redirects = 0;
            failed_in_round += 1;
            let wait = if failed_in_round >= self.servers.len() {
                failed_in_round = 0;
                let wait = backoff;
                backoff = (backoff * 2).min(FAILOVER_BACKOFF_MAX);
                wait
            } else {
                Duration::ZERO
            };
            if !may_repeat || started.elapsed() + wait >= self.failover {
                return Err(error);
            }
            tracing::debug!(error = %error, target = %target, wait_ms = wait.as_millis() as u64, "call failed; trying the next server");
            tokio::time::sleep(wait).await;
        }
    }

    /// Where the next try goes: the leader learned from a redirect, else the server in turn.
    fn target(&self) -> Url {
        if let Some(leader) = self
            .route
            .leader
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            return leader;
        }
        let i = self.route.next.load(Ordering::Relaxed) % self.servers.len().max(1);
        self.servers
            .get(i)
            .cloned()
            .unwrap_or_else(|| self.base.clone())
    }

    fn set_leader(&self, leader: Option<Url>) {
        *self.route.leader.lock().unwrap_or_else(|e| e.into_inner()) = leader;
    }

    /// `url`, built on the first server's base, moved onto `target`'s base.
    fn rebase(&self, url: &Url, target: &Url) -> Url {
        let suffix = url
            .path()
            .strip_prefix(self.base.path())
            .unwrap_or(url.path());
        let mut out = target.clone();
        out.set_path(&format!("{}{suffix}", target.path().trim_end_matches('/')));
        out.set_query(url.query());
        out
    }
}

/// The header in which a follower names the leader.
const LEADER_HEADER: &str = "fairway-leader";

/// The most bytes [`batch_json`] sets aside up front: a batch body the server takes by default.
const BATCH_JSON_RESERVE_MAX: usize = 16 << 20;

/// A batch submission's body, `{"jobs":[...]}` ([`BatchSubmitRequest`]): its `n` jobs written
/// in order by `write_job`, into one buffer that starts with room for `capacity` bytes.
pub(crate) fn batch_envelope<E>(
    n: usize,
    capacity: usize,
    mut write_job: impl FnMut(usize, &mut Vec<u8>) -> Result<(), E>,
) -> Result<Vec<u8>, E> {
    let mut body = Vec::with_capacity(capacity);
    body.extend_from_slice(b"{\"jobs\":[");
    for i in 0..n {
        if i > 0 {
            body.push(b',');
        }
        write_job(i, &mut body)?;
    }
    body.extend_from_slice(b"]}");
    Ok(body)
}

/// The body of a batch of `jobs` as given, its buffer sized from the first job. Left to grow by
/// doubling, the buffer of a 1,000-job body was copied about once over and asked the allocator
/// for about twice its size in fresh pages, on the producer's path before each call.
fn batch_json(jobs: &[JobSpec]) -> Result<Vec<u8>, serde_json::Error> {
    batch_envelope(jobs.len(), 512, |i, body| {
        let start = body.len();
        serde_json::to_writer(&mut *body, &jobs[i])?;
        if i == 0 {
            // Each job a quarter larger than the first, with its comma and the brackets.
            let each = body.len() - start + 1;
            let want = (each + each / 4)
                .saturating_mul(jobs.len())
                .saturating_add(start + 2)
                .min(BATCH_JSON_RESERVE_MAX);
            body.reserve(want.saturating_sub(body.len()));
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves: the batch body written job by job into one buffer is exactly what serde_json
    // makes of the request as a whole (so the server reads the same bytes), for no job, one,
    // and jobs of different sizes whose later ones outgrow the first's estimate.
    #[test]
    fn the_batch_body_is_the_request_as_serde_json_writes_it() {
        #[derive(serde::Serialize)]
        struct Whole<'a> {
            jobs: &'a [JobSpec],
        }
        let small = |i: usize| JobSpec::new("acme").id(format!("job-{i}"));
        let large = |i: usize| {
            JobSpec::new("t\u{e9}nant \"quoted\"")
                .id(format!("big-{i}"))
                .payload(serde_json::json!({ "text": "x".repeat(300 + i), "n": i }))
        };
        let batches: Vec<Vec<JobSpec>> = vec![
            Vec::new(),
            vec![small(0)],
            (0..50).map(small).collect(),
            std::iter::once(small(0))
                .chain((1..40).map(large))
                .collect(),
            (0..40)
                .map(|i| if i % 2 == 0 { large(i) } else { small(i) })
                .collect(),
        ];
        for jobs in &batches {
            let want = serde_json::to_string(&Whole { jobs }).unwrap();
            let got = batch_json(jobs).unwrap();
            assert_eq!(String::from_utf8(got).unwrap(), want, "{} jobs", jobs.len());
        }
    }

    #[test]
    fn ensure_id_generates_once_and_keeps_a_given_id() {
        let mut spec = JobSpec::new("acme");
        let first = spec.ensure_id().to_string();
        assert_eq!(spec.ensure_id(), first, "a second call keeps the id");
        let parsed = uuid::Uuid::parse_str(&first).expect("a UUID");
        assert_eq!(parsed.get_version_num(), 7);
        assert_eq!(
            parsed.to_string(),
            first,
            "the id in the UUID's own text form"
        );
        let mut given = JobSpec::new("acme").id("mine");
        assert_eq!(given.ensure_id(), "mine");
    }

    #[test]
    fn urls_join_the_base_and_encode_job_ids() {
        let client = Client::new("http://127.0.0.1:7700/").unwrap();
        let url = |segments: &[&str]| {
            client
                .request(Method::GET, segments)
                .build()
                .unwrap()
                .url()
                .to_string()
        };
        assert_eq!(url(&["v1", "jobs"]), "http://127.0.0.1:7700/v1/jobs");
        assert_eq!(
            url(&["v1", "jobs", "a/b c", "cancel"]),
            "http://127.0.0.1:7700/v1/jobs/a%2Fb%20c/cancel"
        );
        let prefixed = Client::new("http://example.test/fairway").unwrap();
        let url = prefixed
            .request(Method::GET, &["v1", "policy"])
            .build()
            .unwrap()
            .url()
            .to_string();
        assert_eq!(url, "http://example.test/fairway/v1/policy");
    }

    // Proves: a request built on the base and moved onto the base is the request as built,
    // which is why `send` leaves it as it is when the call goes to the base: for bases with
    // and without a path, ids that need encoding, and a query.
    #[test]
    fn a_request_moved_onto_its_own_base_is_unchanged() {
        for base in [
            "http://127.0.0.1:7700",
            "http://127.0.0.1:7700/",
            "http://example.test/fairway",
            "http://example.test/fairway/",
            "http://a.test:1/x/y/, http://b.test:2",
        ] {
            let client = Client::new(base).unwrap();
            for segments in [
                &["v1", "jobs"][..],
                &["v1", "jobs", "batch"],
                &["v1", "jobs", "a/b c?d#e", "cancel"],
                &["healthz"],
            ] {
                for query in [None, Some("omit=accepted")] {
                    let mut url = client.url(segments);
                    url.set_query(query);
                    assert_eq!(
                        client.rebase(&url, &client.base),
                        url,
                        "{base} {segments:?}"
                    );
                }
            }
        }
    }

    /// Several comma-separated URLs are replicas of one server; a request built on the first
    /// moves onto another's base (its own prefix included), path, encoding and query kept.
    #[test]
    fn several_servers_are_replicas_and_requests_move_between_them() {
        let client = Client::new("http://a.test:1/fairway/, http://b.test:2").unwrap();
        assert_eq!(
            client.server_urls(),
            ["http://a.test:1/fairway", "http://b.test:2/"]
        );
        assert_eq!(
            client.failover, DEFAULT_FAILOVER,
            "several servers fail over"
        );
        let mut url = client.url(&["v1", "jobs", "a/b"]);
        url.set_query(Some("x=1"));
        let b = Url::parse("http://b.test:2").unwrap();
        assert_eq!(
            client.rebase(&url, &b).as_str(),
            "http://b.test:2/v1/jobs/a%2Fb?x=1"
        );
        let c = parse_base("http://c.test:3/prefix/").unwrap();
        assert_eq!(
            client.rebase(&url, &c).as_str(),
            "http://c.test:3/prefix/v1/jobs/a%2Fb?x=1"
        );
        assert_eq!(
            Client::new("http://a.test:1").unwrap().failover,
            Duration::ZERO,
            "one server: a call is one try"
        );
        assert!(matches!(
            Client::new("http://a.test:1,https://b.test"),
            Err(Error::Invalid(_))
        ));
        assert!(matches!(Client::new(" , "), Err(Error::Invalid(_))));
    }

    /// Within the failover window a call goes round the servers, backing off between rounds,
    /// and ends with the last error once the window is spent.
    /// A loopback port nobody listens on (bound, then released): every try is refused at once.
    fn dead_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port()
    }

    #[tokio::test]
    async fn a_call_tries_every_server_within_the_failover_window() {
        let dead = dead_port;
        let urls = format!("http://127.0.0.1:{},http://127.0.0.1:{}", dead(), dead());
        let client = Client::builder(urls)
            .failover(Duration::from_millis(400))
            .build()
            .unwrap();
        let started = std::time::Instant::now();
        let result = client.status("j").await;
        assert!(matches!(result, Err(Error::Transport(_))), "{result:?}");
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_millis(150) && elapsed < Duration::from_secs(3),
            "{elapsed:?}"
        );
        assert!(
            client.route.next.load(Ordering::Relaxed) >= 4,
            "two rounds over two servers at least"
        );
    }

    #[test]
    fn only_plain_http_base_urls_are_accepted() {
        assert!(matches!(
            Client::new("https://example.test"),
            Err(Error::Invalid(_))
        ));
        assert!(matches!(
            Client::new("127.0.0.1:7700"),
            Err(Error::Invalid(_))
        ));
        assert!(matches!(Client::new("not a url"), Err(Error::Invalid(_))));
    }

    #[test]
    fn the_bearer_token_is_sent_and_kept_out_of_debug_output() {
        let client = Client::builder("http://127.0.0.1:7700")
            .token("s3cret")
            .build()
            .unwrap();
        let request = client
            .request(Method::GET, &["v1", "policy"])
            .build()
            .unwrap();
        assert_eq!(
            request.headers()[reqwest::header::AUTHORIZATION],
            "Bearer s3cret"
        );
        assert!(!format!("{client:?}").contains("s3cret"));
    }

    #[tokio::test]
    async fn submit_with_retry_gives_up_after_its_tries_with_the_transport_error() {
        let client = Client::new(format!("http://127.0.0.1:{}", dead_port())).unwrap();
        let retry = RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(40),
            max_backoff: Duration::from_secs(1),
        };
        let started = std::time::Instant::now();
        let result = client.submit_with_retry(JobSpec::new("acme"), &retry).await;
        assert!(matches!(result, Err(Error::Transport(_))), "{result:?}");
        // Three tries, so two waits: 40 ms then 80 ms.
        assert!(started.elapsed() >= Duration::from_millis(120));
    }

    /// A coalesced request that gets no answer (nobody listens) leaves each caller with a
    /// transport failure of its own: every job is sent again alone, once, and fails alone.
    #[tokio::test]
    async fn coalesced_submits_to_an_absent_server_each_fail_with_their_own_error() {
        let client = Client::builder(format!("http://127.0.0.1:{}", dead_port()))
            .coalesce(1)
            .build()
            .unwrap();
        let calls: Vec<_> = (0..20)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move { client.submit(JobSpec::new("acme")).await })
            })
            .collect();
        for call in calls {
            let result = call.await.unwrap();
            assert!(matches!(result, Err(Error::Transport(_))), "{result:?}");
        }
    }

    #[test]
    fn retry_waits_double_up_to_the_cap_and_honour_retry_after() {
        let retry = RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(500),
        };
        let transport_like = Error::Http {
            status: 503,
            code: "not_ready".into(),
            message: String::new(),
        };
        let waits: Vec<u128> = (1..=5)
            .map(|a| retry.wait(a, &transport_like).as_millis())
            .collect();
        assert_eq!(waits, [100, 200, 400, 500, 500]);
        let busy = Error::Rejected {
            retryable: true,
            reason: "busy".into(),
            message: String::new(),
            retry_after: Some(Duration::from_secs(2)),
        };
        assert_eq!(retry.wait(1, &busy), Duration::from_secs(2));
    }
}
