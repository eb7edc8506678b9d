//! The scheduler contract of seed 000 ("State the Scheduler Contract"), checked after every
//! step of random traces with proptest-state-machine: random submissions (several tenants, an
//! urgent class with a reserve, preemptible batch work), scheduling passes, heartbeats and
//! completions with current or stale epochs, failures, cancellations, and time passing (lease
//! expiries). After every transition:
//!
//! 1. bounded admission — no tenant's accepted outstanding work exceeds its envelope;
//! 2. no double ownership — one attempt per job, stale epochs refused and changing nothing;
//! 3. share guarantee — a tenant owed its guarantee is served before tenants that are not;
//! 4. urgency reserve — while urgent work waits, lower classes do not hold its reserve;
//! 5. no unbounded starvation — draining the system runs every accepted job to an end;
//! 6. retry conservation — every attempt's usage (failed, expired, preempted too) is charged
//!    to its tenant, exactly;
//! 7. policy monotonicity — lowering a tenant's weight never gets it more leases in a pass.

use fairway_core::event::Event;
use fairway_core::{
    Dur, Engine, EngineConfig, JobSpec, JobState, Lease, Outcome, Policy, Time, WorkerOffer,
};
use proptest::prelude::*;

/// Cases per property: the default, or `PROPTEST_CASES` for longer runs.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use std::collections::BTreeMap;

const TENANTS: [&str; 3] = ["t0", "t1", "t2"];
const WORKERS: usize = 4;

fn policy_text(t1_weight: f64) -> String {
    format!(
        r#"
[policy]
name = "fair"
preemption = true
lease = "5s"
preempt_grace = "1s"

[[tenant]]
name = "t0"
guarantee = {{ cpu = 1 }}
max_outstanding = 20

[[tenant]]
name = "t1"
weight = {t1_weight}

[[tenant]]
name = "t2"
limit = {{ cpu = 2 }}

[[class]]
name = "urgent"
priority = 10
reserve = 0.25

[[class]]
name = "batch"
max_attempts = 3
backoff = "100ms"
"#
    )
}

#[derive(Clone, Debug)]
enum Step {
    Submit {
        tenant: usize,
        class: usize,
        estimate_ms: u64,
    },
    Schedule,
    Heartbeat {
        pick: usize,
        stale: bool,
    },
    Finish {
        pick: usize,
        stale: bool,
        outcome: u8,
        usage_ms: u64,
    },
    Cancel {
        pick: usize,
    },
    Advance {
        ms: u64,
    },
}

/// The reference model only counts steps: the engine's decisions are checked against the
/// contract's invariants, not against a second implementation.
#[derive(Clone, Debug, Default)]
struct Model {
    steps: usize,
}

impl ReferenceStateMachine for Model {
    type State = Model;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model::default()).boxed()
    }

    fn transitions(_: &Model) -> BoxedStrategy<Step> {
        prop_oneof![
            4 => (0..3usize, 0..3usize, 10..3000u64)
                .prop_map(|(tenant, class, estimate_ms)| Step::Submit { tenant, class, estimate_ms }),
            3 => Just(Step::Schedule),
            2 => (any::<usize>(), any::<bool>()).prop_map(|(pick, stale)| Step::Heartbeat { pick, stale }),
            4 => (any::<usize>(), prop::bool::weighted(0.2), 0..4u8, 0..4000u64)
                .prop_map(|(pick, stale, outcome, usage_ms)| Step::Finish { pick, stale, outcome, usage_ms }),
            1 => any::<usize>().prop_map(|pick| Step::Cancel { pick }),
            2 => (1..3000u64).prop_map(|ms| Step::Advance { ms }),
        ]
        .boxed()
    }

    fn apply(mut state: Model, _: &Step) -> Model {
        state.steps += 1;
        state
    }
}

/// The engine under test, with what the test observed of it through its events.
struct Sut {
    engine: Engine,
    now: Time,
    next_id: u64,
    /// Attempts granted and not yet seen to end: job -> epoch.
    running: BTreeMap<String, u64>,
    /// Cost charged per tenant according to the attempts that ended.
    charged: BTreeMap<String, u128>,
    /// Job -> tenant, for accepted jobs.
    owner: BTreeMap<String, String>,
    /// Worker share of each granted attempt: (job, epoch) -> share.
    shares: BTreeMap<(String, u64), u64>,
    /// Whether the last step was a scheduling pass.
    just_scheduled: bool,
    /// Attempts that borrowed capacity reserved for a higher band.
    borrowed: std::collections::BTreeSet<(String, u64)>,
}

fn offer(w: usize) -> WorkerOffer {
    WorkerOffer {
        worker: format!("w{w}"),
        pool: "default".into(),
        capacity: [("cpu".to_string(), 1.0)].into_iter().collect(),
        labels: BTreeMap::new(),
        max_jobs: u32::MAX,
    }
}

impl Sut {
    fn new() -> Sut {
        let policy = Policy::from_text(&policy_text(2.0)).unwrap();
        let config = EngineConfig {
            worker_ttl: Dur::from_secs(1_000_000),
            ..EngineConfig::default()
        };
        let mut engine = Engine::new(Time::ZERO, policy, config);
        for w in 0..WORKERS {
            engine.worker_ready(Time::ZERO, &offer(w)).unwrap();
        }
        let mut sut = Sut {
            engine,
            now: Time::ZERO,
            next_id: 0,
            running: BTreeMap::new(),
            charged: BTreeMap::new(),
            owner: BTreeMap::new(),
            shares: BTreeMap::new(),
            just_scheduled: false,
            borrowed: Default::default(),
        };
        sut.absorb();
        sut
    }

    /// Reads the engine's events: attempts granted and ended, and what they cost. Workers
    /// asked to stop do so at once.
    fn absorb(&mut self) {
        loop {
            let events = self.engine.drain_events();
            if events.is_empty() {
                break;
            }
            for event in events {
                match event {
                    Event::LeaseGranted {
                        job,
                        epoch,
                        worker_share,
                        borrowed,
                        ..
                    } => {
                        if borrowed {
                            self.borrowed.insert((job.clone(), epoch));
                        }
                        self.running.insert(job.clone(), epoch);
                        self.shares.insert((job, epoch), worker_share);
                    }
                    Event::AttemptEnded {
                        job, epoch, usage, ..
                    } => {
                        let share = self.shares[&(job.clone(), epoch)];
                        *self.charged.entry(self.owner[&job].clone()).or_default() +=
                            share as u128 * usage.0 as u128;
                        if self.running.get(&job) == Some(&epoch) {
                            self.running.remove(&job);
                        }
                    }
                    Event::StopRequested { job, epoch, .. } => {
                        let _ =
                            self.engine
                                .finish(self.now, &job, epoch, Outcome::Stopped, None, None);
                    }
                    _ => {}
                }
            }
        }
    }

    fn pick(&self, pick: usize) -> Option<(String, u64)> {
        if self.running.is_empty() {
            return None;
        }
        let (job, epoch) = self.running.iter().nth(pick % self.running.len())?;
        Some((job.clone(), *epoch))
    }

    /// Passes until nothing changes (stops free capacity at once).
    fn schedule(&mut self) -> Vec<Lease> {
        let mut all = Vec::new();
        for _ in 0..8 {
            let leases = self.engine.schedule(self.now);
            let granted = leases.len();
            all.extend(leases);
            let stops = self.engine.poll_stops().len();
            self.absorb();
            if granted == 0 && stops == 0 {
                break;
            }
        }
        all
    }
}

impl StateMachineTest for Sut {
    type SystemUnderTest = Sut;
    type Reference = Model;

    fn init_test(_: &Model) -> Sut {
        Sut::new()
    }

    fn apply(mut sut: Sut, _: &Model, step: Step) -> Sut {
        sut.just_scheduled = matches!(step, Step::Schedule);
        match step {
            Step::Submit {
                tenant,
                class,
                estimate_ms,
            } => {
                sut.next_id += 1;
                let id = format!("j{}", sut.next_id);
                let mut spec = JobSpec::new(id.clone(), TENANTS[tenant]);
                spec.class = Some(["default", "urgent", "batch"][class].to_string());
                spec.preemptible = class == 2;
                spec.estimate = Some(Dur::from_millis(estimate_ms));
                if sut.engine.submit(sut.now, spec).is_accepted() {
                    sut.owner.insert(id, TENANTS[tenant].to_string());
                }
                sut.absorb();
            }
            Step::Schedule => {
                let owed_before = sut.engine.tenants_owed_guarantee();
                // 7. Monotonicity: a copy with t1's weight lowered gets t1 no more leases.
                let mut lowered = sut.engine.clone();
                lowered.publish(sut.now, &policy_text(0.5)).unwrap();
                let lowered_t1 = lowered
                    .schedule(sut.now)
                    .iter()
                    .filter(|l| sut.owner[&l.job] == "t1")
                    .count();
                let leases = sut.schedule();
                let t1 = leases.iter().filter(|l| sut.owner[&l.job] == "t1").count();
                assert!(
                    lowered_t1 <= t1,
                    "lowering t1's weight got it {lowered_t1} leases instead of {t1}"
                );
                // 3. Share guarantee: while a tenant is still owed its guarantee after the
                // pass, no lease went to a tenant that was not owed.
                let owed_after = sut.engine.tenants_owed_guarantee();
                if owed_before.iter().any(|t| owed_after.contains(t)) {
                    // Reserved capacity lent to preemptible work is not capacity the owed
                    // tenant's non-urgent jobs could have used.
                    // Nor is capacity reserved for the urgent band.
                    let reserved = |l: &Lease| {
                        sut.engine
                            .status(&l.job)
                            .is_some_and(|s| s.class == "urgent")
                    };
                    for l in leases.iter().filter(|l| {
                        !sut.borrowed.contains(&(l.job.clone(), l.epoch)) && !reserved(l)
                    }) {
                        let t = &sut.owner[&l.job];
                        let detail: Vec<String> = leases
                            .iter()
                            .map(|l| {
                                let s = sut.engine.status(&l.job);
                                format!(
                                    "{}:{}:{:?}",
                                    sut.owner[&l.job],
                                    l.job,
                                    s.map(|s| (s.class, s.state))
                                )
                            })
                            .collect();
                        let queued: Vec<String> = sut
                            .owner
                            .iter()
                            .filter_map(|(id, t)| {
                                let s = sut.engine.status(id)?;
                                (s.state == JobState::Queued)
                                    .then(|| format!("{t}:{id}:{}", s.class))
                            })
                            .collect();
                        assert!(
                            owed_before.contains(t),
                            "{t} got a lease while {owed_after:?} were owed their guarantee; leases {detail:?}; queued {queued:?}; usage {:?}",
                            sut.engine.class_usage("default")
                        );
                    }
                }
            }
            Step::Heartbeat { pick, stale } => {
                if let Some((job, epoch)) = sut.pick(pick) {
                    let epoch = if stale {
                        epoch.saturating_sub(1)
                    } else {
                        epoch
                    };
                    let before = sut.engine.status(&job);
                    let reply = sut.engine.heartbeat(sut.now, &job, epoch, None);
                    if stale {
                        // 2. A stale epoch is refused and changes nothing.
                        assert!(
                            reply.is_err(),
                            "heartbeat with stale epoch {epoch} of {job} accepted"
                        );
                        assert_eq!(
                            before,
                            sut.engine.status(&job),
                            "a stale heartbeat changed the job"
                        );
                    }
                    sut.absorb();
                }
            }
            Step::Finish {
                pick,
                stale,
                outcome,
                usage_ms,
            } => {
                if let Some((job, epoch)) = sut.pick(pick) {
                    let epoch = if stale {
                        epoch.saturating_sub(1)
                    } else {
                        epoch
                    };
                    let outcome = match outcome {
                        0 | 1 => Outcome::Succeeded,
                        2 => Outcome::Failed { retryable: true },
                        _ => Outcome::Failed { retryable: false },
                    };
                    let before = sut.engine.status(&job);
                    let result = sut.engine.finish(
                        sut.now,
                        &job,
                        epoch,
                        outcome,
                        Some(Dur::from_millis(usage_ms)),
                        None,
                    );
                    if stale {
                        assert!(
                            result.is_err(),
                            "completion with stale epoch {epoch} of {job} accepted"
                        );
                        assert_eq!(
                            before,
                            sut.engine.status(&job),
                            "a stale completion changed the job"
                        );
                    }
                    sut.absorb();
                }
            }
            Step::Cancel { pick } => {
                let ids: Vec<String> = sut.owner.keys().cloned().collect();
                if !ids.is_empty() {
                    let _ = sut.engine.cancel(sut.now, &ids[pick % ids.len()]);
                    sut.absorb();
                }
            }
            Step::Advance { ms } => {
                sut.now = sut.now.plus(Dur::from_millis(ms));
                sut.engine.tick(sut.now);
                sut.absorb();
            }
        }
        sut
    }

    fn check_invariants(sut: &Sut, _: &Model) {
        // 2. One attempt per job; capacity never over-allocated; limits; the books.
        sut.engine.audit().unwrap_or_else(|e| panic!("audit: {e}"));
        // 1. Bounded admission.
        let t0 = sut.engine.tenant_report("t0").unwrap();
        assert!(
            t0.outstanding_ws <= 20.0 + 1e-9,
            "t0 outstanding {} above its envelope",
            t0.outstanding_ws
        );
        // 4. Urgency reserve: work that cannot give capacity back (the non-preemptible default
        // class) never holds the urgent class's quarter of the pool; and right after a
        // scheduling pass, while urgent work waits, no lower class holds it either (borrowers
        // were preempted, and stop at once here).
        let usage = sut.engine.class_usage("default");
        let cpu = |class: &str| {
            usage
                .get(class)
                .and_then(|u| u.get("cpu"))
                .copied()
                .unwrap_or(0.0)
        };
        assert!(
            cpu("default") <= 3.0,
            "non-preemptible work holds {} CPUs of the reserve",
            cpu("default")
        );
        // (A tenant at its own limit is not owed the reserve: limits are hard caps.)
        let at_limit = |tenant: &str| {
            let r = sut.engine.tenant_report(tenant).unwrap();
            let used = r.usage.get("cpu").copied().unwrap_or(0.0);
            r.limit.get("cpu").is_some_and(|l| used + 1.0 > *l)
        };
        let urgent_waiting = sut.owner.iter().any(|(id, tenant)| {
            sut.engine
                .status(id)
                .is_some_and(|s| s.class == "urgent" && s.state == JobState::Queued)
                && !at_limit(tenant)
        });
        if sut.just_scheduled && urgent_waiting {
            let lower = cpu("default") + cpu("batch");
            assert!(
                lower <= 3.0,
                "lower classes hold {lower} CPUs after a pass while urgent work waits"
            );
        }
        // 6. Retry conservation: every ended attempt's usage is charged to its tenant.
        for t in TENANTS {
            let charged = sut.engine.tenant_report(t).unwrap().ledger.charged;
            let expected = sut.charged.get(t).copied().unwrap_or(0);
            assert_eq!(
                charged, expected,
                "tenant {t}: charged {charged} but its attempts used {expected}"
            );
        }
    }

    fn teardown(mut sut: Sut, _: Model) {
        // 5. No unbounded starvation: with capacity and no new work, every accepted job ends.
        for _ in 0..10_000 {
            if sut.engine.live_jobs() == 0 {
                break;
            }
            sut.now = sut.now.plus(Dur::from_millis(100));
            sut.engine.tick(sut.now);
            sut.absorb();
            sut.schedule();
            let running: Vec<(String, u64)> =
                sut.running.iter().map(|(j, e)| (j.clone(), *e)).collect();
            for (job, epoch) in running {
                let _ = sut
                    .engine
                    .finish(sut.now, &job, epoch, Outcome::Succeeded, None, None);
            }
            sut.absorb();
        }
        assert_eq!(
            sut.engine.live_jobs(),
            0,
            "{} jobs never ended",
            sut.engine.live_jobs()
        );
    }
}

prop_state_machine! {
    #![proptest_config(ProptestConfig { cases: cases(64), ..ProptestConfig::default() })]

    #[test]
    fn the_scheduler_contract_holds_after_every_step(sequential 1..120 => Sut);
}
