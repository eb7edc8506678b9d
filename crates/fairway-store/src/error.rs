//! The store's one error type.

use crate::Lsn;
use crate::codec::CodecError;
use std::fmt;

/// Why a store operation failed.
///
/// Any error from a method that writes ([`crate::EventStore::commit`],
/// [`crate::EventStore::put_snapshot`]) leaves the store poisoned: every later call returns
/// [`StoreError::Poisoned`] and the process must restart and recover.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The operating system refused a file operation.
    Io {
        /// What the store was doing.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The storage engine (redb) failed; its message is kept as text.
    Backend {
        /// What the store was doing.
        context: String,
        /// The engine's error message.
        message: String,
    },
    /// A log record failed its length, CRC or version check, or is missing from the sequence.
    Corrupt {
        /// The LSN of the first bad or missing record.
        lsn: Lsn,
        /// What is wrong with it.
        reason: CorruptReason,
    },
    /// A snapshot record failed its checks.
    CorruptSnapshot {
        /// The LSN the snapshot was taken at.
        lsn: Lsn,
        /// What is wrong with it.
        reason: CodecError,
    },
    /// A job payload failed its checks.
    CorruptPayload {
        /// The job the payload belongs to.
        job: String,
        /// What is wrong with it.
        reason: CodecError,
    },
    /// The data directory was written by a newer build, in a format this build does not know.
    NewerFormat {
        /// The format version found in the `meta` table.
        found: u64,
        /// The newest format version this build reads.
        supported: u64,
    },
    /// The PostgreSQL database has a schema version newer than this build knows.
    NewerSchema {
        /// The version found in `fairway_schema`.
        found: i64,
        /// The newest version this build reads.
        supported: i64,
    },
    /// This replica no longer leads: the leader row names another holder or a higher term, so
    /// the write was rolled back (nothing of it is durable). The replica must stop
    /// acknowledging, and rebuild from the database if it wins a later term.
    Deposed {
        /// The term this store wrote under (0 when it never won one).
        term: u64,
        /// What was found.
        message: String,
    },
    /// A record could not be encoded (it is too large to frame).
    Encode(CodecError),
    /// The caller asked for something the store's invariants forbid (a bug in the caller).
    Invalid(String),
    /// An earlier write failed; the store refuses everything until the process restarts and
    /// recovers, because the caller's memory may now be ahead of the disk.
    Poisoned,
    /// A failure injected by a test ([`crate::MemStore::fail_next_commit`],
    /// [`crate::MemStore::fail_next_snapshot`]).
    Injected,
}

/// What is wrong with a log record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CorruptReason {
    /// The frame failed to decode.
    Codec(CodecError),
    /// The record is absent: the log skips from the previous LSN past this one.
    Missing,
}

impl fmt::Display for CorruptReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CorruptReason::Codec(e) => e.fmt(f),
            CorruptReason::Missing => f.write_str("the record is missing from the log"),
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Io { context, source } => write!(f, "{context}: {source}"),
            StoreError::Backend { context, message } => write!(f, "{context}: {message}"),
            StoreError::Corrupt { lsn, reason } => write!(f, "log record at LSN {lsn}: {reason}"),
            StoreError::CorruptSnapshot { lsn, reason } => {
                write!(f, "snapshot at LSN {lsn}: {reason}")
            }
            StoreError::CorruptPayload { job, reason } => {
                write!(f, "payload of job {job:?}: {reason}")
            }
            StoreError::NewerFormat { found, supported } => write!(
                f,
                "the data directory has format version {found}, newer than this build reads \
                 (up to {supported}); run a newer fairway"
            ),
            StoreError::NewerSchema { found, supported } => write!(
                f,
                "the database has fairway schema version {found}, newer than this build reads \
                 (up to {supported}); run a newer fairway"
            ),
            StoreError::Deposed { term, message } => write!(
                f,
                "deposed: this replica no longer leads (its term was {term}): {message}; \
                 nothing was written"
            ),
            StoreError::Encode(e) => write!(f, "cannot encode a record: {e}"),
            StoreError::Invalid(why) => write!(f, "invalid store request: {why}"),
            StoreError::Poisoned => f.write_str(
                "the store is poisoned by an earlier failed write; restart to recover from disk",
            ),
            StoreError::Injected => f.write_str("injected failure (test)"),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io { source, .. } => Some(source),
            StoreError::CorruptSnapshot { reason, .. }
            | StoreError::CorruptPayload { reason, .. }
            | StoreError::Encode(reason) => Some(reason),
            StoreError::Corrupt {
                reason: CorruptReason::Codec(reason),
                ..
            } => Some(reason),
            _ => None,
        }
    }
}

impl StoreError {
    /// Wraps a backend error with what the store was doing.
    pub(crate) fn backend(context: &str, error: impl fmt::Display) -> StoreError {
        StoreError::Backend {
            context: context.to_owned(),
            message: error.to_string(),
        }
    }
}
