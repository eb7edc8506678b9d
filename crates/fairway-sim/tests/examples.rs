//! The examples users learn from (`examples/*.toml` at the repository root) behave as their
//! comments say: each runs, and each comparison it teaches holds.

mod check;

macro_rules! example {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                check::check_example($name);
            }
        )*
    };
}

example!(
    noisy_neighbor => "noisy-neighbor",
    cost_vs_count => "cost-vs-count",
    starvation => "starvation",
    multi_resource_drf => "multi-resource-drf",
    backfill => "backfill",
    urgent_reserve => "urgent-reserve",
    admission_burst => "admission-burst",
    retry_storm => "retry-storm",
    estimator_gaming => "estimator-gaming",
    worker_loss => "worker-loss",
);
