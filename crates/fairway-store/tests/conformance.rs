//! The shared conformance suite (`fairway_store::conformance`) run against each backend: one
//! `#[test]` per check, named after the behaviour it proves (see each check's doc comment). The
//! PostgreSQL run needs `FAIRWAY_TEST_POSTGRES` and says "skipped" without it.

mod mem {
    fairway_store::conformance_tests!(fairway_store::conformance::MemBackend);
}

mod redb {
    fairway_store::conformance_tests!(fairway_store::conformance::RedbBackend::default());
}

mod postgres {
    // Runs where FAIRWAY_TEST_POSTGRES names a server; each test has a database of its own.
    fairway_store::conformance_tests!(fairway_store::conformance::PgBackend::from_env(
        "postgres conformance"
    ));
}
