//! One stretch of a measure on one thread: a block, or one poll of a future. Its start reads the thread's
//! counters and opens a watch of its peak inside any measure already running on the thread; its end reads
//! them again and hands the outer measure the peak it saw (nested measures each see their own).
#![allow(unsafe_code)]

use std::cell::Cell;
use std::marker::PhantomData;

use memprof_wire::usage::{Measured, Usage};

use super::counting::{COUNTS, Watch};

/// A thread's counters at one moment.
#[derive(Debug, Clone, Copy)]
struct Reading {
    allocated_bytes: u64,
    freed_bytes: u64,
    allocations: u64,
    frees: u64,
}

impl Reading {
    /// The thread's counters as they are, memprof's own work included.
    fn raw(counters: Option<(*const u64, *const u64)>) -> Reading {
        let (allocated_bytes, freed_bytes) = match counters {
            // SAFETY: this thread's jemalloc counters (`this_threads_counters`), valid for its life.
            Some((allocated, freed)) => unsafe { (*allocated, *freed) },
            None => (0, 0),
        };
        COUNTS.with(|counts| Reading {
            allocated_bytes,
            freed_bytes,
            allocations: counts.allocations.get(),
            frees: counts.frees.get(),
        })
    }

    /// The thread's counters, memprof's own work left out.
    fn now(counters: Option<(*const u64, *const u64)>) -> Reading {
        let raw = Reading::raw(counters);
        COUNTS.with(|counts| {
            let [allocated, freed] = counts.not_counted.each_ref().map(Cell::get);
            Reading {
                allocated_bytes: raw.allocated_bytes.wrapping_sub(allocated),
                freed_bytes: raw.freed_bytes.wrapping_sub(freed),
                ..raw
            }
        })
    }

    fn bytes(&self) -> [u64; 2] {
        [self.allocated_bytes, self.freed_bytes]
    }
}

thread_local! {
    /// This thread's jemalloc byte counters, once asked for (`mallctl` is a name lookup: not on each poll).
    static COUNTERS: Cell<Option<Option<(*const u64, *const u64)>>> = const { Cell::new(None) };
}

/// This thread's jemalloc byte counters (`None` without jemalloc's statistics).
pub(super) fn this_threads_counters() -> Option<(*const u64, *const u64)> {
    COUNTERS.with(|counters| match counters.get() {
        Some(known) => known,
        None => {
            let known = crate::jemalloc::this_threads_byte_counters();
            counters.set(Some(known));
            known
        }
    })
}

/// Runs `work`, memprof's own, left out of every measure running on this thread: what it allocates and
/// frees, and its peak.
pub(super) fn not_counted<T>(work: impl FnOnce() -> T) -> T {
    let counters = this_threads_counters();
    let watching = COUNTS.with(|counts| counts.watching.replace(false));
    let before = Reading::raw(counters);
    let value = work();
    let after = Reading::raw(counters);
    COUNTS.with(|counts| {
        for ((total, after), before) in counts.not_counted.iter().zip(after.bytes()).zip(before.bytes()) {
            total.set(total.get().wrapping_add(after.wrapping_sub(before)));
        }
        counts.watching.set(watching);
    });
    value
}

/// A stretch being measured on this thread; [`Segment::end`] gives what it used. Dropped without an end (a
/// panic in the block), it still hands the outer measure its peak.
pub(super) struct Segment {
    start: Reading,
    /// The measure running on this thread before this one began, put back at the end.
    outer: Option<Watch>,
    measured: Measured,
    ended: bool,
    /// A segment is of its thread.
    _not_send: PhantomData<*const ()>,
}

impl Segment {
    /// Starts measuring this thread, `measured` what can be (nothing allocates from the reading on).
    pub(super) fn begin(measured: Measured) -> Segment {
        let counters = this_threads_counters();
        let (allocated, freed) = counters.unwrap_or((std::ptr::null(), std::ptr::null()));
        let mut watch = Watch { allocated, freed, base: 0, peak: 0 };
        let outer = COUNTS.with(|counts| counts.watching.get().then(|| counts.watch.get()));
        let start = Reading::now(counters);
        watch.base = start.allocated_bytes.wrapping_sub(start.freed_bytes);
        COUNTS.with(|counts| {
            counts.watch.set(watch);
            counts.watching.set(true);
        });
        Segment { start, outer, measured, ended: false, _not_send: PhantomData }
    }

    /// Ends the stretch: what it allocated and freed, and its peak.
    pub(super) fn end(mut self) -> Usage {
        let watch = COUNTS.with(|counts| counts.watch.get());
        let end = Reading::now((!watch.allocated.is_null()).then_some((watch.allocated, watch.freed)));
        self.close(&watch);
        let allocated_bytes = end.allocated_bytes.wrapping_sub(self.start.allocated_bytes);
        let freed_bytes = end.freed_bytes.wrapping_sub(self.start.freed_bytes);
        let (allocated_objects, freed_objects, peak_bytes) = match self.measured {
            Measured::Exactly => (
                end.allocations.wrapping_sub(self.start.allocations),
                end.frees.wrapping_sub(self.start.frees),
                watch.peak.max(0) as u64,
            ),
            _ => (0, 0, 0),
        };
        Usage {
            allocated_bytes,
            allocated_objects,
            freed_bytes,
            freed_objects,
            live_bytes: allocated_bytes.wrapping_sub(freed_bytes) as i64,
            peak_bytes,
            measured: self.measured.clone(),
            stacks: Vec::new(),
        }
    }

    /// Puts the outer measure back, its peak raised to this one's above its own base.
    fn close(&mut self, watch: &Watch) {
        self.ended = true;
        COUNTS.with(|counts| match self.outer {
            Some(mut outer) => {
                let inner_peak = watch.base.wrapping_sub(outer.base) as i64 + watch.peak;
                outer.peak = outer.peak.max(inner_peak);
                counts.watch.set(outer);
            }
            None => {
                counts.watching.set(false);
                counts.watch.set(Watch::NONE);
            }
        });
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if !self.ended {
            let watch = COUNTS.with(|counts| counts.watch.get());
            self.close(&watch);
        }
    }
}
