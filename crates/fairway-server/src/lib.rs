//! Fairway's server: the engine and the store behind HTTP API v1.
//!
//! Two halves, joined by one bounded channel:
//!
//! - **The writer loop** ([`writer`]) is a dedicated OS thread that owns the [`Engine`] and the
//!   store. It blocks for a command (or until the engine's next timer or a long poll's
//!   deadline), drains up to a bounded batch more, applies them to the engine, runs `tick` and
//!   `schedule`, commits every event of the batch (with job payloads) in **one** durable
//!   `commit`, and only then answers. Nothing is acknowledged before it is durable; after a
//!   failed commit the loop answers 503 to everyone waiting and stops, and the process exits
//!   non-zero (a restart recovers).
//! - **The HTTP side** ([`http`]) is axum on tokio. Handlers authenticate, parse and check the
//!   request, send a command with `try_send` (a full channel is `429 busy`), and await a
//!   oneshot reply. No handler touches the engine or the store.
//!
//! [`Server::bind`] opens the store and the listener; [`Server::run`] recovers the engine in
//! the writer thread (the API answers `503 not_ready` until then) and serves until the shutdown
//! future resolves. `docs/api.md` documents every route, status code, error code and limit.
//!
//! On a PostgreSQL store the server is one **replica** of several ([`leader`]): it writes only
//! while it holds the leader term, fences every write by it, and otherwise redirects clients to
//! the leader.
//!
//! **Architecture invariant:** only this crate speaks HTTP and JSON. The engine's types never
//! go on the wire directly: [`wire`] holds the API's shapes and converts.
//!
//! [`Engine`]: fairway_core::Engine

#![warn(missing_docs)]

pub mod auth;
pub mod batch_json;
pub mod config;
mod error;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod observe;
mod server;
mod spin;
pub mod vopr;
pub mod wire;
pub mod writer;

pub use auth::{Caller, Role, Tokens};
pub use config::{Limits, MAX_IDLE_SPIN_US, ServerConfig};
pub use error::ApiError;
pub use server::{Server, ServerError};
