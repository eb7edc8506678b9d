//! Regression tests for the engine findings of the `engine_ops` fuzz target (fuzz/README.md,
//! docs/reliability.md), each written out as the smallest story that showed it, and checked
//! with the engine's own audit and a restart from a snapshot and from the log.

use fairway_core::{
    Dur, Engine, EngineConfig, JobSpec, JobState, Lease, Outcome, Policy, Time, WorkerOffer,
};
use std::collections::BTreeMap;

fn config() -> EngineConfig {
    EngineConfig {
        worker_ttl: Dur::from_secs(3600),
        capture_events: true,
        ..EngineConfig::default()
    }
}

fn engine(policy: &str) -> Engine {
    Engine::new(Time::ZERO, Policy::from_text(policy).unwrap(), config())
}

fn offer(name: &str, pool: &str, capacity: &[(&str, f64)]) -> WorkerOffer {
    WorkerOffer {
        worker: name.into(),
        pool: pool.into(),
        capacity: capacity.iter().map(|(r, a)| (r.to_string(), *a)).collect(),
        labels: BTreeMap::new(),
        max_jobs: u32::MAX,
    }
}

fn job(id: &str, tenant: &str, demand: &[(&str, f64)]) -> JobSpec {
    let mut spec = JobSpec::new(id, tenant);
    spec.demand = demand.iter().map(|(r, a)| (r.to_string(), *a)).collect();
    spec.estimate = Some(Dur::from_secs(10));
    spec
}

fn started(leases: &[Lease]) -> Vec<&str> {
    let mut ids: Vec<&str> = leases.iter().map(|l| l.job.as_str()).collect();
    ids.sort();
    ids
}

/// The audit holds, and an engine restored from its snapshot, or replayed from its events, has
/// the same durable state.
fn check(engine: &Engine, events: &[fairway_core::Event]) {
    engine.audit().expect("audit");
    let live = engine.durable_view();
    let restored = Engine::restore(&engine.snapshot(), config()).expect("restore");
    restored.audit().expect("audit after restore");
    assert_eq!(restored.durable_view(), live, "restored from the snapshot");
    let replayed = Engine::replay(events, config());
    replayed.audit().expect("audit after replay");
    assert_eq!(replayed.durable_view(), live, "replayed from the log");
}

const LIMITED: &str = r#"
[policy]
name = "fair"

[[tenant]]
name = "org"

[[tenant]]
name = "org/b"
limit = { cpu = 3, mem = 8 }

[[class]]
name = "urgent"
weight = 4
"#;

/// F5: a tenant's node was reached through a shape its limit admits (a small job of one
/// class), and the walk then took a job of another class below it that the limit refuses.
#[test]
fn a_limit_holds_for_every_shape_below_the_tenant() {
    let mut e = engine(LIMITED);
    let mut events = e.drain_events();
    let mut big = job("big", "org/b", &[("cpu", 4.0)]);
    big.class = Some("urgent".into());
    assert!(e.submit(Time::ZERO, big).is_accepted());
    assert!(
        e.submit(Time::ZERO, job("small", "org/b", &[]))
            .is_accepted()
    );
    e.worker_ready(Time::ZERO, &offer("w", "default", &[("cpu", 8.0)]))
        .unwrap();
    let leases = e.schedule(Time::ZERO);
    assert_eq!(started(&leases), ["small"], "cpu 4 is over the limit of 3");
    events.extend(e.drain_events());
    check(&e, &events);
}

/// A limit caps the resources it names: `limit = { cpu = 3, mem = 8 }` leaves GPUs alone.
#[test]
fn a_limit_leaves_resources_it_does_not_name_alone() {
    let mut e = engine(LIMITED);
    let mut events = e.drain_events();
    assert!(
        e.submit(Time::ZERO, job("g", "org/b", &[("cpu", 1.0), ("gpu", 2.0)]))
            .is_accepted()
    );
    e.worker_ready(
        Time::ZERO,
        &offer("w", "default", &[("cpu", 8.0), ("gpu", 4.0)]),
    )
    .unwrap();
    assert_eq!(started(&e.schedule(Time::ZERO)), ["g"]);
    let report = e.tenant_report("org/b").unwrap();
    assert_eq!(
        report.limit,
        BTreeMap::from([("cpu".to_string(), 3.0), ("mem".to_string(), 8.0)])
    );
    events.extend(e.drain_events());
    check(&e, &events);
}

/// F4: an elastic gang grew past its tenant's limit: it may take only the members the limit
/// has room for.
#[test]
fn an_elastic_gang_grows_only_within_the_limit() {
    let mut e = engine(LIMITED);
    let mut events = e.drain_events();
    let mut gang = job("gang", "org/b", &[("cpu", 1.0)]);
    gang.gang = 8;
    gang.gang_min = Some(2);
    assert!(e.submit(Time::ZERO, gang).is_accepted());
    e.worker_ready(Time::ZERO, &offer("w", "default", &[("cpu", 8.0)]))
        .unwrap();
    let leases = e.schedule(Time::ZERO);
    let members: u32 = leases.iter().map(|l| l.members).sum();
    assert_eq!(members, 3, "the limit of 3 cpus admits 3 members of 1 cpu");
    events.extend(e.drain_events());
    check(&e, &events);
}

/// F3: a publish lowered a limit below what the tenant held. It keeps what runs (nothing is
/// preempted for a limit), starts nothing more until back within the limit, and the books
/// (and a restart) agree.
#[test]
fn a_lowered_limit_lets_running_work_finish_and_starts_nothing_more() {
    let mut e = engine(LIMITED);
    let mut events = e.drain_events();
    for id in ["a", "b", "c"] {
        assert!(
            e.submit(Time::ZERO, job(id, "org/b", &[("cpu", 1.0)]))
                .is_accepted()
        );
    }
    e.worker_ready(Time::ZERO, &offer("w", "default", &[("cpu", 8.0)]))
        .unwrap();
    let leases = e.schedule(Time::ZERO);
    assert_eq!(leases.len(), 3);
    let lowered = LIMITED.replace("cpu = 3", "cpu = 1");
    e.publish(Time::from_millis(1), &lowered).unwrap();
    assert!(
        e.submit(Time::from_millis(1), job("d", "org/b", &[("cpu", 1.0)]))
            .is_accepted()
    );
    e.worker_ready(
        Time::from_millis(1),
        &offer("w", "default", &[("cpu", 8.0)]),
    )
    .unwrap();
    assert!(e.schedule(Time::from_millis(2)).is_empty());
    events.extend(e.drain_events());
    check(&e, &events);
    // Two end: one cpu is held, the limit's one; still nothing starts. The third ends: d starts.
    for lease in &leases[..2] {
        let at = Time::from_millis(3);
        e.finish(at, &lease.job, lease.epoch, Outcome::Succeeded, None, None)
            .unwrap();
    }
    assert!(e.schedule(Time::from_millis(3)).is_empty());
    let last = &leases[2];
    e.finish(
        Time::from_millis(4),
        &last.job,
        last.epoch,
        Outcome::Succeeded,
        None,
        None,
    )
    .unwrap();
    e.worker_ready(
        Time::from_millis(4),
        &offer("w", "default", &[("cpu", 8.0)]),
    )
    .unwrap();
    assert_eq!(started(&e.schedule(Time::from_millis(4))), ["d"]);
    events.extend(e.drain_events());
    check(&e, &events);
}

/// F2: a worker came back under its name with less capacity than its running attempts hold.
/// They go on; it takes new work only where its new capacity has room; and it may not move to
/// another pool while it holds leases (their books are in the first).
#[test]
fn a_worker_back_with_less_capacity_keeps_its_leases() {
    let mut e = engine("[policy]\nname = \"fair\"\n");
    let mut events = e.drain_events();
    assert!(
        e.submit(Time::ZERO, job("m", "t", &[("cpu", 2.0), ("mem", 4.0)]))
            .is_accepted()
    );
    e.worker_ready(
        Time::ZERO,
        &offer("w", "default", &[("cpu", 2.0), ("mem", 16.0)]),
    )
    .unwrap();
    assert_eq!(started(&e.schedule(Time::ZERO)), ["m"]);
    // Back with four cpus and no memory: m's memory is over, but two cpus are free.
    let at = Time::from_millis(1);
    e.worker_ready(at, &offer("w", "default", &[("cpu", 4.0)]))
        .unwrap();
    assert!(e.submit(at, job("c", "t", &[("cpu", 2.0)])).is_accepted());
    assert!(e.submit(at, job("x", "t", &[("cpu", 1.0)])).is_accepted());
    assert_eq!(started(&e.schedule(at)), ["c"]);
    e.audit().expect("over on memory only by what it held");
    let moved = e.worker_ready(at, &offer("w", "gpu", &[("cpu", 4.0)]));
    let err = moved.expect_err("a worker holding leases cannot change pools");
    assert!(
        err.contains("holds 2 lease(s) in pool \"default\""),
        "{err}"
    );
    events.extend(e.drain_events());
    check(&e, &events);
}

const AGING: &str = r#"
[policy]
name = "fair"

[[class]]
name = "batch"
aging_step = "1s"
aging_cap = 5
"#;

/// F6 and F7: a publish changed a class's aging, and the aging cap timers armed under the old
/// one were left behind; one fired for a job cancelled since (or running, after a replay).
#[test]
fn a_publish_that_changes_aging_rearms_the_cap_timers() {
    let mut e = engine(AGING);
    let mut events = e.drain_events();
    let mut spec = job("j", "t", &[("cpu", 1.0)]);
    spec.class = Some("batch".into());
    assert!(e.submit(Time::ZERO, spec.clone()).is_accepted());
    spec.id = "k".into();
    assert!(e.submit(Time::ZERO, spec).is_accepted());
    e.publish(Time::ZERO, &AGING.replace("aging_cap = 5", "aging_cap = 2"))
        .unwrap();
    e.cancel(Time::from_millis(1000), "j").unwrap();
    // The old timer (5 s) would have fired here for the cancelled job.
    e.tick(Time::from_millis(30_000));
    e.worker_ready(
        Time::from_millis(30_000),
        &offer("w", "default", &[("cpu", 1.0)]),
    )
    .unwrap();
    assert_eq!(started(&e.schedule(Time::from_millis(30_000))), ["k"]);
    assert_eq!(e.status("j").map(|s| s.state), Some(JobState::Canceled));
    events.extend(e.drain_events());
    check(&e, &events);
}
