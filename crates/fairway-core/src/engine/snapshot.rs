//! Snapshots: the engine's durable state in one record, so that a restart does not replay all
//! history. `restore(snapshot(e))` gives an engine whose durable state equals `e`'s (checked by
//! `durable_view`), and whose balances and queue order are the same, so later decisions are
//! the same for the same inputs. Ephemeral state (workers' capacity, placement groups, the
//! index, decision records) is not in it: it is rebuilt as workers report.
//!
//! The record is versioned (`SnapshotRecord`) and encoded with postcard; never reorder its
//! fields. V2 is V1 (whose `drain` it leaves empty) followed by what V2 added: admission's
//! meters. A V1 snapshot restores with no meters (admission starts from capacity).

use super::expiry_list::Link;
use super::finished::{FinishedJobs, FinishedSnap, Piece};
use super::meter::RateMeter;
use super::state::{Attempt, Drr, Estimator, Job, Ledger, Node, NodeKind};
use super::{Engine, EngineConfig, EngineStats};
use crate::event::{Event, StopReason};
use crate::ids::{CHAIN_MAX, Chain, JobIdx, NodeIdx, ShapeId, TenantIdx, WorkerIdx};
use crate::job::JobState;
use crate::policy::Policy;
use crate::queue::OrderKey;
use crate::resources::ResVec;
use crate::time::{Dur, Time};
use crate::varint::{varint, varint_len, varint128, zigzag};
use crate::weight::Weight;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt::Write;
use std::sync::Arc;

/// A snapshot's bytes in pieces, one after the other ([`Engine::snapshot_pieces`]): what the
/// engine encoded for it, and the full chunks of its finished jobs' records, shared with the
/// engine rather than copied (on a busy server most of the snapshot: the jobs remembered for
/// idempotency). Whoever writes it out writes the pieces in order; [`SnapshotPieces::to_vec`]
/// joins them.
#[derive(Default)]
pub struct SnapshotPieces {
    pieces: Vec<SnapshotPiece>,
    len: usize,
}

enum SnapshotPiece {
    Encoded(Vec<u8>),
    /// A full chunk of finished records, from an offset on.
    Shared(Arc<Vec<u8>>, usize),
}

impl SnapshotPieces {
    fn push(&mut self, piece: SnapshotPiece) {
        self.len += match &piece {
            SnapshotPiece::Encoded(bytes) => bytes.len(),
            SnapshotPiece::Shared(bytes, from) => bytes.len() - from,
        };
        self.pieces.push(piece);
    }

    /// The snapshot's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no bytes at all (never, for a snapshot an engine took).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pieces, in order: their concatenation is the snapshot.
    pub fn slices(&self) -> impl Iterator<Item = &[u8]> {
        self.pieces.iter().map(|piece| match piece {
            SnapshotPiece::Encoded(bytes) => bytes.as_slice(),
            SnapshotPiece::Shared(bytes, from) => &bytes[*from..],
        })
    }

    /// The snapshot in one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for slice in self.slices() {
            out.extend_from_slice(slice);
        }
        out
    }
}

/// `J` and `F` are how the live and the finished jobs are held when decoded: a `Vec` of each.
/// A snapshot is not encoded through this type as a whole: [`Engine::snapshot_pieces`] writes
/// its parts in this order, the live jobs by hand in the head's place for them
/// ([`LiveJobsSlot`]), the finished jobs' records as the engine keeps them.
#[derive(Serialize, Deserialize)]
enum SnapshotRecord<J = Vec<JobSnap<'static>>, F = Vec<FinishedSnap<'static>>> {
    V1(SnapshotV1<J, F>),
    V2(SnapshotV1<J, F>, SnapshotV2),
}

/// The index of [`SnapshotRecord::V2`] among its variants, as postcard writes it first.
const V2_VARIANT: u32 = 1;

/// What V2 added to V1.
#[derive(Serialize, Deserialize, Default)]
struct SnapshotV2 {
    /// Shapes' meters, live and archived, by description.
    shape_meters: Vec<(JobSpecShape, RateMeter)>,
    /// Leaves' meters, by node index (nodes restore in order).
    leaf_meters: Vec<(u32, RateMeter)>,
    /// Each class's estimator, by class index.
    class_estimators: Vec<Estimator>,
}

/// V1's measured drain (completed cost per window), no longer used.
#[derive(Serialize, Deserialize, Clone, Copy)]
struct DrainV1 {
    window_cost: u128,
    window_start: Time,
    rate: u128,
    windows: u32,
}

/// V1's record. postcard writes a struct as its fields one after the other, with nothing
/// around them, so the three parts encode exactly as the flat list of fields they were first
/// written as (`tests::the_split_record_encodes_as_the_flat_one`); the split lets a snapshot
/// write the finished jobs' bytes between the two others as the engine keeps them.
#[derive(Serialize, Deserialize)]
struct SnapshotV1<J = Vec<JobSnap<'static>>, F = Vec<FinishedSnap<'static>>> {
    head: SnapshotHead<J>,
    finished: F,
    tail: SnapshotTail,
}

/// V1's fields before the finished jobs.
#[derive(Serialize, Deserialize)]
struct SnapshotHead<J = Vec<JobSnap<'static>>> {
    policy_version: u64,
    policy_source: String,
    now: Time,
    seq: u64,
    resources: Vec<String>,
    classes: Vec<ClassSnap>,
    tenants: Vec<TenantSnap>,
    nodes: Vec<NodeSnap>,
    workers: Vec<(u32, String, String)>,
    worker_slots: u32,
    pools: Vec<(String, Ledger)>,
    jobs: J,
    free_jobs: Vec<u32>,
    job_slots: u32,
}

/// V1's fields after the finished jobs.
#[derive(Serialize, Deserialize)]
struct SnapshotTail {
    gps_v: u128,
    gps_at: Time,
    gps_backlog: Vec<(u128, u32)>,
    gps_last_finish: Vec<(u32, u128)>,
    gps_weight_sum: u128,
    drr_round: u128,
    drr_position: u64,
    /// Empty since V2.
    drain: Vec<(u16, JobSpecShape, DrainV1)>,
    stats: EngineStats,
}

#[derive(Serialize, Deserialize)]
struct ClassSnap {
    name: String,
    ledger: Ledger,
    deadline_misses: u64,
}

#[derive(Serialize, Deserialize)]
struct TenantSnap {
    name: String,
    tokens: u128,
    tokens_at: Time,
    retry_used: u128,
    retry_since: Time,
    ledger: Ledger,
    estimators: Vec<(u16, Estimator)>,
    admitted: [u64; 3],
}

#[derive(Serialize, Deserialize)]
struct NodeSnap {
    /// 0 root, 1 tenant, 2 band, 3 flat.
    kind: u8,
    tenant: u32,
    class: u16,
    parent: u32,
    vtime: u128,
    child_v: u128,
    drr: Drr,
}

/// The placement part of a job as names, to re-intern its shape.
#[derive(Serialize, Deserialize, Clone)]
struct JobSpecShape {
    demand: ResVec,
    requires: Vec<(String, String)>,
    class: u16,
    preemptible: bool,
    gang: u32,
    gang_min: u32,
}

/// The largest value a restored counter may hold: no engine counts that far, and one that
/// claims to would overflow at its next step (fuzz finding F12).
const COUNTER_MAX: u64 = u64::MAX / 2;

impl SnapshotV1 {
    /// What a snapshot claims about sizes, checked before anything is allocated from it (fuzz
    /// finding F11: a 1.2 KB snapshot claimed 750 GB of job slots).
    fn check_bounds(&self) -> Result<(), String> {
        let slots = self.head.job_slots as usize;
        if slots != self.head.jobs.len() + self.head.free_jobs.len() {
            return Err(format!(
                "snapshot claims {slots} job slots for {} jobs and {} free slots",
                self.head.jobs.len(),
                self.head.free_jobs.len()
            ));
        }
        let mut used = vec![false; slots];
        for slot in self
            .head
            .jobs
            .iter()
            .map(|j| j.slot)
            .chain(self.head.free_jobs.iter().copied())
        {
            match used.get_mut(slot as usize) {
                Some(u) if !*u => *u = true,
                Some(_) => return Err(format!("snapshot job slot {slot} used twice")),
                None => return Err(format!("snapshot job slot {slot} out of range")),
            }
        }
        if self.head.worker_slots as usize > crate::shape::MAX_WORKERS {
            return Err(format!(
                "snapshot claims {} worker slots, more than the {} workers an engine keeps",
                self.head.worker_slots,
                crate::shape::MAX_WORKERS
            ));
        }
        let st = &self.tail.stats;
        let counters = [
            st.dispatches,
            st.backfills,
            st.preemptions,
            st.lease_expiries,
            st.stale_epochs,
            st.expired,
            st.failures,
            st.retries,
            st.passes,
            st.candidates_examined,
            self.head.seq,
            self.tail.drr_position,
        ];
        if counters.iter().any(|&c| c > COUNTER_MAX) {
            return Err("snapshot holds a counter out of range".to_string());
        }
        Ok(())
    }

    /// The tree is one: a root first, every other node's parent before it, every tenant and
    /// class it names in the snapshot, of the kinds the policy's tree shape has, and a node for
    /// every tenant (fuzz finding F10: a tree without a root, or with indices out of range,
    /// was accepted and then indexed out of bounds).
    fn check_tree(&self, tenants: usize, shape: super::state::TreeShape) -> Result<(), String> {
        use super::state::TreeShape;
        let root = self.head.nodes.first().ok_or("snapshot tree has no root")?;
        if root.kind != 0 || root.parent != u32::MAX {
            return Err("snapshot tree does not start at its root".to_string());
        }
        let mut has_node = vec![false; tenants];
        for (i, n) in self.head.nodes.iter().enumerate().skip(1) {
            if n.parent as usize >= i {
                return Err(format!(
                    "snapshot node {i}: parent {} not before it",
                    n.parent
                ));
            }
            if n.tenant as usize >= tenants {
                return Err(format!("snapshot node {i}: tenant {} unknown", n.tenant));
            }
            if n.class as usize >= self.head.classes.len() {
                return Err(format!("snapshot node {i}: class {} unknown", n.class));
            }
            let parent_kind = self.head.nodes[n.parent as usize].kind;
            let fits = match (shape, n.kind) {
                (TreeShape::Flat, 3) => parent_kind == 0,
                (TreeShape::Hierarchical, 1) => parent_kind <= 1,
                (TreeShape::Hierarchical, 2) => {
                    parent_kind == 1 && self.head.nodes[n.parent as usize].tenant == n.tenant
                }
                _ => false,
            };
            if !fits {
                return Err(format!(
                    "snapshot node {i}: kind {} under kind {parent_kind} in a {shape:?} tree",
                    n.kind
                ));
            }
            if n.kind != 2 {
                let seen = &mut has_node[n.tenant as usize];
                if *seen {
                    return Err(format!("snapshot tenant {} has two nodes", n.tenant));
                }
                *seen = true;
            }
        }
        if let Some(t) = has_node.iter().position(|h| !h) {
            return Err(format!("snapshot tenant {t} has no node"));
        }
        Ok(())
    }
}

impl JobSpecShape {
    fn of(k: crate::shape::ShapeKey) -> JobSpecShape {
        JobSpecShape {
            demand: k.demand,
            requires: k.requires,
            class: k.class,
            preemptible: k.preemptible,
            gang: k.gang,
            gang_min: k.gang_min,
        }
    }

    fn key(&self) -> crate::shape::ShapeKey {
        crate::shape::ShapeKey {
            demand: self.demand.clone(),
            requires: self.requires.clone(),
            class: self.class,
            preemptible: self.preemptible,
            gang: self.gang,
            gang_min: self.gang_min,
        }
    }

    /// A total order, so that a snapshot's bytes do not depend on a map's iteration order.
    #[allow(clippy::type_complexity)]
    fn order(&self) -> (u16, &ResVec, &Vec<(String, String)>, bool, u32, u32) {
        (
            self.class,
            &self.demand,
            &self.requires,
            self.preemptible,
            self.gang,
            self.gang_min,
        )
    }
}

#[derive(Serialize, Deserialize)]
struct AttemptSnap<'a> {
    number: u32,
    epoch: u64,
    started: Time,
    expires: Time,
    placements: Vec<(u32, u32)>,
    members: u32,
    estimate: Dur,
    charges: Cow<'a, [u64]>,
    stop: Option<(StopReason, Time)>,
    borrowed: bool,
    policy_version: u64,
    worker_share: u64,
}

#[derive(Serialize, Deserialize)]
struct JobSnap<'a> {
    slot: u32,
    id: Cow<'a, str>,
    tenant: u32,
    shape: JobSpecShape,
    priority: i32,
    state: JobState,
    seq: u64,
    arrival: Time,
    enqueued: Time,
    estimate: Dur,
    deadline: Time,
    /// A deferred job's not-before time (for any other job, when it entered its queue: the
    /// engine keeps one time for both, `Job::enqueued`).
    not_before: Time,
    max_attempts: u32,
    attempts: u32,
    failures: u32,
    epoch: u64,
    checkpointable: bool,
    downgraded: bool,
    progress: Dur,
    wfq_tag: u128,
    order: OrderKey,
    cost: u128,
    /// When the job first started. The engine no longer keeps it (nothing decided by it):
    /// written as `None`, ignored when read; the field stays so that older snapshots decode.
    first_start: Option<Time>,
    retry: bool,
    digest: u64,
    attempt: Option<AttemptSnap<'a>>,
}

/// Where the live jobs go in an encoded [`SnapshotHead`]: it encodes as nothing (postcard
/// writes a unit as no bytes), and [`Engine::snapshot_pieces`] writes the jobs there by hand
/// ([`Engine::encode_live_jobs`]).
struct LiveJobsSlot;

impl Serialize for LiveJobsSlot {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_unit()
    }
}

/// A running job's [`AttemptSnap`], field by field in its declared order.
fn encode_attempt(a: &Attempt, out: &mut Vec<u8>) {
    varint(out, a.number as u64);
    varint(out, a.epoch);
    varint(out, a.started.0);
    varint(out, a.expires.0);
    varint(out, a.placements.len() as u64);
    for (worker, members) in a.placements.iter() {
        varint(out, worker.0 as u64);
        varint(out, *members as u64);
    }
    varint(out, a.members as u64);
    varint(out, a.estimate.0);
    varint(out, a.charges.len() as u64);
    for charge in a.charges.iter() {
        varint(out, *charge);
    }
    match a.stop {
        None => out.push(0),
        Some((reason, at)) => {
            out.push(1);
            // Its variant index: `StopReason` is a plain enum.
            varint(out, reason as u64);
            varint(out, at.0);
        }
    }
    out.push(a.borrowed as u8);
    varint(out, a.policy_version);
    varint(out, a.worker_share);
}

/// The live jobs' shapes, each encoded once per snapshot ([`JobSpecShape`] as postcard writes
/// it): most jobs share a few shapes, and a shape's demand and requirements are the costliest
/// part of a job's record to write field by field.
#[derive(Default)]
struct ShapeBytes {
    /// By shape index: where its bytes start in `bytes` and how many (`u32::MAX`: not yet).
    at: Vec<(u32, u32)>,
    bytes: Vec<u8>,
}

impl ShapeBytes {
    fn of(&mut self, e: &Engine, s: ShapeId) -> &[u8] {
        if s.ix() >= self.at.len() {
            self.at.resize(s.ix() + 1, (0, u32::MAX));
        }
        if self.at[s.ix()].1 == u32::MAX {
            let start = self.bytes.len();
            self.bytes = postcard::to_extend(&e.shape_snap(s), std::mem::take(&mut self.bytes))
                .expect("a shape encodes");
            self.at[s.ix()] = (start as u32, (self.bytes.len() - start) as u32);
        }
        let (start, len) = self.at[s.ix()];
        &self.bytes[start as usize..(start + len) as usize]
    }
}

impl Engine {
    fn shape_snap(&self, s: ShapeId) -> JobSpecShape {
        let k = self.shapes.get(s);
        JobSpecShape {
            demand: k.demand.clone(),
            requires: k.requires.clone(),
            class: k.class,
            preemptible: k.preemptible,
            gang: k.gang,
            gang_min: k.gang_min,
        }
    }

    /// One live job as the snapshot holds it, borrowing from the engine's (its id's text
    /// `id` from the caller: a UUID's is written out, not stored). The snapshot writes it by
    /// hand ([`Engine::encode_live_job`]); the tests check that against this record's derived
    /// encoding.
    #[cfg(test)]
    fn job_snap<'a>(&'a self, slot: usize, j: &'a Job, id: &'a str) -> JobSnap<'a> {
        JobSnap {
            slot: slot as u32,
            id: Cow::Borrowed(id),
            tenant: j.tenant.0,
            shape: self.shape_snap(j.shape),
            priority: j.priority,
            state: j.state,
            seq: j.seq,
            arrival: j.arrival,
            enqueued: j.enqueued,
            estimate: j.estimate,
            deadline: j.deadline,
            not_before: j.deferred_until(),
            max_attempts: j.max_attempts,
            attempts: j.attempts,
            failures: j.failures,
            epoch: j.epoch,
            checkpointable: j.checkpointable,
            downgraded: j.downgraded,
            progress: j.progress,
            wfq_tag: j.wfq_tag as u128,
            order: j.order.into(),
            cost: j.cost(),
            first_start: None,
            retry: j.retry,
            digest: j.digest,
            attempt: j.attempt.as_ref().map(|a| AttemptSnap {
                number: a.number,
                epoch: a.epoch,
                started: a.started,
                expires: a.expires,
                placements: a.placements.iter().map(|(w, m)| (w.0, *m)).collect(),
                members: a.members,
                estimate: a.estimate,
                charges: Cow::Borrowed(&a.charges),
                stop: a.stop,
                borrowed: a.borrowed,
                policy_version: a.policy_version,
                worker_share: a.worker_share,
            }),
        }
    }

    /// The live jobs exactly as postcard writes the `Vec<JobSnap>` they decode to (its length,
    /// then each job's [`JobSnap`] in slot order), written by hand as the finished records
    /// are: through serde a job took about 1,800 instructions, and with 10^6 queued a
    /// snapshot's encoding held the writer for 300 ms (BENCHMARKS.md, items 79 and 81).
    /// `tests::a_live_job_writes_as_its_record_encodes` pins the two encodings together.
    fn encode_live_jobs(&self, out: &mut Vec<u8>) {
        // Every slot is a live job or a free one (`SnapshotV1::check_bounds`).
        let live = self.jobs.len() - self.free_jobs.len();
        varint(out, live as u64);
        let mut shapes = ShapeBytes::default();
        let mut written = 0;
        for (slot, j) in self.jobs.iter().enumerate() {
            if let Some(j) = j {
                self.encode_live_job(slot, j, &mut shapes, out);
                written += 1;
            }
        }
        debug_assert_eq!(written, live, "live jobs and free slots disagree");
    }

    /// One live job's [`JobSnap`], field by field in its declared order.
    fn encode_live_job(&self, slot: usize, j: &Job, shapes: &mut ShapeBytes, out: &mut Vec<u8>) {
        varint(out, slot as u64);
        let id = j.id.as_str();
        varint(out, id.len() as u64);
        out.extend_from_slice(id.as_bytes());
        varint(out, j.tenant.0 as u64);
        out.extend_from_slice(shapes.of(self, j.shape));
        varint(out, zigzag(j.priority as i64));
        // An enum's variant index: `JobState` is a plain enum, declared in serde's order.
        varint(out, j.state as u64);
        varint(out, j.seq);
        varint(out, j.arrival.0);
        varint(out, j.enqueued.0);
        varint(out, j.estimate.0);
        varint(out, j.deadline.0);
        varint(out, j.deferred_until().0);
        varint(out, j.max_attempts as u64);
        varint(out, j.attempts as u64);
        varint(out, j.failures as u64);
        varint(out, j.epoch);
        out.push(j.checkpointable as u8);
        out.push(j.downgraded as u8);
        varint(out, j.progress.0);
        varint(out, j.wfq_tag);
        match OrderKey::from(j.order) {
            OrderKey::Fixed(tier, key) => {
                out.extend_from_slice(&[0, tier]);
                varint(out, zigzag(key));
            }
            OrderKey::Ramp(key) => {
                out.push(1);
                varint(out, zigzag(key));
            }
            OrderKey::Flat(key) => {
                out.push(2);
                varint(out, zigzag(key));
            }
        }
        varint128(out, j.cost());
        // `first_start`: always `None`.
        out.push(0);
        out.push(j.retry as u8);
        varint(out, j.digest);
        match &j.attempt {
            None => out.push(0),
            Some(a) => {
                out.push(1);
                encode_attempt(a, out);
            }
        }
    }

    /// The durable state, encoded. Pair it with the log position it reflects.
    pub fn snapshot(&self) -> Vec<u8> {
        self.snapshot_pieces().to_vec()
    }

    /// [`Engine::snapshot`] in pieces, without copying the finished jobs' full chunks of
    /// records: the engine shares them with the pieces, which may go to another thread to be
    /// written while the engine goes on (a chunk the engine forgets meanwhile is freed when
    /// the pieces are).
    pub fn snapshot_pieces(&self) -> SnapshotPieces {
        let live = self
            .meters
            .iter()
            .map(|(s, m)| (self.shapes.get(*s).clone(), *m));
        let mut shape_meters: Vec<(JobSpecShape, RateMeter)> = self
            .meter_archive
            .iter()
            .map(|(k, m)| (k.clone(), *m))
            .chain(live)
            .map(|(k, m)| (JobSpecShape::of(k), m))
            .collect();
        shape_meters.sort_by(|a, b| a.0.order().cmp(&b.0.order()));
        let leaf_meters: Vec<(u32, RateMeter)> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.meter != RateMeter::default())
            .map(|(i, n)| (i as u32, n.meter))
            .collect();
        let head = SnapshotHead {
            policy_version: self.version,
            policy_source: self.policy.source.clone(),
            now: self.now,
            seq: self.seq,
            resources: (0..self.resources.len())
                .map(|i| {
                    self.resources
                        .name(crate::resources::ResourceId(i as u16))
                        .to_string()
                })
                .collect(),
            classes: self
                .classes
                .iter()
                .map(|c| ClassSnap {
                    name: c.policy.name.clone(),
                    ledger: c.ledger.clone(),
                    deadline_misses: c.deadline_misses,
                })
                .collect(),
            tenants: self
                .tenants
                .iter()
                .map(|t| TenantSnap {
                    name: t.name.clone(),
                    tokens: t.tokens,
                    tokens_at: t.tokens_at,
                    retry_used: t.retry_used,
                    retry_since: t.retry_since,
                    ledger: t.ledger.clone(),
                    estimators: t.estimators.to_vec(),
                    admitted: t.admitted,
                })
                .collect(),
            nodes: self
                .nodes
                .iter()
                .map(|n| {
                    let (kind, tenant, class) = match n.kind {
                        NodeKind::Root => (0, 0, 0),
                        NodeKind::Tenant(t) => (1, t.0, 0),
                        NodeKind::Band(t, c) => (2, t.0, c),
                        NodeKind::Flat(t) => (3, t.0, 0),
                    };
                    NodeSnap {
                        kind,
                        tenant,
                        class,
                        parent: n.parent.map(|p| p.0).unwrap_or(u32::MAX),
                        vtime: n.vtime,
                        child_v: n.child_v,
                        drr: n.drr,
                    }
                })
                .collect(),
            workers: self
                .workers
                .iter()
                .enumerate()
                .filter(|(_, w)| !w.name.is_empty())
                .map(|(i, w)| (i as u32, w.name.to_string(), w.pool.to_string()))
                .collect(),
            worker_slots: self.workers.len() as u32,
            pools: self
                .pools
                .iter()
                .map(|(n, p)| (n.clone(), p.ledger.clone()))
                .collect(),
            jobs: LiveJobsSlot,
            free_jobs: self.free_jobs.clone(),
            job_slots: self.jobs.len() as u32,
        };
        let tail = SnapshotTail {
            gps_v: self.gps.v,
            gps_at: self.gps.at,
            gps_backlog: self.gps.backlog.iter().map(|(f, t)| (*f, t.0)).collect(),
            gps_last_finish: self
                .gps
                .last_finish
                .iter()
                .map(|(t, f)| (t.0, *f))
                .collect(),
            gps_weight_sum: self.gps.weight_sum,
            drr_round: self.drr_round,
            drr_position: self.drr_position,
            drain: Vec::new(),
            stats: self.stats.clone(),
        };
        let added = SnapshotV2 {
            shape_meters,
            leaf_meters,
            class_estimators: self.classes.iter().map(|c| c.estimator).collect(),
        };
        // A live job encodes to about 130 bytes (6.4 MB for 50,000 queued), and the finished
        // jobs' chunk still filling is copied after them when no full chunk comes first. The
        // buffer is reserved at once, not grown by doubling (a grown buffer is copied, and
        // its new pages faulted in, at each step).
        let filling: usize = self
            .finished
            .pieces()
            .map(|piece| match piece {
                Piece::Filling(bytes) => bytes.len(),
                Piece::Shared(..) => 0,
            })
            .sum();
        let estimate = 64 * 1024 + 160 * self.live_jobs + filling;
        // `SnapshotRecord::V2(SnapshotV1 { head, finished, tail }, added)` as postcard writes
        // it (an enum's variant index, then its fields one after the other; a sequence's
        // length, then its elements), with the finished jobs' records as they are kept
        // (`tests::a_snapshot_is_its_record_as_postcard_writes_it`): full chunks shared, the
        // one still filling copied into the piece that ends the snapshot.
        let mut out = postcard::to_extend(&V2_VARIANT, Vec::with_capacity(estimate))
            .expect("snapshot encodes");
        // The head's fields after its jobs, which the head writes right after the empty slot
        // where the jobs go: taken off its end, and put back after the jobs.
        let after_len = varint_len(head.free_jobs.len() as u64)
            + head
                .free_jobs
                .iter()
                .map(|&f| varint_len(f as u64))
                .sum::<usize>()
            + varint_len(head.job_slots as u64);
        out = postcard::to_extend(&head, out).expect("snapshot encodes");
        let after_jobs = out.split_off(out.len() - after_len);
        debug_assert_eq!(
            after_jobs,
            postcard::to_stdvec(&(&head.free_jobs, head.job_slots)).expect("encodes")
        );
        self.encode_live_jobs(&mut out);
        out.extend_from_slice(&after_jobs);
        out = postcard::to_extend(&self.finished.len(), out).expect("snapshot encodes");
        let mut pieces = SnapshotPieces::default();
        for piece in self.finished.pieces() {
            match piece {
                Piece::Shared(bytes, from) => {
                    pieces.push(SnapshotPiece::Encoded(std::mem::take(&mut out)));
                    pieces.push(SnapshotPiece::Shared(Arc::clone(bytes), from));
                }
                Piece::Filling(bytes) => {
                    if out.capacity() == 0 {
                        out.reserve(bytes.len() + 4096);
                    }
                    out.extend_from_slice(bytes);
                }
            }
        }
        out = postcard::to_extend(&tail, out).expect("snapshot encodes");
        out = postcard::to_extend(&added, out).expect("snapshot encodes");
        pieces.push(SnapshotPiece::Encoded(out));
        pieces.pieces.retain(|piece| match piece {
            SnapshotPiece::Encoded(bytes) => !bytes.is_empty(),
            SnapshotPiece::Shared(bytes, from) => bytes.len() > *from,
        });
        pieces
    }

    /// An engine rebuilt from a snapshot. The bytes come from [`Engine::snapshot`] (the store
    /// checks their integrity); an error says what does not fit.
    pub fn restore(bytes: &[u8], config: EngineConfig) -> Result<Engine, String> {
        Engine::restore_with_room(bytes, config, 0)
    }

    /// [`Engine::restore`], with room in the live jobs' id index for `more_jobs` jobs beyond
    /// the snapshot's: a recovery that will replay the log's tail says how many jobs it
    /// accepts, so that the index does not grow during the replay (growing moves every entry,
    /// reading its id from a record). A hint: any number gives the same engine.
    pub fn restore_with_room(
        bytes: &[u8],
        config: EngineConfig,
        more_jobs: usize,
    ) -> Result<Engine, String> {
        let (s, added) = match postcard::from_bytes(bytes)
            .map_err(|e| format!("snapshot does not decode: {e}"))?
        {
            SnapshotRecord::V1(s) => (s, SnapshotV2::default()),
            SnapshotRecord::V2(s, added) => (s, added),
        };
        s.check_bounds()?;
        let mut e = Engine::for_replay(config);
        e.restoring = true;
        for r in &s.head.resources {
            e.resources
                .intern(r)
                .ok_or("snapshot has too many resources")?;
        }
        // Classes keep their indices: create them in order before the policy is installed.
        for c in &s.head.classes {
            e.class_by_name
                .insert(c.name.clone(), e.classes.len() as u16);
            let placeholder = Policy::built_in().classes[0].clone();
            e.classes.push(super::state::Class {
                policy: crate::policy::ClassPolicy {
                    name: c.name.clone(),
                    ..placeholder
                },
                queued: 0,
                ledger: c.ledger.clone(),
                deadline_misses: c.deadline_misses,
                estimator: Estimator::default(),
            });
        }
        // Tenants keep their indices too.
        for t in &s.head.tenants {
            let idx = e.tenant_for(&t.name);
            if idx.ix() != e.tenants.len() - 1 && e.tenants[idx.ix()].name != t.name {
                return Err(format!("snapshot tenant {} out of order", t.name));
            }
        }
        if e.tenants.len() != s.head.tenants.len() {
            return Err("snapshot tenants are not a tree in creation order".to_string());
        }
        let policy = Policy::from_text(&s.head.policy_source)
            .map_err(|errs| format!("snapshot policy invalid: {errs:?}"))?;
        e.install_policy(s.head.now, s.head.policy_version, policy);
        for (t, snap) in e.tenants.iter_mut().zip(&s.head.tenants) {
            t.tokens = snap.tokens;
            t.tokens_at = snap.tokens_at;
            t.retry_used = snap.retry_used;
            t.retry_since = snap.retry_since;
            t.ledger = snap.ledger.clone();
            t.estimators = snap.estimators.iter().copied().collect();
            t.admitted = snap.admitted;
        }
        // The tree, node for node, with its balances.
        s.check_tree(e.tenants.len(), e.shape_kind)?;
        e.nodes.clear();
        for t in e.tenants.iter_mut() {
            t.node = None;
            t.bands.clear();
        }
        for n in &s.head.nodes {
            let tenant = TenantIdx(n.tenant);
            let (kind, weight) = match n.kind {
                0 => (NodeKind::Root, Weight::ONE),
                1 => (NodeKind::Tenant(tenant), e.tenant_weight(tenant)?),
                2 => (NodeKind::Band(tenant, n.class), e.class_weight(n.class)?),
                3 => (NodeKind::Flat(tenant), e.tenant_weight(tenant)?),
                k => return Err(format!("snapshot node kind {k} unknown")),
            };
            let parent = (n.parent != u32::MAX).then_some(NodeIdx(n.parent));
            let idx = NodeIdx(e.nodes.len() as u32);
            let mut node = Node::new(parent, kind, weight);
            node.vtime = n.vtime;
            node.child_v = n.child_v;
            node.drr = n.drr;
            e.nodes.push(node);
            match kind {
                NodeKind::Tenant(t) | NodeKind::Flat(t) => e.tenants[t.ix()].node = Some(idx),
                NodeKind::Band(t, c) => {
                    e.tenants[t.ix()].bands.insert(c, idx);
                }
                NodeKind::Root => {}
            }
        }
        // Worker slots keep their indices (attempts name them); gaps are free slots.
        for i in 0..s.head.worker_slots {
            let placeholder = format!("\u{0}{i}");
            e.new_worker(&placeholder, "");
            e.worker_by_name.remove(&placeholder);
            e.workers[i as usize].name = "".into();
        }
        for (i, name, pool) in &s.head.workers {
            let w = e
                .workers
                .get_mut(*i as usize)
                .ok_or("snapshot worker slot out of range")?;
            w.name = name.as_str().into();
            w.pool = pool.as_str().into();
            w.pool_slot = None;
            e.worker_by_name.insert(name.clone(), WorkerIdx(*i));
        }
        e.free_workers = (0..s.head.worker_slots)
            .rev()
            .filter(|i| e.workers[*i as usize].name.is_empty())
            .collect();
        for (name, ledger) in &s.head.pools {
            e.pools.entry(name).ledger = ledger.clone();
        }
        e.seq = s.head.seq;
        e.jobs = (0..s.head.job_slots).map(|_| None).collect();
        e.free_jobs = s.head.free_jobs.clone();
        // The id indexes are sized for what they will hold: they index it without growing.
        e.job_by_id =
            super::id_index::IdIndex::with_capacity(s.head.jobs.len().saturating_add(more_jobs));
        e.finished = FinishedJobs::with_capacity(s.finished.len());
        let mut queued: Vec<(u64, JobIdx)> = Vec::new();
        let mut leases: Vec<(Time, JobIdx)> = Vec::new();
        for j in &s.head.jobs {
            let idx = JobIdx(j.slot);
            e.restore_job(idx, j)?;
            match j.state {
                JobState::Queued => queued.push((j.seq, idx)),
                JobState::Deferred => {
                    e.deferred.insert((j.not_before, idx));
                }
                JobState::Running => {
                    if let Some(expires) = e.restore_attempt(idx)? {
                        leases.push((expires, idx));
                    }
                }
                s => return Err(format!("snapshot holds a live job in state {s:?}")),
            }
        }
        queued.sort();
        for (_, j) in queued {
            e.enqueue(j);
        }
        // In expiry order, so that each lease goes on the end of their list.
        leases.sort_unstable();
        for (_, j) in leases {
            e.expiries.push(&mut e.jobs, j.0, None);
        }
        for f in &s.finished {
            // A status query names the job's tenant and class by these indexes.
            if f.tenant as usize >= e.tenants.len() || f.class as usize >= e.classes.len() {
                return Err(format!(
                    "snapshot finished job {}: tenant {} or class {} unknown",
                    f.id, f.tenant, f.class
                ));
            }
            // All of them, as they were: the snapshot holds no more than the retention then.
            e.finished.push(f, usize::MAX);
        }
        e.gps.v = s.tail.gps_v;
        e.gps.at = s.tail.gps_at;
        e.gps.backlog = s
            .tail
            .gps_backlog
            .iter()
            .map(|(f, t)| (*f, TenantIdx(*t)))
            .collect();
        e.gps.last_finish = s
            .tail
            .gps_last_finish
            .iter()
            .map(|(t, f)| (TenantIdx(*t), *f))
            .collect();
        e.gps.weight_sum = s.tail.gps_weight_sum;
        e.drr_round = s.tail.drr_round;
        e.drr_position = s.tail.drr_position;
        for (shape, m) in added.shape_meters {
            let key = shape.key();
            match e.shapes.lookup(&key) {
                Some(id) => {
                    e.meters.insert(id, m);
                }
                None => {
                    e.meter_archive.insert(key, m);
                }
            }
        }
        for (class, estimator) in e.classes.iter_mut().zip(added.class_estimators) {
            class.estimator = estimator;
        }
        for (n, m) in added.leaf_meters {
            e.nodes
                .get_mut(n as usize)
                .ok_or("snapshot meter of a node that does not exist")?
                .meter = m;
        }
        e.stats = s.tail.stats;
        e.now = e.now.max(s.head.now);
        e.restoring = false;
        e.events.clear();
        e.recompute_pending();
        // A tenant over its limit was let keep what it held when a publish lowered it.
        e.grant_limit_grace();
        e.rekey_all();
        Ok(e)
    }

    fn tenant_weight(&self, t: TenantIdx) -> Result<Weight, String> {
        self.tenants
            .get(t.ix())
            .map(|t| t.weight)
            .ok_or_else(|| format!("snapshot names tenant {} that does not exist", t.0))
    }

    fn class_weight(&self, c: u16) -> Result<Weight, String> {
        self.classes
            .get(c as usize)
            .map(|c| c.policy.weight)
            .ok_or_else(|| format!("snapshot names class {c} that does not exist"))
    }

    fn restore_job(&mut self, idx: JobIdx, j: &JobSnap<'_>) -> Result<(), String> {
        let key = crate::shape::ShapeKey {
            demand: j.shape.demand.clone(),
            requires: j.shape.requires.clone(),
            class: j.shape.class,
            preemptible: j.shape.preemptible,
            gang: j.shape.gang,
            gang_min: j.shape.gang_min,
        };
        // What admission would refuse (`shape_key`, `validate`): scheduling counts on every
        // shape demanding some resource, in a gang of 1 to MAX_GANG members.
        if key.demand.is_zero()
            || key.gang == 0
            || key.gang > crate::job::MAX_GANG
            || key.gang_min == 0
            || key.gang_min > key.gang
        {
            return Err(format!(
                "snapshot job {} has a shape no submission can have (it demands no resource, or its gang is out of range)",
                j.id
            ));
        }
        if key.gang_min > 1 {
            self.gang_shapes += 1;
        }
        let (shape, _) = self
            .shapes
            .acquire(key)
            .ok_or("snapshot has too many shapes")?;
        let tenant = TenantIdx(j.tenant);
        if tenant.ix() >= self.tenants.len() || j.shape.class as usize >= self.classes.len() {
            return Err(format!(
                "snapshot job {} names a tenant or class that does not exist",
                j.id
            ));
        }
        let slot = self
            .jobs
            .get_mut(idx.ix())
            .ok_or("snapshot job slot out of range")?;
        *slot = Some(Job {
            id: super::job_id::JobId::new(&j.id),
            tenant,
            class: j.shape.class,
            shape,
            priority: j.priority,
            state: j.state,
            seq: j.seq,
            arrival: j.arrival,
            // A deferred job enters its queue at its not-before time (`Job::deferred_until`).
            enqueued: if j.state == JobState::Deferred {
                j.not_before
            } else {
                j.enqueued
            },
            estimate: j.estimate,
            deadline: j.deadline,
            max_attempts: j.max_attempts,
            attempts: j.attempts,
            failures: j.failures,
            epoch: j.epoch,
            checkpointable: j.checkpointable,
            downgraded: j.downgraded,
            progress: j.progress,
            wfq_tag: super::state::to_wns(j.wfq_tag),
            leaf: NodeIdx(0),
            order: j.order.into(),
            cost_wns: super::state::to_wns(j.cost),
            retry: j.retry,
            digest: j.digest,
            attempt: j.attempt.as_ref().map(|a| {
                Box::new(Attempt {
                    number: a.number,
                    epoch: a.epoch,
                    started: a.started,
                    expires: a.expires,
                    placements: a
                        .placements
                        .iter()
                        .map(|(w, m)| (WorkerIdx(*w), *m))
                        .collect(),
                    members: a.members,
                    estimate: a.estimate,
                    // Longer than any charge path: reset to zeros by `restore_attempt`,
                    // as a list of the wrong length is.
                    charges: if a.charges.len() <= CHAIN_MAX {
                        a.charges.iter().copied().collect()
                    } else {
                        Chain::default()
                    },
                    path: Chain::default(),
                    stop: a.stop,
                    borrowed: a.borrowed,
                    policy_version: a.policy_version,
                    worker_share: a.worker_share,
                    lease_link: Link::UNLISTED,
                })
            }),
        });
        self.index_job(idx, &j.id);
        self.live_jobs += 1;
        let t = &mut self.tenants[tenant.ix()];
        t.live_jobs += 1;
        t.outstanding += super::state::to_wns(j.cost) as u128 * super::state::COST_UNITS_PER_WNS;
        Ok(())
    }

    /// Puts a running job's attempt back: allocations, its stop's timer and its place in the
    /// tree. Returns when its lease runs out unless it is stopping (the caller lists the
    /// leases, all together in expiry order).
    fn restore_attempt(&mut self, j: JobIdx) -> Result<Option<Time>, String> {
        let (tenant, class, shape) = {
            let job = self.job(j);
            (job.tenant, job.class, job.shape)
        };
        let leaf = self.leaf_for(tenant, class);
        let path = self.charge_path(tenant, leaf);
        let per_member = self.shapes.get(shape).demand.clone();
        let a = self
            .job(j)
            .attempt
            .as_ref()
            .ok_or("running job without an attempt")?;
        let (placements, expires, stop) = (a.placements.clone(), a.expires, a.stop);
        if placements.iter().any(|(w, _)| w.ix() >= self.workers.len()) {
            return Err("snapshot placement on an unknown worker".to_string());
        }
        self.hold(j, tenant, class, leaf, &per_member, &placements);
        let lease = match stop {
            Some((_, deadline)) => {
                self.stops.insert((deadline, j));
                None
            }
            None => Some(expires),
        };
        let job = self.job_mut(j);
        job.leaf = leaf;
        if let Some(a) = job.attempt.as_mut() {
            if a.charges.len() != path.len() {
                a.charges = Chain::filled(0, path.len());
            }
            a.path = path;
        }
        Ok(lease)
    }

    /// A deterministic text dump of the durable state, by names (for comparing a live engine
    /// with one rebuilt from events or a snapshot).
    pub fn durable_view(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "policy v{} seq {}", self.version, self.seq);
        let mut jobs: Vec<&Job> = self.jobs.iter().flatten().collect();
        jobs.sort_by(|a, b| a.id.cmp(&b.id));
        for j in jobs {
            let _ = write!(
                out,
                "job {} tenant {} class {} {:?} seq {} epoch {} attempts {} failures {} est {} progress {} nb {} dl {} cost {}",
                j.id,
                self.tenants[j.tenant.ix()].name,
                self.class_name(j.class),
                j.state,
                j.seq,
                j.epoch,
                j.attempts,
                j.failures,
                j.estimate.0,
                j.progress.0,
                j.deferred_until().0,
                j.deadline.0,
                j.cost()
            );
            if let Some(a) = &j.attempt {
                let workers: Vec<String> = a
                    .placements
                    .iter()
                    .map(|(w, m)| format!("{}x{m}", self.workers[w.ix()].name))
                    .collect();
                let _ = write!(
                    out,
                    " attempt {} epoch {} started {} expires {} on {workers:?} stop {:?} charges {:?}",
                    a.number, a.epoch, a.started.0, a.expires.0, a.stop, a.charges
                );
            }
            out.push('\n');
        }
        let mut tenants: Vec<_> = self.tenants.iter().collect();
        tenants.sort_by(|a, b| a.name.cmp(&b.name));
        for t in tenants {
            let balances: Vec<String> = std::iter::once(t.node)
                .chain(t.bands.values().map(|n| Some(*n)))
                .flatten()
                .map(|n| {
                    let node = &self.nodes[n.ix()];
                    format!(
                        "{}:{}/{}/{} meter {:?}",
                        self.node_name(n),
                        node.vtime,
                        node.child_v,
                        node.pending,
                        node.meter
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "tenant {} alloc {:?} outstanding {} tokens {} retry {} ledger {:?} estimators {:?} balances {balances:?}",
                t.name,
                self.resources.named(&t.alloc),
                t.outstanding,
                t.tokens,
                t.retry_used,
                t.ledger,
                t.estimators
            );
        }
        for c in &self.classes {
            let _ = writeln!(
                out,
                "class {} ledger {:?} misses {} estimator {:?}",
                c.policy.name, c.ledger, c.deadline_misses, c.estimator
            );
        }
        // Shapes by description, with resources by name (their ids depend on what workers
        // reported, which is not durable).
        let mut meters: Vec<String> = self
            .meters
            .iter()
            .map(|(s, m)| (self.shapes.get(*s), m))
            .chain(self.meter_archive.iter())
            .map(|(k, m)| {
                format!(
                    "meter class {} demand {:?} requires {:?} preemptible {} gang {}/{} {m:?}",
                    k.class,
                    self.resources.named(&k.demand),
                    k.requires,
                    k.preemptible,
                    k.gang,
                    k.gang_min
                )
            })
            .collect();
        meters.sort();
        for line in meters {
            let _ = writeln!(out, "{line}");
        }
        let mut finished: Vec<_> = self.finished.iter().collect();
        finished.sort_by(|a, b| a.id.cmp(&b.id));
        for f in finished {
            let _ = writeln!(
                out,
                "finished {} {:?} attempts {} epoch {}",
                f.id, f.state, f.attempts, f.epoch
            );
        }
        out
    }
}

impl Engine {
    /// An engine rebuilt by applying `events` in order (the store's recovery path when there is
    /// no snapshot, and a check of replay in tests).
    pub fn replay(events: &[Event], config: EngineConfig) -> Engine {
        let mut e = Engine::for_replay(config);
        for ev in events {
            e.apply(ev);
        }
        e.events.clear();
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobSpec;

    /// Worker `w0` of the default pool offering `cpu` and `max_jobs`.
    fn offer(cpu: f64, max_jobs: u32) -> crate::WorkerOffer {
        crate::WorkerOffer {
            worker: "w0".into(),
            pool: "default".into(),
            capacity: std::collections::BTreeMap::from([("cpu".to_string(), cpu)]),
            labels: std::collections::BTreeMap::new(),
            max_jobs,
        }
    }

    // Proves: the hand-written encoder writes each live job exactly as postcard writes its
    // derived `JobSnap`, for jobs of several shapes, queued, deferred and running (a gang's
    // placements, charges, a stop asked), with every integer field at its width's edges, every
    // order kind with extreme keys, and a cost above 2^64.
    #[test]
    fn a_live_job_writes_as_its_record_encodes() {
        let mut e = Engine::new(Time::ZERO, Policy::built_in(), EngineConfig::default());
        let mut big = JobSpec::new("a-longer-job-id-".repeat(4), "globex");
        big.demand = std::collections::BTreeMap::from([("cpu".to_string(), 2.0)]);
        big.requires = std::collections::BTreeMap::from([("zone".to_string(), "a".to_string())]);
        big.priority = -7;
        for (at, spec) in [
            JobSpec::new("j0", "acme"),
            big,
            JobSpec::new("0b5e9a44-4c1f-4a53-9d2e-7f10c3a5b6d8", "acme"),
        ]
        .into_iter()
        .enumerate()
        {
            let admission = e.submit(Time(at as u64 + 1), spec);
            assert!(admission.is_accepted(), "{admission:?}");
        }
        e.worker_ready(Time(10), &offer(4.0, 1)).expect("ready");
        assert_eq!(e.schedule(Time(10)).len(), 1, "one job runs");
        let edges = [0u64, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX];
        let orders = [
            OrderKey::Fixed(0, i64::MIN),
            OrderKey::Fixed(255, -1),
            OrderKey::Ramp(i64::MAX),
            OrderKey::Ramp(0),
            OrderKey::Flat(-64),
            OrderKey::Flat(64),
        ];
        let slots: Vec<usize> = (0..e.jobs.len()).filter(|&i| e.jobs[i].is_some()).collect();
        assert!(slots.len() >= 3);
        let mut checked = 0;
        for (k, &v) in edges.iter().enumerate() {
            for (o, &order) in orders.iter().enumerate() {
                for &slot in &slots {
                    let j = e.jobs[slot].as_mut().expect("live");
                    j.priority = (v as i64 ^ -(o as i64)) as i32;
                    j.state = [JobState::Deferred, JobState::Queued, JobState::Running][o % 3];
                    j.seq = v;
                    j.arrival = Time(v);
                    j.enqueued = Time(v / 3);
                    j.estimate = Dur(v ^ 5);
                    j.deadline = Time(u64::MAX - v);
                    j.max_attempts = v as u32;
                    j.attempts = (v >> 7) as u32;
                    j.failures = (v >> 14) as u32;
                    j.epoch = v.rotate_left(k as u32);
                    j.checkpointable = o % 2 == 0;
                    j.downgraded = o % 2 == 1;
                    j.progress = Dur(v >> 1);
                    j.wfq_tag = u64::MAX - v;
                    j.order = order.into();
                    j.cost_wns = v;
                    j.retry = k % 2 == 0;
                    j.digest = !v;
                    if let Some(a) = j.attempt.as_mut() {
                        a.number = v as u32;
                        a.epoch = v;
                        a.started = Time(v);
                        a.expires = Time(!v);
                        // Up to 301 placements and 12 charges of up to 10 bytes each.
                        a.placements = (0..=o as u32 * 60)
                            .map(|w| (WorkerIdx(w.wrapping_mul(v as u32)), k as u32))
                            .collect();
                        a.members = o as u32;
                        a.estimate = Dur(v);
                        a.charges = (0..o * 2 + 2).map(|c| v >> c).collect();
                        a.stop = match o % 3 {
                            0 => None,
                            1 => Some((StopReason::Preempt, Time(v))),
                            _ => Some((StopReason::Cancel, Time(!v))),
                        };
                        a.borrowed = k % 2 == 1;
                        a.policy_version = v;
                        a.worker_share = !v;
                    }
                    let j = e.jobs[slot].as_ref().expect("live");
                    let mut mine = vec![9u8];
                    e.encode_live_job(slot, j, &mut ShapeBytes::default(), &mut mine);
                    let id = j.id.as_str();
                    let theirs =
                        postcard::to_extend(&e.job_snap(slot, j, &id), vec![9u8]).expect("encodes");
                    assert_eq!(mine, theirs, "slot {slot}, value {v}, order {order:?}");
                    checked += 1;
                }
            }
        }
        assert!(checked >= 3 * edges.len() * orders.len());
        // And the whole list, shapes shared across jobs, as the record's vector encodes.
        let mut mine = Vec::new();
        e.encode_live_jobs(&mut mine);
        let records: Vec<JobSnap<'_>> = slots
            .iter()
            .map(|&slot| {
                let j = e.jobs[slot].as_ref().expect("live");
                let id = j.id.as_str().to_string();
                let mut r = e.job_snap(slot, j, "");
                r.id = Cow::Owned(id);
                r
            })
            .collect();
        assert_eq!(mine, postcard::to_stdvec(&records).expect("encodes"));
    }

    /// The live jobs are written straight from the engine ([`Engine::encode_live_jobs`]): the
    /// bytes are exactly those of the decoded record encoded again, so the two paths cannot
    /// drift.
    /// The engine holds queued, running (with charges) and finished jobs and a freed slot.
    #[test]
    fn live_jobs_encode_as_the_records_they_decode_to() {
        let mut e = Engine::new(Time::ZERO, Policy::built_in(), EngineConfig::default());
        for i in 0..6 {
            let tenant = if i % 2 == 0 { "acme" } else { "globex" };
            e.submit(Time(i), JobSpec::new(format!("j{i}"), tenant));
        }
        e.worker_ready(Time(10), &offer(2.0, 2)).expect("ready");
        let leases = e.schedule(Time(10));
        assert_eq!(leases.len(), 2, "two jobs run");
        let done = &leases[0];
        e.finish(
            Time(20),
            &done.job,
            done.epoch,
            crate::Outcome::Succeeded,
            None,
            None,
        )
        .expect("finishes");
        assert!(
            e.jobs
                .iter()
                .any(|j| j.as_ref().is_some_and(|j| j.attempt.is_some()))
        );
        assert!(!e.free_jobs.is_empty() && e.finished.len() > 0);
        let bytes = e.snapshot();
        let decoded: SnapshotRecord = postcard::from_bytes(&bytes).expect("decodes");
        assert_eq!(postcard::to_stdvec(&decoded).expect("encodes"), bytes);
    }

    // Proves: a snapshot's pieces join to exactly the snapshot's bytes while sharing the
    // finished jobs' full chunks with the engine, and stay that snapshot while the engine goes
    // on and forgets every chunk they hold; the engine's own later snapshots are whole.
    #[test]
    fn snapshot_pieces_share_the_full_chunks_and_outlive_the_engine_forgetting_them() {
        let chunk = crate::engine::chunked::CHUNK;
        let (mut e, _) = engine_with_many_finished(2 * chunk, 3 * chunk + 37);
        let pieces = e.snapshot_pieces();
        let bytes = e.snapshot();
        assert_eq!(pieces.to_vec(), bytes);
        assert_eq!(pieces.len(), bytes.len());
        let shared = pieces
            .pieces
            .iter()
            .filter(|p| matches!(p, SnapshotPiece::Shared(..)))
            .count();
        assert_eq!(shared, 2, "both full chunks shared, the one filling copied");
        let view = e.durable_view();
        let mut now = Time(e.now.0 + 1_000);
        for i in 0..3 * chunk {
            now = Time(now.0 + 1_000);
            e.submit(now, JobSpec::new(format!("more-{i:05}"), "acme"));
            let lease = e.schedule(now).pop().expect("a lease");
            e.finish(
                now,
                &lease.job,
                lease.epoch,
                crate::Outcome::Succeeded,
                None,
                None,
            )
            .expect("finishes");
        }
        assert_eq!(pieces.to_vec(), bytes, "still the snapshot taken");
        let restored = Engine::restore(&pieces.to_vec(), e.config.clone()).expect("restores");
        assert_eq!(restored.durable_view(), view);
        drop(pieces);
        let later = Engine::restore(&e.snapshot(), e.config.clone()).expect("restores");
        later.audit().expect("audit");
        assert_eq!(later.durable_view(), e.durable_view());
    }

    /// An engine that has finished more jobs than it remembers, its oldest forgotten in the
    /// middle of a chunk, with failure reasons (records of several lengths) and live jobs.
    /// Returns it with the ids it finished, in order, and how each ended.
    fn engine_with_many_finished(
        retention: usize,
        finished: usize,
    ) -> (Engine, Vec<(String, JobState)>) {
        let config = EngineConfig {
            finished_retention: retention,
            ..EngineConfig::default()
        };
        let mut e = Engine::new(Time::ZERO, Policy::built_in(), config);
        let offer = crate::WorkerOffer {
            worker: "w0".into(),
            pool: "default".into(),
            capacity: std::collections::BTreeMap::from([("cpu".to_string(), 1.0)]),
            labels: std::collections::BTreeMap::new(),
            max_jobs: u32::MAX,
        };
        let mut now = Time::ZERO;
        for i in 0..finished + 3 {
            now = Time(now.0 + 1_000);
            let mut spec = JobSpec::new(format!("job-{i:05}"), ["acme", "globex"][i % 2]);
            spec.max_attempts = Some(1);
            e.submit(now, spec);
        }
        e.worker_ready(now, &offer).expect("ready");
        let mut ended = Vec::new();
        for i in 0..finished {
            now = Time(now.0 + 1_000);
            let lease = e.schedule(now).pop().expect("a lease");
            let outcome = if i % 5 == 0 {
                crate::Outcome::Failed { retryable: false }
            } else {
                crate::Outcome::Succeeded
            };
            let state = e
                .finish(now, &lease.job, lease.epoch, outcome, None, None)
                .expect("finishes");
            ended.push((lease.job, state));
        }
        (e, ended)
    }

    /// A snapshot copies the finished jobs' bytes as the list keeps them between the parts it
    /// encodes: the result is exactly the record as postcard writes it, and it restores to the
    /// same engine, which finds every remembered job and has forgotten the others.
    #[test]
    fn a_snapshot_is_its_record_as_postcard_writes_it() {
        let chunk = crate::engine::chunked::CHUNK;
        let (e, ended) = engine_with_many_finished(chunk + 100, 2 * chunk + 37);
        assert_eq!(e.finished.len(), chunk + 100);
        let bytes = e.snapshot();
        let decoded: SnapshotRecord = postcard::from_bytes(&bytes).expect("decodes");
        assert_eq!(postcard::to_stdvec(&decoded).expect("encodes"), bytes);
        let restored = Engine::restore(&bytes, e.config.clone()).expect("restores");
        restored.audit().expect("audit");
        assert_eq!(restored.durable_view(), e.durable_view());
        assert_eq!(
            restored.snapshot(),
            bytes,
            "a restored engine writes the same bytes"
        );
        let first_kept = ended.len() - (chunk + 100);
        assert!(ended.iter().any(|(_, s)| *s == JobState::Failed));
        for (i, (id, state)) in ended.iter().enumerate() {
            let want = (i >= first_kept).then_some(*state);
            assert_eq!(restored.status(id).map(|s| s.state), want, "{id}");
        }
    }

    /// A snapshot whose finished job names a tenant the snapshot does not hold is refused
    /// with the job named, not restored to panic at the first status query.
    #[test]
    fn a_finished_job_of_an_unknown_tenant_is_refused() {
        let (e, _) = engine_with_many_finished(50, 60);
        let bytes = e.snapshot();
        let Ok(SnapshotRecord::V2(mut v1, added)) = postcard::from_bytes::<SnapshotRecord>(&bytes)
        else {
            panic!("snapshots are written as V2");
        };
        v1.finished[7].tenant = 99;
        let bad = postcard::to_stdvec(&SnapshotRecord::V2(v1, added)).expect("encodes");
        let err = Engine::restore(&bad, e.config.clone())
            .err()
            .expect("refused");
        assert!(
            err.contains("finished job") && err.contains("tenant 99"),
            "{err}"
        );
    }

    /// A snapshot whose live job demands no resource (which no submission can) is refused
    /// with the job named: scheduling stops a pass once no waiting worker has anything free.
    #[test]
    fn a_job_demanding_nothing_is_refused() {
        let (e, _) = engine_with_many_finished(50, 60);
        let mut e = e;
        e.submit(Time(1_000_000), JobSpec::new("queued-0", "acme"));
        let bytes = e.snapshot();
        let Ok(SnapshotRecord::V2(mut v1, added)) = postcard::from_bytes::<SnapshotRecord>(&bytes)
        else {
            panic!("snapshots are written as V2");
        };
        let job = v1.head.jobs.first_mut().expect("a live job");
        let id = job.id.to_string();
        job.shape.demand = ResVec::default();
        let bad = postcard::to_stdvec(&SnapshotRecord::V2(v1, added)).expect("encodes");
        let err = Engine::restore(&bad, e.config.clone())
            .err()
            .expect("refused");
        assert!(
            err.contains(&id) && err.contains("demands no resource"),
            "{err}"
        );
    }

    /// V1's record is three structs in a row; postcard writes them as the flat list of fields
    /// snapshots were first written with, so snapshots of either kind decode as the other.
    #[test]
    fn the_split_record_encodes_as_the_flat_one() {
        #[derive(Serialize, Deserialize)]
        struct FlatV1 {
            policy_version: u64,
            policy_source: String,
            now: Time,
            seq: u64,
            resources: Vec<String>,
            classes: Vec<ClassSnap>,
            tenants: Vec<TenantSnap>,
            nodes: Vec<NodeSnap>,
            workers: Vec<(u32, String, String)>,
            worker_slots: u32,
            pools: Vec<(String, Ledger)>,
            jobs: Vec<JobSnap<'static>>,
            free_jobs: Vec<u32>,
            job_slots: u32,
            finished: Vec<FinishedSnap<'static>>,
            gps_v: u128,
            gps_at: Time,
            gps_backlog: Vec<(u128, u32)>,
            gps_last_finish: Vec<(u32, u128)>,
            gps_weight_sum: u128,
            drr_round: u128,
            drr_position: u64,
            drain: Vec<(u16, JobSpecShape, DrainV1)>,
            stats: EngineStats,
        }
        #[derive(Serialize, Deserialize)]
        enum FlatRecord {
            V1(FlatV1),
            V2(FlatV1, SnapshotV2),
        }
        let (e, _) = engine_with_many_finished(50, 80);
        let bytes = e.snapshot();
        let flat: FlatRecord = postcard::from_bytes(&bytes).expect("decodes as the flat record");
        let FlatRecord::V2(v1, _) = &flat else {
            panic!("snapshots are written as V2");
        };
        assert_eq!((v1.finished.len(), v1.jobs.len()), (50, 3));
        assert_eq!(postcard::to_stdvec(&flat).expect("encodes"), bytes);
    }

    /// A deferred job keeps its not-before time through a snapshot (the record holds it as
    /// its `enqueued`): restored, it still waits, is told `Deferred` until that time on a
    /// resubmission, and becomes eligible exactly then, not before.
    #[test]
    fn a_deferred_job_waits_for_its_time_after_a_restore() {
        let mut e = Engine::new(Time::ZERO, Policy::built_in(), EngineConfig::default());
        let mut later = JobSpec::new("later", "acme");
        later.not_before = Some(Time(5_000));
        assert!(matches!(
            e.submit(Time(1), later.clone()),
            crate::Admission::Deferred {
                until: Time(5_000),
                ..
            }
        ));
        e.submit(Time(2), JobSpec::new("now", "acme"));
        let restored = Engine::restore(&e.snapshot(), EngineConfig::default()).expect("restores");
        restored.audit().expect("audit");
        assert_eq!(restored.durable_view(), e.durable_view());
        for mut engine in [e, restored] {
            assert!(matches!(
                engine.submit(Time(3), later.clone()),
                crate::Admission::Deferred {
                    until: Time(5_000),
                    duplicate: true,
                    ..
                }
            ));
            engine.tick(Time(4_999));
            assert_eq!(engine.queued_jobs, 1, "still deferred at 4,999");
            engine.tick(Time(5_000));
            assert_eq!(engine.queued_jobs, 2, "eligible at 5,000");
            engine.audit().expect("audit");
        }
    }

    /// A restore told how many jobs the log's tail will add indexes them without growing its
    /// id index; one not told grows it on the way (so the check can fail).
    #[test]
    fn a_restore_with_room_indexes_the_tail_without_growing() {
        let mut e = Engine::new(Time::ZERO, Policy::built_in(), EngineConfig::default());
        for i in 0..1_000 {
            e.submit(Time(i), JobSpec::new(format!("j{i}"), "acme"));
        }
        let bytes = e.snapshot();
        let tail = 3_000;
        let mut grew = [false, false];
        for (k, room) in [tail, 0].into_iter().enumerate() {
            let mut r =
                Engine::restore_with_room(&bytes, EngineConfig::default(), room).expect("restores");
            for i in 0..tail {
                r.submit(
                    Time(2_000 + i as u64),
                    JobSpec::new(format!("t{i}"), "acme"),
                );
                grew[k] |= r.job_by_id.is_growing();
            }
            assert_eq!(r.live_jobs(), 1_000 + tail);
            r.audit().expect("audit");
        }
        assert_eq!(
            grew,
            [false, true],
            "sized for the tail: no growth; not sized: growth"
        );
    }

    /// A snapshot written before V2 (no meters) still restores: the same jobs and books, and
    /// admission starts unmeasured.
    #[test]
    fn a_v1_snapshot_restores_without_meters() {
        let mut e = Engine::new(Time::ZERO, Policy::built_in(), EngineConfig::default());
        for i in 0..3 {
            let admission = e.submit(Time(i), JobSpec::new(format!("j{i}"), "acme"));
            assert!(matches!(admission, crate::Admission::Accepted { .. }));
        }
        let bytes = e.snapshot();
        let Ok(SnapshotRecord::V2(v1, added)) = postcard::from_bytes::<SnapshotRecord>(&bytes)
        else {
            panic!("snapshots are written as V2");
        };
        assert!(!added.shape_meters.is_empty() && !added.leaf_meters.is_empty());
        let old = postcard::to_stdvec(&SnapshotRecord::V1(v1)).expect("encodes");
        let restored = Engine::restore(&old, EngineConfig::default()).expect("V1 restores");
        restored.audit().expect("audit");
        assert!(restored.meters.is_empty() && restored.meter_archive.is_empty());
        assert!(
            restored
                .nodes
                .iter()
                .all(|n| n.meter == RateMeter::default())
        );
        let strip = |view: String| -> String {
            view.lines()
                .filter(|l| !l.starts_with("meter ") && !l.starts_with("tenant "))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(strip(restored.durable_view()), strip(e.durable_view()));
        assert_eq!(restored.queued_jobs, 3);
    }
}
