//! The server process's memory: two knobs of the binary's allocator (mimalloc, the
//! `#[global_allocator]` in `bench.rs`, which also counts bytes for the benchmarks) and of the
//! kernel's, that `fairway serve` sets.

unsafe extern "C" {
    /// mimalloc's `void mi_collect(bool force)` (the C library `MiMalloc` is built from).
    fn mi_collect(force: bool);
}

/// Returns the memory the calling thread freed to the OS now. mimalloc otherwise keeps freed
/// pages until later allocations trigger its delayed purge, which an idle server never does:
/// after recovery (a decoded snapshot and log, all freed) a restarted server held about twice
/// the resident memory of one filled live, and an idle one kept a stored snapshot's bytes
/// (BENCHMARKS.md, "Memory per queued job" and "Restart").
pub fn release_free_memory() {
    // SAFETY: `mi_collect` takes no pointers and may be called from any thread at any time.
    unsafe { mi_collect(true) }
}

/// Turns transparent huge pages off for this process (Linux; elsewhere it does nothing).
/// mimalloc returns freed memory in small pieces, which splits huge pages, and each later fault
/// in such a region zeroes a whole 2 MiB page again: with THP on, 40% to 68% of a fresh
/// server's samples during a bulk fill were the kernel's `clear_page`, and bulk enqueue into a
/// fresh server ran at half the rate (BENCHMARKS.md, "What was changed").
pub fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and changes only this process
    // (and the children it forks). A kernel without it answers EINVAL, which leaves THP as is.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
