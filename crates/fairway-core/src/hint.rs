//! Cache hints: they change no state and no result, only when memory arrives.

/// Asks the processor to bring the cache line holding `at` into its caches, so that a read
/// soon after finds it there instead of waiting for memory. A hint only: any address is
/// allowed, and off x86_64 it does nothing. The engine's one `unsafe` block outside
/// `engine/job_id.rs`.
#[inline]
pub(crate) fn prefetch<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing architecturally (any address is allowed; one that is
    // not mapped is ignored), and SSE, which it needs, is part of every x86_64 CPU.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}
