//! Scenario tests: each is a scenario file plus expected values (`tests/scenarios/NAME.toml`
//! and `NAME.expect`), run by one helper. Each test's scenario file says what it proves.

mod check;

macro_rules! scenario {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check::check(stringify!($name));
            }
        )*
    };
}

scenario!(
    drf_paper,
    weighted_drf,
    limits,
    guarantees,
    drr_textbook,
    wfq_round_number,
    converge_equal,
    converge_weighted,
    cost_not_count,
    small_tenant_flood,
    overestimated_flood,
    newcomer_estimates,
    strict_starvation,
    backfill_easy,
    backfill_short,
    gang,
    unplaceable,
    admission_burst,
    admission_per_tenant,
    admission_contracts,
    impossible_deadline,
    retry_storm,
    estimator_gaming,
    urgent_reserve,
    urgent_no_preemption,
    worker_loss,
);
