//! The dashboard at `/`: HTML rendered by the server (maud), refreshed by a vendored htmx file
//! that the binary serves itself. No JS build, no CDN.
//!
//! The page is complete without JavaScript: every panel is rendered into it. With JavaScript,
//! each panel asks for a fresh copy of itself every two seconds (`hx-get` + `hx-trigger="every
//! 2s"` on `/dashboard/panel/{name}`). Charts are inline SVG written here (plain rectangles),
//! so the server does not pull in the simulator's plotting stack.
//!
//! **Auth.** On an open server (no token file, loopback only) the dashboard is open. With a
//! token file it is for admins: the admin token as a bearer header, or once as
//! `/?token=SECRET`, which the server answers with a redirect to `/` that sets an HttpOnly,
//! SameSite=Strict cookie holding it (so the secret leaves the address bar and the history).
//! The cookie is honoured by the dashboard's routes only (all `GET`, all read-only), never by
//! the API, so it cannot be used to change anything.

use super::{App, Caller};
use crate::error::ApiError;
use crate::observe::Query;
use crate::wire::observe::*;
use crate::writer::Command;
use axum::extract::{Path, Query as UrlQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// The vendored htmx (npm package `htmx.org` 2.0.11, 0BSD; see `assets/htmx.LICENSE`).
const HTMX_JS: &str = include_str!("../../assets/htmx.min.js");
/// Where it is served: the version is in the path, so it can be cached for a year.
const HTMX_PATH: &str = "/assets/htmx-2.0.11.min.js";
/// The dashboard's cookie.
const COOKIE: &str = "fairway_token";
/// Panels and how often they refresh.
const REFRESH: &str = "every 2s";
/// Rows per table, at most.
const MAX_ROWS: usize = 50;

/// Renders so far: each page or panel gets the next number, shown in the status line, so a
/// refresh is visible (and testable).
static RENDERS: AtomicU64 = AtomicU64::new(0);

/// The dashboard's routes.
pub(super) fn routes() -> axum::Router<App> {
    axum::Router::new()
        .route("/", get(page))
        .route("/dashboard/panel/{name}", get(panel))
        .route(HTMX_PATH, get(htmx))
}

#[derive(Debug, Default, Deserialize)]
struct PageParams {
    token: Option<String>,
    job: Option<String>,
}

async fn htmx() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
        ],
        HTMX_JS,
    )
        .into_response()
}

/// Percent-encodes a token for a cookie value.
fn cookie_encode(secret: &str) -> String {
    let mut out = String::new();
    for b in secret.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn cookie_decode(value: &str) -> Option<Vec<u8>> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Who is looking: the bearer header, else the dashboard's cookie.
fn viewer(app: &App, headers: &HeaderMap) -> Result<Caller, ApiError> {
    let Some(tokens) = &app.inner.tokens else {
        return Ok(Caller::Open);
    };
    if headers.contains_key(header::AUTHORIZATION) {
        return app.caller(headers);
    }
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| {
            kv.trim()
                .strip_prefix(&format!("{COOKIE}="))
                .map(str::to_string)
        });
    cookie
        .and_then(|c| cookie_decode(&c))
        .and_then(|secret| tokens.lookup(&secret))
        .ok_or_else(|| ApiError::unauthorized("the dashboard needs the admin token"))
}

fn is_admin(caller: &Caller) -> bool {
    matches!(caller, Caller::Open | Caller::Admin)
}

fn login(status: StatusCode, message: &str) -> Response {
    let body = html! {
        (DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { "Fairway" } style { (PreEscaped(CSS)) } }
            body {
                h1 { "Fairway" }
                p.note { (message) }
                form method="get" action="/" {
                    label { "Admin token " input type="password" name="token" autocomplete="off"; }
                    " " button type="submit" { "Open the dashboard" }
                }
            }
        }
    };
    (status, body).into_response()
}

async fn page(
    State(app): State<App>,
    headers: HeaderMap,
    params: Result<UrlQuery<PageParams>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let params = params.map(|UrlQuery(p)| p).unwrap_or_default();
    if let (Some(tokens), Some(token)) = (&app.inner.tokens, params.token.as_deref()) {
        return match tokens.lookup(token.as_bytes()) {
            Some(Caller::Admin) => {
                let to = match &params.job {
                    Some(job) => format!("/?job={}", cookie_encode(job)),
                    None => "/".to_string(),
                };
                let mut response = Redirect::to(&to).into_response();
                let cookie = format!(
                    "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
                    cookie_encode(token)
                );
                if let Ok(v) = HeaderValue::from_str(&cookie) {
                    response.headers_mut().insert(header::SET_COOKIE, v);
                }
                response
            }
            Some(_) => login(
                StatusCode::FORBIDDEN,
                "That token is not an admin token: the dashboard shows every tenant.",
            ),
            None => login(StatusCode::UNAUTHORIZED, "Unknown token."),
        };
    }
    match viewer(&app, &headers) {
        Ok(c) if is_admin(&c) => {}
        Ok(_) => {
            return login(
                StatusCode::FORBIDDEN,
                "The dashboard shows every tenant: it needs the admin token.",
            );
        }
        Err(_) => {
            return login(
                StatusCode::UNAUTHORIZED,
                "This server has a token file: enter the admin token.",
            );
        }
    }
    let view = match overview(&app).await {
        Ok(v) => v,
        Err(e) => return unavailable(&e),
    };
    let explanation = match &params.job {
        Some(job) if !job.is_empty() => Some(explain(&app, job).await),
        _ => None,
    };
    let job = params.job.clone().unwrap_or_default();
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Fairway" }
                style { (PreEscaped(CSS)) }
                script src=(HTMX_PATH) {}
            }
            body {
                header {
                    h1 { "Fairway" }
                    div #status hx-get="/dashboard/panel/status" hx-trigger=(REFRESH) { (status_panel(&view)) }
                }
                main {
                    section.wide #tenants hx-get="/dashboard/panel/tenants" hx-trigger=(REFRESH) { (tenants_panel(&view)) }
                    section #explain {
                        h2 { "Why does a job wait?" }
                        form method="get" action="/" {
                            input type="text" name="job" placeholder="job id" value=(job) size="36";
                            " " button type="submit" { "Explain" }
                        }
                        @if let Some(e) = &explanation {
                            div #explanation hx-get=(format!("/dashboard/panel/explain?job={}", cookie_encode(&job))) hx-trigger=(REFRESH) { (explain_panel(e)) }
                        }
                    }
                    section #classes hx-get="/dashboard/panel/classes" hx-trigger=(REFRESH) { (classes_panel(&view)) }
                    section #admissions hx-get="/dashboard/panel/admissions" hx-trigger=(REFRESH) { (admissions_panel(&view)) }
                    section #pools hx-get="/dashboard/panel/pools" hx-trigger=(REFRESH) { (pools_panel(&view)) }
                    section.wide #workers hx-get="/dashboard/panel/workers" hx-trigger=(REFRESH) { (workers_panel(&view)) }
                    section.wide #decisions hx-get="/dashboard/panel/decisions" hx-trigger=(REFRESH) { (decisions_panel(&view)) }
                }
            }
        }
    }
    .into_response()
}

async fn panel(
    State(app): State<App>,
    headers: HeaderMap,
    Path(name): Path<String>,
    params: Result<UrlQuery<PageParams>, axum::extract::rejection::QueryRejection>,
) -> Response {
    match viewer(&app, &headers) {
        Ok(c) if is_admin(&c) => {}
        _ => {
            return (
                StatusCode::UNAUTHORIZED,
                html! { p.note { "The dashboard needs the admin token: reload the page." } },
            )
                .into_response();
        }
    }
    if name == "explain" {
        let job = params
            .ok()
            .and_then(|UrlQuery(p)| p.job)
            .unwrap_or_default();
        return explain_panel(&explain(&app, &job).await).into_response();
    }
    let view = match overview(&app).await {
        Ok(v) => v,
        Err(e) => return unavailable(&e),
    };
    let markup = match name.as_str() {
        "status" => status_panel(&view),
        "tenants" => tenants_panel(&view),
        "classes" => classes_panel(&view),
        "admissions" => admissions_panel(&view),
        "pools" => pools_panel(&view),
        "workers" => workers_panel(&view),
        "decisions" => decisions_panel(&view),
        _ => return (StatusCode::NOT_FOUND, html! { p { "no such panel" } }).into_response(),
    };
    markup.into_response()
}

fn unavailable(e: &ApiError) -> Response {
    (
        e.status,
        html! { p.note { "The server cannot answer now: " (e.message) } },
    )
        .into_response()
}

async fn overview(app: &App) -> Result<OverviewReply, ApiError> {
    let observation = app
        .call(app.timeout(), |reply| {
            Command::Observe(Query::Overview { reply })
        })
        .await?;
    Ok(observation.view.clone())
}

async fn explain(app: &App, job: &str) -> Result<Option<ExplainReply>, String> {
    let id = job.to_string();
    app.call(app.timeout(), |reply| {
        Command::Observe(Query::Explain {
            job: id,
            scope: None,
            reply,
        })
    })
    .await
    .map_err(|e| e.message)
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn age(ms: u64) -> String {
    let s = ms as f64 / 1e3;
    if s < 1.0 {
        format!("{ms} ms")
    } else if s < 120.0 {
        format!("{s:.1} s")
    } else if s < 7200.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

fn amounts(m: &BTreeMap<String, f64>) -> String {
    if m.is_empty() {
        return "-".into();
    }
    m.iter()
        .map(|(r, v)| format!("{r}={}", trim(*v)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn job_link(job: &str) -> Markup {
    html! { a href=(format!("/?job={}", cookie_encode(job))) { (job) } }
}

fn status_panel(v: &OverviewReply) -> Markup {
    let render = RENDERS.fetch_add(1, Ordering::Relaxed) + 1;
    html! {
        p.status data-render=(render) {
            "policy " b { (v.policy) } " v" (v.policy_version)
            " · " b.live-jobs { (v.live_jobs) } " live jobs, " b { (v.queued_jobs) } " queued"
            " · " (v.workers_total) " workers"
            " · " (v.tenants_with_jobs) " tenants with jobs, "
            b.over { (v.tenants_over) } " over their share"
            " · observed " (v.at) " (#" (v.generation) ", " (format!("{:.1}", v.observe_ms)) " ms)"
            " · render " span.render { (render) }
        }
    }
}

/// A bar of `share` (0..1) with a tick at `entitlement`.
fn share_bar(share: f64, entitlement: f64, over: bool) -> Markup {
    let width = 220.0;
    let w = (share.clamp(0.0, 1.0) * width).round();
    let x = (entitlement.clamp(0.0, 1.0) * width).round();
    let fill = if over { "#d1495b" } else { "#2e86ab" };
    html! {
        svg width="220" height="14" viewBox="0 0 220 14" role="img" aria-label=(format!("share {} of entitlement {}", pct(share), pct(entitlement))) {
            rect x="0" y="2" width="220" height="10" fill="#e8e8e8" {}
            rect x="0" y="2" width=(w) height="10" fill=(fill) {}
            line x1=(x) y1="0" x2=(x) y2="14" stroke="#222" stroke-width="2" {}
        }
    }
}

fn tenants_panel(v: &OverviewReply) -> Markup {
    html! {
        h2 { "Service versus entitlement" }
        p.note {
            "Dominant share of all live capacity held (bar) against the share the tenant's weight earns among active tenants (tick). "
            @if (v.tenants.len() as u64) < v.tenants_with_jobs {
                "Showing the " (v.tenants.len()) " of " (v.tenants_with_jobs) " tenants with jobs furthest above their entitlement."
            }
        }
        @if v.tenants.is_empty() {
            p.empty { "No tenant has jobs." }
        } @else {
            table {
                thead { tr {
                    th { "tenant" } th { "weight" } th { "share / entitlement" } th.num { "share" }
                    th.num { "entitled" } th.num { "over" } th.num { "queued" } th.num { "oldest wait" }
                    th.num { "running" } th.num { "balance" } th.num { "debt (ws)" }
                } }
                tbody {
                    @for t in v.tenants.iter().take(MAX_ROWS) {
                        @let over = t.over > 0.005;
                        tr.tenant.over-share[over] data-tenant=(t.name) {
                            td { b { (t.name) } @if over { " " span.badge { "over its share" } } }
                            td.num { (trim(t.weight)) }
                            td { (share_bar(t.dominant_share, t.entitlement, over)) }
                            td.num { (pct(t.dominant_share)) }
                            td.num { (pct(t.entitlement)) }
                            td.num { (format!("{:+.1}%", t.over * 100.0)) }
                            td.num { (t.queued) }
                            td.num { (t.oldest_age_ms.map(age).unwrap_or_else(|| "-".into())) }
                            td.num { (t.running) }
                            td.num { (format!("{:.3}", t.balance)) }
                            td.num { (format!("{:.1}", t.debt_ws)) }
                        }
                    }
                }
            }
        }
    }
}

fn classes_panel(v: &OverviewReply) -> Markup {
    let max_age = v
        .classes
        .iter()
        .filter_map(|c| c.oldest_age_s)
        .fold(0.0f64, f64::max)
        .max(1e-9);
    html! {
        h2 { "Queue age by class" }
        table {
            thead { tr {
                th { "class" } th.num { "priority" } th.num { "reserve" } th.num { "queued" }
                th { "per pool" } th.num { "unplaceable" }
                th { "oldest wait" } th.num { "predicted start" } th.num { "deadline misses" }
            } }
            tbody {
                @for c in &v.classes {
                    tr.class data-class=(c.name) {
                        td { b { (c.name) } }
                        td.num { (c.priority) }
                        td.num { (pct(c.reserve)) }
                        td.num { (c.queued.map(|q| q.to_string()).unwrap_or_else(|| "?".into())) }
                        td.pools {
                            @for (i, (pool, b)) in c.queued_by_pool.iter().enumerate() {
                                @if i > 0 { ", " }
                                (pool) " " b.count data-pool=(pool) { (b.queued) }
                            }
                        }
                        td.num.unplaceable { (c.unplaceable) }
                        td.age {
                            @if let Some(a) = c.oldest_age_s {
                                svg width="120" height="10" viewBox="0 0 120 10" {
                                    rect x="0" y="1" width=((a / max_age * 120.0).round()) height="8" fill="#f4a259" {}
                                }
                                " " (age((a * 1e3) as u64))
                            } @else { "-" }
                        }
                        td.num { (c.predicted_start_s.map(|s| age((s * 1e3) as u64)).unwrap_or_else(|| "no capacity".into())) }
                        td.num { (c.deadline_misses) }
                    }
                }
            }
        }
    }
}

/// A series of the admissions chart: its name, its colour and how to read it.
type Series = (&'static str, &'static str, fn(&IntervalView) -> u64);

fn admissions_panel(v: &OverviewReply) -> Markup {
    let series: [Series; 5] = [
        ("accepted", "#2e86ab", |i| i.accepted),
        ("deferred", "#7fb7be", |i| i.deferred),
        ("rejected (retry)", "#f4a259", |i| i.rejected_retryable),
        ("rejected (final)", "#d1495b", |i| i.rejected_final),
        ("expired", "#888888", |i| i.expired),
    ];
    let total = |i: &IntervalView| series.iter().map(|(_, _, f)| f(i)).sum::<u64>();
    let max = v.admissions.iter().map(total).max().unwrap_or(0).max(1) as f64;
    let (width, height) = (600.0, 120.0);
    let bar = width / v.admissions.len().max(1) as f64;
    let sums: Vec<u64> = series
        .iter()
        .map(|(_, _, f)| v.admissions.iter().map(f).sum())
        .collect();
    html! {
        h2 { "Admission outcomes over time" }
        svg.chart width="600" height="140" viewBox="0 0 600 140" role="img" aria-label="admission outcomes per 10 seconds, last 10 minutes" {
            @for (k, i) in v.admissions.iter().enumerate() {
                @let mut y = height;
                @for (_, color, f) in &series {
                    @let h = f(i) as f64 / max * (height - 4.0);
                    @if h > 0.0 {
                        @let top = { y -= h; y };
                        rect x=(format!("{:.1}", k as f64 * bar + 1.0)) y=(format!("{top:.1}")) width=(format!("{:.1}", (bar - 2.0).max(1.0))) height=(format!("{h:.1}")) fill=(color) {}
                    }
                }
            }
            line x1="0" y1="120" x2="600" y2="120" stroke="#999" {}
            text x="0" y="136" font-size="11" fill="#555" { "10 min ago" }
            text x="600" y="136" font-size="11" fill="#555" text-anchor="end" { "now" }
            text x="4" y="12" font-size="11" fill="#555" { (format!("max {} per 10 s", max as u64)) }
        }
        p.legend {
            @for ((name, color, _), sum) in series.iter().zip(&sums) {
                span.key style=(format!("background:{color}")) {} " " (name) ": " b.count data-outcome=(name) { (sum) } "  "
            }
        }
    }
}

fn pools_panel(v: &OverviewReply) -> Markup {
    html! {
        h2 { "Pools and reserves" }
        @if v.pools.is_empty() {
            p.empty { "No live workers." }
        }
        @for p in &v.pools {
            h3 { (p.name) " " span.note { (p.workers) " workers" } }
            p {
                "capacity " (amounts(&p.capacity)) " · used " (amounts(&p.used))
                @if !p.borrowed.is_empty() {
                    " · borrowed from reserves " span.borrowed { (amounts(&p.borrowed)) }
                }
            }
            @if !p.reserves.is_empty() {
                table {
                    thead { tr { th { "class" } th { "reserved" } th { "used" } th { "held" } th.num { "occupancy" } } }
                    tbody {
                        @for r in &p.reserves {
                            tr.reserve data-pool=(p.name) data-class=(r.class) {
                                td { (r.class) } td { (amounts(&r.reserved)) } td { (amounts(&r.used)) }
                                td { (amounts(&r.held)) } td.num { (pct(r.occupancy)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn workers_panel(v: &OverviewReply) -> Markup {
    html! {
        h2 { "Workers and leases" }
        @if v.workers.is_empty() {
            p.empty { "No worker is known: none has asked for work recently or holds a lease." }
        } @else {
            table {
                thead { tr {
                    th { "worker" } th { "pool" } th { "state" } th { "capacity" } th { "free" }
                    th.num { "leases" } th { "jobs" } th.num { "last heard" }
                } }
                tbody {
                    @for w in v.workers.iter().take(MAX_ROWS) {
                        tr.worker data-worker=(w.name) {
                            td { b { (w.name) } }
                            td { (w.pool) }
                            td.state { (worker_state(w)) }
                            td { (amounts(&w.capacity)) }
                            td { (amounts(&w.free)) }
                            td.num { (w.leases) }
                            td { @for (i, j) in w.jobs.iter().enumerate() { @if i > 0 { ", " } (job_link(j)) } }
                            td.num { (age(w.last_poll_ms)) " ago" }
                        }
                    }
                }
            }
            @if v.workers_total as usize > MAX_ROWS.min(v.workers.len()) {
                p.note { "and " (v.workers_total as usize - MAX_ROWS.min(v.workers.len())) " more" }
            }
        }
    }
}

/// A worker's state in a word: waiting for work, live, or silent (holding leases recovered
/// after a restart, or gone quiet).
fn worker_state(w: &WorkerView) -> &'static str {
    match (w.live, w.polling) {
        (true, true) => "polling",
        (true, false) => "live",
        (false, _) => "silent",
    }
}

fn decisions_panel(v: &OverviewReply) -> Markup {
    html! {
        h2 { "Recent decisions" }
        @if v.decisions.is_empty() {
            p.empty { "No job has been started yet." }
        } @else {
            table {
                thead { tr { th { "at" } th { "job" } th { "tenant" } th { "class" } th { "workers" } th { "why" } } }
                tbody {
                    @for d in &v.decisions {
                        tr.decision {
                            td.time { (d.at.get(11..23).unwrap_or(&d.at)) }
                            td { (job_link(&d.job_id)) }
                            td { (d.tenant) }
                            td { (d.class) }
                            td { (d.workers.join(", ")) }
                            td.reason { (d.reason) }
                        }
                    }
                }
            }
        }
    }
}

fn explain_panel(result: &Result<Option<ExplainReply>, String>) -> Markup {
    html! {
        @match result {
            Err(message) => p.note { "The server cannot answer now: " (message) },
            Ok(None) => p.note { "No such job." },
            Ok(Some(e)) => {
                p.summary {
                    b { (e.job_id) } " (" (e.tenant) ", " (e.class) ") is " b.state { (e.state) } ": "
                    span.why { (e.summary) }
                }
                @if !e.reasons.is_empty() {
                    ul {
                        @for r in &e.reasons {
                            li { code { (r.code) } " " (r.message) }
                        }
                    }
                }
                @if !e.decisions.is_empty() {
                    p.note { "Started by:" }
                    ul {
                        @for d in &e.decisions {
                            li { (d.at) ": epoch " (d.epoch) " on " (d.workers.join(", ")) ". " (d.reason) }
                        }
                    }
                }
            }
        }
    }
}

const CSS: &str = r#"
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #222; background: #f6f6f4; }
header { background: #1d3557; color: #fff; padding: 8px 16px; display: flex; gap: 16px; align-items: baseline; flex-wrap: wrap; }
header h1 { margin: 0; font-size: 20px; }
header .status { margin: 0; }
main { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 12px; padding: 12px; }
section { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px; overflow-x: auto; }
section.wide { grid-column: 1 / -1; }
h2 { font-size: 16px; margin: 4px 0 8px; }
h3 { font-size: 14px; margin: 8px 0 4px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 3px 6px; border-bottom: 1px solid #eee; vertical-align: middle; }
th { font-weight: 600; color: #555; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.over-share td { background: #fdecee; }
.badge { background: #d1495b; color: #fff; border-radius: 3px; padding: 0 4px; font-size: 11px; }
.note, .empty { color: #666; }
.key { display: inline-block; width: 10px; height: 10px; }
td.reason { color: #333; }
td.time { font-variant-numeric: tabular-nums; color: #555; }
td.age { white-space: nowrap; }
.summary .why { font-weight: 600; }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_values_round_trip_any_secret() {
        for secret in ["plain-secret_0123", "with space;and,comma\"quote%", "ünï"] {
            let encoded = cookie_encode(secret);
            assert!(
                encoded
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.~%".contains(&b))
            );
            assert_eq!(cookie_decode(&encoded).unwrap(), secret.as_bytes());
        }
        assert!(cookie_decode("%zz").is_none());
    }

    #[test]
    fn ages_read_in_their_unit() {
        assert_eq!(age(250), "250 ms");
        assert_eq!(age(1500), "1.5 s");
        assert_eq!(age(600_000), "10.0 min");
        assert_eq!(trim(2.0), "2");
        assert_eq!(trim(0.125), "0.125");
    }
}
