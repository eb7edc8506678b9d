//! The dispatch-decision rig shared by the criterion benchmark (`benches/decision.rs`) and
//! `fairway bench engine`, so that both measure exactly the same work. Behind the `bench-rig`
//! feature: it is not part of the engine's API.
//!
//! An engine with one polling worker of capacity cpu = 1 and a backlog spread round-robin over
//! tenants. One decision ([`Rig::decide`]) is a `schedule` that grants one lease plus the
//! `finish` of that lease, which frees the capacity for the next decision: the steady-state
//! work the engine does per job dispatched. After each, [`Rig::replace`] submits a job for the
//! tenant just served, so that the backlog keeps its exact size and shape.
//!
//! The rig is as pure as the engine: it reads no clock (callers time [`Rig::decide`]), and
//! its simulated time advances by [`ESTIMATE`] per decision.

use crate::hash::FxHashMap;
use crate::{Admission, Dur, Engine, EngineConfig, JobSpec, Lease, Outcome, Policy, Time};
use crate::{ConfigError, WorkerOffer};

/// Declared (and actual) run time of every job: `now` advances by this much per decision, so
/// that usage equals the estimate and the fair policy's charges are never reconciled.
pub const ESTIMATE: Dur = Dur::from_millis(10);

/// How job ids are formed. Producers choose ids, and the engine keys its job tables by them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobIds {
    /// 16 hex digits, a bijective mix of a counter: spread like random UUIDs.
    Random,
    /// The counter in decimal (`1`, `2`, ...), as many producers number their jobs.
    Sequential,
    /// A UUIDv7's canonical text, as the Rust SDK makes its ids: a millisecond prefix that
    /// grows with the counter (1,000 jobs a millisecond), the rest a mix of it.
    Uuid,
}

impl JobIds {
    /// Its name on a command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            JobIds::Random => "random",
            JobIds::Sequential => "sequential",
            JobIds::Uuid => "uuid",
        }
    }
}

impl std::str::FromStr for JobIds {
    type Err = String;

    fn from_str(s: &str) -> Result<JobIds, String> {
        match s {
            "random" => Ok(JobIds::Random),
            "sequential" => Ok(JobIds::Sequential),
            "uuid" => Ok(JobIds::Uuid),
            _ => Err(format!("{s:?} is not random, sequential or uuid")),
        }
    }
}

/// SplitMix64's finalizer: a bijection on u64 that spreads a counter over all bits.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The built-in policy `name` with its defaults (`fair`, `drf`, `fifo`, ...).
pub fn policy(name: &str) -> Result<Policy, Vec<ConfigError>> {
    Policy::from_text(&format!("[policy]\nname = {name:?}\n"))
}

/// An engine with one worker and a fixed backlog, driven one decision at a time.
pub struct Rig {
    engine: Engine,
    now: Time,
    tenant_names: Vec<String>,
    /// Tenant number by name, to find whom a lease's job belonged to (lookups only).
    tenant_index: FxHashMap<String, usize>,
    next_job: u64,
    job_ids: JobIds,
    /// Whether the engine captures its events for a driver, as the server's does: each
    /// decision then also builds its events, and the rig drops them as a driver would after
    /// persisting them.
    capture: bool,
}

impl Rig {
    /// An engine running `policy` with one polling worker of capacity cpu = 1, room for
    /// `max_jobs` live jobs, and no job yet; with `capture`, it captures its events as the
    /// server's engine does (see [`Rig::decide`]).
    pub fn new(policy: Policy, max_jobs: usize, job_ids: JobIds, capture: bool) -> Rig {
        Rig::with_decision_ring(policy, max_jobs, job_ids, capture, 0)
    }

    /// [`Rig::new`] whose engine keeps its last `decision_ring` decision records, as the
    /// server's keeps 4,096 for `explain` and the decisions API (0: none, each decision then
    /// builds no record).
    pub fn with_decision_ring(
        policy: Policy,
        max_jobs: usize,
        job_ids: JobIds,
        capture: bool,
        decision_ring: usize,
    ) -> Rig {
        let config = EngineConfig {
            capture_events: capture,
            decision_ring,
            max_jobs,
            ..Default::default()
        };
        let mut engine = Engine::new(Time::ZERO, policy, config);
        let offer = WorkerOffer {
            worker: "w0".into(),
            pool: "default".into(),
            capacity: [("cpu".into(), 1.0)].into(),
            labels: Default::default(),
            max_jobs: u32::MAX,
        };
        engine.worker_ready(Time::ZERO, &offer).expect("worker");
        Rig {
            engine,
            now: Time::ZERO,
            tenant_names: Vec::new(),
            tenant_index: FxHashMap::default(),
            next_job: 0,
            job_ids,
            capture,
        }
    }

    /// Names `count` more tenants `{prefix}-{i}`; they exist in the engine once they submit.
    /// Returns their numbers.
    pub fn add_tenants(&mut self, prefix: &str, count: usize) -> std::ops::Range<usize> {
        let first = self.tenant_names.len();
        for i in 0..count {
            let name = format!("{prefix}-{i}");
            self.tenant_index.insert(name.clone(), first + i);
            self.tenant_names.push(name);
        }
        first..self.tenant_names.len()
    }

    /// Submits one job for tenant number `tenant`.
    pub fn submit(&mut self, tenant: usize) {
        self.next_job += 1;
        let id = match self.job_ids {
            JobIds::Random => format!("{:016x}", mix(self.next_job)),
            JobIds::Sequential => self.next_job.to_string(),
            JobIds::Uuid => {
                let (n, r) = (self.next_job, mix(self.next_job));
                let ms = 0x0192_0000_0000 + n / 1_000;
                format!(
                    "{:08x}-{:04x}-7{:03x}-{:04x}-{:012x}",
                    ms >> 16,
                    ms & 0xFFFF,
                    r >> 52,
                    0x8000 | (r >> 36) & 0x3FFF,
                    r & 0xFFFF_FFFF_FFFF,
                )
            }
        };
        let spec = JobSpec {
            estimate: Some(ESTIMATE),
            ..JobSpec::new(id, &self.tenant_names[tenant])
        };
        let admission = self.engine.submit(self.now, spec);
        if self.capture {
            drop(self.engine.drain_events());
        }
        assert!(
            matches!(admission, Admission::Accepted { .. }),
            "{admission:?}"
        );
    }

    /// Submits `queued` jobs spread round-robin over tenants `tenants` (numbers from
    /// [`Rig::add_tenants`]).
    pub fn fill(&mut self, tenants: std::ops::Range<usize>, queued: usize) {
        for t in Rig::fill_order(tenants, queued) {
            self.submit(t);
        }
    }

    /// The tenant of each of [`Rig::fill`]'s submissions, in order: for a caller that times
    /// them one by one.
    pub fn fill_order(
        tenants: std::ops::Range<usize>,
        queued: usize,
    ) -> impl Iterator<Item = usize> {
        (0..queued).map(move |k| tenants.start + k % tenants.len())
    }

    /// Gives each tenant of `tenants` a job and runs it to completion: they exist, and are
    /// idle with empty queues.
    pub fn idle(&mut self, tenants: std::ops::Range<usize>) {
        for t in tenants {
            self.submit(t);
            self.decide();
        }
    }

    /// One decision: a scheduling pass that grants exactly one lease, and its completion.
    /// When the rig captures events, the decision's events are taken and dropped here, inside
    /// the decision, as the server's writer takes them after every turn.
    pub fn decide(&mut self) -> Lease {
        let mut leases = self.engine.schedule(self.now);
        assert_eq!(leases.len(), 1, "one worker, one free slot: one lease");
        let lease = leases.pop().expect("one lease");
        self.now = self.now.plus(ESTIMATE);
        self.engine
            .finish(
                self.now,
                &lease.job,
                lease.epoch,
                Outcome::Succeeded,
                None,
                None,
            )
            .expect("finish a live lease");
        if self.capture {
            drop(self.engine.drain_events());
        }
        lease
    }

    /// Submits a job for the tenant whose job `lease` ran, keeping the backlog's shape.
    pub fn replace(&mut self, lease: &Lease) {
        let status = self
            .engine
            .status(&lease.job)
            .expect("finished jobs are remembered");
        let tenant = self.tenant_index[&status.tenant];
        self.submit(tenant);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves: a decision grants one lease and a replacement keeps the backlog's size and its
    // spread over tenants, under every policy the benchmarks measure, with events captured or
    // not; captured events do not pile up between decisions.
    #[test]
    fn a_decision_and_its_replacement_keep_the_backlog() {
        for name in ["fair", "drf", "fifo"] {
            for ids in [JobIds::Random, JobIds::Sequential, JobIds::Uuid] {
                for capture in [false, true] {
                    let mut rig = Rig::new(policy(name).unwrap(), 1_000, ids, capture);
                    let idle = rig.add_tenants("idle", 3);
                    rig.idle(idle);
                    let active = rig.add_tenants("tenant", 4);
                    rig.fill(active, 100);
                    for _ in 0..50 {
                        let lease = rig.decide();
                        rig.replace(&lease);
                        assert_eq!(rig.engine.live_jobs(), 100, "{name}");
                        assert!(rig.engine.drain_events().is_empty(), "{name}");
                    }
                    rig.engine.audit().unwrap();
                }
            }
        }
    }

    #[test]
    fn job_ids_parse_their_names() {
        for ids in [JobIds::Random, JobIds::Sequential, JobIds::Uuid] {
            assert_eq!(ids.name().parse::<JobIds>(), Ok(ids));
        }
        assert!("guid".parse::<JobIds>().is_err());
    }

    // Proves: `--job-ids uuid` makes UUIDv7 texts (version 7, RFC variant, lowercase), the
    // form the SDK sends and the engine's records hold in 16 bytes.
    #[test]
    fn uuid_job_ids_are_uuid_v7_texts() {
        let mut rig = Rig::new(policy("fair").unwrap(), 10, JobIds::Uuid, false);
        let tenants = rig.add_tenants("t", 1);
        rig.fill(tenants, 5);
        for _ in 0..5 {
            let lease = rig.decide();
            let id = lease.job.as_str();
            let b = id.as_bytes();
            assert_eq!(b.len(), 36, "{id}");
            for (i, &c) in b.iter().enumerate() {
                match i {
                    8 | 13 | 18 | 23 => assert_eq!(c, b'-', "{id}"),
                    14 => assert_eq!(c, b'7', "{id}"),
                    19 => assert!(b"89ab".contains(&c), "{id}"),
                    _ => assert!(c.is_ascii_digit() || (b'a'..=b'f').contains(&c), "{id}"),
                }
            }
        }
    }
}
