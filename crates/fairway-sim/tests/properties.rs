//! Property tests over random scenarios: every policy and backfill mode, random pools,
//! tenants with weights, guarantees and limits, random job streams with failures. After every
//! simulated instant the engine's books are recomputed and checked (capacity never
//! over-allocated, limits never exceeded, one authoritative attempt per job), and without
//! backfilling no capacity idles while a job the policy would start could run. Runs are
//! deterministic: the same scenario gives the same output, byte for byte.

use fairway_core::PolicyName;
use fairway_sim::scenario::Overrides;
use fairway_sim::{RunOptions, Scenario};
use proptest::prelude::*;

/// Cases per property: the default, or `PROPTEST_CASES` for longer runs.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
use std::fmt::Write;

#[derive(Clone, Debug)]
struct Gen {
    policy: usize,
    backfill: usize,
    workers: Vec<(u8, u8)>,
    tenants: Vec<(u8, Option<u8>, Option<u8>)>,
    streams: Vec<(usize, u8, u16, u8, u8, bool)>,
    seed: u64,
}

fn scenario_text(g: &Gen, unit_jobs: bool) -> String {
    let mut s = String::new();
    let policy = PolicyName::ALL[g.policy % PolicyName::ALL.len()];
    let backfill = ["none", "easy", "conservative"][g.backfill % 3];
    writeln!(
        s,
        "[sim]\nseed = {}\n\n[policy]\nname = \"{policy}\"\nbackfill = \"{backfill}\"\n",
        g.seed
    )
    .unwrap();
    for (i, (workers, cpu)) in g.workers.iter().enumerate() {
        writeln!(s, "[[pool]]\nname = \"p{i}\"\nworkers = {workers}\ncapacity = {{ cpu = {cpu}, mem = 8 }}\n").unwrap();
    }
    for (i, (weight, guarantee, limit)) in g.tenants.iter().enumerate() {
        writeln!(s, "[[tenant]]\nname = \"t{i}\"\nweight = {weight}").unwrap();
        if let Some(gu) = guarantee {
            writeln!(s, "guarantee = {{ cpu = {gu} }}").unwrap();
        }
        if let Some(l) = limit {
            writeln!(s, "limit = {{ cpu = {} }}", l.max(&guarantee.unwrap_or(0))).unwrap();
        }
        writeln!(s).unwrap();
    }
    for (tenant, count, duration_ms, cpu, at, fails) in &g.streams {
        let cpu = if unit_jobs { 1 } else { *cpu };
        writeln!(
            s,
            "[[stream]]\ntenant = \"t{}\"\ncount = {count}\nat = \"{at}00ms\"\nrate = 20\nduration = \"{duration_ms}ms\"\ndemand = {{ cpu = {cpu}, mem = 1 }}\nfail_rate = {}\n",
            tenant % g.tenants.len(),
            if *fails { 0.2 } else { 0.0 }
        )
        .unwrap();
    }
    s
}

fn scenarios() -> impl Strategy<Value = Gen> {
    (
        0..8usize,
        0..3usize,
        prop::collection::vec((1..4u8, 1..5u8), 1..3),
        prop::collection::vec(
            (1..4u8, prop::option::of(1..3u8), prop::option::of(1..6u8)),
            1..5,
        ),
        prop::collection::vec(
            (
                0..8usize,
                1..25u8,
                10..2000u16,
                1..3u8,
                0..30u8,
                any::<bool>(),
            ),
            1..7,
        ),
        any::<u64>(),
    )
        .prop_map(|(policy, backfill, workers, tenants, streams, seed)| Gen {
            policy,
            backfill,
            workers,
            tenants,
            streams,
            seed,
        })
}

fn run(text: &str, check: &mut fairway_sim::driver::StepHook<'_>) -> String {
    let scenario = Scenario::from_text(text, None, &Overrides::default())
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let metrics = fairway_sim::run(
        &scenario,
        RunOptions {
            events: true,
            on_step: Some(check),
            ..RunOptions::default()
        },
    );
    serde_json::to_string(&metrics.to_json()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    /// Books balance, capacity is never over-allocated, limits are never exceeded, and without
    /// backfilling the engine is work conserving; and the same scenario replays identically.
    #[test]
    fn books_balance_and_runs_are_deterministic(g in scenarios()) {
        let text = scenario_text(&g, false);
        let mut failure: Option<String> = None;
        let first = run(&text, &mut |engine, t, _| {
            if failure.is_some() {
                return;
            }
            if let Err(e) = engine.audit() {
                failure = Some(format!("at {t}: {e}"));
            } else if let Some(idle) = engine.idle_violation() {
                failure = Some(format!("at {t}: {idle}"));
            }
        });
        prop_assert!(failure.is_none(), "{}\n{}", failure.unwrap_or_default(), text);
        let second = run(&text, &mut |_, _, _| {});
        prop_assert_eq!(first, second, "the same scenario gave two outputs");
    }

    /// Under `fair` with one-CPU jobs and guarantees that fit the capacity, a tenant below its
    /// guarantee with work waiting gets capacity within the longest job's duration: every
    /// capacity freed goes to tenants owed their guarantee first.
    #[test]
    fn guarantees_are_met_while_demand_exists(g in scenarios()) {
        let mut g = g;
        g.policy = PolicyName::ALL.iter().position(|p| *p == PolicyName::Fair).unwrap();
        g.backfill = 0;
        let capacity: u32 = g.workers.iter().map(|(w, c)| *w as u32 * *c as u32).sum();
        let mut left = capacity;
        for t in g.tenants.iter_mut() {
            if let Some(gu) = t.1 {
                if (gu as u32) <= left { left -= gu as u32; } else { t.1 = None; }
            }
            t.2 = None;
        }
        let longest_ms = g.streams.iter().map(|s| s.2 as u64).max().unwrap_or(0);
        let text = scenario_text(&g, true);
        let mut owed_since: std::collections::BTreeMap<String, fairway_core::Time> = Default::default();
        let mut failure: Option<String> = None;
        run(&text, &mut |engine, t, _| {
            let owed = engine.tenants_owed_guarantee();
            owed_since.retain(|name, _| owed.contains(name));
            for name in owed {
                let since = *owed_since.entry(name.clone()).or_insert(t);
                if t.since(since) > fairway_core::Dur::from_millis(longest_ms + 1) && failure.is_none() {
                    failure = Some(format!("{name} was owed its guarantee from {since} to {t}"));
                }
            }
        });
        prop_assert!(failure.is_none(), "{}\n{}", failure.unwrap_or_default(), text);
    }
}
