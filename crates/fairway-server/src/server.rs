//! Starting and stopping: the listener, the writer thread, graceful shutdown.

use crate::config::{Limits, ServerConfig};
use crate::http::{App, router};
use crate::leader::{Replica, run_replica};
use crate::writer::{Command, Shared, Writer, WriterSettings, recover};
use fairway_core::Time;
use fairway_store::{Leadership, RedbStore};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;
use tokio::sync::{Notify, Semaphore, watch};
use tracing::{debug, info, warn};

/// How long a graceful shutdown waits for open requests once the writer has stopped.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Why a server could not start, or stopped on an error.
#[derive(Debug)]
pub enum ServerError {
    /// The configuration is refused (bad input: `fairway serve` exits 2).
    Config(String),
    /// The store could not be opened.
    Store(String),
    /// The address could not be bound.
    Bind(SocketAddr, std::io::Error),
    /// Serving failed.
    Io(std::io::Error),
    /// The writer stopped on an error: recovery or a commit failed. Nothing unacknowledged was
    /// acknowledged; a restart recovers from what is durable.
    Writer(String),
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerError::Config(m) => write!(f, "{m}"),
            ServerError::Store(m) => write!(f, "{m}"),
            ServerError::Bind(addr, e) => write!(f, "cannot listen on {addr}: {e}"),
            ServerError::Io(e) => write!(f, "serving: {e}"),
            ServerError::Writer(m) => write!(f, "the writer stopped: {m}"),
        }
    }
}

impl std::error::Error for ServerError {}

/// A server with its store open and its address bound, not yet serving.
pub struct Server {
    config: ServerConfig,
    store: Store,
    listener: TcpListener,
    local_addr: SocketAddr,
    advertise: String,
}

/// Where the state lives.
enum Store {
    /// The embedded store: this process is the only writer.
    /// Boxed: the store and its applier's state are far larger than the other variant.
    Embedded(Box<RedbStore>),
    /// PostgreSQL: this process is one replica; it writes while it holds the leader term.
    Postgres {
        /// The database.
        url: String,
        /// This replica's side of the election (connected, schema migrated).
        leadership: Leadership,
    },
}

impl Server {
    /// Checks the configuration, opens the store (one process per data directory; or, with
    /// PostgreSQL, connects and brings the schema up to date) and binds the listener.
    pub async fn bind(config: ServerConfig) -> Result<Server, ServerError> {
        config.check().map_err(ServerError::Config)?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|e| ServerError::Bind(config.listen, e))?;
        let local_addr = listener.local_addr().map_err(ServerError::Io)?;
        let advertise = config
            .advertise
            .clone()
            .unwrap_or_else(|| format!("http://{local_addr}"))
            .trim_end_matches('/')
            .to_string();
        let store = match &config.postgres {
            Some(url) => {
                // Unique per process start: a restarted replica is a new holder.
                let holder = format!("{advertise}#{}", uuid::Uuid::now_v7());
                let leadership =
                    Leadership::connect(url, &holder, &advertise, config.leader_lease_ms)
                        .await
                        .map_err(|e| {
                            ServerError::Store(format!("opening the PostgreSQL store: {e}"))
                        })?;
                Store::Postgres {
                    url: url.clone(),
                    leadership,
                }
            }
            None => {
                let dir = config.data_dir.clone();
                let store = tokio::task::spawn_blocking(move || RedbStore::open(&dir))
                    .await
                    .map_err(|e| ServerError::Store(format!("opening the store: {e}")))?
                    .map_err(|e| {
                        ServerError::Store(format!(
                            "opening the store in {}: {e}",
                            config.data_dir.display()
                        ))
                    })?;
                Store::Embedded(Box::new(store))
            }
        };
        Ok(Server {
            config,
            store,
            listener,
            local_addr,
            advertise,
        })
    }

    /// The URL this server advertises to clients and other replicas.
    pub fn advertise(&self) -> &str {
        &self.advertise
    }

    /// The address it listens on (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Recovers the engine (in the writer thread; `/readyz` is 503 until then) and serves
    /// until `shutdown` resolves or the writer stops on an error. A clean stop stops accepting
    /// connections, lets the writer finish its turn and answer the parked long polls,
    /// snapshots, and returns `Ok`.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let Server {
            config,
            store,
            listener,
            local_addr,
            advertise,
        } = self;
        let limits = config.limits.clone();
        let shared = Arc::new(Shared::default());
        let (tx, rx) = std::sync::mpsc::sync_channel(limits.channel_capacity.max(1));
        let (exit_tx, mut exit_rx) = watch::channel(false);
        let settings = WriterSettings {
            limits: limits.clone(),
            policy: config.policy.clone(),
            lease_ms: config.lease_ms,
            release_memory: config.release_memory,
        };
        shared.leader.set_self_url(advertise);
        let writer_shared = shared.clone();
        let handle = match store {
            Store::Embedded(store) => Handle::Thread(
                std::thread::Builder::new()
                    .name("fairway-writer".into())
                    .spawn(move || {
                        // Marks the writer gone however it ends, a panic included.
                        let _exit = ExitGuard {
                            shared: writer_shared.clone(),
                            exit: exit_tx,
                        };
                        let mut store = *store;
                        let (engine, unsnapshotted) = recover(&mut store, &settings, wall_clock())?;
                        writer_shared.ready.store(true, Ordering::Release);
                        info!("ready");
                        Writer::new(engine, unsnapshotted, store, rx, writer_shared, settings).run()
                    })
                    .map_err(ServerError::Io)?,
            ),
            Store::Postgres { url, leadership } => Handle::Task(tokio::spawn(run_replica(
                Replica {
                    url,
                    leadership,
                    rx,
                    tx: tx.clone(),
                    shared: writer_shared,
                    settings,
                },
                exit_tx,
            ))),
        };

        let app = App::new(tx.clone(), shared.clone(), config.tokens.clone(), limits);
        let service = router(app);
        let stopping = Arc::new(Notify::new());
        let signal = {
            let shared = shared.clone();
            let stopping = stopping.clone();
            async move {
                tokio::select! {
                    _ = shutdown => info!("shutting down"),
                    _ = exit_rx.wait_for(|gone| *gone) => {}
                }
                shared.shutdown.store(true, Ordering::Release);
                let _ = tx.try_send(Command::Wake);
                stopping.notify_one();
            }
        };
        info!(addr = %local_addr, "listening");
        let serve = serve_http(listener, service, &config.limits, signal);
        let grace = async {
            stopping.notified().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        };
        let served = tokio::select! {
            () = serve => Ok(()),
            _ = grace => {
                warn!("graceful shutdown timed out; closing the remaining connections");
                Ok(())
            }
        };
        let joined = match handle {
            Handle::Thread(handle) => tokio::task::spawn_blocking(move || handle.join())
                .await
                .map_err(|e| ServerError::Writer(format!("joining the writer: {e}")))?
                .map_err(|_| ()),
            Handle::Task(task) => task.await.map_err(|_| ()),
        };
        match joined {
            Ok(Ok(())) => served,
            Ok(Err(message)) => Err(ServerError::Writer(message)),
            Err(_) => Err(ServerError::Writer("the writer thread panicked".into())),
        }
    }
}

/// The answer to a connection beyond `max_connections`, written before it is closed.
const TOO_MANY_CONNECTIONS: &[u8] = b"HTTP/1.1 429 Too Many Requests\r\n\
    content-type: application/json\r\n\
    retry-after: 1\r\n\
    connection: close\r\n\
    content-length: 65\r\n\
    \r\n\
    {\"error\":\"busy\",\"message\":\"too many connections are open; retry\"}";

/// Serves HTTP/1.1 on `listener` until `signal`: at most `max_connections` connections at once
/// (a connection beyond gets 429 `busy` and is closed), each request's headers read within
/// `header_timeout_ms` (a slow client is cut off; an idle keep-alive connection is closed after
/// as long). On `signal` it stops accepting, lets every connection finish the request it is
/// serving, and returns when all are closed.
async fn serve_http(
    listener: TcpListener,
    service: axum::Router,
    limits: &Limits,
    signal: impl Future<Output = ()>,
) {
    let max = limits.max_connections.clamp(1, Semaphore::MAX_PERMITS);
    let permits = Arc::new(Semaphore::new(max));
    let header_timeout = Duration::from_millis(limits.header_timeout_ms.max(1));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut signal = std::pin::pin!(signal);
    loop {
        let stream = tokio::select! {
            () = &mut signal => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before it was accepted:
                    // wait a little rather than spin.
                    debug!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tokio::spawn(refuse_connection(stream));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(service.clone());
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        debug!("connection: {e}");
                    }
                    return;
                }
                _ = stop.wait_for(|stop| *stop) => conn.as_mut().graceful_shutdown(),
            }
            let _ = conn.await;
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    // Every connection holds a permit until it is closed.
    let _ = permits.acquire_many(max as u32).await;
}

/// Answers a connection beyond the limit with 429 `busy`, reads what the client sent for a
/// moment (so that closing does not reset the connection before it reads the answer), and
/// closes it.
async fn refuse_connection(mut stream: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(TOO_MANY_CONNECTIONS).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    })
    .await;
}

/// What runs the writer: the embedded store's one thread, or a replica's election loop.
enum Handle {
    Thread(std::thread::JoinHandle<Result<(), String>>),
    Task(tokio::task::JoinHandle<Result<(), String>>),
}

struct ExitGuard {
    shared: Arc<Shared>,
    exit: watch::Sender<bool>,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let clean = self.shared.shutdown.load(Ordering::Acquire);
        self.shared.ready.store(false, Ordering::Release);
        if !clean || std::thread::panicking() {
            self.shared.failed.store(true, Ordering::Release);
        }
        let _ = self.exit.send(true);
    }
}

/// Now, as engine time: Unix-epoch nanoseconds.
pub(crate) fn wall_clock() -> Time {
    Time(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0),
    )
}
