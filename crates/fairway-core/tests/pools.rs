//! Pools' books: an attempt is booked in its worker's pool when it starts and released from
//! the same pool when it ends, also when the worker moves to another pool between attempts,
//! and an engine restored from its snapshot or replayed from its events agrees.

use fairway_core::{Dur, Engine, EngineConfig, JobSpec, Outcome, Policy, Time, WorkerOffer};
use std::collections::BTreeMap;

fn config() -> EngineConfig {
    EngineConfig {
        worker_ttl: Dur::from_secs(3600),
        capture_events: true,
        ..EngineConfig::default()
    }
}

fn offer(pool: &str) -> WorkerOffer {
    WorkerOffer {
        worker: "w1".into(),
        pool: pool.into(),
        capacity: [("cpu".to_string(), 2.0)].into_iter().collect(),
        labels: BTreeMap::new(),
        max_jobs: u32::MAX,
    }
}

fn job(id: &str) -> JobSpec {
    let mut spec = JobSpec::new(id, "t1");
    spec.demand = [("cpu".to_string(), 1.0)].into_iter().collect();
    spec.estimate = Some(Dur::from_secs(10));
    spec
}

/// CPU held in each pool, by name.
fn used(e: &Engine) -> BTreeMap<String, f64> {
    e.pool_usage()
        .into_iter()
        .map(|(name, u)| (name, u.used.get("cpu").copied().unwrap_or(0.0)))
        .collect()
}

/// The audit holds, and a restored or replayed engine has the same durable state.
fn check(e: &Engine, events: &[fairway_core::Event]) {
    e.audit().expect("audit");
    let restored = Engine::restore(&e.snapshot(), config()).expect("restore");
    restored.audit().expect("audit after restore");
    assert_eq!(restored.durable_view(), e.durable_view(), "restored");
    let replayed = Engine::replay(events, config());
    replayed.audit().expect("audit after replay");
    assert_eq!(replayed.durable_view(), e.durable_view(), "replayed");
}

#[test]
fn a_worker_that_moves_to_another_pool_books_its_next_attempts_there() {
    let policy = Policy::from_text("[policy]\nname = \"fair\"\n").unwrap();
    let mut e = Engine::new(Time::ZERO, policy, config());
    let mut events = Vec::new();
    let mut now = Time::ZERO;

    e.worker_ready(now, &offer("a")).unwrap();
    e.submit(now, job("j1"));
    let leases = e.schedule(now);
    assert_eq!(leases.len(), 1);
    assert_eq!(used(&e), BTreeMap::from([("a".to_string(), 1.0)]));
    events.extend(e.drain_events());
    check(&e, &events);

    now = now.plus(Dur::from_secs(10));
    e.finish(now, "j1", leases[0].epoch, Outcome::Succeeded, None, None)
        .unwrap();
    e.worker_ready(now, &offer("b")).unwrap();
    e.submit(now, job("j2"));
    e.submit(now, job("j3"));
    let leases = e.schedule(now);
    assert_eq!(leases.len(), 2);
    assert_eq!(
        used(&e),
        BTreeMap::from([("a".to_string(), 0.0), ("b".to_string(), 2.0)]),
        "the new attempts are booked in the worker's new pool"
    );
    events.extend(e.drain_events());
    check(&e, &events);

    // A restored engine releases them from that pool too.
    let mut restored = Engine::restore(&e.snapshot(), config()).expect("restore");
    now = now.plus(Dur::from_secs(10));
    for engine in [&mut e, &mut restored] {
        for lease in &leases {
            engine
                .finish(now, &lease.job, lease.epoch, Outcome::Succeeded, None, None)
                .unwrap();
        }
        assert_eq!(
            used(engine),
            BTreeMap::from([("a".to_string(), 0.0), ("b".to_string(), 0.0)])
        );
        engine.audit().expect("audit after the ends");
    }
    assert_eq!(restored.durable_view(), e.durable_view());
    events.extend(e.drain_events());
    check(&e, &events);
}
