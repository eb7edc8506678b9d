//! `engine_restore`: [`Engine::restore`] on arbitrary bytes, as if the store handed it a
//! snapshot that passed its CRC but is not what a correct engine wrote.
//!
//! Checks: `restore` returns `Ok` or `Err`, never panics. What it accepts is then used as a
//! server would use a recovered engine (its durable view, a snapshot, a restore of that snapshot,
//! a timer tick, a worker and a scheduling pass) and must not panic either.
//!
//! Whether `restore` should also refuse a snapshot whose books do not audit is the engine
//! owner's call. `FAIRWAY_FUZZ_RESTORE_STRICT=1` asks more of what it accepts, to find such
//! inputs: its books audit clean, and its own snapshot restores to the same durable state.

use fairway_core::{Engine, EngineConfig, Time, WorkerOffer};

/// Runs one input.
pub fn run(data: &[u8]) {
    let Ok(mut engine) = Engine::restore(data, EngineConfig::default()) else {
        return;
    };
    static STRICT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let strict = *STRICT.get_or_init(|| std::env::var_os("FAIRWAY_FUZZ_RESTORE_STRICT").is_some());
    if strict && let Err(e) = engine.audit() {
        panic!("restore accepted a snapshot whose books do not audit: {e}");
    }
    let view = engine.durable_view();
    let again = Engine::restore(&engine.snapshot(), EngineConfig::default());
    if strict {
        match again {
            Ok(again) => assert_eq!(
                again.durable_view(),
                view,
                "a restored engine's snapshot restores to a different state"
            ),
            Err(e) => panic!("a restored engine's own snapshot does not restore: {e}"),
        }
    }
    // Use it as a server would after recovery: timers, a worker, a pass.
    let now = Time(engine.poll_timeout().unwrap_or(Time::ZERO).0.max(1));
    engine.tick(now);
    let offer = WorkerOffer {
        worker: "w0".into(),
        pool: "default".into(),
        capacity: [("cpu".to_string(), 4.0)].into_iter().collect(),
        labels: Default::default(),
        max_jobs: 4,
    };
    let _ = engine.worker_ready(now, &offer);
    let _ = engine.schedule(now);
}
