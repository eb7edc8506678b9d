-- Migration 1: the event log, snapshots, job payloads, and the leader row.
--
-- Applied by `postgres::migrate` inside one transaction, after pg_advisory_xact_lock, and
-- recorded in fairway_schema. Never edit a migration that has shipped: add the next file.
--
-- Every record column holds a frame of fairway_store::codec, byte for byte what the embedded
-- backend stores: [len u32 LE][crc32 u32 LE][payload]. The database never interprets it; the
-- CHECKs below only refuse what can never be a frame.

-- The log: one row per engine event, LSNs contiguous from 1 (pruned up to the latest snapshot).
-- `term` is the leader term that wrote the row: with fencing, terms never decrease along the
-- log, which the failover tests check.
CREATE TABLE fairway_events (
    lsn    bigint PRIMARY KEY,
    term   bigint NOT NULL,
    record bytea  NOT NULL,
    CONSTRAINT events_lsn_positive CHECK (lsn > 0),
    CONSTRAINT events_term_positive CHECK (term > 0),
    CONSTRAINT events_record_is_a_frame CHECK (octet_length(record) >= 8)
);

-- Snapshots of the engine's state after event `lsn`; at most one after each snapshot commit.
CREATE TABLE fairway_snapshots (
    lsn    bigint PRIMARY KEY,
    term   bigint NOT NULL,
    record bytea  NOT NULL,
    CONSTRAINT snapshots_lsn_not_negative CHECK (lsn >= 0),
    CONSTRAINT snapshots_term_positive CHECK (term > 0),
    CONSTRAINT snapshots_record_is_a_frame CHECK (octet_length(record) >= 8)
);

-- Job payloads, put with the job's acceptance and deleted when it ends.
CREATE TABLE fairway_payloads (
    job    text  PRIMARY KEY,
    record bytea NOT NULL,
    CONSTRAINT payloads_job_bounded CHECK (octet_length(job) <= 1024),
    CONSTRAINT payloads_record_is_a_frame CHECK (octet_length(record) >= 8)
);

-- Leadership: one row. A replica leads while it holds the row with an unexpired lease; it
-- becomes leader by taking an expired row and raising the term. Every write transaction of
-- the store first updates this row conditioned on (holder, term), so once another replica has
-- raised the term, a deposed leader commits nothing.
CREATE TABLE fairway_leader (
    name        text        PRIMARY KEY,
    holder      text        NOT NULL,
    address     text        NOT NULL,
    term        bigint      NOT NULL,
    acquired_at timestamptz NOT NULL,
    renewed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    CONSTRAINT leader_single_row CHECK (name = 'scheduler'),
    CONSTRAINT leader_holder_named CHECK (octet_length(holder) BETWEEN 1 AND 512),
    CONSTRAINT leader_address_bounded CHECK (octet_length(address) <= 2048),
    CONSTRAINT leader_term_positive CHECK (term > 0),
    CONSTRAINT leader_renewed_after_acquired CHECK (renewed_at >= acquired_at),
    -- A resignation sets expires_at = renewed_at: free at once.
    CONSTRAINT leader_expires_after_renewal CHECK (expires_at >= renewed_at)
);
