//! `engine_ops`: the fuzzer's bytes as a sequence of engine commands, run against one
//! [`Engine`] as a server would drive it, with the books checked after every step.
//!
//! The first bytes choose the engine's limits and its first policy; then each command takes a
//! few bytes: submit (a small random spec for one of five tenants, two of them in a tree, and
//! one of three classes or an unknown one; new ids and reused ones), a worker ready with a small
//! capacity in one of two pools, a worker withdrawing, a scheduling pass, a heartbeat or a
//! completion with the current epoch or a stale one, a cancellation, time passing (with or
//! without a tick), a stop request obeyed, a publish of one of a few valid policies (`fair` with
//! reserves, preemption, guarantees, limits, quotas and a tenant tree; `fifo` with EASY
//! backfilling; `fair` with conservative backfilling; `drf`, `wfq`, `drr`, `strict`, `sjf`,
//! `round-robin`) or of an invalid one, read-only queries (explain, reports), and a restart from
//! a snapshot or from the log. Any command may arrive with a clock a second behind the last one
//! (a server's clock is not monotonic across restarts).
//!
//! Checks:
//! - after every step, [`Engine::audit`] (the books recomputed from scratch) is `Ok`;
//! - a heartbeat or completion with a stale epoch is refused and changes no durable state;
//! - a restart from [`Engine::snapshot`] through [`Engine::restore`], and one from
//!   [`Engine::replay`] of every event so far, give the live engine's [`Engine::durable_view`]
//!   (the run then goes on with the restarted engine, as a server does);
//! - at the end, replay of all events and restore of a snapshot equal the live engine again.
//!
//! Work is bounded: at most [`MAX_STEPS`] commands, six workers of at most four jobs each.
//! With `FAIRWAY_FUZZ_TRACE` set every command is printed to stderr as it runs.

use arbitrary::{Result, Unstructured};
use fairway_core::event::Event;
use fairway_core::{Dur, Engine, EngineConfig, JobSpec, Outcome, Policy, Time, WorkerOffer};
use std::collections::{BTreeMap, BTreeSet};

/// The most commands one input runs.
pub const MAX_STEPS: usize = 256;

const TENANTS: [&str; 5] = ["t0", "t1", "t2", "org/a", "org/b"];
const CLASSES: [&str; 4] = ["default", "urgent", "batch", "unknown"];
const WORKERS: [&str; 6] = ["w0", "w1", "w2", "w3", "w4", "w5"];
const POOLS: [&str; 2] = ["default", "gpu"];
/// Worker kinds: pool, capacity, labels. Worker `i` starts as kind `i`.
const KINDS: [(&str, &[(&str, f64)], &[(&str, &str)]); 6] = [
    ("default", &[("cpu", 4.0)], &[]),
    ("default", &[("cpu", 2.0), ("mem", 16.0)], &[]),
    ("default", &[("cpu", 1.0)], &[("zone", "a")]),
    ("default", &[("cpu", 2.0), ("mem", 4.0)], &[("zone", "b")]),
    ("gpu", &[("cpu", 4.0), ("gpu", 2.0), ("mem", 16.0)], &[]),
    ("gpu", &[("cpu", 1.0), ("gpu", 1.0)], &[("zone", "a")]),
];
const CPU: [f64; 6] = [0.0, 0.5, 1.0, 1.5, 2.0, 4.0];
const MILLIS: [u64; 10] = [0, 1, 10, 100, 500, 1_000, 2_000, 5_000, 30_000, 120_000];

/// The policies a run may publish. Every one but the last validates.
pub const POLICIES: [&str; 10] = [
    // 0: fair, with everything that interacts with preemption and admission.
    r#"
[policy]
name = "fair"
preemption = true
lease = "5s"
preempt_grace = "1s"
default_estimate = "2s"

[[tenant]]
name = "t0"
guarantee = { cpu = 1 }
max_outstanding = 40

[[tenant]]
name = "t1"
weight = 2
burst = 20
rate = 2

[[tenant]]
name = "t2"
limit = { cpu = 2 }
retry_budget = 6
retry_window = "10s"

[[tenant]]
name = "org"
weight = 3

[[tenant]]
name = "org/a"
guarantee = { cpu = 1, gpu = 1 }
classes = ["default", "batch"]

[[tenant]]
name = "org/b"
limit = { cpu = 3, mem = 8 }

[[class]]
name = "urgent"
priority = 10
weight = 4
reserve = 0.25
max_age = "20s"
overload = "defer"
max_estimate = "30s"

[[class]]
name = "batch"
max_attempts = 3
backoff = "100ms"
backoff_max = "1s"
aging_step = "1s"
aging_cap = 5
on_deadline = "downgrade"
"#,
    // 1: fifo with EASY backfilling.
    r#"
[policy]
name = "fifo"
backfill = "easy"
lease = "10s"

[[class]]
name = "urgent"
priority = 10

[[class]]
name = "batch"
max_attempts = 2
on_deadline = "drop"
"#,
    // 2: fair with conservative backfilling over a tenant tree, no preemption.
    r#"
[policy]
name = "fair"
backfill = "conservative"
reservation_depth = 3
backfill_window = 8
lease = "3s"

[[tenant]]
name = "org"
weight = 2
guarantee = { cpu = 2 }

[[tenant]]
name = "org/b"
weight = 3

[[class]]
name = "urgent"
priority = 5
reserve = 0.5
max_age = "5s"

[[class]]
name = "batch"
weight = 0.5
max_attempts = 4
backoff = "10ms"
on_deadline = "drop"
"#,
    // 3: weighted DRF.
    r#"
[policy]
name = "drf"
preemption = true

[[tenant]]
name = "t1"
weight = 3
limit = { cpu = 4 }

[[class]]
name = "urgent"
priority = 1
reserve = 0.2
"#,
    // 4: WFQ.
    r#"
[policy]
name = "wfq"

[[tenant]]
name = "t0"
weight = 0.5

[[class]]
name = "batch"
max_attempts = 5
"#,
    // 5: DRR with a small quantum.
    r#"
[policy]
name = "drr"
quantum = 0.5
lease = "2s"

[[tenant]]
name = "t2"
weight = 2
max_outstanding = 10
"#,
    // 6: strict priority with aging.
    r#"
[policy]
name = "strict"
backfill = "easy"

[[class]]
name = "urgent"
priority = 100

[[class]]
name = "batch"
priority = -5
aging_step = "500ms"
aging_cap = 200
"#,
    // 7: shortest job first.
    r#"
[policy]
name = "sjf"
backfill = "conservative"
"#,
    // 8: round robin over tenants.
    r#"
[policy]
name = "round-robin"
preemption = true

[[class]]
name = "urgent"
priority = 3
reserve = 0.3
"#,
    // 9: invalid (unknown policy name): publish must refuse it and change nothing.
    r#"
[policy]
name = "lottery"
"#,
];

/// One command of a run.
#[derive(Clone, Debug)]
enum Command {
    Submit(Box<JobSpec>),
    /// Worker `worker` polls for up to `max_jobs` leases; with `kind`, it comes back as another
    /// kind of worker (a restart with other settings under the same name).
    Ready {
        worker: usize,
        max_jobs: u32,
        kind: Option<usize>,
    },
    Withdraw(usize),
    Schedule,
    Heartbeat {
        pick: usize,
        epoch_offset: i8,
        progress: Option<Dur>,
    },
    Finish {
        pick: usize,
        epoch_offset: i8,
        outcome: Outcome,
        usage: Option<Dur>,
        progress: Option<Dur>,
    },
    Cancel(usize),
    Advance {
        by: Dur,
        tick: bool,
    },
    ObeyStops,
    Publish(usize),
    Query(usize),
    Restart {
        from_snapshot: bool,
    },
}

fn pick_of<T: Copy>(u: &mut Unstructured, from: &[T]) -> Result<T> {
    Ok(*u.choose(from)?)
}

fn millis(u: &mut Unstructured) -> Result<Dur> {
    Ok(Dur::from_millis(pick_of(u, &MILLIS)?))
}

fn epoch_offset(u: &mut Unstructured) -> Result<i8> {
    // Mostly the current epoch; sometimes one behind or ahead.
    Ok(match u.int_in_range(0..=7u8)? {
        0 => -1,
        1 => 1,
        _ => 0,
    })
}

impl Command {
    fn decode(
        u: &mut Unstructured,
        next_id: &mut u32,
        ids: &[String],
        now: Time,
    ) -> Result<Command> {
        Ok(match u.int_in_range(0..=15u8)? {
            0..=2 => Command::Submit(Box::new(spec(u, next_id, ids, now)?)),
            3 => Command::Ready {
                worker: u.choose_index(WORKERS.len())?,
                max_jobs: u.int_in_range(0..=4)?,
                kind: if u.int_in_range(0..=7u8)? == 0 {
                    Some(u.choose_index(KINDS.len())?)
                } else {
                    None
                },
            },
            4 => Command::Withdraw(u.choose_index(WORKERS.len())?),
            5 | 6 => Command::Schedule,
            7 => Command::Heartbeat {
                pick: u.arbitrary::<u8>()? as usize,
                epoch_offset: epoch_offset(u)?,
                progress: if u.arbitrary()? {
                    Some(millis(u)?)
                } else {
                    None
                },
            },
            8 | 9 => Command::Finish {
                pick: u.arbitrary::<u8>()? as usize,
                epoch_offset: epoch_offset(u)?,
                outcome: match u.int_in_range(0..=4u8)? {
                    0 | 1 => Outcome::Succeeded,
                    2 => Outcome::Failed { retryable: true },
                    3 => Outcome::Failed { retryable: false },
                    _ => Outcome::Stopped,
                },
                usage: if u.arbitrary()? {
                    Some(millis(u)?)
                } else {
                    None
                },
                progress: if u.arbitrary()? {
                    Some(millis(u)?)
                } else {
                    None
                },
            },
            10 => Command::Cancel(u.arbitrary::<u8>()? as usize),
            11 => Command::Advance {
                by: millis(u)?,
                tick: u.int_in_range(0..=3u8)? != 0,
            },
            12 => Command::ObeyStops,
            13 => Command::Publish(u.choose_index(POLICIES.len())?),
            14 => Command::Query(u.arbitrary::<u8>()? as usize),
            _ => Command::Restart {
                from_snapshot: u.arbitrary()?,
            },
        })
    }
}

fn spec(u: &mut Unstructured, next_id: &mut u32, ids: &[String], now: Time) -> Result<JobSpec> {
    // One in eight reuses an id: idempotent resubmission, or a different job under the same id.
    let id = if !ids.is_empty() && u.int_in_range(0..=7u8)? == 0 {
        ids[u.choose_index(ids.len())?].clone()
    } else {
        *next_id += 1;
        format!("j{next_id}")
    };
    let mut spec = JobSpec::new(id, pick_of(u, &TENANTS)?);
    let class = pick_of(u, &CLASSES)?;
    spec.class = (class != "default" || u.arbitrary()?).then(|| class.to_string());
    spec.priority = u.int_in_range(-2..=2)?;
    let cpu = pick_of(u, &CPU)?;
    if cpu > 0.0 {
        spec.demand.insert("cpu".into(), cpu);
    }
    if u.int_in_range(0..=3u8)? == 0 {
        spec.demand
            .insert("mem".into(), pick_of(u, &[1.0, 4.0, 16.0])?);
    }
    if u.int_in_range(0..=5u8)? == 0 {
        spec.demand.insert("gpu".into(), 1.0);
        spec.requires.insert("pool".into(), "gpu".into());
    }
    if u.int_in_range(0..=7u8)? == 0 {
        spec.requires
            .insert("zone".into(), pick_of(u, &["a", "b"])?.into());
    }
    spec.estimate = if u.int_in_range(0..=3u8)? == 0 {
        None
    } else {
        Some(Dur::from_millis(pick_of(
            u,
            &[1, 50, 500, 2_000, 10_000, 60_000],
        )?))
    };
    if u.int_in_range(0..=5u8)? == 0 {
        spec.deadline = Some(now.plus(millis(u)?));
    }
    if u.int_in_range(0..=5u8)? == 0 {
        spec.not_before = Some(now.plus(millis(u)?));
    }
    if u.int_in_range(0..=3u8)? == 0 {
        spec.max_attempts = Some(u.int_in_range(1..=4)?);
    }
    spec.preemptible = u.arbitrary()?;
    spec.checkpointable = u.int_in_range(0..=3u8)? == 0;
    if u.int_in_range(0..=7u8)? == 0 {
        spec.gang = u.int_in_range(2..=4)?;
        spec.gang_min = if u.arbitrary()? {
            Some(u.int_in_range(1..=spec.gang)?)
        } else {
            None
        };
    }
    Ok(spec)
}

fn offer(worker: usize, kind: usize, max_jobs: u32) -> WorkerOffer {
    let (pool, capacity, labels) = KINDS[kind];
    WorkerOffer {
        worker: WORKERS[worker].to_string(),
        pool: pool.to_string(),
        capacity: capacity.iter().map(|(r, a)| (r.to_string(), *a)).collect(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        max_jobs,
    }
}

/// The engine under test and what the driver saw of it.
struct Driver {
    engine: Engine,
    config: EngineConfig,
    now: Time,
    /// Every event since the engine was created, in order: the log a store would hold.
    log: Vec<Event>,
    /// Ids submitted, accepted or not (bounded by the step count).
    ids: Vec<String>,
    next_id: u32,
    /// Attempts granted and not yet seen to end: job -> epoch.
    running: BTreeMap<String, u64>,
    /// The kind each worker last announced, and the jobs its leases hold.
    kinds: [usize; 6],
    holding: [BTreeSet<String>; 6],
    /// The steps so far, for failure messages.
    steps: Vec<String>,
}

impl Driver {
    fn new(config: EngineConfig, policy: usize) -> Driver {
        let policy = Policy::from_text(POLICIES[policy]).expect("the harness's policies validate");
        let engine = Engine::new(Time::ZERO, policy, config.clone());
        let mut driver = Driver {
            engine,
            config,
            now: Time::ZERO,
            log: Vec::new(),
            ids: Vec::new(),
            next_id: 0,
            running: BTreeMap::new(),
            kinds: [0, 1, 2, 3, 4, 5],
            holding: Default::default(),
            steps: Vec::new(),
        };
        driver.absorb();
        driver
    }

    fn timeline(&self) -> String {
        let start = self.steps.len().saturating_sub(40);
        let mut out = String::new();
        for (i, s) in self.steps.iter().enumerate().skip(start) {
            out.push_str(&format!("  {i:>3} {s}\n"));
        }
        out
    }

    /// Moves the engine's new events to the log and follows attempts through them.
    fn absorb(&mut self) {
        for event in self.engine.drain_events() {
            match &event {
                Event::LeaseGranted {
                    job,
                    epoch,
                    placements,
                    ..
                } => {
                    self.running.insert(job.clone(), *epoch);
                    for p in placements {
                        if let Some(w) = WORKERS.iter().position(|w| **w == *p.worker) {
                            self.holding[w].insert(job.clone());
                        }
                    }
                }
                Event::AttemptEnded { job, epoch, .. } => {
                    if self.running.get(job) == Some(epoch) {
                        self.running.remove(job);
                    }
                    for held in self.holding.iter_mut() {
                        held.remove(job);
                    }
                }
                _ => {}
            }
            self.log.push(event);
        }
    }

    fn pick_running(&self, pick: usize, offset: i8) -> Option<(String, u64)> {
        if self.running.is_empty() {
            return None;
        }
        let (job, epoch) = self.running.iter().nth(pick % self.running.len())?;
        let epoch = match offset {
            -1 => epoch.checked_sub(1)?,
            1 => epoch + 1,
            _ => *epoch,
        };
        Some((job.clone(), epoch))
    }

    /// Asserts that a refused lease operation changed no durable state and emitted nothing.
    fn check_unchanged(&mut self, before: &str, what: &str) {
        let events = self.engine.drain_events();
        assert!(
            events.is_empty(),
            "{what} was refused but emitted {events:?}\n{}",
            self.timeline()
        );
        assert_eq!(
            self.engine.durable_view(),
            before,
            "{what} was refused but changed the durable state\n{}",
            self.timeline()
        );
    }

    fn step(&mut self, command: Command, late: bool) {
        // A late command carries a clock a second behind the engine's.
        let at = if late {
            Time(self.now.0.saturating_sub(1_000_000_000))
        } else {
            self.now
        };
        let line = format!(
            "@{}ms{} {command:?}",
            at.0 / 1_000_000,
            if late { " late" } else { "" }
        );
        if crate::trace_enabled() {
            eprintln!("engine_ops {:>3} {line}", self.steps.len());
        }
        self.steps.push(line);
        match command {
            Command::Submit(spec) => {
                let id = spec.id.clone();
                let _ = self.engine.submit(at, *spec);
                if !self.ids.contains(&id) {
                    self.ids.push(id);
                }
            }
            Command::Ready {
                worker,
                max_jobs,
                kind,
            } => {
                // Another kind of worker under the same name: the engine accepts a new capacity
                // (F2) and refuses a new pool while the worker holds leases.
                let kind = kind.unwrap_or(self.kinds[worker]);
                if self
                    .engine
                    .worker_ready(at, &offer(worker, kind, max_jobs))
                    .is_ok()
                {
                    self.kinds[worker] = kind;
                }
            }
            Command::Withdraw(w) => self.engine.worker_withdraw(WORKERS[w]),
            Command::Schedule => {
                let _ = self.engine.schedule(at);
            }
            Command::Heartbeat {
                pick,
                epoch_offset,
                progress,
            } => {
                if let Some((job, epoch)) = self.pick_running(pick, epoch_offset) {
                    let before = (epoch_offset != 0).then(|| self.engine.durable_view());
                    let reply = self.engine.heartbeat(at, &job, epoch, progress);
                    if let Some(before) = before {
                        assert!(
                            reply.is_err(),
                            "heartbeat of {job} with stale epoch {epoch} accepted: {reply:?}\n{}",
                            self.timeline()
                        );
                        self.check_unchanged(&before, "a stale heartbeat");
                    }
                }
            }
            Command::Finish {
                pick,
                epoch_offset,
                outcome,
                usage,
                progress,
            } => {
                if let Some((job, epoch)) = self.pick_running(pick, epoch_offset) {
                    let before = (epoch_offset != 0).then(|| self.engine.durable_view());
                    let result = self
                        .engine
                        .finish(at, &job, epoch, outcome, usage, progress);
                    if let Some(before) = before {
                        assert!(
                            result.is_err(),
                            "completion of {job} with stale epoch {epoch} accepted: {result:?}\n{}",
                            self.timeline()
                        );
                        self.check_unchanged(&before, "a stale completion");
                    }
                }
            }
            Command::Cancel(pick) => {
                let id = if self.ids.is_empty() || pick % 8 == 7 {
                    "never-submitted".to_string()
                } else {
                    self.ids[pick % self.ids.len()].clone()
                };
                let _ = self.engine.cancel(at, &id);
            }
            Command::Advance { by, tick } => {
                self.now = self.now.plus(by);
                if tick {
                    let _ = self.engine.tick(self.now);
                }
            }
            Command::ObeyStops => {
                for stop in self.engine.poll_stops() {
                    let _ =
                        self.engine
                            .finish(at, &stop.job, stop.epoch, Outcome::Stopped, None, None);
                }
            }
            Command::Publish(p) => {
                let result = self.engine.publish(at, POLICIES[p]);
                assert_eq!(
                    result.is_ok(),
                    p != POLICIES.len() - 1,
                    "publish of policy {p}: {result:?}\n{}",
                    self.timeline()
                );
            }
            Command::Query(pick) => {
                let id = if self.ids.is_empty() {
                    "never-submitted".to_string()
                } else {
                    self.ids[pick % self.ids.len()].clone()
                };
                let _ = self.engine.status(&id);
                let _ = self.engine.explain(&id);
                let _ = self.engine.is_unplaceable(&id);
                let _ = self.engine.decisions_for(&id);
                let _ = self.engine.tenant_report(TENANTS[pick % TENANTS.len()]);
                let _ = self.engine.tenant_snapshots();
                let _ = self.engine.pool_usage();
                let _ = self.engine.class_usage(POOLS[pick % POOLS.len()]);
                let _ = self.engine.poll_timeout();
            }
            Command::Restart { from_snapshot } => {
                self.absorb();
                let restarted = self.restarted(from_snapshot);
                self.engine = restarted;
            }
        }
        self.absorb();
        if let Err(e) = self.engine.audit() {
            panic!(
                "audit failed after step {}: {e}\n{}",
                self.steps.len() - 1,
                self.timeline()
            );
        }
    }

    /// An engine recovered as a server recovers: from a snapshot, or by replaying the log.
    /// Its durable state must equal the live engine's.
    fn restarted(&self, from_snapshot: bool) -> Engine {
        let live = self.engine.durable_view();
        let (how, engine) = if from_snapshot {
            let snapshot = self.engine.snapshot();
            let engine = Engine::restore(&snapshot, self.config.clone()).unwrap_or_else(|e| {
                panic!(
                    "the live engine's snapshot does not restore: {e}\n{}",
                    self.timeline()
                )
            });
            ("restore(snapshot)", engine)
        } else {
            (
                "replay(log)",
                Engine::replay(&self.log, self.config.clone()),
            )
        };
        let recovered = engine.durable_view();
        if recovered != live {
            panic!(
                "{how} differs from the live engine\n{}\n--- live\n{live}--- {how}\n{recovered}",
                self.timeline()
            );
        }
        engine
    }
}

/// Runs one input.
pub fn run(data: &[u8]) {
    let _ = run_to_end(data);
}

/// Runs `data` as [`run`] does and returns the event log and the engine at the end (`None` when
/// the input is too short to choose a configuration). Used to make seed corpora.
pub fn run_to_end(data: &[u8]) -> Option<(Vec<Event>, Engine)> {
    let mut u = Unstructured::new(data);
    let config = config(&mut u).ok()?;
    let policy = u.choose_index(POLICIES.len() - 1).ok()?;
    if crate::trace_enabled() {
        eprintln!("engine_ops start: policy {policy}, {config:?}");
    }
    let mut driver = Driver::new(config, policy);
    while !u.is_empty() && driver.steps.len() < MAX_STEPS {
        let Ok(late) = u.int_in_range(0..=15u8).map(|b| b == 0) else {
            break;
        };
        let Ok(command) = Command::decode(&mut u, &mut driver.next_id, &driver.ids, driver.now)
        else {
            break;
        };
        driver.step(command, late);
    }
    let _ = driver.restarted(true);
    let _ = driver.restarted(false);
    Some((driver.log, driver.engine))
}

/// The engine's limits: the defaults, or small ones so that admission's and retention's bounds
/// are reached.
fn config(u: &mut Unstructured) -> Result<EngineConfig> {
    let byte: u8 = u.arbitrary()?;
    Ok(EngineConfig {
        max_jobs: if byte & 1 == 0 { 10_000_000 } else { 6 },
        finished_retention: if byte & 2 == 0 { 1_000_000 } else { 3 },
        decision_ring: 16,
        capture_events: true,
        worker_ttl: if byte & 4 == 0 {
            Dur::from_secs(3_600)
        } else {
            Dur::from_secs(5)
        },
    })
}
