//! What a server is started with: where its data lives, where it listens, its policy, its
//! tokens, and the limit on everything.

use crate::auth::Tokens;
use fairway_core::Policy;
use fairway_core::config::{DurStr, PolicyFile, render_sections};
use fairway_core::time::Dur;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The bounds the server keeps. Every queue, batch and wait has one; `docs/api.md` lists them.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest job payload, as its JSON text, in bytes (413 `too_large` beyond).
    pub max_payload_bytes: usize,
    /// Largest request body, in bytes (413 `too_large` beyond).
    pub max_body_bytes: usize,
    /// Most jobs in one `POST /v1/jobs/batch` and completions in one `POST /v1/leases/complete`.
    pub max_batch: usize,
    /// Most leases one `POST /v1/leases` may ask for (`max_jobs`).
    pub max_jobs_per_lease: u32,
    /// Longest long poll (`wait_ms`).
    pub max_wait_ms: u64,
    /// Commands waiting for the writer loop; a full channel answers 429 `busy`.
    pub channel_capacity: usize,
    /// Most commands the writer loop applies in one group commit.
    pub commit_batch_max: usize,
    /// Most long polls parked at once (429 `busy` beyond).
    pub max_parked: usize,
    /// Most requests in flight at once, long polls included (429 `busy` beyond).
    pub max_in_flight: usize,
    /// How long a request may take, in milliseconds, on top of its `wait_ms` for a long poll
    /// (503 `unavailable` beyond).
    pub request_timeout_ms: u64,
    /// How long a client may take to send a request's headers, in milliseconds, counted from
    /// when the server starts reading them; it also closes a keep-alive connection idle this
    /// long between requests. A slow client (slow-loris) is cut off.
    pub header_timeout_ms: u64,
    /// Most connections open at once; beyond, a new connection gets 429 `busy` and is closed.
    pub max_connections: usize,
    /// The writer snapshots the engine after this many events since the last snapshot (or
    /// after as many as there are live jobs, if that is more, and no sooner than ten times
    /// the last snapshot's duration after it, encoding and storing).
    pub snapshot_every_events: u64,
    /// The most events a restart may have to replay after the latest snapshot: once this many
    /// have been committed since the last snapshot, the next is taken however large the state
    /// and however recent the last one, so that recovery time after a crash stays bounded
    /// (about 2 µs per event on the machine of BENCHMARKS.md).
    pub snapshot_max_tail_events: u64,
    /// How long, in microseconds, the writer and store threads poll their channel for the next
    /// turn before they sleep (yielding the CPU between polls; 0: sleep at once). Waking a
    /// sleeping thread on a virtual machine's idle vCPU costs tens of microseconds a hop, and
    /// a lone request makes three; polling trades a little CPU right after each turn for
    /// those (see `crate::spin`). At most [`MAX_IDLE_SPIN_US`].
    pub idle_spin_us: u64,
}

impl Limits {
    /// [`Limits::idle_spin_us`] as a duration.
    pub fn idle_spin(&self) -> std::time::Duration {
        std::time::Duration::from_micros(self.idle_spin_us)
    }
}

/// The longest [`Limits::idle_spin_us`] a server accepts: beyond it, polling is a busy loop,
/// not a bridge over a hand-off.
pub const MAX_IDLE_SPIN_US: u64 = 10_000;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_payload_bytes: 1 << 20,
            max_body_bytes: 16 << 20,
            max_batch: 1000,
            max_jobs_per_lease: 1000,
            max_wait_ms: 60_000,
            channel_capacity: 4096,
            commit_batch_max: 1024,
            max_parked: 10_000,
            max_in_flight: 16_384,
            request_timeout_ms: 30_000,
            header_timeout_ms: 10_000,
            max_connections: 16_384,
            snapshot_every_events: 50_000,
            snapshot_max_tail_events: 250_000,
            idle_spin_us: crate::spin::DEFAULT_SPIN_US,
        }
    }
}

/// Everything a [`crate::Server`] needs to start.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The data directory (the embedded store's files live there).
    pub data_dir: PathBuf,
    /// Where to listen. Without tokens only a loopback address is allowed.
    pub listen: SocketAddr,
    /// The policy text to run. `None` keeps the persisted policy, or the built-in one on a
    /// fresh data directory.
    pub policy: Option<String>,
    /// Lease length in milliseconds, overriding the policy's `lease` in every policy version
    /// this server publishes (including those sent with `PUT /v1/policy`).
    pub lease_ms: Option<u64>,
    /// Bearer tokens; `None` runs open (loopback only).
    pub tokens: Option<Tokens>,
    /// The limits.
    pub limits: Limits,
    /// A PostgreSQL URL: keep the state there instead of in `data_dir`, as one replica of
    /// several (see [`crate::leader`]). `None`: the embedded store.
    pub postgres: Option<String>,
    /// The URL other replicas send clients to, for this one (`GET /v1/leader`, redirects).
    /// Default: `http://` and the bound address, which needs a specific listen address.
    pub advertise: Option<String>,
    /// How long a leader's lease on the leader row lasts without renewal, in ms: the longest a
    /// dead leader keeps the others waiting (it renews every third of it).
    pub leader_lease_ms: u64,
    /// Called where the writer has just freed a large amount of memory: once the engine is
    /// recovered (a snapshot decoded, the log replayed; before `/readyz` answers 200, in the
    /// writer thread), after each snapshot is stored (its encoded bytes freed, in the store
    /// thread), and in the writer thread once it has had no command for half a second after
    /// some. The `fairway` binary has its allocator return free memory to the OS there:
    /// otherwise an idle server keeps it (a restarted one held about twice the resident memory
    /// of one filled live).
    pub release_memory: Option<fn()>,
}

/// The default leader lease: a crashed leader is replaced within about this long.
pub const DEFAULT_LEADER_LEASE_MS: u64 = 10_000;

impl ServerConfig {
    /// A configuration with the defaults of `fairway serve`: `./fairway-data`,
    /// `127.0.0.1:7700`, the built-in policy, open.
    pub fn new(data_dir: impl Into<PathBuf>) -> ServerConfig {
        ServerConfig {
            data_dir: data_dir.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 7700)),
            policy: None,
            lease_ms: None,
            tokens: None,
            limits: Limits::default(),
            postgres: None,
            advertise: None,
            leader_lease_ms: DEFAULT_LEADER_LEASE_MS,
            release_memory: None,
        }
    }

    /// Whether the server runs without authentication.
    pub fn is_open(&self) -> bool {
        self.tokens.is_none()
    }

    /// Checks what can be checked before anything is opened: an open server must listen on a
    /// loopback address, and the policy (with the lease override) must validate.
    pub fn check(&self) -> Result<(), String> {
        if self.tokens.is_none() && !self.listen.ip().is_loopback() {
            return Err(format!(
                "refusing to listen on {} without a token file: an open server (no --tokens) \
                 only listens on a loopback address such as 127.0.0.1",
                self.listen
            ));
        }
        if let Some(ms) = self.lease_ms
            && ms == 0
        {
            return Err("--lease-ms must be at least 1".to_string());
        }
        if self.limits.idle_spin_us > MAX_IDLE_SPIN_US {
            return Err(format!(
                "--idle-spin-us {}: at most {MAX_IDLE_SPIN_US} (10 ms); 0 turns polling off",
                self.limits.idle_spin_us
            ));
        }
        if self.postgres.is_some() && self.leader_lease_ms < 100 {
            return Err("--leader-lease-ms must be at least 100".to_string());
        }
        if let Some(url) = &self.advertise
            && !(url.starts_with("http://") && url.len() > "http://".len())
        {
            return Err(format!(
                "--advertise {url:?}: expected an http:// URL that clients can reach, such as \
                 http://10.0.0.5:7700"
            ));
        }
        if self.postgres.is_some() && self.advertise.is_none() && self.listen.ip().is_unspecified()
        {
            return Err(format!(
                "listening on {} with --store postgres needs --advertise URL: the address \
                 other replicas send clients to",
                self.listen
            ));
        }
        if let Some(text) = &self.policy {
            let effective = effective_policy(text, self.lease_ms).map_err(|errors| {
                errors
                    .iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("\n")
            })?;
            Policy::from_text(&effective).map_err(|errors| {
                errors
                    .iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("\n")
            })?;
        }
        Ok(())
    }
}

/// The policy text the server publishes for `text`: `text` itself, or, when a lease override
/// is in force and `text` does not already say that lease, `text` re-rendered with
/// `[policy] lease` set (comments are then lost; the meaning is kept). The original is
/// validated first, so errors name lines of what the user wrote.
pub fn effective_policy(
    text: &str,
    lease_ms: Option<u64>,
) -> Result<String, Vec<fairway_core::ConfigError>> {
    Policy::from_text(text)?;
    let Some(ms) = lease_ms else {
        return Ok(text.to_string());
    };
    let mut file = PolicyFile::parse(text).map_err(|e| vec![e])?;
    let lease = Dur::from_millis(ms);
    if file.policy.lease.as_ref().map(|d| d.0) == Some(lease) {
        return Ok(text.to_string());
    }
    file.policy.lease = Some(DurStr(lease));
    Ok(render_sections(
        &file.policy,
        &file.pool,
        &file.tenant,
        &file.class,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_override_is_rendered_only_when_it_changes_something() {
        let text = "# comment\n[policy]\nname = \"fair\"\nlease = \"300ms\"\n";
        assert_eq!(effective_policy(text, Some(300)).unwrap(), text);
        assert_eq!(effective_policy(text, None).unwrap(), text);
        let changed = effective_policy(text, Some(5000)).unwrap();
        let policy = Policy::from_text(&changed).unwrap();
        assert_eq!(policy.lease, Dur::from_millis(5000));
        let built_in = effective_policy(fairway_core::policy::BUILT_IN_POLICY, Some(250)).unwrap();
        let policy = Policy::from_text(&built_in).unwrap();
        assert_eq!(policy.lease, Dur::from_millis(250));
        assert_eq!(policy.classes[0].name, "default");
    }

    #[test]
    fn open_servers_listen_on_loopback_only() {
        let mut config = ServerConfig::new("/tmp/unused");
        assert!(config.check().is_ok());
        config.listen = "0.0.0.0:7700".parse().unwrap();
        let err = config.check().unwrap_err();
        assert!(err.contains("without a token file"), "{err}");
        config.listen = "[::1]:7700".parse().unwrap();
        assert!(config.check().is_ok());
    }

    #[test]
    fn polling_before_sleeping_is_bounded() {
        let mut config = ServerConfig::new("/tmp/unused");
        for ok in [0, 200, MAX_IDLE_SPIN_US] {
            config.limits.idle_spin_us = ok;
            assert!(config.check().is_ok(), "{ok}");
        }
        config.limits.idle_spin_us = MAX_IDLE_SPIN_US + 1;
        let err = config.check().unwrap_err();
        assert!(err.contains("--idle-spin-us 10001: at most 10000"), "{err}");
    }
}
