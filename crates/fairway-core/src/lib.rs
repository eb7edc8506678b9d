//! Fairway's scheduling engine.
//!
//! A fully deterministic implementation of admission, fair ordering, placement, leases and
//! accounting for durable work. It contains no I/O, reads no clock and draws no randomness:
//! every time-dependent call takes `now`, so the same inputs in the same order give the same
//! outputs, bit for bit. See [`Engine`] for the API and ARCHITECTURE.md for the invariants.

#![warn(missing_docs)]

#[cfg(feature = "bench-rig")]
pub mod bench_rig;
pub mod config;
mod engine;
pub mod event;
pub mod hash;
mod hint;
pub mod ids;
pub mod job;
pub mod policy;
pub mod queue;
pub mod resources;
pub mod shape;
pub mod time;
pub mod varint;
pub mod weight;

/// A small deterministic generator (xorshift64) for the model tests that walk random
/// operations: the same sequence on every run and machine.
#[cfg(test)]
pub(crate) fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

pub use config::{Backfill, ConfigError, PolicyName};
pub use engine::{
    Candidate, DecisionRecord, Engine, EngineConfig, EngineStats, Explanation, Ledger,
    TenantReport, WaitReason,
};
pub use engine::{
    Census, ClassCensus, PoolCensus, QueuedWork, ReserveStatus, TenantCensus, WorkerView,
};
pub use engine::{PoolUsage, SnapshotPieces, StopNotice, TenantSnapshot, TickReport, WorkerOffer};
pub use event::Event;
pub use job::{
    Admission, HeartbeatReply, JobSpec, JobState, JobStatus, Lease, LeaseError, Outcome,
    RejectReason,
};
pub use policy::Policy;
pub use time::{Dur, Time};
pub use weight::Weight;
