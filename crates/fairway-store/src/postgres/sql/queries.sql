-- The PostgreSQL backend's statements, one section per statement, each headed by a comment
-- line giving its name; src/postgres/mod.rs looks them up with `sql("NAME")`. Parameters are
-- positional; each statement says what they are.

-- name: schema_table
-- Run under the migration lock, before reading the version.
CREATE TABLE IF NOT EXISTS fairway_schema (
    version    integer     PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT schema_version_positive CHECK (version > 0)
)

-- name: schema_version
SELECT coalesce(max(version), 0)::integer FROM fairway_schema

-- name: record_migration
-- $1 version
INSERT INTO fairway_schema (version) VALUES ($1)

-- name: fence
-- $1 holder, $2 term, $3 lease in ms.
-- The first statement of every write transaction. It must update exactly one row, or the
-- caller rolls back: the leader row no longer names this holder and term, so this replica was
-- deposed and may commit nothing. The row lock it takes orders this transaction against a
-- takeover (which updates the same row). It renews the lease too: a busy leader stays leader.
UPDATE fairway_leader
   SET renewed_at = now(),
       expires_at = greatest(expires_at, now() + $3::bigint * interval '1 millisecond')
 WHERE name = 'scheduler' AND holder = $1 AND term = $2

-- name: check_term
-- $1 holder, $2 term. One row while this holder still has the term. Checked before answering a
-- turn that committed nothing: a read that sees the term was taken by no one at that moment,
-- so answering from this replica's state is answering from the latest committed state. It
-- writes nothing (no WAL flush per read-only turn).
SELECT 1 FROM fairway_leader WHERE name = 'scheduler' AND holder = $1 AND term = $2

-- name: log_bounds
-- The last LSN: the log ends at the later of its last event and its latest snapshot (events are
-- pruned only up to a snapshot); and the latest snapshot's LSN, if any.
SELECT greatest((SELECT max(lsn) FROM fairway_events), (SELECT max(lsn) FROM fairway_snapshots), 0)::bigint,
       (SELECT max(lsn) FROM fairway_snapshots)

-- name: append_events
-- $1 term, $2 LSNs, $3 frames: a whole group commit's events in one statement.
INSERT INTO fairway_events (lsn, term, record)
SELECT batch.lsn, $1::bigint, batch.record
  FROM unnest($2::bigint[], $3::bytea[]) AS batch(lsn, record)

-- name: put_payloads
-- $1 job ids (distinct), $2 frames. A put replaces an earlier payload.
INSERT INTO fairway_payloads (job, record)
SELECT batch.job, batch.record
  FROM unnest($1::text[], $2::bytea[]) AS batch(job, record)
    ON CONFLICT (job) DO UPDATE SET record = excluded.record

-- name: delete_payloads
-- $1 job ids. Absent ones are ignored.
DELETE FROM fairway_payloads WHERE job = ANY($1::text[])

-- name: put_snapshot
-- $1 LSN, $2 term, $3 frame. A second snapshot at the same LSN replaces the first.
INSERT INTO fairway_snapshots (lsn, term, record) VALUES ($1, $2, $3)
    ON CONFLICT (lsn) DO UPDATE SET term = excluded.term, record = excluded.record

-- name: prune_snapshots
-- $1 the new snapshot's LSN.
DELETE FROM fairway_snapshots WHERE lsn < $1

-- name: prune_events
-- $1 the new snapshot's LSN: the events it covers.
DELETE FROM fairway_events WHERE lsn <= $1

-- name: latest_snapshot
SELECT lsn, record FROM fairway_snapshots ORDER BY lsn DESC LIMIT 1

-- name: events_from
-- $1 the first LSN wanted.
SELECT lsn, record FROM fairway_events WHERE lsn >= $1 ORDER BY lsn

-- name: payloads
-- $1 job ids. The stored ones, in no particular order (the caller matches them by job).
SELECT job, record FROM fairway_payloads WHERE job = ANY($1::text[])

-- name: acquire_leadership
-- $1 holder, $2 advertised address, $3 lease in ms. Takes the leader row if it is free (first
-- start), expired, or already this holder's, raising the term; returns the new term, or no row
-- when another replica holds an unexpired lease.
INSERT INTO fairway_leader AS l (name, holder, address, term, acquired_at, renewed_at, expires_at)
VALUES ('scheduler', $1, $2, 1, now(), now(), now() + $3::bigint * interval '1 millisecond')
    ON CONFLICT (name) DO UPDATE
   SET holder = excluded.holder,
       address = excluded.address,
       term = l.term + 1,
       acquired_at = now(),
       renewed_at = now(),
       expires_at = excluded.expires_at
 WHERE l.expires_at <= now() OR l.holder = excluded.holder
RETURNING term

-- name: renew_leadership
-- $1 holder, $2 term, $3 lease in ms. No row updated: deposed.
UPDATE fairway_leader
   SET renewed_at = now(), expires_at = now() + $3::bigint * interval '1 millisecond'
 WHERE name = 'scheduler' AND holder = $1 AND term = $2

-- name: resign_leadership
-- $1 holder, $2 term. Frees the row at once, so that another replica takes over without waiting
-- for the lease to run out.
UPDATE fairway_leader
   SET renewed_at = now(), expires_at = now()
 WHERE name = 'scheduler' AND holder = $1 AND term = $2

-- name: read_leader
-- Who leads, as the database sees it now: holder, address, term, whether the lease is live,
-- and the ms it has left (negative when expired).
SELECT holder, address, term, expires_at > now(),
       (extract(epoch FROM (expires_at - now())) * 1000)::bigint
  FROM fairway_leader
 WHERE name = 'scheduler'

-- name: expire_leadership
-- Test hook: ends the current lease now, as if its holder had stopped renewing long ago.
UPDATE fairway_leader SET renewed_at = acquired_at, expires_at = acquired_at WHERE name = 'scheduler'
