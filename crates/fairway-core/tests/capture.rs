//! An engine that does not capture its events applies their effects without building them
//! (`EngineConfig::capture_events = false`, as the benchmarks and embedded uses run it). This
//! checks that such an engine decides and ends in exactly the state of one that captures them.

use fairway_core::bench_rig::policy;
use fairway_core::{Dur, Engine, EngineConfig, JobSpec, Outcome, Policy, Time, WorkerOffer};
use std::collections::BTreeMap;

fn offer(name: &str, pool: &str, cpu: f64, max_jobs: u32) -> WorkerOffer {
    WorkerOffer {
        worker: name.into(),
        pool: pool.into(),
        capacity: BTreeMap::from([("cpu".to_string(), cpu), ("mem".to_string(), 8.0)]),
        labels: BTreeMap::new(),
        max_jobs,
    }
}

/// Drives `engine` through submissions, grants, every kind of completion, heartbeats,
/// cancellations and lease expiries, and returns a transcript of every answer it gave.
fn drive(engine: &mut Engine) -> Vec<String> {
    let mut out = Vec::new();
    let mut now = Time::from_millis(1_000);
    let tenants = ["acme/etl", "acme/web", "globex", "initech"];
    let mut running: Vec<fairway_core::Lease> = Vec::new();
    for round in 0..60u64 {
        for k in 0..3u64 {
            let n = round * 3 + k;
            let mut spec = JobSpec::new(format!("j{n}"), tenants[(n % 4) as usize]);
            spec.estimate = Some(Dur::from_millis(50 + 10 * (n % 5)));
            if n % 3 == 0 {
                spec.demand = BTreeMap::from([("cpu".to_string(), 2.0), ("mem".to_string(), 1.0)]);
            }
            spec.checkpointable = n % 4 == 1;
            out.push(format!("{:?}", engine.submit(now, spec)));
        }
        for (w, pool, cpu) in [
            ("w0", "default", 4.0),
            ("w1", "default", 2.0),
            ("w2", "gpu", 3.0),
        ] {
            let max_jobs = if round % 7 == 6 { 0 } else { 2 };
            out.push(format!(
                "{:?}",
                engine.worker_ready(now, &offer(w, pool, cpu, max_jobs))
            ));
        }
        let leases = engine.schedule(now);
        out.push(format!("{leases:?}"));
        running.extend(leases);
        now = now.plus(Dur::from_millis(40));
        // End about half of what runs, in turn: success, retryable and final failures, stop.
        let mut keep = Vec::new();
        for (i, lease) in running.drain(..).enumerate() {
            let outcome = match (round as usize + i) % 6 {
                0 | 1 => Some(Outcome::Succeeded),
                2 => Some(Outcome::Failed { retryable: true }),
                3 => Some(Outcome::Failed { retryable: false }),
                4 => Some(Outcome::Stopped),
                _ => None,
            };
            match outcome {
                Some(o) => {
                    let usage = (i % 2 == 0).then(|| Dur::from_millis(30 + 20 * (i as u64 % 4)));
                    let r = engine.finish(now, &lease.job, lease.epoch, o, usage, None);
                    out.push(format!("{r:?}"));
                }
                None => {
                    let r = engine.heartbeat(now, &lease.job, lease.epoch, None);
                    out.push(format!("{r:?}"));
                    keep.push(lease);
                }
            }
        }
        running = keep;
        if round % 9 == 4 {
            out.push(format!(
                "{:?}",
                engine.cancel(now, &format!("j{}", round * 3))
            ));
        }
        // Now and then let leases run out.
        let step = if round % 11 == 10 {
            Dur::from_secs(600)
        } else {
            Dur::from_millis(5)
        };
        now = now.plus(step);
        out.push(format!("{:?}", engine.tick(now)));
        out.push(format!("{:?}", engine.poll_stops()));
    }
    out.push(format!("{:?}", engine.stats()));
    out.push(format!("{:?}", engine.decisions(usize::MAX)));
    out
}

/// The built-in policy and every named one.
fn every_policy() -> Vec<Policy> {
    let mut policies = vec![Policy::from_text(fairway_core::policy::BUILT_IN_POLICY).unwrap()];
    for name in [
        "fair",
        "drf",
        "fifo",
        "strict",
        "sjf",
        "round-robin",
        "drr",
        "wfq",
    ] {
        policies.push(policy(name).unwrap());
    }
    policies
}

/// An engine of policy `p` and `config`, driven by [`drive`], and its transcript.
fn driven(p: &Policy, config: EngineConfig) -> (Engine, Vec<String>) {
    let mut engine = Engine::new(Time::ZERO, p.clone(), config);
    let transcript = drive(&mut engine);
    (engine, transcript)
}

// Proves: with or without capturing events, every policy gives the same answers (leases,
// completions, heartbeats, ticks, stops, stats, decision records) and ends in the same durable
// state, which passes the audit.
#[test]
fn not_capturing_events_changes_nothing_but_the_log() {
    for p in every_policy() {
        let run = |capture_events: bool| {
            let config = EngineConfig {
                capture_events,
                ..EngineConfig::default()
            };
            let (mut engine, transcript) = driven(&p, config);
            engine.audit().expect("audit");
            (
                transcript,
                engine.durable_view(),
                engine.drain_events().len(),
            )
        };
        let (captured, captured_view, events) = run(true);
        let (uncaptured, uncaptured_view, no_events) = run(false);
        let name = p.name;
        assert!(events > 0 && no_events == 0, "{name:?}");
        assert_eq!(captured.len(), uncaptured.len(), "{name:?}");
        for (a, b) in captured.iter().zip(&uncaptured) {
            assert_eq!(a, b, "{name:?}");
        }
        assert_eq!(captured_view, uncaptured_view, "{name:?}");
    }
}

// Proves: a full decision ring, which writes each new record into its oldest one, keeps
// records equal to those of a ring that never filled (nothing of an overwritten record
// is left behind: its job, tenant, class, workers, candidates), under every policy.
#[test]
fn a_full_decision_ring_keeps_whole_records() {
    for p in every_policy() {
        let ring = |decision_ring: usize| EngineConfig {
            decision_ring,
            ..EngineConfig::default()
        };
        let (small, _) = driven(&p, ring(5));
        let (large, _) = driven(&p, ring(100_000));
        let name = p.name;
        let all = large.decisions(usize::MAX);
        assert!(all.len() > 50, "{name:?}: {} decisions", all.len());
        assert!(all.iter().any(|d| d.candidates.len() > 1), "{name:?}");
        assert_eq!(small.decisions(usize::MAX), large.decisions(5), "{name:?}");
    }
}
