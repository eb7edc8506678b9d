//! Replicas: one leader at a time on a PostgreSQL store, the others following.
//!
//! A replica runs [`run_replica`] instead of a single writer. It loops:
//!
//! - **Follower.** Every quarter of the leader lease it tries to take the leader row
//!   ([`Leadership::try_acquire`]: the row must be free, expired or its own; the term goes up).
//!   Meanwhile it reads who leads and probes that leader's `/readyz`, for `GET /v1/leader`, for
//!   its own readiness, and to send clients there: every `/v1/*` request (except
//!   `GET /v1/leader`) is answered `307 Temporary Redirect` to the same path on the leader,
//!   or `503 no_leader` while there is none ([`redirect_to_leader`], asked by the HTTP guard).
//! - **Leader.** It opens a [`PgStore`] fenced by its new term, rebuilds the engine from the
//!   database (snapshot and events), and runs the writer loop on the replica's one command
//!   channel. Every write transaction checks the term, and a turn that commits nothing checks
//!   it before answering. Beside the writer it renews the lease every third of it. A renewal
//!   that finds the row taken, or no successful renewal for a whole lease, **deposes** it: the
//!   writer answers 503 to everyone waiting and stops; the replica drops whatever commands are
//!   still queued (their callers get 503 and retry elsewhere) and becomes a follower. If it
//!   wins a later term it rebuilds from the database again: nothing of its old memory is kept.
//!
//! Safety does not depend on the lease or on clocks: a deposed leader's commits are refused by
//! the database. The lease only decides how soon a follower may take over (see
//! `docs/store.md`, "Fencing").

use crate::error::ApiError;
use crate::http::App;
use crate::writer::{Command, Shared, Writer, WriterSettings, recover};
use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use fairway_store::{Leadership, PgStore};
use serde::Serialize;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tracing::{info, warn};
use utoipa::ToSchema;

/// The header that names the leader in a redirect (and on `503 no_leader`, when known).
pub const LEADER_HEADER: &str = "fairway-leader";

/// What this replica is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Role {
    /// The embedded store: the only writer there is.
    #[default]
    Standalone,
    /// A replica that holds the leader term (it may still be rebuilding its state).
    Leader,
    /// A replica that follows.
    Follower,
}

/// Who leads, as this replica knows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ViewState {
    /// This replica's role.
    pub role: Role,
    /// The URL this replica advertises.
    pub self_url: String,
    /// The leader's URL, when known (this replica's own when it leads).
    pub leader_url: Option<String>,
    /// The leader's term (0 for the embedded store, or before any leader is known).
    pub term: u64,
    /// For a follower: the leader answered its last `/readyz` probe with 200.
    pub leader_reachable: bool,
}

/// The shared, updatable [`ViewState`].
#[derive(Debug, Default)]
pub struct LeaderView {
    state: RwLock<ViewState>,
}

impl LeaderView {
    /// The view now.
    pub fn get(&self) -> ViewState {
        self.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// This replica's role now.
    pub fn role(&self) -> Role {
        self.state.read().unwrap_or_else(|e| e.into_inner()).role
    }

    fn update(&self, f: impl FnOnce(&mut ViewState)) {
        f(&mut self.state.write().unwrap_or_else(|e| e.into_inner()));
    }

    /// Sets the URL this replica advertises, keeping its role.
    pub fn set_self_url(&self, url: String) {
        self.update(|s| s.self_url = url);
    }

    /// Whether a follower may call itself ready: it knows the leader and reached it.
    pub fn follower_ready(&self) -> bool {
        let s = self.get();
        s.role == Role::Follower && s.leader_url.is_some() && s.leader_reachable
    }
}

/// `GET /v1/leader`: who leads.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct LeaderReply {
    /// The leader's advertised URL; absent while no replica leads (or none is known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// The leader's term: it rises with every change of leader (0 for the embedded store).
    pub term: u64,
    /// This replica's advertised URL.
    #[serde(rename = "self")]
    pub self_url: String,
    /// Whether this replica is the leader.
    pub is_leader: bool,
    /// `standalone` (embedded store), `leader` or `follower`.
    pub role: String,
}

/// Who leads, as this replica knows it. A replica's view lags the database by up to a quarter
/// of the leader lease; a leader that has just been deposed may still claim the term until
/// its next renewal (it acknowledges nothing meanwhile: its writes are refused).
#[utoipa::path(get, path = "/v1/leader", tag = "health",
    responses((status = 200, description = "who leads", body = LeaderReply)))]
pub async fn get_leader(State(app): State<App>) -> Json<LeaderReply> {
    let view = app.shared().leader.get();
    let role = match view.role {
        Role::Standalone => "standalone",
        Role::Leader => "leader",
        Role::Follower => "follower",
    };
    let leader = match view.role {
        Role::Standalone => Some(view.self_url.clone()),
        Role::Leader | Role::Follower => view.leader_url.clone(),
    };
    Json(LeaderReply {
        leader,
        term: view.term,
        self_url: view.self_url.clone(),
        is_leader: matches!(view.role, Role::Standalone | Role::Leader),
        role: role.to_string(),
    })
}

/// On a follower, the answer to every `/v1/*` request but `GET /v1/leader`: `307` with
/// `Location` on the leader (same method, path, query and body) and the leader's URL in the
/// body and the `fairway-leader` header; `503 no_leader` while no leader is known. `None`
/// where the request is this replica's to serve. The HTTP guard asks before anything else.
pub(crate) fn redirect_to_leader(app: &App, req: &Request) -> Option<Response> {
    let path = req.uri().path();
    if !path.starts_with("/v1/") || path == "/v1/leader" {
        return None;
    }
    // Read on every request: the role alone, not a copy of the view.
    if app.shared().leader.role() != Role::Follower {
        return None;
    }
    let view = app.shared().leader.get();
    let Some(leader) = view.leader_url else {
        return Some(
            ApiError {
                retry_after_s: Some(1),
                ..ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "no_leader",
                    "this replica follows, and no replica leads right now (an election is under \
                 way); retry",
                )
            }
            .into_response(),
        );
    };
    let target = format!(
        "{}{}",
        leader.trim_end_matches('/'),
        req.uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or(path)
    );
    let body = serde_json::json!({
        "error": "not_leader",
        "message": format!("this replica follows; the leader is {leader}"),
        "leader": leader,
    });
    let mut response = (StatusCode::TEMPORARY_REDIRECT, Json(body)).into_response();
    if let (Ok(location), Ok(name)) = (
        HeaderValue::from_str(&target),
        HeaderValue::from_str(&leader),
    ) {
        response.headers_mut().insert(header::LOCATION, location);
        response.headers_mut().insert(LEADER_HEADER, name);
    }
    Some(response)
}

/// Everything a replica runs with.
pub(crate) struct Replica {
    /// The database.
    pub url: String,
    /// The election.
    pub leadership: Leadership,
    /// The command channel's receiving end (the writer of each term reads it).
    pub rx: Receiver<Command>,
    /// Its sending end, to wake the writer.
    pub tx: SyncSender<Command>,
    /// State shared with the HTTP side.
    pub shared: Arc<Shared>,
    /// How the writer runs.
    pub settings: WriterSettings,
}

/// Runs a replica until a shutdown is asked for (see the module documentation). Marks the
/// server gone through `exit` when it ends. An error means the replica cannot go on (the OS
/// refused a thread, or a writer panicked).
pub(crate) async fn run_replica(replica: Replica, exit: watch::Sender<bool>) -> Result<(), String> {
    let Replica {
        url,
        leadership,
        mut rx,
        tx,
        shared,
        settings,
    } = replica;
    let _exit = ExitOnDrop(exit);
    let lease = Duration::from_millis(leadership.lease_ms());
    let poll = (lease / 4).max(Duration::from_millis(25));
    let probe = probe_client(poll.max(Duration::from_millis(250)));
    let self_url = shared.leader.get().self_url;
    shared.leader.update(|s| {
        s.role = Role::Follower;
        s.leader_url = None;
    });
    info!(holder = leadership.holder(), address = %self_url, lease_ms = leadership.lease_ms(), "replica started: following");
    while !shared.shutdown.load(Ordering::Acquire) {
        match leadership.try_acquire().await {
            Ok(Some(term)) => {
                let started = Instant::now();
                info!(
                    term,
                    "won the leader term: rebuilding the engine from the database"
                );
                shared.leader.update(|s| {
                    s.role = Role::Leader;
                    s.leader_url = Some(s.self_url.clone());
                    s.term = term;
                    s.leader_reachable = true;
                });
                let (ended, back) = lead(
                    term,
                    &url,
                    &leadership,
                    rx,
                    &tx,
                    &shared,
                    &settings,
                    started,
                )
                .await?;
                rx = back;
                // Whatever is still queued was meant for a leader this replica no longer is.
                let mut dropped = 0;
                loop {
                    match rx.try_recv() {
                        Ok(Command::Wake) => {}
                        Ok(_) => dropped += 1,
                        Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                    }
                }
                let shutdown = shared.shutdown.load(Ordering::Acquire);
                shared.ready.store(false, Ordering::Release);
                shared.failed.store(false, Ordering::Release);
                shared.deposed.store(false, Ordering::Release);
                shared.leader.update(|s| {
                    s.role = Role::Follower;
                    s.leader_url = None;
                    s.leader_reachable = false;
                });
                match ended {
                    Ok(()) if shutdown => {
                        // A clean stop: the writer snapshotted; let another take over at once.
                        if let Err(e) = leadership.resign(term).await {
                            warn!(error = %e, "could not resign the leader term");
                        }
                        info!(term, "stopped leading: resigned");
                    }
                    Ok(()) => info!(term, dropped, "stopped leading"),
                    Err(e) => warn!(term, dropped, error = %e, "stepped down: now following"),
                }
                if shutdown {
                    break;
                }
                // Give another replica a chance before trying again.
                sleep_or_shutdown(poll, &shared).await;
                continue;
            }
            Ok(None) => {}
            Err(e) => warn!(error = %e, "could not reach the database to take the leader term"),
        }
        follow(&leadership, &probe, &shared).await;
        sleep_or_shutdown(poll, &shared).await;
    }
    Ok(())
}

/// Reads who leads and probes it; updates the view.
async fn follow(leadership: &Leadership, probe: &Option<reqwest::Client>, shared: &Shared) {
    let row = match leadership.current().await {
        Ok(row) => row,
        Err(e) => {
            warn!(error = %e, "could not read the leader row");
            shared.leader.update(|s| s.leader_reachable = false);
            return;
        }
    };
    let Some(row) = row.filter(|r| r.live && r.holder != leadership.holder()) else {
        shared.leader.update(|s| {
            s.leader_url = None;
            s.leader_reachable = false;
        });
        return;
    };
    let reachable = match probe {
        Some(http) => http
            .get(format!("{}/readyz", row.address.trim_end_matches('/')))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success()),
        None => false,
    };
    shared.leader.update(|s| {
        let changed = s.leader_url.as_deref() != Some(row.address.as_str()) || s.term != row.term;
        if changed {
            info!(leader = %row.address, term = row.term, reachable, "following");
        }
        s.leader_url = Some(row.address.clone());
        s.term = row.term;
        s.leader_reachable = reachable;
    });
}

/// Leads for one term: the writer on its own thread (open the store fenced by `term`, rebuild,
/// run), the lease renewed beside it. Returns how the term ended and the command channel, or
/// an error when the writer could not run at all (the channel is then gone).
#[allow(clippy::too_many_arguments)]
async fn lead(
    term: u64,
    url: &str,
    leadership: &Leadership,
    rx: Receiver<Command>,
    tx: &SyncSender<Command>,
    shared: &Arc<Shared>,
    settings: &WriterSettings,
    started: Instant,
) -> Result<(Result<(), String>, Receiver<Command>), String> {
    let fence = leadership.fence(term);
    let (done_tx, mut done_rx) = tokio::sync::oneshot::channel();
    let writer_shared = shared.clone();
    let writer_settings = settings.clone();
    let writer_url = url.to_owned();
    let spawned = std::thread::Builder::new()
        .name(format!("fairway-writer-{term}"))
        .spawn(move || {
            let ended = (move || {
                let mut store = match PgStore::open(&writer_url, fence) {
                    Ok(store) => store,
                    Err(e) => return (Err(format!("opening the store: {e}")), rx),
                };
                let now = crate::server::wall_clock();
                let (engine, unsnapshotted) = match recover(&mut store, &writer_settings, now) {
                    Ok(recovered) => recovered,
                    Err(e) => return (Err(e), rx),
                };
                writer_shared.ready.store(true, Ordering::Release);
                info!(
                    term,
                    rebuild_ms = started.elapsed().as_millis() as u64,
                    "leading: ready"
                );
                Writer::new(
                    engine,
                    unsnapshotted,
                    store,
                    rx,
                    writer_shared,
                    writer_settings,
                )
                .run_keeping_channel()
            })();
            let _ = done_tx.send(ended);
        });
    if let Err(e) = spawned {
        // The closure (and the channel in it) is gone with the failed spawn: nothing can
        // serve any more. This only happens when the OS refuses a thread.
        return Err(format!("cannot start the writer thread: {e}"));
    }

    let lease = Duration::from_millis(leadership.lease_ms());
    let every = (lease / 3).max(Duration::from_millis(10));
    // The last renewal known to have succeeded was sent no earlier than the acquisition.
    let mut renewed_at = started;
    let mut deposed = false;
    loop {
        tokio::select! {
            ended = &mut done_rx => {
                return match ended {
                    Ok(ended) => Ok(ended),
                    // The writer thread panicked: the channel went with it.
                    Err(_) => Err(format!("the writer thread of term {term} panicked")),
                };
            }
            _ = tokio::time::sleep(every), if !deposed => {}
        }
        if deposed {
            continue;
        }
        let sent = Instant::now();
        let renewed = tokio::time::timeout(every, leadership.renew(term)).await;
        let lost = match renewed {
            Ok(Ok(true)) => {
                renewed_at = sent;
                false
            }
            Ok(Ok(false)) => {
                warn!(term, "the leader row was taken: deposed");
                true
            }
            Ok(Err(e)) => {
                warn!(term, error = %e, "could not renew the leader lease");
                sent.duration_since(renewed_at) + every >= lease
            }
            Err(_) => {
                warn!(term, "renewing the leader lease timed out");
                sent.duration_since(renewed_at) + every >= lease
            }
        };
        if lost {
            warn!(
                term,
                "stepping down: no longer sure to lead; acknowledging nothing more"
            );
            shared.deposed.store(true, Ordering::Release);
            shared.ready.store(false, Ordering::Release);
            let _ = tx.try_send(Command::Wake);
            deposed = true;
        }
    }
}

async fn sleep_or_shutdown(wait: Duration, shared: &Shared) {
    let until = Instant::now() + wait;
    while Instant::now() < until && !shared.shutdown.load(Ordering::Acquire) {
        tokio::time::sleep(Duration::from_millis(20).min(wait)).await;
    }
}

fn probe_client(timeout: Duration) -> Option<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(
            |e| warn!(error = %e, "cannot build the probe client; followers will not be ready"),
        )
        .ok()
}

struct ExitOnDrop(watch::Sender<bool>);

impl Drop for ExitOnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(true);
    }
}
