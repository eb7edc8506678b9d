//! The shared conformance suite (`fairway_store::conformance`) run against each backend: one
//! `#[test]` per check, named after the behaviour it proves (see each check's doc comment).

mod mem {
    fairway_store::conformance_tests!(fairway_store::conformance::MemBackend);
}

mod redb {
    fairway_store::conformance_tests!(fairway_store::conformance::RedbBackend::default());
}
