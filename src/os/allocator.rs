//! A counting global allocator: `used_memory` in INFO and the maxmemory
//! levels are real measurements of live heap bytes, not estimates.
//! Install it in the binary with `#[global_allocator]`.

use std::alloc::{GlobalAlloc, Layout, System};
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

/// The system allocator plus a live-bytes counter.
pub struct Counting;

// SAFETY: defers to the system allocator; only adds atomic bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            account(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        account(-(layout.size() as isize));
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            account(layout.size() as isize);
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            account(new_size as isize - layout.size() as isize);
        }
        p
    }
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
