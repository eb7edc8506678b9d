//! The PostgreSQL backend: several `fairway serve` replicas on one database, one leader at a
//! time, and every write fenced by the leader's term.
//!
//! Tables (migration `sql/001_initial.sql`; every record column is a frame of
//! [`crate::codec`], exactly what the embedded backend stores):
//!
//! | table               | key             | value                                          |
//! | ------------------- | --------------- | ---------------------------------------------- |
//! | `fairway_schema`    | `version`       | when it was applied                            |
//! | `fairway_events`    | `lsn`           | `term` that wrote it, framed `LogRecord`       |
//! | `fairway_snapshots` | `lsn`           | `term`, framed `SnapshotRecord`                |
//! | `fairway_payloads`  | `job`           | framed opaque bytes                            |
//! | `fairway_leader`    | `'scheduler'`   | holder, address, term, acquired/renewed/expiry |
//!
//! [`PgStore`] is the [`EventStore`]: each [`EventStore::commit`] is **one** transaction that
//! first runs the `fence` statement (the leader row must still name this store's holder and
//! term: exactly one row, or the transaction is rolled back and the store answers
//! [`StoreError::Deposed`]), then appends the batch's events with one `unnest` insert, puts
//! and deletes its payloads with one statement each, and commits. PostgreSQL makes a commit
//! durable once its WAL record is flushed (`synchronous_commit = on`, the default).
//!
//! [`leader`] elects: a replica takes the leader row when it is expired, raising the term, and
//! renews it; see `docs/store.md` for the fencing argument.
//!
//! The statements are named, in `sql/queries.sql`; migrations are embedded with `include_str!`
//! and applied by [`migrate`] in one transaction under `pg_advisory_xact_lock`.
//!
//! The trait is synchronous, like the server's writer thread that calls it, so a [`PgStore`]
//! drives tokio-postgres on a one-thread runtime of its own.

pub mod leader;
#[doc(hidden)]
pub mod testing;

use crate::codec::{self, CodecError};
use crate::{Batch, EventStore, Lsn, Recovered, StoreError};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::OnceLock;
use std::time::Duration;
use tokio_postgres::NoTls;

pub use leader::{LeaderRow, Leadership};

/// The migrations, in order: `(version, SQL)`. The newest version is the schema this build
/// writes and the newest it reads.
const MIGRATIONS: &[(i32, &str)] = &[(1, include_str!("sql/001_initial.sql"))];

/// The schema version this build writes, and the newest it reads.
pub const SCHEMA_VERSION: i32 = 1;

/// The key of the advisory lock that serialises migrations ("fairway!" in ASCII).
const MIGRATION_LOCK: i64 = 0x6661_6972_7761_7921;

/// Connections a store keeps: the writer uses one at a time; a second serves payload reads.
const STORE_POOL_SIZE: usize = 2;

/// How long to wait for a connection to the database.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The named statements of `sql/queries.sql`.
fn sql(name: &str) -> &'static str {
    static QUERIES: OnceLock<BTreeMap<&'static str, &'static str>> = OnceLock::new();
    let queries = QUERIES.get_or_init(|| parse_named(include_str!("sql/queries.sql")));
    // The names are constants of this module, checked by a unit test: a miss is a bug here.
    queries
        .get(name)
        .copied()
        .unwrap_or_else(|| panic!("no statement named {name:?} in sql/queries.sql"))
}

/// Splits a file of `-- name: NAME` sections into statements (comments and blank lines at the
/// ends of a section are kept; PostgreSQL ignores them).
fn parse_named(text: &'static str) -> BTreeMap<&'static str, &'static str> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while let Some(at) = rest.find("-- name: ") {
        let after = &rest[at + "-- name: ".len()..];
        let name_end = after.find('\n').unwrap_or(after.len());
        let name = after[..name_end].trim();
        let body = &after[name_end..];
        let end = body.find("-- name: ").unwrap_or(body.len());
        out.insert(name, body[..end].trim());
        rest = &body[end..];
    }
    out
}

/// A database error with what the store was doing, and PostgreSQL's own message and code.
fn pg_error(context: &str, e: &tokio_postgres::Error) -> StoreError {
    let message = match e.as_db_error() {
        Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                text.push_str(": ");
                text.push_str(&s.to_string());
                source = s.source();
            }
            text
        }
    };
    StoreError::Backend {
        context: context.to_owned(),
        message,
    }
}

fn pool_error(e: deadpool_postgres::PoolError) -> StoreError {
    StoreError::backend("connecting to PostgreSQL", e)
}

/// A connection pool to the database at `url` (a `postgres://` URL or a key=value connection
/// string), created on the calling tokio runtime.
///
/// Every session gets `idle_in_transaction_session_timeout` and `lock_timeout` of
/// `session_timeout`: a leader paused (SIGSTOP, a long GC-like stall) in the middle of a write
/// transaction would otherwise hold the leader row's lock and block every takeover; PostgreSQL
/// ends such a session instead, which rolls the transaction back.
pub fn connect(url: &str, size: usize, session_timeout: Duration) -> Result<Pool, StoreError> {
    let mut config = tokio_postgres::Config::from_str(url).map_err(|e| StoreError::Backend {
        context: "reading the PostgreSQL connection URL".into(),
        message: e.to_string(),
    })?;
    let ms = session_timeout.as_millis().max(1);
    let extra = format!("-c idle_in_transaction_session_timeout={ms} -c lock_timeout={ms}");
    let options = match config.get_options() {
        Some(existing) if !existing.trim().is_empty() => format!("{existing} {extra}"),
        _ => extra,
    };
    config.options(&options);
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("fairway");
    }
    let manager = Manager::from_config(
        config,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size.max(1))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .wait_timeout(Some(CONNECT_TIMEOUT * 2))
        .create_timeout(Some(CONNECT_TIMEOUT))
        .build()
        .map_err(|e| StoreError::backend("creating the PostgreSQL pool", e))
}

/// Brings the schema to [`SCHEMA_VERSION`]: one transaction, under an advisory lock so that
/// replicas starting together apply each migration once, recorded in `fairway_schema`. A
/// database with a newer schema is refused ([`StoreError::NewerSchema`]) and left untouched.
pub async fn migrate(pool: &Pool) -> Result<(), StoreError> {
    let mut client = pool.get().await.map_err(pool_error)?;
    let txn = client
        .transaction()
        .await
        .map_err(|e| pg_error("beginning the migration", &e))?;
    txn.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(|e| pg_error("taking the migration lock", &e))?;
    txn.batch_execute(sql("schema_table"))
        .await
        .map_err(|e| pg_error("creating fairway_schema", &e))?;
    let current: i32 = txn
        .query_one(sql("schema_version"), &[])
        .await
        .map_err(|e| pg_error("reading the schema version", &e))?
        .get(0);
    if current > SCHEMA_VERSION {
        // Dropping the transaction rolls it back: nothing is written.
        return Err(StoreError::NewerSchema {
            found: i64::from(current),
            supported: i64::from(SCHEMA_VERSION),
        });
    }
    for (version, text) in MIGRATIONS {
        if *version <= current {
            continue;
        }
        txn.batch_execute(text)
            .await
            .map_err(|e| pg_error(&format!("applying migration {version}"), &e))?;
        txn.execute(sql("record_migration"), &[version])
            .await
            .map_err(|e| pg_error("recording the migration", &e))?;
    }
    txn.commit()
        .await
        .map_err(|e| pg_error("committing the migration", &e))
}

/// What a [`PgStore`] writes under: the leader row must name this holder and term in every
/// write transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fence {
    /// The replica's unique holder id (one per process start).
    pub holder: String,
    /// The term it won.
    pub term: u64,
    /// The leader lease, in ms: each write renews the lease this long.
    pub lease_ms: u64,
}

/// The PostgreSQL [`EventStore`], fenced by a leader term. See the module documentation.
pub struct PgStore {
    /// `Some` until drop; its own runtime, because the trait is synchronous.
    runtime: Option<tokio::runtime::Runtime>,
    pool: Pool,
    fence: Fence,
    last_lsn: Lsn,
    snapshot_lsn: Option<Lsn>,
    poisoned: bool,
    fail_next_commit: bool,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("fence", &self.fence)
            .field("last_lsn", &self.last_lsn)
            .field("snapshot_lsn", &self.snapshot_lsn)
            .field("poisoned", &self.poisoned)
            .finish()
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        // Safe from any context, an async one included (a plain drop of a runtime is not).
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A lease length as the `bigint` milliseconds the statements take.
fn lease_param(lease_ms: u64) -> i64 {
    i64::try_from(lease_ms).unwrap_or(i64::MAX)
}

fn lsn_param(lsn: Lsn) -> Result<i64, StoreError> {
    i64::try_from(lsn).map_err(|_| StoreError::Invalid(format!("LSN {lsn} is beyond bigint")))
}

impl PgStore {
    /// Opens the store at `url` to write under `fence`: connects, migrates, and reads the log's
    /// bounds. Open it only after winning `fence.term` ([`Leadership::try_acquire`]), so that
    /// every commit of an earlier term is either visible here or refused.
    pub fn open(url: &str, fence: Fence) -> Result<PgStore, StoreError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("fairway-pg")
            .enable_all()
            .build()
            .map_err(|source| StoreError::Io {
                context: "starting the PostgreSQL store's runtime".into(),
                source,
            })?;
        let session_timeout = Duration::from_millis(fence.lease_ms.max(1_000));
        let pool = runtime.block_on(async {
            let pool = connect(url, STORE_POOL_SIZE, session_timeout)?;
            migrate(&pool).await?;
            Ok::<_, StoreError>(pool)
        })?;
        let mut store = PgStore {
            runtime: Some(runtime),
            pool,
            fence,
            last_lsn: 0,
            snapshot_lsn: None,
            poisoned: false,
            fail_next_commit: false,
        };
        let (last_lsn, snapshot_lsn) = store.block_on(store.read_bounds())?;
        store.last_lsn = last_lsn;
        store.snapshot_lsn = snapshot_lsn;
        Ok(store)
    }

    /// Opens the store at `url` as its leader: migrates, takes the leader row (it must be free
    /// or expired) under `holder` and `address` with a lease of `lease_ms`, and opens fenced by
    /// the term won. For tools and tests with a single writer; a server replica elects with
    /// [`Leadership`] and renews.
    pub fn open_leading(
        url: &str,
        holder: &str,
        address: &str,
        lease_ms: u64,
    ) -> Result<PgStore, StoreError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| StoreError::Io {
                context: "starting a runtime".into(),
                source,
            })?;
        let term = runtime.block_on(async {
            let leadership = Leadership::connect(url, holder, address, lease_ms).await?;
            leadership.try_acquire().await
        })?;
        let Some(term) = term else {
            return Err(StoreError::Deposed {
                term: 0,
                message: "another replica holds an unexpired leader lease".into(),
            });
        };
        PgStore::open(
            url,
            Fence {
                holder: holder.to_owned(),
                term,
                lease_ms,
            },
        )
    }

    /// The fence this store writes under.
    pub fn fence_of(&self) -> &Fence {
        &self.fence
    }

    /// Test hook: the next commit with anything in it fails after writing its rows into the
    /// transaction but before committing it (the transaction is rolled back).
    #[doc(hidden)]
    pub fn fail_next_commit(&mut self) {
        self.fail_next_commit = true;
    }

    /// Test hook: how many event rows the database holds (pruned ones are gone).
    #[doc(hidden)]
    pub fn stored_event_count(&self) -> Result<u64, StoreError> {
        self.block_on(async {
            let client = self.pool.get().await.map_err(pool_error)?;
            let n: i64 = client
                .query_one("SELECT count(*) FROM fairway_events", &[])
                .await
                .map_err(|e| pg_error("counting events", &e))?
                .get(0);
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }

    /// Test hook: rewrites the stored frame of the event (or, with `snapshot`, the snapshot) at
    /// `lsn`: flips a bit in its middle, or deletes the row with `remove`. Returns whether a row
    /// was there.
    #[doc(hidden)]
    pub fn tamper(&self, lsn: Lsn, snapshot: bool, remove: bool) -> Result<bool, StoreError> {
        let table = if snapshot {
            "fairway_snapshots"
        } else {
            "fairway_events"
        };
        let statement = if remove {
            format!("DELETE FROM {table} WHERE lsn = $1")
        } else {
            // set_byte/get_byte index from 0; xor 16 flips one bit, as the other backends do.
            format!(
                "UPDATE {table} SET record = set_byte(record, octet_length(record) / 2, \
                 get_byte(record, octet_length(record) / 2) # 16) WHERE lsn = $1"
            )
        };
        let lsn = lsn_param(lsn)?;
        self.block_on(async {
            let client = self.pool.get().await.map_err(pool_error)?;
            let n = client
                .execute(statement.as_str(), &[&lsn])
                .await
                .map_err(|e| pg_error("tampering", &e))?;
            Ok(n == 1)
        })
    }

    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        match &self.runtime {
            Some(runtime) => runtime.block_on(future),
            // Only `drop` takes the runtime.
            None => unreachable!("the store's runtime is gone only after drop"),
        }
    }

    fn check_poisoned(&self) -> Result<(), StoreError> {
        crate::unpoisoned(self.poisoned)
    }

    async fn read_bounds(&self) -> Result<(Lsn, Option<Lsn>), StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let row = client
            .query_one(sql("log_bounds"), &[])
            .await
            .map_err(|e| pg_error("reading the log bounds", &e))?;
        let last: i64 = row.get(0);
        let snapshot: Option<i64> = row.get(1);
        Ok((
            u64::try_from(last).unwrap_or(0),
            snapshot.and_then(|s| u64::try_from(s).ok()),
        ))
    }

    /// Runs the fence statement in `txn`: exactly one row, or this replica was deposed.
    async fn fence_in(&self, txn: &deadpool_postgres::Transaction<'_>) -> Result<(), StoreError> {
        let term = i64::try_from(self.fence.term).unwrap_or(i64::MAX);
        let updated = txn
            .execute(
                sql("fence"),
                &[&self.fence.holder, &term, &lease_param(self.fence.lease_ms)],
            )
            .await
            .map_err(|e| pg_error("checking the leader term", &e))?;
        if updated == 1 {
            Ok(())
        } else {
            Err(StoreError::Deposed {
                term: self.fence.term,
                message: "the leader row no longer names this replica and term".into(),
            })
        }
    }

    async fn commit_inner(&mut self, batch: &Batch) -> Result<Lsn, StoreError> {
        // Encode everything before the transaction starts: a record that cannot be framed
        // fails the commit without touching the database.
        let frames = batch
            .events
            .iter()
            .map(codec::encode_event)
            .collect::<Result<Vec<_>, CodecError>>()
            .map_err(StoreError::Encode)?;
        // A later put of the same job replaces an earlier one; one statement cannot update a
        // row twice, so keep the last put per job, in first-put order.
        let mut last_put: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, (job, _)) in batch.put_payloads.iter().enumerate() {
            last_put.insert(job.as_str(), i);
        }
        let mut put_jobs = Vec::with_capacity(last_put.len());
        let mut put_frames = Vec::with_capacity(last_put.len());
        for (i, (job, bytes)) in batch.put_payloads.iter().enumerate() {
            if last_put.get(job.as_str()) == Some(&i) {
                put_jobs.push(job.as_str());
                put_frames.push(codec::encode_blob(bytes).map_err(StoreError::Encode)?);
            }
        }
        let first = self.last_lsn + 1;
        let lsns = (first..first + frames.len() as u64)
            .map(lsn_param)
            .collect::<Result<Vec<i64>, _>>()?;
        let term = i64::try_from(self.fence.term).unwrap_or(i64::MAX);

        let mut client = self.pool.get().await.map_err(pool_error)?;
        let txn = client
            .transaction()
            .await
            .map_err(|e| pg_error("beginning a commit", &e))?;
        self.fence_in(&txn).await?;
        if !frames.is_empty() {
            let statement = txn
                .prepare_cached(sql("append_events"))
                .await
                .map_err(|e| pg_error("preparing append_events", &e))?;
            txn.execute(&statement, &[&term, &lsns, &frames])
                .await
                .map_err(|e| pg_error("appending events", &e))?;
        }
        if !put_jobs.is_empty() {
            txn.execute(sql("put_payloads"), &[&put_jobs, &put_frames])
                .await
                .map_err(|e| pg_error("storing payloads", &e))?;
        }
        if !batch.delete_payloads.is_empty() {
            txn.execute(sql("delete_payloads"), &[&batch.delete_payloads])
                .await
                .map_err(|e| pg_error("deleting payloads", &e))?;
        }
        if std::mem::take(&mut self.fail_next_commit) {
            let _ = txn.rollback().await;
            return Err(StoreError::Injected);
        }
        txn.commit().await.map_err(|e| pg_error("committing", &e))?;
        Ok(self.last_lsn + frames.len() as u64)
    }

    async fn put_snapshot_inner(&self, lsn: Lsn, bytes: &[u8]) -> Result<(), StoreError> {
        crate::check_snapshot_lsn(lsn, self.last_lsn, self.snapshot_lsn)?;
        let frame = codec::encode_snapshot(bytes).map_err(StoreError::Encode)?;
        let lsn = lsn_param(lsn)?;
        let term = i64::try_from(self.fence.term).unwrap_or(i64::MAX);
        let mut client = self.pool.get().await.map_err(pool_error)?;
        let txn = client
            .transaction()
            .await
            .map_err(|e| pg_error("beginning a snapshot", &e))?;
        self.fence_in(&txn).await?;
        txn.execute(sql("put_snapshot"), &[&lsn, &term, &frame])
            .await
            .map_err(|e| pg_error("storing a snapshot", &e))?;
        // Pruning in the same transaction: the snapshot and the pruning become durable
        // together, so there is never a moment with neither the events nor the snapshot.
        txn.execute(sql("prune_snapshots"), &[&lsn])
            .await
            .map_err(|e| pg_error("pruning older snapshots", &e))?;
        txn.execute(sql("prune_events"), &[&lsn])
            .await
            .map_err(|e| pg_error("pruning events", &e))?;
        txn.commit()
            .await
            .map_err(|e| pg_error("committing a snapshot", &e))
    }

    async fn check_term(&self) -> Result<(), StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let term = i64::try_from(self.fence.term).unwrap_or(i64::MAX);
        let rows = client
            .query(sql("check_term"), &[&self.fence.holder, &term])
            .await
            .map_err(|e| pg_error("checking the leader term", &e))?;
        if rows.len() == 1 {
            Ok(())
        } else {
            Err(StoreError::Deposed {
                term: self.fence.term,
                message: "the leader row no longer names this replica and term".into(),
            })
        }
    }

    async fn recover_inner(&self) -> Result<Recovered, StoreError> {
        let mut client = self.pool.get().await.map_err(pool_error)?;
        // One consistent view of the snapshot and the log after it.
        let txn = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(|e| pg_error("beginning recovery", &e))?;
        let snapshot = txn
            .query_opt(sql("latest_snapshot"), &[])
            .await
            .map_err(|e| pg_error("reading the latest snapshot", &e))?
            .map(|row| {
                let lsn: i64 = row.get(0);
                let record: Vec<u8> = row.get(1);
                (u64::try_from(lsn).unwrap_or(0), record)
            });
        let from = snapshot.as_ref().map_or(1, |(lsn, _)| lsn + 1);
        let rows = txn
            .query(sql("events_from"), &[&lsn_param(from)?])
            .await
            .map_err(|e| pg_error("reading events", &e))?;
        txn.commit()
            .await
            .map_err(|e| pg_error("ending recovery", &e))?;
        let events = rows.into_iter().map(|row| {
            let lsn: i64 = row.get(0);
            let record: Vec<u8> = row.get(1);
            Ok((u64::try_from(lsn).unwrap_or(0), record))
        });
        crate::recover_from_records(
            snapshot
                .as_ref()
                .map(|(lsn, frame)| (*lsn, frame.as_slice())),
            events,
            self.last_lsn,
        )
    }

    /// The payloads of `jobs` in one statement (one round trip, however many jobs).
    async fn payloads_inner(&self, jobs: &[&str]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let rows = client
            .query(sql("payloads"), &[&jobs])
            .await
            .map_err(|e| pg_error("reading payloads", &e))?;
        let found: BTreeMap<String, Vec<u8>> = rows
            .into_iter()
            .map(|row| (row.get::<_, String>(0), row.get::<_, Vec<u8>>(1)))
            .collect();
        jobs.iter()
            .map(|&job| match found.get(job) {
                None => Ok(None),
                Some(frame) => codec::decode_blob(frame).map(Some).map_err(|reason| {
                    StoreError::CorruptPayload {
                        job: job.to_owned(),
                        reason,
                    }
                }),
            })
            .collect()
    }
}

impl EventStore for PgStore {
    fn commit(&mut self, batch: &Batch) -> Result<Lsn, StoreError> {
        self.check_poisoned()?;
        if batch.is_empty() {
            return Ok(self.last_lsn);
        }
        let runtime = self.runtime.take();
        let result = match &runtime {
            Some(rt) => rt.block_on(self.commit_inner(batch)),
            None => unreachable!("the store's runtime is gone only after drop"),
        };
        self.runtime = runtime;
        // A lost connection during COMMIT leaves the outcome unknown, as in the embedded store.
        self.last_lsn = crate::poison_on_error(&mut self.poisoned, result)?;
        Ok(self.last_lsn)
    }

    fn put_snapshot(&mut self, lsn: Lsn, bytes: &[u8]) -> Result<(), StoreError> {
        self.check_poisoned()?;
        let result = self.block_on(self.put_snapshot_inner(lsn, bytes));
        crate::poison_on_error(&mut self.poisoned, result)?;
        self.snapshot_lsn = Some(lsn);
        Ok(())
    }

    fn recover(&mut self) -> Result<Recovered, StoreError> {
        self.check_poisoned()?;
        self.block_on(self.recover_inner())
    }

    fn payload(&self, job: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.payloads(&[job])?.pop().flatten())
    }

    fn payloads(&self, jobs: &[&str]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.check_poisoned()?;
        self.block_on(self.payloads_inner(jobs))
    }

    fn last_lsn(&self) -> Lsn {
        self.last_lsn
    }

    fn fence(&mut self) -> Result<(), StoreError> {
        self.check_poisoned()?;
        let result = self.block_on(self.check_term());
        crate::poison_on_error(&mut self.poisoned, result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every statement the module names is in `sql/queries.sql`, and each is non-empty.
    #[test]
    fn every_named_statement_exists() {
        let named = parse_named(include_str!("sql/queries.sql"));
        for name in [
            "schema_table",
            "schema_version",
            "record_migration",
            "fence",
            "check_term",
            "log_bounds",
            "append_events",
            "put_payloads",
            "delete_payloads",
            "put_snapshot",
            "prune_snapshots",
            "prune_events",
            "latest_snapshot",
            "events_from",
            "payloads",
            "acquire_leadership",
            "renew_leadership",
            "resign_leadership",
            "read_leader",
            "expire_leadership",
        ] {
            let text = named.get(name).unwrap_or_else(|| panic!("{name} missing"));
            assert!(
                text.lines().any(|l| !l.trim_start().starts_with("--")),
                "{name} has no SQL"
            );
        }
    }

    /// Migrations are numbered from 1 without a gap, and the newest is the schema version.
    #[test]
    fn migrations_are_contiguous() {
        for (i, (version, _)) in MIGRATIONS.iter().enumerate() {
            assert_eq!(*version, i as i32 + 1);
        }
        assert_eq!(MIGRATIONS.last().map(|m| m.0), Some(SCHEMA_VERSION));
    }
}
