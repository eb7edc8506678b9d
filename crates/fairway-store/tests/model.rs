//! Model-based property test: random operation sequences (batches of random events and payloads,
//! snapshots, failing commits, restarts, reads) run against RedbStore and PgStore and the
//! MemStore model, comparing every answer and every `recover()` (`conformance::check_against_model`).
//! The PostgreSQL run needs `FAIRWAY_TEST_POSTGRES` and says "skipped" without it.

mod common;

use fairway_store::Batch;
use fairway_store::conformance::{self, Backend, Op, PgBackend, RedbBackend};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use std::cell::RefCell;

/// A few job ids, so that puts, deletes and reads of the same payload collide often.
fn job() -> impl Strategy<Value = String> {
    (0u8..6).prop_map(|i| format!("job-{i}"))
}

fn batch() -> impl Strategy<Value = Batch> {
    (
        vec(common::event(), 0..6),
        vec((job(), vec(any::<u8>(), 0..40)), 0..3),
        vec(job(), 0..2),
    )
        .prop_map(|(events, put_payloads, delete_payloads)| Batch {
            events,
            put_payloads,
            delete_payloads,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => batch().prop_map(Op::Commit),
        1 => batch().prop_map(Op::FailingCommit),
        2 => (0u64..4, vec(any::<u8>(), 0..64)).prop_map(|(back, bytes)| Op::Snapshot { back, bytes }),
        2 => Just(Op::Reopen),
        2 => Just(Op::Recover),
        2 => job().prop_map(Op::Payload),
    ]
}

proptest! {
    // Each case does a few dozen fsynced commits; 64 cases keep the test to seconds.
    #![proptest_config(ProptestConfig::with_cases(64))]

    // Proves: RedbStore answers every operation of any sequence as the MemStore model does.
    #[test]
    fn redb_matches_the_model(ops in vec(op(), 1..40)) {
        conformance::check_against_model(&mut RedbBackend::default(), &ops);
    }
}

// Proves: PgStore answers every operation of any sequence as the MemStore model does. The
// same strategy as above, run by hand so that the test's database (one schema per case) is
// dropped when the test ends, whatever the outcome.
#[test]
fn postgres_matches_the_model() {
    let backend = PgBackend::from_env("postgres_matches_the_model");
    if !backend.available() {
        return;
    }
    let backend = RefCell::new(backend);
    // Each case is a few dozen round trips to the database; 24 cases keep it to seconds.
    let mut runner = TestRunner::new(ProptestConfig::with_cases(24));
    let result = runner.run(&vec(op(), 1..40), |ops| {
        conformance::check_against_model(&mut *backend.borrow_mut(), &ops);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
