//! The observability routes: `GET /v1/jobs/{id}/explain`, `GET /v1/tenants/{id}`,
//! `GET /v1/decisions`, `GET /v1/overview` and `GET /metrics`.
//!
//! Like every read, each is one command to the writer (which owns the engine), answered after
//! the turn's commit. Tenant tokens see only their own jobs, tenant (and descendants) and
//! decisions, with other tenants' names replaced by `another tenant`; admins see everything.

use super::{Allowed, App, JobId, allow};
use crate::error::ApiError;
use crate::observe::{DecisionQuery, MAX_DECISIONS_PAGE, Query, in_scope};
use crate::wire::observe::*;
use crate::wire::{ErrorBody, parse_instant};
use crate::writer::Command;
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::time::Duration;
use utoipa::IntoParams;

/// Default page of `GET /v1/decisions`.
const DEFAULT_DECISIONS_PAGE: usize = 100;

/// How long `GET /metrics` waits for a fresh observation before encoding the latest one.
const METRICS_OBSERVE_WAIT: Duration = Duration::from_secs(2);

/// Why a job is not running: its waiting reasons, from the engine's current state, and the
/// decisions that started its attempts.
#[utoipa::path(
    get, path = "/v1/jobs/{id}/explain", tag = "observe",
    params(("id" = String, Path, description = "job id")),
    responses(
        (status = 200, description = "the explanation", body = ExplainReply),
        (status = 404, description = "unknown_job (also another tenant's job)", body = ErrorBody)
    )
)]
pub(super) async fn explain(
    State(app): State<App>,
    headers: HeaderMap,
    JobId(id): JobId,
) -> Result<Json<ExplainReply>, ApiError> {
    let caller = app.caller(&headers)?;
    allow(&caller, Allowed::Producers)?;
    let scope = caller.tenant_scope().map(str::to_string);
    let job = id.clone();
    let reply = app
        .call(app.timeout(), |reply| {
            Command::Observe(Query::Explain { job, scope, reply })
        })
        .await?;
    reply.map(Json).ok_or_else(|| ApiError::unknown_job(&id))
}

/// What a tenant has, is owed and owes: exact backlog per class, usage, guarantee,
/// entitlement, balance and books. A nested tenant's path is one segment, percent-encoded
/// (`acme%2Fetl`).
#[utoipa::path(
    get, path = "/v1/tenants/{id}", tag = "observe",
    params(("id" = String, Path, description = "tenant path, percent-encoded")),
    responses(
        (status = 200, description = "the tenant's report", body = TenantReply),
        (status = 403, description = "forbidden: another tenant's report", body = ErrorBody),
        (status = 404, description = "unknown_tenant", body = ErrorBody)
    )
)]
pub(super) async fn tenant(
    State(app): State<App>,
    headers: HeaderMap,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<Json<TenantReply>, ApiError> {
    let caller = app.caller(&headers)?;
    allow(&caller, Allowed::Producers)?;
    let Path(name) =
        path.map_err(|e| ApiError::invalid(format!("the tenant in the path: {}", e.body_text())))?;
    if let Some(own) = caller.tenant_scope()
        && !in_scope(own, &name)
    {
        return Err(ApiError::forbidden(format!(
            "this token sees tenant {own:?} and its descendants, not {name:?}"
        )));
    }
    let tenant = name.clone();
    let reply = app
        .call(app.timeout(), |reply| {
            Command::Observe(Query::Tenant {
                name: tenant,
                reply,
            })
        })
        .await?;
    reply.map(Json).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_tenant",
            format!("no tenant {name:?}: the policy does not declare it and no job named it"),
        )
    })
}

/// The filter of `GET /v1/decisions`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(super) struct DecisionParams {
    /// Only this job's decisions.
    job: Option<String>,
    /// Only decisions taken at or after this RFC 3339 instant (pages forward).
    since: Option<String>,
    /// Only decisions after this `seq` (pages forward: pass the reply's `next_after`).
    after: Option<u64>,
    /// At most this many, 1 to 1000. Default 100.
    limit: Option<usize>,
}

/// Decision records from the engine's ring (the last 4096 dispatch decisions since the server
/// started): which job started, on which workers, and the leading queues with their balances
/// when it was chosen. Each is numbered by the engine's durable dispatch count (`seq`), so a
/// cursor stays valid across restarts. Without `since` or `after`, the latest `limit`; with
/// either, the first `limit` after it.
#[utoipa::path(
    get, path = "/v1/decisions", tag = "observe",
    params(DecisionParams),
    responses(
        (status = 200, description = "matching records, oldest first", body = DecisionsReply),
        (status = 422, description = "invalid: a bad parameter", body = ErrorBody)
    )
)]
pub(super) async fn decisions(
    State(app): State<App>,
    headers: HeaderMap,
    params: Result<axum::extract::Query<DecisionParams>, QueryRejection>,
) -> Result<Json<DecisionsReply>, ApiError> {
    let caller = app.caller(&headers)?;
    allow(&caller, Allowed::Producers)?;
    let axum::extract::Query(params) =
        params.map_err(|e| ApiError::invalid(format!("the query string: {}", e.body_text())))?;
    let limit = params.limit.unwrap_or(DEFAULT_DECISIONS_PAGE);
    if limit == 0 || limit > MAX_DECISIONS_PAGE {
        return Err(ApiError::invalid(format!(
            "parameter `limit`: {limit} is not between 1 and {MAX_DECISIONS_PAGE}"
        )));
    }
    let since = match params.since.as_deref().map(parse_instant) {
        None => None,
        Some(Ok(t)) => Some(t),
        Some(Err(why)) => return Err(ApiError::invalid(format!("parameter `since`: {why}"))),
    };
    let query = DecisionQuery {
        job: params.job,
        since,
        after: params.after,
        limit,
    };
    let scope = caller.tenant_scope().map(str::to_string);
    let reply = app
        .call(app.timeout(), |reply| {
            Command::Observe(Query::Decisions {
                query,
                scope,
                reply,
            })
        })
        .await?;
    Ok(Json(reply))
}

/// The whole picture: tenants against their entitlement, classes and their backlog per pool,
/// pools, reserves and borrowed capacity, workers and their leases, recent decisions,
/// admission outcomes over time. One census of the engine; observations are paced (at most one
/// a second), so calling it often costs the writer little.
#[utoipa::path(
    get, path = "/v1/overview", tag = "observe",
    responses(
        (status = 200, description = "the overview", body = OverviewReply),
        (status = 403, description = "forbidden: needs an admin token", body = ErrorBody)
    )
)]
pub(super) async fn overview(
    State(app): State<App>,
    headers: HeaderMap,
) -> Result<Json<OverviewReply>, ApiError> {
    let caller = app.caller(&headers)?;
    allow(&caller, Allowed::Admins)?;
    let observation = app
        .call(app.timeout(), |reply| {
            Command::Observe(Query::Overview { reply })
        })
        .await?;
    Ok(Json(observation.view.clone()))
}

/// Prometheus metrics, in the text format (0.0.4), or OpenMetrics when the `Accept` header
/// asks for `application/openmetrics-text`. Needs an admin token when the server has a token
/// file. `docs/api.md` lists the series.
#[utoipa::path(
    get, path = "/metrics", tag = "observe",
    responses(
        (status = 200, description = "the metrics", body = String, content_type = "text/plain"),
        (status = 403, description = "forbidden: needs an admin token", body = ErrorBody)
    )
)]
pub(super) async fn metrics(
    State(app): State<App>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let caller = app.caller(&headers)?;
    allow(&caller, Allowed::Admins)?;
    // Refresh the engine-side series; while the server is not ready (or busy) the counters
    // are still served, with the latest observation.
    let _ = app
        .call(METRICS_OBSERVE_WAIT, |reply| {
            Command::Observe(Query::Overview { reply })
        })
        .await;
    let metrics = &app.inner.shared.metrics;
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/openmetrics-text"));
    let (content_type, body) = if openmetrics {
        (
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode_openmetrics(),
        )
    } else {
        (
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            metrics.encode_prometheus(),
        )
    };
    Ok(([(header::CONTENT_TYPE, content_type)], body).into_response())
}
