//! The census counts classes, tenants, pools, reserves and workers in one pass, and agrees with
//! the per-tenant reports and with the decision records.

use fairway_core::{Dur, Engine, EngineConfig, JobSpec, Policy, Time, WorkerOffer};
use std::collections::BTreeMap;

const POLICY: &str = r#"
[policy]
name = "fair"
preemption = true

[[tenant]]
name = "acme"
weight = 3

[[tenant]]
name = "acme/etl"

[[tenant]]
name = "acme/web"

[[tenant]]
name = "solo"

[[class]]
name = "urgent"
priority = 10
reserve = 0.5

[[class]]
name = "batch"
"#;

fn offer(name: &str, pool: &str, gpu: bool) -> WorkerOffer {
    let mut labels = BTreeMap::new();
    if gpu {
        labels.insert("gpu".to_string(), "a100".to_string());
    }
    WorkerOffer {
        worker: name.into(),
        pool: pool.into(),
        capacity: BTreeMap::from([("cpu".to_string(), 1.0)]),
        labels,
        max_jobs: u32::MAX,
    }
}

fn job(id: &str, tenant: &str, class: &str, at_ms: u64) -> (Time, JobSpec) {
    let mut spec = JobSpec::new(id, tenant);
    spec.class = Some(class.to_string());
    spec.estimate = Some(Dur::from_secs(10));
    spec.preemptible = class == "batch";
    (Time::from_millis(at_ms), spec)
}

#[test]
fn one_pass_counts_what_the_reports_count() {
    let config = EngineConfig {
        worker_ttl: Dur::from_secs(3600),
        ..EngineConfig::default()
    };
    let mut engine = Engine::new(Time::ZERO, Policy::from_text(POLICY).unwrap(), config);
    engine
        .worker_ready(Time::ZERO, &offer("c1", "cpu", false))
        .unwrap();
    engine
        .worker_ready(Time::ZERO, &offer("c2", "cpu", false))
        .unwrap();
    engine
        .worker_ready(Time::ZERO, &offer("g1", "gpu", true))
        .unwrap();
    // Two batch jobs: one takes a cpu worker, the other borrows the urgent reserve (half the
    // cpu pool) because no urgent job waits; the gpu worker takes a third.
    let mut submitted = vec![
        job("e1", "acme/etl", "batch", 0),
        job("e2", "acme/etl", "batch", 0),
        job("w1", "acme/web", "batch", 0),
    ];
    for (at, spec) in submitted.drain(..) {
        assert!(engine.submit(at, spec).is_accepted());
    }
    let leases = engine.schedule(Time::from_millis(5));
    assert_eq!(leases.len(), 3, "{leases:?}");
    // Later: queued work. One job needs a label no worker has.
    let mut later = vec![
        job("s1", "solo", "batch", 1000),
        job("s2", "solo", "urgent", 2000),
        job("e3", "acme/etl", "batch", 3000),
    ];
    let (at, mut odd) = job("s3", "solo", "batch", 4000);
    odd.requires.insert("gpu".into(), "h100".into());
    later.push((at, odd));
    let (at, mut gpu) = job("s4", "solo", "batch", 4500);
    gpu.requires.insert("gpu".into(), "a100".into());
    later.push((at, gpu));
    for (at, spec) in later {
        assert!(engine.submit(at, spec).is_accepted());
    }
    let census = engine.census();
    assert_eq!(census.at, Time::from_millis(4500));

    let batch = census.classes.iter().find(|c| c.name == "batch").unwrap();
    assert_eq!(batch.running, 3);
    assert_eq!(batch.backlog.queued, 4);
    assert_eq!(batch.backlog.oldest, Some(Time::from_millis(1000)));
    assert_eq!(batch.unplaceable, 1, "s3 needs gpu=h100");
    // s1 and e3 fit both pools; s4 only the gpu pool.
    assert_eq!(batch.by_pool["cpu"].queued, 2);
    assert_eq!(batch.by_pool["gpu"].queued, 3);
    assert_eq!(batch.by_pool["gpu"].oldest, Some(Time::from_millis(1000)));
    let urgent = census.classes.iter().find(|c| c.name == "urgent").unwrap();
    assert_eq!(urgent.backlog.queued, 1);
    assert_eq!(urgent.backlog.oldest, Some(Time::from_millis(2000)));

    // Tenants: those with jobs, and acme as the parent of two.
    let names: Vec<&str> = census.tenants.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["acme", "acme/etl", "acme/web", "solo"]);
    let acme = &census.tenants[0];
    assert_eq!(
        acme.usage["cpu"], 3.0,
        "descendants' use counts in the parent's"
    );
    assert_eq!(acme.usage_by_pool["cpu"]["cpu"], 2.0);
    assert_eq!(acme.usage_by_pool["gpu"]["cpu"], 1.0);
    assert_eq!(acme.backlog.queued, 0, "its own jobs only");
    // Active at the top: acme (weight 3) and solo (weight 1); under acme, etl and web.
    assert!(
        (acme.entitlement - 0.75).abs() < 1e-9,
        "{}",
        acme.entitlement
    );
    let etl = &census.tenants[1];
    assert!((etl.sibling_entitlement - 0.5).abs() < 1e-9);
    assert!((etl.entitlement - 0.375).abs() < 1e-9);
    assert_eq!(etl.running, 2);
    assert_eq!(etl.backlog.queued, 1);
    assert_eq!(
        etl.backlog_by_class["batch"].oldest,
        Some(Time::from_millis(3000))
    );
    for t in &census.tenants {
        let report = engine.tenant_report(&t.name).unwrap();
        assert_eq!(report.usage, t.usage, "{}", t.name);
        assert_eq!(report.running, t.running, "{}", t.name);
        assert_eq!(report.dominant_share, t.dominant_share, "{}", t.name);
        let queued: u64 = report.backlog.values().map(|(q, _)| q).sum();
        assert_eq!(queued, t.backlog.queued, "{}", t.name);
    }

    // The cpu pool: half held for urgent, of which one worker's worth is lent out.
    let cpu = census.pools.iter().find(|p| p.name == "cpu").unwrap();
    assert_eq!(cpu.workers, 2);
    assert_eq!(cpu.used["cpu"], 2.0);
    assert_eq!(cpu.reserves.len(), 1);
    assert_eq!(cpu.reserves[0].class, "urgent");
    assert_eq!(cpu.reserves[0].reserved["cpu"], 1.0);
    assert_eq!(cpu.reserves[0].held["cpu"], 1.0);
    assert_eq!(cpu.borrowed.get("cpu").copied().unwrap_or(0.0), 1.0);
    assert_eq!(cpu.used_by_class["batch"]["cpu"], 2.0);

    // Workers: who runs what, after the fact.
    let workers = engine.workers();
    let names: Vec<&str> = workers.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["c1", "c2", "g1"]);
    let running: usize = workers.iter().map(|w| w.jobs.len()).sum();
    assert_eq!(running, 3);
    assert!(
        workers
            .iter()
            .all(|w| w.live && w.free.get("cpu").copied().unwrap_or(0.0) == 0.0)
    );
    assert_eq!(
        workers[2].labels.get("gpu").map(String::as_str),
        Some("a100")
    );

    // Decision records are numbered by the dispatch count and page from a number.
    let all = engine.decisions(10);
    let seqs: Vec<u64> = all.iter().map(|d| d.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
    // One in each pool: the second cpu job, and the gpu job (half the gpu worker is held).
    assert_eq!(all.iter().filter(|d| d.borrowed).count(), 2);
    let after = engine.decisions_after(1, 1);
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].seq, 2);
    assert!(engine.decisions_after(3, 10).is_empty());
}

#[test]
fn an_empty_engine_has_an_empty_census() {
    let engine = Engine::new(
        Time::ZERO,
        Policy::from_text(POLICY).unwrap(),
        EngineConfig::default(),
    );
    let census = engine.census();
    assert!(census.tenants.is_empty());
    assert!(census.pools.is_empty());
    assert!(
        census.classes.len() >= 2,
        "the declared classes (and any implicit default)"
    );
    assert!(
        census
            .classes
            .iter()
            .all(|c| c.backlog.queued == 0 && c.backlog.oldest.is_none())
    );
    assert!(engine.workers().is_empty());
}
