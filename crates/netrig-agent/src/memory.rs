//! Memory a finished test freed, given back to the system.
//!
//! A large test's buffers are freed when it ends, but glibc kept them: once
//! a large block it had mapped is freed, it raises its mmap threshold (up to
//! 32 MiB) and its trim threshold (twice that), so the next test's buffers
//! come from the worker threads' arenas, whose tops it then keeps, and which
//! `malloc_trim` does not trim (it trims only the main arena's top). Measured
//! with `tcp-maerts -T 16 -P 512 -m 16M` (266 MB at its peak): the idle
//! agent kept 126 MB after one, 189 MB after two, `malloc_trim(0)` or not.
//! With the thresholds fixed at glibc's initial values it went back to
//! 13 MB, and to 11 MB (its size after a small test) with `malloc_trim(0)`
//! after each test for the free chunks arenas hold below their tops.

/// Fixes glibc's mmap threshold at its initial 128 KiB (which fixes its trim
/// threshold too): a buffer of 128 KiB or more is mapped, and unmapped when
/// freed; an arena's free top over 128 KiB is returned when a block is freed.
pub(crate) fn keep_large_blocks_mapped() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes two integers and changes only glibc's own
    // parameters, under its lock.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Returns the free memory the allocator holds to the system.
pub(crate) fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointer; it walks glibc's own arenas
    // under their locks, from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}
