//! `policy_toml`: [`Policy::from_text`] on arbitrary text (bytes decoded lossily as UTF-8).
//!
//! Checks, for every input: parsing and validation never panic. For a policy that validates:
//! an engine starts on it and accepts it again through `publish` (which is what
//! `fairway policy put` does), its books audit clean, and replaying the engine's events (which
//! re-parse the policy source) rebuilds the same durable state; the sections re-rendered as the
//! simulator renders them (`render_sections`) validate too.

use fairway_core::config::{PolicyFile, render_sections};
use fairway_core::{Engine, EngineConfig, Policy, Time};

/// Runs one input.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(policy) = Policy::from_text(&text) else {
        return;
    };
    let mut engine = Engine::new(Time::ZERO, policy, EngineConfig::default());
    if let Err(errors) = engine.publish(Time::from_millis(1), &text) {
        panic!("a policy that validates was refused by publish: {errors:?}");
    }
    engine
        .audit()
        .unwrap_or_else(|e| panic!("audit after publishing a valid policy: {e}"));
    let events = engine.drain_events();
    let replayed = Engine::replay(&events, EngineConfig::default());
    assert_eq!(
        replayed.durable_view(),
        engine.durable_view(),
        "replaying the policy events differs from the live engine"
    );
    let file = PolicyFile::parse(&text).expect("a policy that validates parses");
    let rendered = render_sections(&file.policy, &file.pool, &file.tenant, &file.class);
    if let Err(errors) = Policy::from_text(&rendered) {
        panic!(
            "re-rendered policy sections do not validate: {errors:?}\n--- rendered:\n{rendered}"
        );
    }
}
