//! A counting global allocator: `used_memory` in INFO and the maxmemory
//! levels are real measurements of live heap bytes, not estimates.
//! Install it in the binary with `#[global_allocator]`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator plus a live-bytes counter.
pub struct Counting;

// SAFETY: defers to the system allocator; only adds atomic bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            add(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        ALLOCATED.fetch_sub(layout.size(), Relaxed);
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            add(layout.size());
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            ALLOCATED.fetch_sub(layout.size(), Relaxed);
            add(new_size);
        }
        p
    }
}

fn add(n: usize) {
    let now = ALLOCATED.fetch_add(n, Relaxed) + n;
    if now > PEAK.load(Relaxed) {
        PEAK.store(now, Relaxed);
    }
}

/// Live heap bytes (0 when the counting allocator is not installed).
pub fn allocated() -> usize {
    ALLOCATED.load(Relaxed)
}

pub fn peak() -> usize {
    PEAK.load(Relaxed)
}
