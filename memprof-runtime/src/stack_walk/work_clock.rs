//! The clock of a sampled allocation's work, for the budget of sampling work ([`crate::sampler::throttle`]):
//! started as memprof's backtrace hook begins the walk, stopped as the record's sample hook ends the
//! sample. On this thread, from the vDSO's clock: no system call (but in the few samples also timed on the
//! CPU clock, below), no lock, no allocation. Off (no clock read) until continuous sampling with a budget
//! switches it on.
//!
//! The wall clock counts what the thread waited inside the hooks as work: preempted, or behind a lock whose
//! holder was. So one sample in [`CPU_TIMED_ONE_IN`] of each thread's, chosen afresh each time, is also
//! timed on the thread's CPU clock (a system call each end, some 0.7 us here): what the budget makes of
//! the wall clock is checked against it ([`crate::sampler::budget::Work::spent`]).

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::process::thread_times;

/// One sample in how many is timed on its thread's CPU clock too, on average.
pub(crate) const CPU_TIMED_ONE_IN: u64 = 32;

thread_local! {
    /// When this thread's sampled allocation began, on the wall clock and, where it is one of those timed
    /// so, on the thread's CPU clock (ns).
    static BEGAN: Cell<Option<(Instant, Option<u64>)>> = const { Cell::new(None) };
    /// This thread's draws of which samples are CPU-timed (xorshift64; 0: not seeded yet).
    static DRAWS: Cell<u64> = const { Cell::new(0) };
}

/// A sampled allocation's work: on the wall clock, and on its thread's CPU clock where it was timed so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timed {
    pub(crate) wall: Duration,
    pub(crate) cpu: Option<Duration>,
}

/// Times every sampled allocation's work from now on.
pub(crate) fn switch_on() {
    super::WALK.timed.store(true, Ordering::Release);
}

/// A sampled allocation's work begins on this thread (memprof's backtrace hook, first thing).
#[inline]
pub(crate) fn start() {
    if super::WALK.timed.load(Ordering::Relaxed) {
        let cpu = DRAWS.try_with(cpu_timed).unwrap_or(false).then(thread_times::this_thread_cpu_ns).flatten();
        let _ = BEGAN.try_with(|began| began.set(Some((Instant::now(), cpu))));
    }
}

/// This thread's sampled allocation's work ends (the record's sample hook, last thing): how long it took,
/// if it was timed.
#[inline]
pub(crate) fn stop() -> Option<Timed> {
    if !super::WALK.timed.load(Ordering::Relaxed) {
        return None;
    }
    let (began, cpu_began) = BEGAN.try_with(|began| began.take()).ok().flatten()?;
    let wall = began.elapsed();
    let cpu = cpu_began
        .and_then(|cpu_began| thread_times::this_thread_cpu_ns()?.checked_sub(cpu_began))
        .map(Duration::from_nanos);
    Some(Timed { wall, cpu })
}

/// Whether this thread's next sample is timed on its CPU clock too: one in [`CPU_TIMED_ONE_IN`], drawn
/// (a thread's first sample no likelier than another: a new thread's cost more).
fn cpu_timed(draws: &Cell<u64>) -> bool {
    let mut state = draws.get();
    if state == 0 {
        // Seeded from where this thread's locals lie and the clock: threads draw apart.
        let seed = draws as *const Cell<u64> as u64 ^ thread_times::boot_clock_ns().unwrap_or(0);
        state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    }
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    draws.set(state);
    // xorshift64*'s output, its high half.
    (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32).is_multiple_of(CPU_TIMED_ONE_IN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn about_one_sample_in_the_stated_number_is_cpu_timed() {
        let draws = Cell::new(0);
        let timed = (0..64_000).filter(|_| cpu_timed(&draws)).count() as u64;
        let expected = 64_000 / CPU_TIMED_ONE_IN;
        assert!(timed.abs_diff(expected) < expected / 5, "{timed} of 64,000, {expected} expected");
    }
}
