//! The clock of a sampled allocation's work, for the budget of sampling work ([`crate::sampler::throttle`]):
//! started as memprof's backtrace hook begins the walk, stopped as the record's sample hook ends the
//! sample. On this thread, from the vDSO's clock: no system call, no lock, no allocation. Off (no clock
//! read) until continuous sampling with a budget switches it on.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

thread_local! {
    /// When this thread's sampled allocation began.
    static BEGAN: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Times every sampled allocation's work from now on.
pub(crate) fn switch_on() {
    super::WALK.timed.store(true, Ordering::Release);
}

/// A sampled allocation's work begins on this thread (memprof's backtrace hook, first thing).
#[inline]
pub(crate) fn start() {
    if super::WALK.timed.load(Ordering::Relaxed) {
        let _ = BEGAN.try_with(|began| began.set(Some(Instant::now())));
    }
}

/// This thread's sampled allocation's work ends (the record's sample hook, last thing): how long it took,
/// if it was timed.
#[inline]
pub(crate) fn stop() -> Option<Duration> {
    if !super::WALK.timed.load(Ordering::Relaxed) {
        return None;
    }
    BEGAN.try_with(|began| began.take()).ok().flatten().map(|began| began.elapsed())
}
