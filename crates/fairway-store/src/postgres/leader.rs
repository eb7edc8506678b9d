//! Leader election on the `fairway_leader` row: take it when it is free or expired (raising
//! the term), renew it, resign it.
//!
//! Expiry is judged by the **database's** clock (`now()` in every statement), so replicas'
//! clocks never compare with each other here. The lease only decides when another replica may
//! take over; safety does not rest on it: every write of [`super::PgStore`] is conditioned on
//! the term in the same transaction, so a leader that lost the row commits nothing, whatever
//! its clock says.

use super::{connect, lease_param, migrate, pg_error, pool_error, sql};
use crate::StoreError;
use deadpool_postgres::Pool;
use std::time::Duration;

/// Connections the election keeps (renewals and reads; one at a time in practice).
const LEADERSHIP_POOL_SIZE: usize = 2;

/// The leader row as the database sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderRow {
    /// The holder's unique id.
    pub holder: String,
    /// The URL it advertises.
    pub address: String,
    /// Its term.
    pub term: u64,
    /// Whether its lease is unexpired now.
    pub live: bool,
    /// Milliseconds the lease has left (negative: expired that long ago).
    pub remaining_ms: i64,
}

/// One replica's side of the election: its holder id, its advertised address and its lease.
#[derive(Clone)]
pub struct Leadership {
    pool: Pool,
    holder: String,
    address: String,
    lease_ms: u64,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("holder", &self.holder)
            .field("address", &self.address)
            .field("lease_ms", &self.lease_ms)
            .finish()
    }
}

impl Leadership {
    /// Connects to the database at `url` (on the calling tokio runtime) and brings its schema up
    /// to date. `holder` must be unique per process start; `address` is what other replicas
    /// send clients to.
    pub async fn connect(
        url: &str,
        holder: &str,
        address: &str,
        lease_ms: u64,
    ) -> Result<Leadership, StoreError> {
        if lease_ms == 0 {
            return Err(StoreError::Invalid(
                "the leader lease must be at least 1 ms".into(),
            ));
        }
        // Shorter than a lease: a statement that waits on a lock longer than that is of no use.
        let session_timeout = Duration::from_millis(lease_ms.max(1_000));
        let pool = connect(url, LEADERSHIP_POOL_SIZE, session_timeout)?;
        migrate(&pool).await?;
        Ok(Leadership {
            pool,
            holder: holder.to_owned(),
            address: address.to_owned(),
            lease_ms,
        })
    }

    /// This replica's holder id.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The address it advertises.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The leader lease, in ms.
    pub fn lease_ms(&self) -> u64 {
        self.lease_ms
    }

    /// The fence a store of term `term` writes under.
    pub fn fence(&self, term: u64) -> super::Fence {
        super::Fence {
            holder: self.holder.clone(),
            term,
            lease_ms: self.lease_ms,
        }
    }

    /// Takes the leader row if it is free, expired or already ours, raising the term: returns
    /// the new term, or `None` while another replica holds an unexpired lease.
    pub async fn try_acquire(&self) -> Result<Option<u64>, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let row = client
            .query_opt(
                sql("acquire_leadership"),
                &[&self.holder, &self.address, &lease_param(self.lease_ms)],
            )
            .await
            .map_err(|e| pg_error("taking the leader row", &e))?;
        Ok(row.map(|r| u64::try_from(r.get::<_, i64>(0)).unwrap_or(0)))
    }

    /// Extends the lease of `term`: `true` if it is still ours, `false` if another replica
    /// has taken the row (deposed).
    pub async fn renew(&self, term: u64) -> Result<bool, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let term = i64::try_from(term).unwrap_or(i64::MAX);
        let n = client
            .execute(
                sql("renew_leadership"),
                &[&self.holder, &term, &lease_param(self.lease_ms)],
            )
            .await
            .map_err(|e| pg_error("renewing the leader lease", &e))?;
        Ok(n == 1)
    }

    /// Gives the row up at once (a clean stop), if `term` is still ours.
    pub async fn resign(&self, term: u64) -> Result<(), StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let term = i64::try_from(term).unwrap_or(i64::MAX);
        client
            .execute(sql("resign_leadership"), &[&self.holder, &term])
            .await
            .map_err(|e| pg_error("resigning the leader lease", &e))?;
        Ok(())
    }

    /// The leader row now, if any replica ever led.
    pub async fn current(&self) -> Result<Option<LeaderRow>, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let row = client
            .query_opt(sql("read_leader"), &[])
            .await
            .map_err(|e| pg_error("reading the leader row", &e))?;
        Ok(row.map(|r| LeaderRow {
            holder: r.get(0),
            address: r.get(1),
            term: u64::try_from(r.get::<_, i64>(2)).unwrap_or(0),
            live: r.get(3),
            remaining_ms: r.get(4),
        }))
    }

    /// Test hook: ends the current lease now, whoever holds it, so that the next
    /// [`Leadership::try_acquire`] of any replica wins (as if the holder had been gone a while).
    #[doc(hidden)]
    pub async fn expire_for_test(&self) -> Result<(), StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        client
            .execute(sql("expire_leadership"), &[])
            .await
            .map_err(|e| pg_error("expiring the leader lease", &e))?;
        Ok(())
    }
}
