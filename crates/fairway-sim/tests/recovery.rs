//! Recovery is exact: at many points of every scenario and example, an engine rebuilt by
//! replaying the event log, and one restored from a snapshot, have the same durable state as
//! the live engine (jobs, attempts, epochs, leases, books, balances, finished jobs).

use fairway_core::{Engine, EngineConfig};
use fairway_sim::scenario::Overrides;
use fairway_sim::{RunOptions, Scenario};
use std::path::Path;

fn check_file(path: &Path) {
    let scenario =
        Scenario::from_path(path, &Overrides::default()).unwrap_or_else(|e| panic!("{e}"));
    let mut steps = 0u64;
    let mut checks = 0u64;
    let mut hook = |engine: &mut Engine, t: fairway_core::Time, events: &[fairway_core::Event]| {
        steps += 1;
        // Check at every power of four, so that long runs are checked throughout (early, when
        // states are small and varied, and at growing intervals) at a cost proportional to
        // their length.
        if !(steps.is_power_of_two() && steps.trailing_zeros().is_multiple_of(2)) {
            return;
        }
        checks += 1;
        let live = engine.durable_view();
        let config = EngineConfig {
            capture_events: false,
            ..EngineConfig::default()
        };
        let replayed = Engine::replay(events, config.clone()).durable_view();
        assert_eq!(
            live,
            replayed,
            "{}: replayed state differs at {t}",
            path.display()
        );
        let restored =
            Engine::restore(&engine.snapshot(), config).unwrap_or_else(|e| panic!("restore: {e}"));
        assert_eq!(
            live,
            restored.durable_view(),
            "{}: restored state differs at {t}",
            path.display()
        );
        restored.audit().unwrap_or_else(|e| {
            panic!(
                "{}: restored engine fails its audit at {t}: {e}",
                path.display()
            )
        });
    };
    fairway_sim::run(
        &scenario,
        RunOptions {
            copy_events: true,
            on_step: Some(&mut hook),
            ..RunOptions::default()
        },
    );
    assert!(checks > 0, "{}: never checked", path.display());
}

#[test]
fn every_scenario_and_example_recovers_exactly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(root.join("tests/scenarios"))
        .unwrap()
        .chain(std::fs::read_dir(root.join("../../examples")).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(
        files.len() > 20,
        "expected the scenario and example files, found {}",
        files.len()
    );
    for f in files {
        check_file(&f);
    }
}
