//! HTTP API v1: routes, authentication, request checks, and the OpenAPI document.
//!
//! Handlers are thin: authenticate, parse and check the body (every failure, extractor
//! failures included, is a JSON [`ApiError`]), send one command to the writer loop with
//! `try_send`, await its answer, shape the reply. `docs/api.md` is the reference.

use crate::auth::{Caller, Tokens};
use crate::batch_json;
use crate::config::Limits;
use crate::error::ApiError;
use crate::wire::*;
use crate::writer::{
    Command, Completion, LeaseFailure, LeaseOutcome, Reply, Shared, StoredJob, SubmitJob,
    Unavailable,
};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use fairway_core::time::Dur;
use fairway_core::{Admission, HeartbeatReply, JobSpec, JobState, Outcome, WorkerOffer};
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::Duration;
use tokio::sync::{Semaphore, oneshot};
use tower_http::trace::{DefaultOnFailure, TraceLayer};
use tracing::Level;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

mod dashboard;
mod observe;

/// The OpenAPI document's header; the paths come from the handlers.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Fairway API",
        version = "1",
        description = "Fairway's HTTP API v1: submit jobs, lease and work them, manage the policy. \
                       Durations are integer milliseconds named *_ms; instants are RFC 3339 in UTC."
    ),
    tags(
        (name = "jobs", description = "Producers: submit, read, cancel."),
        (name = "leases", description = "Workers: lease, heartbeat, complete."),
        (name = "policy", description = "Operators: the versioned policy."),
        (name = "observe", description = "Why jobs wait, what tenants have and are owed, what was decided."),
        (name = "health", description = "Liveness and readiness.")
    ),
    components(schemas(ErrorBody))
)]
struct ApiDoc;

/// What every handler shares: the way to the writer, who may call, and the limits.
#[derive(Clone)]
pub struct App {
    inner: Arc<AppInner>,
}

struct AppInner {
    tx: SyncSender<Command>,
    shared: Arc<Shared>,
    tokens: Option<Tokens>,
    limits: Limits,
    in_flight: Arc<Semaphore>,
}

impl App {
    /// The state of the routes: commands go to `tx`.
    pub fn new(
        tx: SyncSender<Command>,
        shared: Arc<Shared>,
        tokens: Option<Tokens>,
        limits: Limits,
    ) -> App {
        let in_flight = Arc::new(Semaphore::new(limits.max_in_flight.max(1)));
        App {
            inner: Arc::new(AppInner {
                tx,
                shared,
                tokens,
                limits,
                in_flight,
            }),
        }
    }

    fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The state shared with the writer and the election.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.limits().request_timeout_ms)
    }

    /// Who is calling: `Open` without a token file, else the token's caller.
    fn caller(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        let Some(tokens) = &self.inner.tokens else {
            return Ok(Caller::Open);
        };
        let value = headers.get(header::AUTHORIZATION).ok_or_else(|| {
            ApiError::unauthorized("this server needs an `Authorization: Bearer <token>` header")
        })?;
        let bytes = value.as_bytes();
        let secret = match bytes.split_at_checked(7) {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case(b"bearer ") => rest,
            _ => {
                return Err(ApiError::unauthorized(
                    "the Authorization header must be `Bearer <token>`",
                ));
            }
        };
        tokens
            .lookup(secret)
            .ok_or_else(|| ApiError::unauthorized("unknown token"))
    }

    /// Sends a command to the writer and waits for its answer (sent after the commit).
    async fn call<T>(
        &self,
        timeout: Duration,
        make: impl FnOnce(Reply<T>) -> Command,
    ) -> Result<T, ApiError> {
        let answer = self.send(make)?;
        App::answer(timeout, answer).await
    }

    /// Sends a command to the writer; its answer comes on the channel returned, after the
    /// commit (see [`App::answer`]). Commands sent one after the other are applied in that
    /// order.
    fn send<T>(
        &self,
        make: impl FnOnce(Reply<T>) -> Command,
    ) -> Result<oneshot::Receiver<Result<T, Unavailable>>, ApiError> {
        let shared = &self.inner.shared;
        if !shared.ready.load(Ordering::Acquire) {
            return Err(
                if shared.failed.load(Ordering::Acquire) || shared.shutdown.load(Ordering::Acquire)
                {
                    ApiError::unavailable("the server is stopping")
                } else {
                    ApiError::not_ready()
                },
            );
        }
        let (tx, rx) = oneshot::channel();
        self.inner.tx.try_send(make(tx)).map_err(|e| match e {
            TrySendError::Full(_) => ApiError::busy("the server's command queue is full"),
            TrySendError::Disconnected(_) => ApiError::unavailable("the server is stopping"),
        })?;
        shared.metrics.writer_queue_depth.inc();
        Ok(rx)
    }

    /// Waits up to `timeout` for the answer to a command [`App::send`] sent.
    async fn answer<T>(
        timeout: Duration,
        rx: oneshot::Receiver<Result<T, Unavailable>>,
    ) -> Result<T, ApiError> {
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(Ok(value))) => Ok(value),
            Ok(Ok(Err(Unavailable))) => Err(ApiError::unavailable(
                "the store could not make the request durable; its outcome is unknown: retry",
            )),
            Ok(Err(_)) => Err(ApiError::unavailable(
                "the server stopped before answering; the outcome is unknown: retry",
            )),
            Err(_) => Err(ApiError::unavailable(
                "timed out waiting for the server; the outcome is unknown: retry",
            )),
        }
    }

    /// Turns a submitted body into a job, or the refusal a single submission would answer. The
    /// payload is the body's own, or else `payload`, its JSON text borrowed from the request
    /// (a large batch's plain jobs, [`batch_json::plain_job`]).
    fn prepare_job(
        &self,
        caller: &Caller,
        mut body: SubmitBody,
        payload: Option<&str>,
    ) -> Result<SubmitJob, Refusal> {
        let raw = body.payload.take();
        let payload = raw.as_deref().map(RawValue::get).or(payload);
        let id = body.id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let refuse = |status: StatusCode, code: &str, message: String| {
            Box::new((
                status,
                SubmitReply::refused(Some(id.clone()), code, message),
            ))
        };
        let tenant = match (caller, body.tenant) {
            (Caller::Tenant(own), None) => own.clone(),
            (Caller::Tenant(own), Some(named)) if named == *own => named,
            (Caller::Tenant(own), Some(named)) => {
                return Err(refuse(
                    StatusCode::FORBIDDEN,
                    "tenant_mismatch",
                    format!("this token submits as tenant {own:?}, not {named:?}"),
                ));
            }
            (_, Some(named)) => named,
            (_, None) => {
                return Err(refuse(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid",
                    "field `tenant` is required when the caller is not a tenant token".into(),
                ));
            }
        };
        let not_before = match body.not_before.as_deref().map(parse_instant) {
            None => None,
            Some(Ok(t)) => Some(t),
            Some(Err(why)) => {
                return Err(refuse(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid",
                    format!("field `not_before`: {why}"),
                ));
            }
        };
        let payload = match payload {
            None => None,
            Some(text) => {
                let bytes = text.as_bytes();
                let max = self.limits().max_payload_bytes;
                if bytes.len() > max {
                    return Err(refuse(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "too_large",
                        format!(
                            "field `payload`: {} bytes of JSON, more than the limit of {max}",
                            bytes.len()
                        ),
                    ));
                }
                Some(bytes)
            }
        };
        let mut spec = JobSpec::new(id, tenant);
        spec.class = body.class;
        spec.priority = body.priority.unwrap_or(0);
        spec.demand = body.demand.unwrap_or_default();
        spec.requires = body.requires.unwrap_or_default();
        spec.estimate = body.estimate_ms.map(Dur::from_millis);
        spec.not_before = not_before;
        spec.max_attempts = body.max_attempts;
        spec.preemptible = body.preemptible.unwrap_or(false);
        spec.checkpointable = body.checkpointable.unwrap_or(false);
        spec.gang = body.gang.unwrap_or(1);
        spec.gang_min = body.gang_min;
        let blob = (payload.is_some() || !spec.demand.is_empty())
            .then(|| StoredJob::encode(&spec.demand, payload));
        Ok(SubmitJob {
            spec,
            deadline_ms: body.deadline_ms,
            blob,
        })
    }
}

/// A submission refused before the engine: the status and reply it gets.
type Refusal = Box<(StatusCode, SubmitReply)>;

/// Which callers may use a route.
#[derive(Clone, Copy)]
enum Allowed {
    /// Producers: tenant tokens and admins.
    Producers,
    /// Workers and admins.
    Workers,
    /// Admins only.
    Admins,
}

fn allow(caller: &Caller, allowed: Allowed) -> Result<(), ApiError> {
    let ok = matches!(
        (caller, allowed),
        (Caller::Open | Caller::Admin, _)
            | (Caller::Tenant(_), Allowed::Producers)
            | (Caller::Worker(_), Allowed::Workers)
    );
    if ok {
        Ok(())
    } else {
        let what = match allowed {
            Allowed::Producers => "a tenant or admin token",
            Allowed::Workers => "a worker or admin token",
            Allowed::Admins => "an admin token",
        };
        Err(ApiError::forbidden(format!("this route needs {what}")))
    }
}

/// A request body, read within the body limit (413 `too_large` beyond).
pub struct RawBody(pub Bytes);

impl FromRequest<App> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &App) -> Result<Self, Self::Rejection> {
        let max = state.limits().max_body_bytes;
        // A declared length over the limit is refused at once, not after the upload (or the
        // request timeout, for a client that never sends it).
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|len| len > max as u64) {
            return Err(ApiError::too_large(format!(
                "the request body is larger than the limit of {max} bytes"
            )));
        }
        match Bytes::from_request(req, state).await {
            Ok(bytes) => Ok(RawBody(bytes)),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Err(ApiError::too_large(format!(
                    "the request body is larger than the limit of {} bytes",
                    state.limits().max_body_bytes
                )))
            }
            Err(e) => Err(ApiError::malformed_json(e.body_text())),
        }
    }
}

/// The `{job_id}` / `{id}` path segment.
pub struct JobId(pub String);

impl FromRequestParts<App> for JobId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &App) -> Result<Self, Self::Rejection> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(id)| JobId(id))
            .map_err(|e| ApiError::invalid(format!("the job id in the path: {}", e.body_text())))
    }
}

/// Parses a JSON body: a syntax error is 400 `malformed_json`; a well-formed body of the wrong
/// shape (unknown or missing field, bad value) is 422 `invalid`, naming the field.
///
/// A well-formed body is read once, without tracking where the reader is; only a body that
/// fails is read again with the path tracked, for an error that names the field.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).or_else(|_| parse_json_tracked(bytes))
}

/// [`parse_json`] with the path tracked: the same value, or the error naming the field.
fn parse_json_tracked<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(shape_error)?;
    de.end()
        .map_err(|e| ApiError::malformed_json(format!("after the JSON value: {e}")))?;
    Ok(value)
}

/// Reads one item of a batch held as a JSON value.
fn parse_value<T: DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(shape_error)
}

/// Reads one item of a batch from its JSON text (the whole body was already parsed once).
fn parse_item<T: DeserializeOwned>(item: &RawValue) -> Result<T, ApiError> {
    parse_json(item.get().as_bytes())
}

fn shape_error(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    match inner.classify() {
        serde_json::error::Category::Data => {
            if path == "." {
                ApiError::invalid(inner.to_string())
            } else {
                ApiError::invalid(format!("field `{path}`: {inner}"))
            }
        }
        _ => ApiError::malformed_json(inner.to_string()),
    }
}

fn submit_response(status: StatusCode, reply: SubmitReply) -> Response {
    let retry_s = reply.retry_after_ms.map(|ms| ms.div_ceil(1000).max(1));
    let mut response = (status, Json(reply)).into_response();
    if let Some(s) = retry_s {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    response
}

fn status_of(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// Submit one job.
#[utoipa::path(
    post, path = "/v1/jobs", tag = "jobs",
    request_body = SubmitBody,
    responses(
        (status = 201, description = "accepted (or accepted before: `duplicate`)", body = SubmitReply),
        (status = 202, description = "accepted, deferred until `not_before`", body = SubmitReply),
        (status = 400, description = "malformed_json", body = ErrorBody),
        (status = 401, description = "unauthorized", body = ErrorBody),
        (status = 403, description = "rejected_final `class_not_permitted`, `tenant_mismatch`, or forbidden", body = SubmitReply),
        (status = 413, description = "too_large: body or payload", body = SubmitReply),
        (status = 422, description = "rejected_final (a `reason` code), or invalid", body = SubmitReply),
        (status = 429, description = "rejected_retryable (with Retry-After), or busy", body = SubmitReply),
        (status = 503, description = "not_ready or unavailable", body = ErrorBody)
    )
)]
async fn submit(
    State(app): State<App>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let caller = app.caller(&headers)?;
    allow(&caller, Allowed::Producers)?;
    let body: SubmitBody = parse_json(&body)?;
    let job = match app.prepare_job(&caller, body, None) {
        Ok(job) => job,
        Err(refusal) => {
            let (status, reply) = *refusal;
            return Ok(submit_response(status, reply));
        }
    };
    let id = job.spec.id.clone();
    let admissions = app
        .call(app.timeout(), |reply| Command::Submit {
            jobs: vec![job],
            more: None,
            reply,
        })
        .await?;
    let admission = admissions
        .first()
        .ok_or_else(|| ApiError::unavailable("the server gave no answer"))?;
    let (status, reply) = SubmitReply::from_admission(admission, &id);
    Ok(submit_response(status_of(status), reply))
}

/// The query of `POST /v1/jobs/batch`.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct BatchParams {
    /// `accepted`: leave out the result of each job accepted as new under the id its request
    /// gave; the reply counts them in `omitted`, and every result it lists carries its job's
    /// `index` in the request. Without it, every job's result, in order.
    omit: Option<String>,
}

/// Submit up to 1000 jobs; one result per job, in order (with `omit=accepted`, only the
/// results that say more than "accepted under the id you gave").
#[utoipa::path(
    post, path = "/v1/jobs/batch", tag = "jobs",
    params(BatchParams),
    request_body = BatchSubmitBody,
    responses(
        (status = 200, description = "one result per job, in order", body = BatchSubmitReply),
        (status = 400, description = "malformed_json", body = ErrorBody),
        (status = 413, description = "too_large: more than 1000 jobs, or the body", body = ErrorBody),
        (status = 422, description = "invalid: a job, or the query string", body = ErrorBody),
        (status = 429, description = "busy", body = ErrorBody),
        (status = 503, description = "not_ready or unavailable", body = ErrorBody)
    )
)]
async fn submit_batch(
    State(app): State<App>,
    headers: HeaderMap,
    params: Result<axum::extract::Query<BatchParams>, axum::extract::rejection::QueryRejection>,
    RawBody(body): RawBody,
) -> Result<Json<BatchSubmitReply>, ApiError> {
    let caller = app.caller(&headers)?;
    allow(&caller, Allowed::Producers)?;
    let axum::extract::Query(params) =
        params.map_err(|e| ApiError::invalid(format!("the query string: {}", e.body_text())))?;
    let omit_accepted = match params.omit.as_deref() {
        None => false,
        Some("accepted") => true,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "parameter `omit`: {other:?} is not `accepted`, the one result that can be left out"
            )));
        }
    };
    let items = batch_items(&body)?;
    let count = items.len();
    let max = app.limits().max_batch;
    if count > max {
        return Err(ApiError::too_large(format!(
            "field `jobs`: {count} jobs, more than the limit of {max}"
        )));
    }
    // A large batch goes to the writer in parts as its jobs are read: the engine applies one
    // part while the next is read, all in one turn (see `Command::Submit`'s `more`).
    let (first_len, part_len) = if matches!(items, BatchItems::Texts(_)) {
        (BATCH_FIRST_PART, BATCH_PART)
    } else {
        (count.max(1), count.max(1))
    };
    let mut outgoing = Outgoing::new(count.div_ceil(part_len) + 1);
    // Each slot is either a refusal already known, or the index of a job sent to the engine.
    let mut slots: Vec<Result<usize, (u16, SubmitReply)>> = Vec::with_capacity(count);
    let mut ids: Vec<String> = Vec::with_capacity(count);
    let mut part = Vec::with_capacity(first_len.min(count));
    // Whether each job's request named its id: only those results can be left out, as the
    // caller already knows what they would say.
    let mut named = Vec::with_capacity(if omit_accepted { count } else { 0 });
    for (i, item) in items.into_iter().enumerate() {
        if omit_accepted {
            named.push(matches!(&item, Ok((b, _)) if b.id.is_some()));
        }
        let prepared = item
            .map_err(|e| {
                Box::new((
                    e.status,
                    SubmitReply::refused(None, e.code, format!("jobs[{i}]: {}", e.message)),
                ))
            })
            .and_then(|(b, payload)| app.prepare_job(&caller, b, payload));
        match prepared {
            Ok(job) => {
                slots.push(Ok(ids.len()));
                ids.push(job.spec.id.clone());
                part.push(job);
                let full_at = if outgoing.started() {
                    part_len
                } else {
                    first_len
                };
                if part.len() == full_at && i + 1 < count {
                    let full = std::mem::replace(&mut part, Vec::with_capacity(part_len));
                    outgoing.send(&app, full, false)?;
                }
            }
            Err(refusal) => {
                let (status, reply) = *refusal;
                slots.push(Err((status.as_u16(), reply)));
            }
        }
    }
    if !part.is_empty() {
        outgoing.send(&app, part, true)?;
    }
    let admissions = outgoing.answers(app.timeout()).await?;
    let mut results = Vec::with_capacity(if omit_accepted { 0 } else { slots.len() });
    let mut omitted = 0;
    for (i, slot) in slots.into_iter().enumerate() {
        let (status, reply) = match slot {
            Err(refused) => refused,
            Ok(k) => match (admissions.get(k), ids.get(k)) {
                (
                    Some(Admission::Accepted {
                        duplicate: false, ..
                    }),
                    Some(_),
                ) if omit_accepted && named[i] => {
                    omitted += 1;
                    continue;
                }
                (Some(a), Some(id)) => SubmitReply::from_admission(a, id),
                (_, id) => (503, SubmitReply::not_applied(id.cloned())),
            },
        };
        results.push(BatchSubmitResult {
            status,
            index: omit_accepted.then_some(i),
            reply,
        });
    }
    Ok(Json(BatchSubmitReply {
        results,
        omitted: omit_accepted.then_some(omitted),
    }))
}

/// How many jobs of a large batch go to the writer at a time (see [`Outgoing`]), the first
/// part fewer, so that the engine starts soon.
const BATCH_PART: usize = 128;
const BATCH_FIRST_PART: usize = 32;

/// A batch body of at least this many bytes (some 250 jobs) is read job by job, each part sent
/// to the writer as soon as it is read; a smaller one is read whole first, in one pass.
const LARGE_BATCH_BYTES: usize = 32 * 1024;

/// The jobs of a batch body, each to be read or refused on its own.
enum BatchItems<'a> {
    /// Read already, each job or its refusal.
    Read(Vec<Result<SubmitBody, ApiError>>),
    /// Each job's JSON text, read as it is taken.
    Texts(Vec<&'a str>),
}

impl<'a> BatchItems<'a> {
    fn len(&self) -> usize {
        match self {
            BatchItems::Read(items) => items.len(),
            BatchItems::Texts(texts) => texts.len(),
        }
    }

    /// Each job, read (or refused) in order, with its payload's text where it was left in the
    /// body rather than read into the job.
    fn into_iter(self) -> Box<dyn Iterator<Item = JobItem<'a>> + 'a> {
        match self {
            BatchItems::Read(items) => Box::new(items.into_iter().map(|item| Ok((item?, None)))),
            BatchItems::Texts(texts) => Box::new(texts.into_iter().map(read_job)),
        }
    }
}

/// One job of a batch, read: the body and its payload's text if left in the request, or the
/// job's refusal.
type JobItem<'a> = Result<(SubmitBody, Option<&'a str>), ApiError>;

/// Reads one job's text: the plain shape by [`batch_json::plain_job`], its payload left in the
/// request; anything else by serde_json (as a single submission's body is read).
fn read_job(text: &str) -> JobItem<'_> {
    match batch_json::plain_job(text) {
        Some(job) => Ok((plain_body(&job), job.payload)),
        None => Ok((parse_json(text.as_bytes())?, None)),
    }
}

/// A plain job's fields as a `SubmitBody`, but for its payload.
fn plain_body(job: &batch_json::PlainJob) -> SubmitBody {
    SubmitBody {
        id: job.id.map(str::to_owned),
        tenant: job.tenant.map(str::to_owned),
        class: job.class.map(str::to_owned),
        priority: job.priority,
        estimate_ms: job.estimate_ms,
        deadline_ms: job.deadline_ms,
        max_attempts: job.max_attempts,
        ..SubmitBody::default()
    }
}

/// The jobs of a batch body. A large body is checked as JSON and split into its jobs' texts
/// (by [`batch_json::job_texts`] when it has the plain shape, else by serde_json), each read
/// later, as its part goes to the writer. A small one whose every job is well formed
/// (the common case) is read in one pass; otherwise it is read again as a list of JSON texts,
/// each then read alone, so that a bad job is refused in its slot and the others still go in.
fn batch_items(body: &[u8]) -> Result<BatchItems<'_>, ApiError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct WellFormed {
        jobs: Vec<SubmitBody>,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Texts<'a> {
        #[serde(borrow)]
        jobs: Vec<&'a RawValue>,
    }
    if body.len() >= LARGE_BATCH_BYTES {
        if let Some(jobs) = batch_json::job_texts(body) {
            return Ok(BatchItems::Texts(jobs));
        }
        if let Ok(batch) = serde_json::from_slice::<Texts>(body) {
            let jobs = batch.jobs.into_iter().map(|job| job.get()).collect();
            return Ok(BatchItems::Texts(jobs));
        }
        // Not JSON, or a field besides `jobs`: no stricter reading can succeed, so only the
        // one that names the problem is left.
    } else if let Ok(batch) = serde_json::from_slice::<WellFormed>(body) {
        return Ok(BatchItems::Read(batch.jobs.into_iter().map(Ok).collect()));
    }
    let batch: BatchSubmitBody = parse_json(body)?;
    Ok(BatchItems::Read(
        batch.jobs.iter().map(|item| parse_item(item)).collect(),
    ))
}

/// A batch's jobs on their way to the writer: the first part as a [`Command::Submit`], the
/// later ones on its `more` channel, which is closed when this is answered or dropped.
struct Outgoing {
    /// How many parts the channel holds without waiting: every part of the batch.
    parts: usize,
    answer: Option<oneshot::Receiver<Result<Vec<Admission>, Unavailable>>>,
    more: Option<std::sync::mpsc::SyncSender<Vec<SubmitJob>>>,
}

impl Outgoing {
    fn new(parts: usize) -> Outgoing {
        Outgoing {
            parts: parts.max(1),
            answer: None,
            more: None,
        }
    }

    /// Whether the first part has gone.
    fn started(&self) -> bool {
        self.answer.is_some()
    }

    /// Sends a part (`last`: the batch's last). The first fails as any command would (nothing
    /// is then submitted); a later one the writer no longer waits for is dropped, and its jobs
    /// get no admission.
    fn send(&mut self, app: &App, part: Vec<SubmitJob>, last: bool) -> Result<(), ApiError> {
        if self.answer.is_none() {
            let (tx, more) = if last {
                (None, None)
            } else {
                let (tx, rx) = std::sync::mpsc::sync_channel(self.parts);
                (Some(tx), Some(rx))
            };
            self.answer = Some(app.send(|reply| Command::Submit {
                jobs: part,
                more,
                reply,
            })?);
            self.more = tx;
        } else if let Some(more) = &self.more
            && more.try_send(part).is_err()
        {
            self.more = None;
        }
        Ok(())
    }

    /// The admissions of the jobs sent, in order (fewer when the writer stopped waiting for a
    /// part); none when nothing was sent.
    async fn answers(mut self, timeout: Duration) -> Result<Vec<Admission>, ApiError> {
        // Closing the channel tells the writer the batch is whole.
        self.more = None;
        match self.answer {
            None => Ok(Vec::new()),
            Some(rx) => App::answer(timeout, rx).await,
        }
    }
}

/// A job's state.
#[utoipa::path(
    get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "job id")),
    responses(
        (status = 200, description = "the job", body = JobStatusReply),
        (status = 404, description = "unknown_job (also another tenant's job)", body = ErrorBody)
    )
)]
async fn get_job(
    State(app): State<App>,
    headers: HeaderMap,
    JobId(id): JobId,
) -> Result<Json<JobStatusReply>, ApiError> {
    let caller = app.caller(&headers)?;
    allow(&caller, Allowed::Producers)?;
    let tenant = caller.tenant_scope().map(str::to_string);
    let job = id.clone();
    let status = app
        .call(app.timeout(), |reply| Command::Status {
            job,
            tenant,
            reply,
        })
        .await?;
    status
        .map(|s| Json(JobStatusReply::from(&s)))
        .ok_or_else(|| ApiError::unknown_job(&id))
}

/// Cancel a job: a waiting job ends at once; a running one is told to stop at its next
/// heartbeat (and stays `running` until it does or is fenced).
#[utoipa::path(
    post, path = "/v1/jobs/{id}/cancel", tag = "jobs",
    params(("id" = String, Path, description = "job id")),
    responses(
        (status = 200, description = "the job's state after the call", body = JobStateReply),
        (status = 404, description = "unknown_job", body = ErrorBody)
    )
)]
async fn cancel_job(
    State(app): State<App>,
    headers: HeaderMap,
    JobId(id): JobId,
) -> Result<Json<JobStateReply>, ApiError> {
    let caller = app.caller(&headers)?;
    allow(&caller, Allowed::Producers)?;
    let tenant = caller.tenant_scope().map(str::to_string);
    let job = id.clone();
    let state = app
        .call(app.timeout(), |reply| Command::Cancel {
            job,
            tenant,
            reply,
        })
        .await?;
    state
        .map(|s| {
            Json(JobStateReply {
                job_id: id.clone(),
                state: s.as_str().to_string(),
            })
        })
        .ok_or_else(|| ApiError::unknown_job(&id))
}

/// A worker asks for work, waiting up to `wait_ms` (a long poll).
#[utoipa::path(
    post, path = "/v1/leases", tag = "leases",
    request_body = LeaseBody,
    responses(
        (status = 200, description = "the leases granted (empty when the wait ended without work)", body = LeaseReply),
        (status = 403, description = "forbidden: a worker token of another pool", body = ErrorBody),
        (status = 422, description = "invalid: max_jobs, wait_ms, a name or the capacity", body = ErrorBody),
        (status = 429, description = "busy: too many parked long polls", body = ErrorBody)
    )
)]
async fn lease(
    State(app): State<App>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Json<LeaseReply>, ApiError> {
    let caller = app.caller(&headers)?;
    allow(&caller, Allowed::Workers)?;
    let body: LeaseBody = parse_json(&body)?;
    let (offer, wait_ms) = lease_offer(&app, &caller, body, "")?;
    let timeout = app.timeout() + Duration::from_millis(wait_ms);
    let outcome = app
        .call(timeout, |reply| Command::Lease {
            offer,
            wait: Dur::from_millis(wait_ms),
            reply,
        })
        .await?;
    Ok(Json(LeaseReply {
        leases: granted(&app, outcome)?,
    }))
}

/// The worker's offer and wait (in ms) a lease request makes, checked against the caller's
/// pool and the limits; `at` prefixes the fields named in an error (`next.` inside a
/// completion call).
fn lease_offer(
    app: &App,
    caller: &Caller,
    body: LeaseBody,
    at: &str,
) -> Result<(WorkerOffer, u64), ApiError> {
    let pool = match (caller, body.pool) {
        (Caller::Worker(Some(own)), None) => own.clone(),
        (Caller::Worker(Some(own)), Some(asked)) if asked != *own => {
            return Err(ApiError::forbidden(format!(
                "this token leases from pool {own:?}, not {asked:?}"
            )));
        }
        (_, Some(asked)) => asked,
        (_, None) => "default".to_string(),
    };
    let limits = app.limits();
    let max_jobs = body.max_jobs.unwrap_or(1);
    if max_jobs > limits.max_jobs_per_lease {
        return Err(ApiError::invalid(format!(
            "field `{at}max_jobs`: {max_jobs} is more than the limit of {}",
            limits.max_jobs_per_lease
        )));
    }
    let wait_ms = body.wait_ms.unwrap_or(0);
    if wait_ms > limits.max_wait_ms {
        return Err(ApiError::invalid(format!(
            "field `{at}wait_ms`: {wait_ms} is more than the limit of {}",
            limits.max_wait_ms
        )));
    }
    let offer = WorkerOffer {
        worker: body.worker,
        pool,
        capacity: body.capacity,
        labels: body.labels.unwrap_or_default(),
        max_jobs,
    };
    Ok((offer, wait_ms))
}

/// The leases a lease request got, or what it answers instead.
fn granted(app: &App, outcome: LeaseOutcome) -> Result<Vec<LeaseGrant>, ApiError> {
    match outcome {
        LeaseOutcome::Granted(leases) => Ok(leases),
        LeaseOutcome::Busy => Err(ApiError::busy(format!(
            "{} long polls are parked already; retry",
            app.limits().max_parked
        ))),
        LeaseOutcome::Invalid(why) => Err(ApiError::invalid(why)),
    }
}

/// A completion call's items, each read on its own (a malformed one is refused in its slot),
/// and its lease request. A well-formed body is read in one pass, straight into its final
/// shape; only a body with a bad item is read again, item by item from JSON values (as
/// [`batch_items`] does for jobs).
type CompletionItems = (Vec<Result<CompletionItem, ApiError>>, Option<LeaseBody>);

fn completion_items(body: &[u8]) -> Result<CompletionItems, ApiError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct WellFormed {
        completions: Vec<CompletionItem>,
        #[serde(default)]
        next: Option<LeaseBody>,
    }
    if let Ok(batch) = serde_json::from_slice::<WellFormed>(body) {
        return Ok((batch.completions.into_iter().map(Ok).collect(), batch.next));
    }
    let batch: BatchCompleteBody = parse_json(body)?;
    let items = batch.completions.into_iter().map(parse_value).collect();
    Ok((items, batch.next))
}

fn lease_failure(job: &str, f: LeaseFailure) -> ApiError {
    match f {
        LeaseFailure::UnknownJob => ApiError::unknown_job(job),
        LeaseFailure::Stale { current, message } => ApiError::stale_epoch(message, current),
    }
}

/// The worker still runs the job under `epoch`: extends the lease, or says stop.
#[utoipa::path(
    post, path = "/v1/leases/{job_id}/heartbeat", tag = "leases",
    params(("job_id" = String, Path, description = "job id")),
    request_body = HeartbeatBody,
    responses(
        (status = 200, description = "continue, preempt or cancel", body = HeartbeatReplyBody),
        (status = 404, description = "unknown_job", body = ErrorBody),
        (status = 409, description = "stale_epoch: the lease is lost; stop", body = ErrorBody)
    )
)]
async fn heartbeat(
    State(app): State<App>,
    headers: HeaderMap,
    JobId(id): JobId,
    RawBody(body): RawBody,
) -> Result<Json<HeartbeatReplyBody>, ApiError> {
    let caller = app.caller(&headers)?;
    allow(&caller, Allowed::Workers)?;
    let body: HeartbeatBody = parse_json(&body)?;
    let job = id.clone();
    let result = app
        .call(app.timeout(), |reply| Command::Heartbeat {
            job,
            epoch: body.epoch,
            progress: body.progress_ms.map(Dur::from_millis),
            reply,
        })
        .await?;
    let (action, at) = match result.map_err(|f| lease_failure(&id, f))? {
        HeartbeatReply::Continue { expires } => ("continue", expires),
        HeartbeatReply::Preempt { deadline } => ("preempt", deadline),
        HeartbeatReply::Cancel { deadline } => ("cancel", deadline),
    };
    Ok(Json(HeartbeatReplyBody {
        action: action.to_string(),
        expires_at: instant(at),
    }))
}

fn outcome(o: CompleteOutcome, retryable: Option<bool>) -> Outcome {
    match o {
        CompleteOutcome::Succeeded => Outcome::Succeeded,
        CompleteOutcome::Failed => Outcome::Failed {
            retryable: retryable.unwrap_or(true),
        },
        CompleteOutcome::Stopped => Outcome::Stopped,
    }
}

/// The worker's attempt under `epoch` ended.
#[utoipa::path(
    post, path = "/v1/leases/{job_id}/complete", tag = "leases",
    params(("job_id" = String, Path, description = "job id")),
    request_body = CompleteBody,
    responses(
        (status = 200, description = "the job's state after the attempt", body = JobStateReply),
        (status = 404, description = "unknown_job", body = ErrorBody),
        (status = 409, description = "stale_epoch: changes nothing", body = ErrorBody)
    )
)]
async fn complete(
    State(app): State<App>,
    headers: HeaderMap,
    JobId(id): JobId,
    RawBody(body): RawBody,
) -> Result<Json<JobStateReply>, ApiError> {
    let caller = app.caller(&headers)?;
    allow(&caller, Allowed::Workers)?;
    let body: CompleteBody = parse_json(&body)?;
    let item = Completion {
        job: id.clone(),
        epoch: body.epoch,
        outcome: outcome(body.outcome, body.retryable),
        usage: body.usage_ms.map(Dur::from_millis),
        progress: body.progress_ms.map(Dur::from_millis),
    };
    let results = app
        .call(app.timeout(), |reply| Command::Complete {
            items: vec![item],
            reply,
        })
        .await?;
    let state = results
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::unavailable("the server gave no answer"))?
        .map_err(|f| lease_failure(&id, f))?;
    Ok(Json(JobStateReply {
        job_id: id,
        state: state.as_str().to_string(),
    }))
}

/// Up to 1000 completions; one result each, in order. With `next`, the worker's next lease
/// request too: applied right after the completions, in the same turn of the writer, and
/// answered with them (it does not wait for work: the completions' answers would wait too).
#[utoipa::path(
    post, path = "/v1/leases/complete", tag = "leases",
    request_body = BatchCompleteBody,
    responses(
        (status = 200, description = "one result per completion, in order; with `next`, its leases or `lease_error`", body = BatchCompleteReply),
        (status = 403, description = "forbidden: `next` names another pool than the worker token's", body = ErrorBody),
        (status = 413, description = "too_large: more than 1000 completions", body = ErrorBody),
        (status = 422, description = "invalid: `next.max_jobs` over its limit, or a `next.wait_ms` (nothing applied)", body = ErrorBody)
    )
)]
async fn complete_batch(
    State(app): State<App>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Json<BatchCompleteReply>, ApiError> {
    let caller = app.caller(&headers)?;
    allow(&caller, Allowed::Workers)?;
    let (completions, next) = completion_items(&body)?;
    let max = app.limits().max_batch;
    if completions.len() > max {
        return Err(ApiError::too_large(format!(
            "field `completions`: {} completions, more than the limit of {max}",
            completions.len()
        )));
    }
    // Checked before anything is applied: a bad `next` changes nothing.
    if let Some(wait) = next.as_ref().and_then(|n| n.wait_ms)
        && wait > 0
    {
        return Err(ApiError::invalid(format!(
            "field `next.wait_ms`: {wait}, but a lease request inside a completion call is \
             answered at once, with the completions; long-poll with POST /v1/leases"
        )));
    }
    let next = next
        .map(|next| lease_offer(&app, &caller, next, "next."))
        .transpose()?;
    let mut slots: Vec<Result<usize, CompletionResult>> = Vec::with_capacity(completions.len());
    let mut items = Vec::with_capacity(completions.len());
    for (i, item) in completions.into_iter().enumerate() {
        match item {
            Ok(c) => {
                slots.push(Ok(items.len()));
                items.push(Completion {
                    job: c.job_id,
                    epoch: c.epoch,
                    outcome: outcome(c.outcome, c.retryable),
                    usage: c.usage_ms.map(Dur::from_millis),
                    progress: c.progress_ms.map(Dur::from_millis),
                });
            }
            Err(e) => slots.push(Err(CompletionResult {
                status: e.status.as_u16(),
                error: Some(e.code.to_string()),
                message: Some(format!("completions[{i}]: {}", e.message)),
                ..CompletionResult::default()
            })),
        }
    }
    let ids: Vec<String> = items.iter().map(|c| c.job.clone()).collect();
    // Both commands are sent before either answer is awaited, the lease request after the
    // completions: the writer applies them in that order, usually in one turn, so the
    // capacity the completions free goes to the lease request and one commit covers both.
    let completed = if items.is_empty() {
        None
    } else {
        Some(app.send(|reply| Command::Complete { items, reply })?)
    };
    let leasing = next.map(|(offer, _)| {
        app.send(|reply| Command::Lease {
            offer,
            wait: Dur::ZERO,
            reply,
        })
    });
    let results: Vec<Result<JobState, LeaseFailure>> = match completed {
        None => Vec::new(),
        Some(answer) => App::answer(app.timeout(), answer).await?,
    };
    // The completions are durable from here: a failed lease request is told beside them.
    let (leases, lease_error) = match leasing {
        None => (None, None),
        Some(sent) => {
            let leases = async { granted(&app, App::answer(app.timeout(), sent?).await?) };
            match leases.await {
                Ok(leases) => (Some(leases), None),
                Err(e) => (
                    Some(Vec::new()),
                    Some(LeaseProblem {
                        status: e.status.as_u16(),
                        error: e.code.to_string(),
                        message: e.message,
                    }),
                ),
            }
        }
    };
    let mut results = results.into_iter();
    let out = slots
        .into_iter()
        .map(|slot| match slot {
            Err(r) => r,
            Ok(k) => {
                let job_id = ids.get(k).cloned().unwrap_or_default();
                match results.next() {
                    Some(Ok(state)) => CompletionResult {
                        job_id,
                        status: 200,
                        state: Some(state.as_str().to_string()),
                        ..CompletionResult::default()
                    },
                    Some(Err(f)) => {
                        let e = lease_failure(&job_id, f);
                        CompletionResult {
                            job_id,
                            status: e.status.as_u16(),
                            error: Some(e.code.to_string()),
                            message: Some(e.message),
                            current_epoch: e.current_epoch,
                            ..CompletionResult::default()
                        }
                    }
                    None => CompletionResult {
                        job_id,
                        status: 503,
                        error: Some("unavailable".into()),
                        message: Some("no answer for this completion".into()),
                        ..CompletionResult::default()
                    },
                }
            }
        })
        .collect();
    Ok(Json(BatchCompleteReply {
        results: out,
        leases,
        lease_error,
    }))
}

/// The policy in force and its version.
#[utoipa::path(
    get, path = "/v1/policy", tag = "policy",
    responses(
        (status = 200, description = "the policy", body = PolicyReply),
        (status = 403, description = "forbidden: needs an admin token", body = ErrorBody)
    )
)]
async fn get_policy(
    State(app): State<App>,
    headers: HeaderMap,
) -> Result<Json<PolicyReply>, ApiError> {
    let caller = app.caller(&headers)?;
    allow(&caller, Allowed::Admins)?;
    let (version, policy) = app
        .call(app.timeout(), |reply| Command::GetPolicy { reply })
        .await?;
    Ok(Json(PolicyReply { version, policy }))
}

/// Publishes a policy (the body is its TOML text, whatever the content type) as the next
/// version. A malformed policy is refused with every error, and the prior version stays.
#[utoipa::path(
    put, path = "/v1/policy", tag = "policy",
    request_body(content = String, content_type = "application/toml", description = "the policy file"),
    responses(
        (status = 200, description = "published", body = PolicyVersionReply),
        (status = 403, description = "forbidden: needs an admin token", body = ErrorBody),
        (status = 422, description = "invalid_policy: every error; the prior version stays", body = PolicyErrorReply)
    )
)]
async fn put_policy(
    State(app): State<App>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let caller = app.caller(&headers)?;
    allow(&caller, Allowed::Admins)?;
    let text = match String::from_utf8(body.to_vec()) {
        Ok(t) => t,
        Err(_) => {
            let reply = PolicyErrorReply {
                error: "invalid_policy".into(),
                message: "the policy is not UTF-8 text".into(),
                errors: vec![PolicyErrorItem {
                    line: None,
                    key: None,
                    message: "the policy is not UTF-8 text".into(),
                }],
            };
            return Ok((StatusCode::UNPROCESSABLE_ENTITY, Json(reply)).into_response());
        }
    };
    let result = app
        .call(app.timeout(), |reply| Command::PutPolicy { text, reply })
        .await?;
    Ok(match result {
        Ok(version) => Json(PolicyVersionReply { version }).into_response(),
        Err(errors) => {
            let message = errors
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n");
            let reply = PolicyErrorReply {
                error: "invalid_policy".into(),
                message,
                errors: errors
                    .into_iter()
                    .map(|e| PolicyErrorItem {
                        line: e.line,
                        key: e.key,
                        message: e.message,
                    })
                    .collect(),
            };
            (StatusCode::UNPROCESSABLE_ENTITY, Json(reply)).into_response()
        }
    })
}

/// 200 while the process runs.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "the process runs", body = HealthReply)))]
async fn healthz() -> Json<HealthReply> {
    Json(HealthReply {
        status: "ok".into(),
    })
}

/// 200 once the state is recovered and while the store is writable; 503 before and after. A
/// follower replica is ready while it knows the leader and reached it.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "ready", body = HealthReply),
        (status = 503, description = "not_ready (recovering) or unavailable (failed or stopping)", body = ErrorBody)
    ))]
async fn readyz(State(app): State<App>) -> Result<Json<HealthReply>, ApiError> {
    let shared = &app.inner.shared;
    if shared.ready.load(Ordering::Acquire) || shared.leader.follower_ready() {
        Ok(Json(HealthReply {
            status: "ok".into(),
        }))
    } else if shared.failed.load(Ordering::Acquire) {
        Err(ApiError::unavailable(
            "the store failed; the server is stopping",
        ))
    } else if shared.shutdown.load(Ordering::Acquire) {
        Err(ApiError::unavailable("the server is stopping"))
    } else {
        Err(ApiError::not_ready())
    }
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such route (see /openapi.json)",
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method (see /openapi.json)",
    )
}

/// Bounds every request: at most `max_in_flight` at once (429 `busy` beyond), and at most
/// `request_timeout_ms` each (plus the longest wait, for a long poll; 503 `unavailable`).
async fn guard(State(app): State<App>, req: Request, next: Next) -> Response {
    let Ok(_permit) = app.inner.in_flight.clone().try_acquire_owned() else {
        return ApiError::busy("too many requests in flight").into_response();
    };
    // Replicas: a follower sends `/v1/*` to the leader.
    if let Some(redirect) = crate::leader::redirect_to_leader(&app, &req) {
        return redirect;
    }
    let mut budget = app.timeout();
    if req.uri().path() == "/v1/leases" {
        budget += Duration::from_millis(app.limits().max_wait_ms);
    }
    // A little beyond the writer wait in `App::call`, so that its clearer message wins.
    budget += Duration::from_secs(1);
    match tokio::time::timeout(budget, next.run(req)).await {
        Ok(response) => response,
        Err(_) => ApiError::unavailable("the request timed out").into_response(),
    }
}

/// The OpenAPI document of every route.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut api = api_router().split_for_parts().1;
    document_common_answers(&mut api);
    api
}

/// Documents on every operation the answers any route can give besides its own (`docs/api.md`,
/// "Routes"), found missing by API fuzzing: 429 `busy` and 503 on every route; 401 and 403 on
/// the authenticated ones; 400, 413 and 422 wherever a body is read. Where an operation already
/// documents one of these codes with a body of its own (a submission's `SubmitReply`), the
/// plain error body is documented beside it: the request may be refused before it is read.
/// Path parameters are at least one character long.
fn document_common_answers(api: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::path::ParameterIn;
    use utoipa::openapi::schema::{AnyOfBuilder, Schema};
    use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
    const ERROR_BODY: &str = "#/components/schemas/ErrorBody";
    for (path, item) in api.paths.paths.iter_mut() {
        let authenticated = path.starts_with("/v1/") && path != "/v1/leader";
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
        ];
        for operation in operations.into_iter().flatten() {
            let mut common = vec![
                (
                    "429",
                    "busy: too many requests in flight or queued; see Retry-After",
                ),
                (
                    "503",
                    "not_ready (recovering) or unavailable (the outcome is unknown)",
                ),
            ];
            if authenticated {
                common.push(("401", "unauthorized: the token is missing or unknown"));
                common.push(("403", "forbidden: the token's role may not use this route"));
            }
            if operation.request_body.is_some() {
                common.push(("400", "malformed_json: the body is not JSON"));
                common.push(("413", "too_large: the body is over the limit"));
                common.push((
                    "422",
                    "invalid: a field is unknown, missing or has a bad value",
                ));
            }
            // A path segment is never empty: an empty id makes the path another route's.
            for parameter in operation.parameters.iter_mut().flatten() {
                if let RefOr::T(parameter) = parameter
                    && parameter.parameter_in == ParameterIn::Path
                    && let Some(RefOr::T(Schema::Object(schema))) = &mut parameter.schema
                {
                    schema.min_length = Some(1);
                }
            }
            let responses = &mut operation.responses.responses;
            for (code, description) in common {
                let Some(existing) = responses.get_mut(code) else {
                    let answer = ResponseBuilder::new()
                        .description(description)
                        .content(
                            "application/json",
                            ContentBuilder::new()
                                .schema(Some(Ref::new(ERROR_BODY)))
                                .build(),
                        )
                        .build();
                    responses.insert(code.to_string(), RefOr::T(answer));
                    continue;
                };
                let RefOr::T(response) = existing else {
                    continue;
                };
                for content in response.content.values_mut() {
                    let RefOr::T(content) = content else { continue };
                    let Some(RefOr::Ref(own)) = &content.schema else {
                        continue;
                    };
                    if own.ref_location == ERROR_BODY {
                        continue;
                    }
                    let either = AnyOfBuilder::new()
                        .item(RefOr::Ref(own.clone()))
                        .item(Ref::new(ERROR_BODY))
                        .build();
                    content.schema = Some(RefOr::T(Schema::AnyOf(either)));
                }
            }
        }
    }
}

fn api_router() -> OpenApiRouter<App> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(submit))
        .routes(routes!(submit_batch))
        .routes(routes!(get_job))
        .routes(routes!(cancel_job))
        .routes(routes!(lease))
        .routes(routes!(heartbeat))
        .routes(routes!(complete))
        .routes(routes!(complete_batch))
        .routes(routes!(get_policy, put_policy))
        .routes(routes!(observe::explain))
        .routes(routes!(observe::tenant))
        .routes(routes!(observe::decisions))
        .routes(routes!(observe::overview))
        .routes(routes!(observe::metrics))
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(crate::leader::get_leader))
}

/// The service: every route of API v1, `/openapi.json`, the JSON fallbacks and the bounds.
pub fn router(app: App) -> axum::Router {
    let (router, mut api) = api_router().split_for_parts();
    document_common_answers(&mut api);
    let spec: Arc<str> = api
        .to_pretty_json()
        .unwrap_or_else(|_| "{}".to_string())
        .into();
    let body_limit = app.limits().max_body_bytes;
    router
        .route(
            "/openapi.json",
            axum::routing::get(move || {
                let spec = spec.clone();
                async move {
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        spec.to_string(),
                    )
                }
            }),
        )
        .merge(dashboard::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        // Error answers are expected traffic (a 503 while recovering, a 409 for a stale
        // epoch); the writer logs the failures that matter.
        .layer(TraceLayer::new_for_http().on_failure(DefaultOnFailure::new().level(Level::DEBUG)))
        .with_state(app)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether [`batch_json::plain_job`] read `text` as serde_json reads it into `SubmitBody`;
    /// panics if it read something serde_json refuses or reads otherwise.
    fn plain_agrees(text: &str) -> bool {
        let plain = batch_json::plain_job(text);
        let serde = serde_json::from_str::<SubmitBody>(text);
        match (plain, serde) {
            (None, _) => false,
            (Some(_), Err(e)) => panic!("plain_job reads what serde_json refuses ({e}): {text}"),
            (Some(job), Ok(body)) => {
                let read = SubmitBody {
                    payload: job
                        .payload
                        .map(|p| RawValue::from_string(p.to_owned()).unwrap()),
                    ..plain_body(&job)
                };
                assert_eq!(
                    serde_json::to_string(&read).unwrap(),
                    serde_json::to_string(&body).unwrap(),
                    "{text}"
                );
                true
            }
        }
    }

    #[test]
    fn a_plain_job_is_read_as_serde_json_reads_it() {
        let bench = r#"{"id":"0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","tenant":"tenant-3","payload":{"t":"A","i":12,"e":1733612345678.125}}"#;
        assert!(plain_agrees(bench));
        assert!(plain_agrees(
            r#" { "tenant" : "a/b" , "class":"batch","priority":-7,"estimate_ms":250,
                "deadline_ms":0,"max_attempts":4294967295,"payload":[1,"x",{"y":null}] } "#
        ));
        assert!(plain_agrees("{}"));
        for left_to_serde in [
            r#"{"id":"a\"b"}"#,
            r#"{"id":null}"#,
            r#"{"payload":null}"#,
            r#"{"i\u0064":"x"}"#,
            r#"{"id":"a","id":"b"}"#,
            r#"{"priority":2147483648}"#,
            r#"{"priority":-0}"#,
            r#"{"priority":1.0}"#,
            r#"{"estimate_ms":1e3}"#,
            r#"{"estimate_ms":-1}"#,
            r#"{"estimate_ms":18446744073709551616}"#,
            r#"{"demand":{"cpu":2}}"#,
            r#"{"colour":"blue"}"#,
            r#"{"tenant":"a",}"#,
            r#"{"tenant":"a"} x"#,
            r#"[]"#,
        ] {
            assert!(!plain_agrees(left_to_serde), "{left_to_serde}");
        }
    }

    #[test]
    fn generated_jobs_are_read_as_serde_json_reads_them() {
        const KEYS: [&str; 12] = [
            "id",
            "tenant",
            "class",
            "priority",
            "estimate_ms",
            "deadline_ms",
            "max_attempts",
            "payload",
            "payload",
            "gang",
            "colour",
            "i\\u0064",
        ];
        const VALUES: [&str; 30] = [
            "\"job-1\"",
            "\"\"",
            "\"a\\\"b\"",
            "\"caf\u{e9} \u{1F600}\"",
            "\"t\\u00e9\"",
            "\"0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b\"",
            "0",
            "-0",
            "7",
            "-7",
            "2147483647",
            "2147483648",
            "-2147483648",
            "-2147483649",
            "4294967295",
            "4294967296",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999999",
            "1.0",
            "1e3",
            "-1.5E-2",
            "null",
            "true",
            "false",
            "{}",
            "[]",
            "{\"t\":\"A\",\"i\":1}",
            "[1,[2,{\"x\":\"y\"}]]",
            "{\"cpu\":2}",
        ];
        let mut generate = batch_json::tests::Gen(0x2026_1207_5eed);
        let mut below = |n: usize| generate.below(n as u64) as usize;
        let (mut read, mut total) = (0, 0);
        for _ in 0..20_000 {
            let mut text = String::from(if below(3) == 0 { " {" } else { "{" });
            let fields = below(6);
            for k in 0..fields {
                if k > 0 {
                    text.push_str(if below(4) == 0 { " , " } else { "," });
                }
                // Mostly the fields and values the plain reader takes, so that it answers
                // often; the rest are the ones it must leave to serde_json.
                let key = if below(4) == 0 {
                    KEYS[below(KEYS.len())]
                } else {
                    KEYS[below(8)]
                };
                let value = match key {
                    "id" | "tenant" | "class" if below(3) > 0 => VALUES[below(6)],
                    "priority" | "estimate_ms" | "deadline_ms" | "max_attempts" if below(3) > 0 => {
                        VALUES[6 + below(14)]
                    }
                    _ => VALUES[below(VALUES.len())],
                };
                text.push_str(&format!("\"{key}\":{value}"));
            }
            text.push('}');
            total += 1;
            read += usize::from(plain_agrees(&text));
        }
        // Both sides were exercised: many read here, many left to serde_json.
        assert!(
            read > 3_000 && read < total - 3_000,
            "{read} of {total} read"
        );
    }
}
