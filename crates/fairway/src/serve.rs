//! `fairway serve`: the durable server (thin over `fairway-server`).
//!
//! With no flags it keeps its data in `./fairway-data`, listens on `127.0.0.1:7700`, runs the
//! built-in policy, and runs open (no authentication), which it allows on a loopback address
//! only. With `--store postgres://…` it keeps its state in PostgreSQL instead, as one replica of
//! several on that database: one leads, the others redirect clients to it and take over when it
//! fails. Every flag has a `FAIRWAY_*` environment variable. Logs go to stderr (`RUST_LOG`,
//! default `info`); where it listens and whether it runs open go to stdout.
//!
//! Exit codes: 0 after a clean shutdown (SIGTERM or Ctrl-C); 1 a runtime failure (the store
//! cannot be opened or recovered, the address cannot be bound, a commit failed); 2 bad input
//! (an unreadable or invalid policy or token file, an open server on a non-loopback address).

use clap::Args;
use fairway_server::{Limits, Server, ServerConfig, ServerError, Tokens};
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `fairway serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Data directory: the embedded store's files live there (unused with --store).
    #[arg(long, env = "FAIRWAY_DATA", default_value = "./fairway-data")]
    data: PathBuf,
    /// Keep the state in PostgreSQL (`postgres://USER@HOST:PORT/DB`) instead of --data, as one
    /// replica of several on that database.
    #[arg(long, env = "FAIRWAY_STORE", value_name = "URL")]
    store: Option<String>,
    /// The URL clients and the other replicas reach this one at (with --store). Default:
    /// http:// and the address it listens on.
    #[arg(long, env = "FAIRWAY_ADVERTISE", value_name = "URL")]
    advertise: Option<String>,
    /// With --store: how long the leader's lease on the database lasts without renewal, in
    /// milliseconds; a failed leader is replaced about this long after its last renewal.
    #[arg(long, env = "FAIRWAY_LEADER_LEASE_MS", default_value_t = fairway_server::config::DEFAULT_LEADER_LEASE_MS, value_name = "MS")]
    leader_lease_ms: u64,
    /// Address to listen on. Without --tokens only a loopback address is allowed.
    #[arg(long, env = "FAIRWAY_LISTEN", default_value = "127.0.0.1:7700")]
    listen: SocketAddr,
    /// Policy file (TOML) to run; published as a new version if it differs from the one in
    /// force. Default: the persisted policy, or the built-in one on a fresh data directory.
    #[arg(long, env = "FAIRWAY_POLICY")]
    policy: Option<PathBuf>,
    /// Lease length in milliseconds, overriding the policy's `lease` (which is 30000 unless
    /// the policy sets it).
    #[arg(long, env = "FAIRWAY_LEASE_MS")]
    lease_ms: Option<u64>,
    /// Token file (TOML `[[token]]` entries: secret, role, tenant, pool). Without it the
    /// server runs open, on loopback only.
    #[arg(long, env = "FAIRWAY_TOKENS")]
    tokens: Option<PathBuf>,
    /// Largest job payload, in bytes of JSON.
    #[arg(long, env = "FAIRWAY_MAX_PAYLOAD_BYTES", default_value_t = 1 << 20)]
    max_payload_bytes: usize,
    /// Largest request body, in bytes [default: 16 MiB, and at least the payload limit
    /// plus 64 KiB].
    #[arg(long, env = "FAIRWAY_MAX_BODY_BYTES")]
    max_body_bytes: Option<usize>,
    /// How long a client may take to send a request's headers, in milliseconds (a slow client
    /// is cut off); also how long a keep-alive connection may sit idle between requests.
    #[arg(long, env = "FAIRWAY_HEADER_TIMEOUT_MS", default_value_t = Limits::default().header_timeout_ms, value_name = "MS")]
    header_timeout_ms: u64,
    /// How long a request may take, in milliseconds, on top of its wait for a long poll
    /// (503 `unavailable` beyond: the outcome is unknown).
    #[arg(long, env = "FAIRWAY_REQUEST_TIMEOUT_MS", default_value_t = Limits::default().request_timeout_ms, value_name = "MS")]
    request_timeout_ms: u64,
    /// Most connections open at once; a connection beyond gets 429 `busy` and is closed.
    #[arg(long, env = "FAIRWAY_MAX_CONNECTIONS", default_value_t = Limits::default().max_connections, value_name = "N")]
    max_connections: usize,
    /// Snapshot the engine after this many committed events (or after as many as there are
    /// live jobs, if that is more, and no sooner than ten times the last snapshot's duration,
    /// encoding and storing),
    /// so that a restart replays only what follows.
    #[arg(long, env = "FAIRWAY_SNAPSHOT_EVERY_EVENTS", default_value_t = Limits::default().snapshot_every_events)]
    snapshot_every_events: u64,
    /// The most committed events a restart may have to replay after the latest snapshot: a
    /// snapshot is taken once this many follow the last one, whatever the state's size.
    #[arg(long, env = "FAIRWAY_SNAPSHOT_MAX_TAIL_EVENTS", default_value_t = Limits::default().snapshot_max_tail_events, value_name = "N")]
    snapshot_max_tail_events: u64,
    /// How long, in microseconds, the writer and store threads poll for their next turn
    /// before they sleep (at most 10,000; 0: sleep at once, the least CPU at light load).
    /// Polling spares a lone request the wake-ups of sleeping threads (tens of microseconds
    /// each on a virtual machine) for a little CPU after each turn.
    #[arg(long, env = "FAIRWAY_IDLE_SPIN_US", default_value_t = Limits::default().idle_spin_us, value_name = "US")]
    idle_spin_us: u64,
}

/// Runs `fairway serve`.
pub fn run(args: ServeArgs) -> ExitCode {
    crate::memory::disable_transparent_huge_pages();
    init_logging();
    let config = match config(&args) {
        Ok(c) => c,
        Err(message) => {
            eprintln!("fairway serve: {message}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fairway serve: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(serve(config, &args))
}

async fn serve(config: ServerConfig, args: &ServeArgs) -> ExitCode {
    let open = config.is_open();
    let token_count = config.tokens.as_ref().map(Tokens::len).unwrap_or(0);
    let server = match Server::bind(config).await {
        Ok(s) => s,
        Err(e) => return failure(e),
    };
    match &args.store {
        // The URL may hold a password: it is not printed.
        Some(_) => println!(
            "fairway serve: listening on http://{} (a replica on PostgreSQL, advertised as {})",
            server.local_addr(),
            server.advertise()
        ),
        None => println!(
            "fairway serve: listening on http://{} (data in {})",
            server.local_addr(),
            args.data.display()
        ),
    }
    if open {
        println!(
            "fairway serve: running OPEN: no --tokens, so any local caller may act as any \
             tenant, worker or admin (loopback only)"
        );
    } else {
        println!(
            "fairway serve: authentication on: {token_count} token(s) from {}",
            args.tokens
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        );
    }
    match server.run(shutdown_signal()).await {
        Ok(()) => {
            println!("fairway serve: stopped cleanly");
            ExitCode::SUCCESS
        }
        Err(e) => failure(e),
    }
}

fn failure(e: ServerError) -> ExitCode {
    eprintln!("fairway serve: {e}");
    match e {
        ServerError::Config(_) => ExitCode::from(2),
        _ => ExitCode::from(1),
    }
}

/// Builds the server's configuration from the flags, reading the policy and token files.
fn config(args: &ServeArgs) -> Result<ServerConfig, String> {
    let mut config = ServerConfig::new(args.data.clone());
    config.listen = args.listen;
    config.lease_ms = args.lease_ms;
    if let Some(url) = &args.store {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(format!(
                "--store {url:?}: expected a postgres:// URL (the embedded store takes --data)"
            ));
        }
        config.postgres = Some(url.clone());
    }
    config.advertise = args.advertise.clone();
    config.leader_lease_ms = args.leader_lease_ms;
    if let Some(path) = &args.policy {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read policy {}: {e}", path.display()))?;
        fairway_server::config::effective_policy(&text, args.lease_ms).map_err(|errors| {
            errors
                .iter()
                .map(|e| format!("{}: {e}", path.display()))
                .collect::<Vec<_>>()
                .join("\n")
        })?;
        config.policy = Some(text);
    }
    if let Some(path) = &args.tokens {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read tokens {}: {e}", path.display()))?;
        config.tokens = Some(Tokens::parse(&path.display().to_string(), &text)?);
    }
    let body_default = Limits::default().max_body_bytes;
    config.limits.max_payload_bytes = args.max_payload_bytes;
    config.limits.snapshot_every_events = args.snapshot_every_events.max(1);
    config.limits.snapshot_max_tail_events = args.snapshot_max_tail_events.max(1);
    config.limits.header_timeout_ms = args.header_timeout_ms.max(1);
    config.limits.request_timeout_ms = args.request_timeout_ms.max(1);
    config.limits.max_connections = args.max_connections.max(1);
    config.limits.idle_spin_us = args.idle_spin_us;
    config.limits.max_body_bytes = args
        .max_body_bytes
        .unwrap_or(body_default)
        .max(args.max_payload_bytes.saturating_add(64 << 10));
    // After recovery and after each snapshot, large buffers were just freed.
    config.release_memory = Some(crate::memory::release_free_memory);
    config.check()?;
    Ok(config)
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
