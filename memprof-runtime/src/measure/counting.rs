//! The global allocator memprof installs: jemalloc, with each thread's allocations and frees counted, and its
//! high-water mark watched, while a measure runs on the thread.
//!
//! jemalloc counts each thread's bytes (`thread.allocatedp`, read at no cost) but not its objects, and its
//! own peak (`thread.peak`) is brought up to date only every 64 KiB allocated. So while a measure runs on a
//! thread, each allocation there adds one to a thread-local count and reads jemalloc's two byte counters to
//! raise the thread's peak ([`Watch`]). Elsewhere an allocation or a free pays one thread-local load and a
//! branch not taken (counted under callgrind in BENCHMARKS.md).
//! Nothing here allocates, locks or calls jemalloc beyond the allocation itself.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;

use tikv_jemallocator::Jemalloc;

/// jemalloc as the global allocator, each thread's objects counted for `memprof::measure`: what
/// `#[memprof::main]` and `memprof::global_allocator!()` install.
///
/// ```ignore
/// #[global_allocator]
/// static ALLOCATOR: memprof_runtime::Allocator = memprof_runtime::Allocator;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Allocator;

/// A thread's counts, and its watch of the peak while a measure runs on it.
pub(super) struct ThreadCounts {
    /// Allocations and reallocations through [`Allocator`] on this thread while it was watched.
    pub(super) allocations: Cell<u64>,
    /// Frees and reallocations, while it was watched.
    pub(super) frees: Cell<u64>,
    /// Whether a measure runs on this thread: then each allocation raises [`ThreadCounts::watch`]'s peak.
    pub(super) watching: Cell<bool>,
    /// The innermost measure's watch of the peak.
    pub(super) watch: Cell<Watch>,
    /// The bytes memprof's own work on this thread allocated and freed ([`super::segment::not_counted`]),
    /// left out of every measure (its objects are never counted: the thread is not watched meanwhile).
    pub(super) not_counted: [Cell<u64>; 2],
}

/// What raises a measure's peak: jemalloc's byte counters of the thread, and the live bytes at its start.
#[derive(Debug, Clone, Copy)]
pub(super) struct Watch {
    /// `thread.allocatedp`.
    pub(super) allocated: *const u64,
    /// `thread.deallocatedp`.
    pub(super) freed: *const u64,
    /// Allocated minus freed at the measure's start.
    pub(super) base: u64,
    /// The most allocated minus freed rose above `base` since (at least 0).
    pub(super) peak: i64,
}

impl Watch {
    /// No watch: nothing to read.
    pub(super) const NONE: Watch = Watch { allocated: std::ptr::null(), freed: std::ptr::null(), base: 0, peak: 0 };

    /// Allocated minus freed on this thread now, per jemalloc (0 without its counters), memprof's own work
    /// left out (`not_counted`, this thread's).
    pub(super) fn live(&self, not_counted: &[Cell<u64>; 2]) -> u64 {
        if self.allocated.is_null() {
            return 0;
        }
        // SAFETY: `thread.allocatedp` and `thread.deallocatedp` of this thread (a watch never leaves its
        // thread: `ThreadCounts` is thread-local), valid for the thread's life.
        let live = unsafe { (*self.allocated).wrapping_sub(*self.freed) };
        live.wrapping_sub(not_counted[0].get()).wrapping_add(not_counted[1].get())
    }

    /// Raises the peak to what is live now, if higher.
    #[inline]
    fn see(&mut self, not_counted: &[Cell<u64>; 2]) {
        let above = self.live(not_counted).wrapping_sub(self.base) as i64;
        if above > self.peak {
            self.peak = above;
        }
    }
}

thread_local! {
    /// This thread's counts: constant-initialized and without a destructor, so reaching them is one
    /// thread-pointer-relative access, from the allocator, on every thread, at any time of its life.
    pub(super) static COUNTS: ThreadCounts = const {
        ThreadCounts {
            allocations: Cell::new(0),
            frees: Cell::new(0),
            watching: Cell::new(false),
            watch: Cell::new(Watch::NONE),
            not_counted: [const { Cell::new(0) }; 2],
        }
    };
}

#[inline]
fn allocated() {
    COUNTS.with(|counts| {
        if counts.watching.get() {
            counted_allocation(counts);
        }
    });
}

#[inline(never)]
fn counted_allocation(counts: &ThreadCounts) {
    counts.allocations.set(counts.allocations.get().wrapping_add(1));
    let mut watch = counts.watch.get();
    watch.see(&counts.not_counted);
    counts.watch.set(watch);
}

#[inline]
fn freed() {
    COUNTS.with(|counts| {
        if counts.watching.get() {
            counts.frees.set(counts.frees.get().wrapping_add(1));
        }
    });
}

// SAFETY: every call is jemalloc's, with the caller's arguments; the counting around it touches only
// thread-local cells.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let pointer = unsafe { Jemalloc.alloc(layout) };
        if !pointer.is_null() {
            allocated();
        }
        pointer
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let pointer = unsafe { Jemalloc.alloc_zeroed(layout) };
        if !pointer.is_null() {
            allocated();
        }
        pointer
    }

    #[inline]
    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { Jemalloc.dealloc(pointer, layout) };
        freed();
    }

    #[inline]
    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let moved = unsafe { Jemalloc.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            freed();
            allocated();
        }
        moved
    }
}
