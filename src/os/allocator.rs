//! The server's global allocator: mimalloc with a live-bytes counter, so
//! `used_memory` in INFO and the maxmemory levels are real measurements of
//! live heap bytes, not estimates. Install it in the binary with
//! `#[global_allocator]` and call [`tune`] first thing in `main`.
//!
//! Why mimalloc (docs/PERFORMANCE.md, run AO): glibc's arenas put a lock
//! on every free of a large chunk another thread allocated, and the spill
//! tier moves 1 KiB records between the owner and the spill thread; with
//! mimalloc the server spends less CPU per job with or without spill. Its
//! two defaults that hold memory back are changed: no transparent huge
//! pages (the `no_thp` feature: a 2 MiB page stays resident while one job
//! on it lives) and a 10 ms purge delay instead of 1 s.

use std::alloc::{GlobalAlloc, Layout};

use mimalloc::MiMalloc as Inner;
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering::Relaxed};

/// Can dip below zero for a moment: a thread may free what another thread
/// allocated before that one flushed its local count.
static ALLOCATED: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Per-thread changes are folded into the global counter once they exceed
/// this, so the hot path touches no shared cache line (a shared atomic
/// would bounce one line between the threads on every allocation). The
/// total is exact to within
/// FLUSH bytes per thread.
const FLUSH: isize = 32 * 1024;

thread_local! {
    static LOCAL: Cell<isize> = const { Cell::new(0) };
}

/// mimalloc plus a live-bytes counter.
pub struct Counting;

// SAFETY: defers to mimalloc; only adds atomic bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = Inner.alloc(layout);
        if !p.is_null() {
            account(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        Inner.dealloc(ptr, layout);
        account(-(layout.size() as isize));
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = Inner.alloc_zeroed(layout);
        if !p.is_null() {
            account(layout.size() as isize);
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = Inner.realloc(ptr, layout, new_size);
        if !p.is_null() {
            account(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// mimalloc's `mi_option_purge_delay` (mimalloc.h, v3): milliseconds
/// before the pages of freed memory go back to the kernel.
const PURGE_DELAY_OPTION: libmimalloc_sys::mi_option_t = 15;
const PURGE_DELAY_MS: std::ffi::c_long = 10;

/// Set the allocator's options; call before the server allocates much
/// (the option is read each time freed pages are scheduled for purging).
pub fn tune() {
    // SAFETY: mi_option_set only stores the value; the server calls this
    // once at startup, before it starts any thread.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY_OPTION, PURGE_DELAY_MS) }
}

fn account(delta: isize) {
    // `const` thread-locals without destructors never allocate; after the
    // thread's TLS is gone, fall back to the shared counter.
    let local = LOCAL.try_with(|c| {
        let v = c.get() + delta;
        if v.abs() >= FLUSH {
            c.set(0);
            flush(v);
        } else {
            c.set(v);
        }
    });
    if local.is_err() {
        flush(delta);
    }
}

fn flush(v: isize) {
    let now = ALLOCATED.fetch_add(v, Relaxed) + v;
    if now > 0 {
        PEAK.fetch_max(now as usize, Relaxed);
    }
}

/// Live heap bytes (0 when the counting allocator is not installed).
pub fn allocated() -> usize {
    ALLOCATED.load(Relaxed).max(0) as usize
}

pub fn peak() -> usize {
    PEAK.load(Relaxed)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_purge_delay_option_is_the_one_tune_sets() {
        super::tune();
        // SAFETY: reads an option; tests run tune() only, with the same value.
        let got = unsafe { libmimalloc_sys::mi_option_get(super::PURGE_DELAY_OPTION) };
        assert_eq!(got, super::PURGE_DELAY_MS);
    }
}
