//! The open findings in `fuzz/findings/`, one test each, run through their target's checks in
//! a plain build: `cargo test --manifest-path fuzz/Cargo.toml --test findings -- --ignored`.
//!
//! Each is `#[ignore]`d while it is open, because it fails (F11's inputs abort the test process
//! by running it out of memory, as they do the engine). They are the engine's to fix
//! (`crates/fairway-core/src/engine/snapshot.rs`); with the fix, drop the `#[ignore]`, move the
//! input to `fuzz/regressions/TARGET/` (which CI replays) and the finding's row in
//! docs/reliability.md to fixed.

use fairway_fuzz::{engine_restore, store_record};

/// One test: `target`'s checks on the input `findings/FILE`, ignored with `why`.
macro_rules! open_finding {
    ($(#[doc = $doc:literal])* $name:ident: $target:ident, $file:literal, $why:literal) => {
        $(#[doc = $doc])*
        #[test]
        #[ignore = $why]
        fn $name() {
            $target::run(include_bytes!(concat!("../findings/", $file)));
        }
    };
}

open_finding! {
    /// F10: `Engine::restore` accepts a snapshot without a root node; the first scheduling pass
    /// then indexes `nodes[0]` of an empty tree (`engine/tree.rs`, `select`).
    f10_no_root_node: engine_restore, "engine_restore/F10-no-root-node",
    "open finding F10 (engine/snapshot.rs): restore accepts a tree without a root"
}

open_finding! {
    /// F10: a node of the snapshot's tree names a tenant the snapshot does not have; `restore`
    /// indexes `tenants` with it (`engine/snapshot.rs`, the band of an unknown tenant).
    f10_band_of_unknown_tenant: engine_restore, "engine_restore/F10-band-of-unknown-tenant",
    "open finding F10 (engine/snapshot.rs): restore indexes tenants by a node's tenant"
}

open_finding! {
    /// F10, through the store: the same kind of input, sealed in a store frame with a good CRC.
    f10_band_of_unknown_tenant_in_a_store_frame: store_record,
    "store_record/F10-band-of-unknown-tenant",
    "open finding F10 (engine/snapshot.rs): restore indexes tenants by a node's tenant"
}

open_finding! {
    /// F10: a node's parent is past the end of the tree; `restore` accepts it, and walking the
    /// node's ancestors indexes past the end (`engine/mod.rs`, `ancestors`).
    f10_parent_out_of_range: engine_restore, "engine_restore/F10-parent-out-of-range",
    "open finding F10 (engine/snapshot.rs): restore accepts a parent out of range"
}

open_finding! {
    /// F11: `restore` allocates as many job slots as the snapshot claims (`job_slots`, a `u32`)
    /// before checking it against the jobs it holds: a 1.2 KB input asks for about 750 GB.
    f11_job_slots_unbounded: engine_restore, "engine_restore/F11-job-slots-unbounded",
    "open finding F11 (engine/snapshot.rs): restore allocates what job_slots claims (aborts)"
}

open_finding! {
    /// F11: the same for `worker_slots`: one placeholder worker registered per claimed slot,
    /// past 2 GB and 10 s.
    f11_worker_slots_unbounded: engine_restore, "engine_restore/F11-worker-slots-unbounded",
    "open finding F11 (engine/snapshot.rs): restore registers a worker per claimed worker slot"
}

open_finding! {
    /// F12: the engine's counters come back from the snapshot as they are; one at `u64::MAX`
    /// overflows at the next pass (`engine/dispatch.rs`, `self.stats.passes += 1`: a panic
    /// with overflow checks, as in debug and fuzz builds; it wraps in release).
    f12_pass_counter_overflow: engine_restore, "engine_restore/F12-pass-counter-overflow",
    "open finding F12 (engine/snapshot.rs): a restored pass counter overflows"
}
