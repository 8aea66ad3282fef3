//! Keeps continuous sampling within its budget (judged in [`super::budget`]): measures the work of each
//! sampled allocation, and, in the counters' thread's place of its sleep ([`Pacer::pace`]), switches
//! sampling off and on a slot at a time while the work exceeds the budget.
//!
//! A sampled allocation's work is measured on its own thread, from memprof's backtrace hook (the walk's
//! start, [`work_began`]) to the record's sample hook (the object recorded, [`work_ended`]): the walk,
//! jemalloc's bookkeeping of the stack and the promoted page, the record; two reads of the vDSO's clock
//! each, nothing taken, nothing allocated. The free of a sampled object is not measured.
//!
//! Each slot sampling is off in, the pacer reads the process's CPU clock ([`crate::process::cpu`]): the
//! judge sees the load stop without waiting for a sampled slot.
//!
//! While a run an operator asked for is in progress (`/start`, `heap_profile?active=true`), sampling is
//! whole, as on demand ([`sample_whole`]): its profile is what the operator came for, and its length is
//! theirs; the budget judges again from its end.
//!
//! Sampling switched off for a slot is said as on by [`sampling_on`] (it is thinned, not stopped), and each
//! sample taken in a slot that was on carries the thinning in force ([`thinning`]) into the record, which
//! weighs it by that much.

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::budget::{Budget, MOST_WORK_PER_CPU, Persistence, Quiet, SLOT, Schedule, Spent, Thinning};
use crate::jemalloc;
use crate::process::cpu;

/// How often the pacer looks at what sampling cost while it is unthinned.
const LOOK: Duration = Duration::from_millis(100);

/// The budget, once continuous sampling armed it ([`arm`]); `None` inside: sampling is never thinned.
static BUDGET: OnceLock<Option<Budget>> = OnceLock::new();

/// Whether the hooks measure their work (continuous sampling with a budget).
static MEASURING: AtomicBool = AtomicBool::new(false);

/// The work measured in sampled allocations since the pacer last took it, nanoseconds.
static WORK_NANOS: AtomicU64 = AtomicU64::new(0);

/// The thinning the samples taken now carry (its exponent).
static THINNING: AtomicU8 = AtomicU8::new(0);

/// Whether the pacer switched sampling off for a slot (and so switches it on again).
static HOLDING_OFF: AtomicBool = AtomicBool::new(false);

/// Whether a run an operator asked for is in progress: sampling whole meanwhile.
static WHOLE: AtomicBool = AtomicBool::new(false);

/// Samples whole while `whole`: a run an operator asked for is in progress. Whole at once (the pacer may be
/// busy reading the counters), and kept whole by the pacer from its next step (a slot it began before
/// may switch sampling off for up to 10 ms).
pub(crate) fn sample_whole(whole: bool) {
    WHOLE.store(whole, Ordering::Release);
    if whole && budget().is_some() {
        THINNING.store(Thinning::NONE.exponent(), Ordering::Relaxed);
        switch(true);
    }
}

/// The most sampling was thinned since start-up (its exponent), and for how long in all (ns).
static MOST: AtomicU8 = AtomicU8::new(0);
static THINNED_NANOS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// When this thread's sampled allocation began.
    static BEGAN: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Keeps sampling within `budget` from now on (`None`: never thinned): called once, as continuous sampling
/// starts; later calls change nothing.
pub(crate) fn arm(budget: Option<Budget>) {
    if BUDGET.set(budget).is_ok() && budget.is_some() {
        MEASURING.store(true, Ordering::Release);
    }
}

/// The budget armed, if any.
pub(crate) fn budget() -> Option<Budget> {
    BUDGET.get().copied().flatten()
}

/// A sampled allocation's work begins on this thread (memprof's backtrace hook, first thing).
#[inline]
pub(crate) fn work_began() {
    if MEASURING.load(Ordering::Relaxed) {
        // `Instant::now` reads the vDSO's clock: no system call, no lock, no allocation.
        let _ = BEGAN.try_with(|began| began.set(Some(Instant::now())));
    }
}

/// This thread's sampled allocation's work ends (the record's sample hook, last thing).
#[inline]
pub(crate) fn work_ended() {
    if MEASURING.load(Ordering::Relaxed)
        && let Some(began) = BEGAN.try_with(|began| began.take()).ok().flatten()
    {
        WORK_NANOS.fetch_add(began.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

/// The thinning a sample taken now carries.
pub(crate) fn thinning() -> Thinning {
    Thinning::of(THINNING.load(Ordering::Relaxed))
}

/// Whether sampling is on: `prof.active`, or off for a slot of thinning (on, thinned).
pub(crate) fn sampling_on() -> Result<bool, jemalloc::CtlError> {
    Ok(jemalloc::profiling_active()? || HOLDING_OFF.load(Ordering::Acquire))
}

/// What `state` says of the budget: the budget, the thinning now, the most since start-up, and how long
/// sampling was thinned in all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Report {
    pub(crate) budget: Budget,
    pub(crate) now: Thinning,
    pub(crate) most: Thinning,
    pub(crate) thinned: Duration,
}

/// The budget's report, when one is armed.
pub(crate) fn report() -> Option<Report> {
    Some(Report {
        budget: budget()?,
        now: thinning(),
        most: Thinning::of(MOST.load(Ordering::Relaxed)),
        thinned: Duration::from_nanos(THINNED_NANOS.load(Ordering::Relaxed)),
    })
}

/// What a profile from the record says once sampling was thinned: how much, and what its samples weigh.
pub(crate) fn thinned_note() -> Option<String> {
    let report = report().filter(|report| report.most != Thinning::NONE)?;
    Some(format!(
        "sampling was thinned to keep within its budget ({} % of a core; MEMPROF_SAMPLING_BUDGET): on in one time \
         slot of up to {} for {:.1} s in all since start-up (one in {} now); each sample taken then stands for that \
         many times more, so totals stay unbiased, with more noise",
        report.budget.share() * 100.0,
        report.most.factor(),
        report.thinned.as_secs_f64(),
        report.now.factor()
    ))
}

/// Switches sampling on or off for a slot, unless something else switched it off (a thread's birth, the
/// end of sampling): only what the pacer switched off is switched on again.
fn switch(on: bool) {
    if on != HOLDING_OFF.load(Ordering::Acquire) {
        return; // as it should be, or off for another reason (then left alone)
    }
    crate::process::threads::with_sampling_switched(|| {
        if on {
            if HOLDING_OFF.load(Ordering::Acquire) && jemalloc::set_profiling_active(true).is_ok() {
                HOLDING_OFF.store(false, Ordering::Release);
            }
        } else if !HOLDING_OFF.load(Ordering::Acquire)
            && jemalloc::profiling_active().unwrap_or(false)
            && jemalloc::set_profiling_active(false).is_ok()
        {
            HOLDING_OFF.store(true, Ordering::Release);
        }
    });
}

/// The CPU time the process's threads but the calling one have taken: the program's and memprof's
/// others, without the pacer's own switching and reading. `None` where the clocks cannot be read.
#[derive(Debug, Clone, Copy)]
struct OthersCpu(Option<Duration>);

impl OthersCpu {
    /// Now, if `read` (else unread: an idle process's pacer makes no system call for it).
    fn now(read: bool) -> OthersCpu {
        if !read {
            return OthersCpu(None);
        }
        OthersCpu(cpu::cpu_time().zip(cpu::thread_cpu_time()).map(|(all, own)| all.saturating_sub(own)))
    }

    /// Nanoseconds taken since `before`.
    fn since(self, before: OthersCpu) -> Option<u64> {
        Some(self.0?.saturating_sub(before.0?).as_nanos() as u64)
    }
}

/// The counters' thread's pace: its period waited, sampling thinned meanwhile as the budget needs.
pub(crate) struct Pacer {
    schedule: Schedule,
    /// What sampling cost since the last judgement.
    spent: Spent,
    /// Sampling's work per nanosecond of the process's other CPU time at the last judgement.
    work_per_cpu: f64,
    persistence: Persistence,
    /// Whether sampling had work in the last step.
    busy: bool,
}

impl Pacer {
    /// A pacer at no thinning.
    pub(crate) fn new() -> Pacer {
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Pacer {
            schedule: Schedule::new(seed.as_nanos() as u64),
            spent: Spent::default(),
            work_per_cpu: MOST_WORK_PER_CPU,
            persistence: Persistence::default(),
            busy: false,
        }
    }

    /// Waits `period`: while sampling is unthinned (or no budget is armed) asleep but for a look every
    /// [`LOOK`], else slot by slot, sampling on in the slots the schedule draws; what sampling cost is
    /// judged whenever sampling was on long enough, so a load past the budget is thinned within a look, and
    /// each slot sampling was off in is judged by the process's CPU time, so sampling comes back within a
    /// slot of the load's end.
    pub(crate) fn pace(&mut self, period: Duration) {
        let Some(budget) = budget() else { return std::thread::sleep(period) };
        let started = Instant::now();
        while let Some(left) = period.checked_sub(started.elapsed()).filter(|left| !left.is_zero()) {
            if WHOLE.load(Ordering::Acquire) {
                self.whole_for(LOOK.min(left));
                continue;
            }
            let on = self.schedule.next_slot();
            let thinned = self.begin_slot(on);
            // The CPU clocks are read only where they may be judged: thinned, or after sampling had work.
            let clocked = thinned || self.busy;
            let (step, cpu_before) = (Instant::now(), OthersCpu::now(clocked));
            std::thread::sleep(if thinned { SLOT } else { LOOK.min(left) });
            let lasted = step.elapsed().as_nanos() as u64;
            let cpu_nanos = OthersCpu::now(clocked).since(cpu_before);
            if on {
                self.spent.sampled_nanos += lasted;
                self.spent.cpu_nanos += cpu_nanos.unwrap_or(lasted);
            }
            if thinned {
                THINNED_NANOS.fetch_add(lasted, Ordering::Relaxed);
            }
            let work = WORK_NANOS.swap(0, Ordering::Relaxed);
            self.busy = work > 0;
            self.spent.work_nanos += work;
            if self.spent.enough() {
                let spent = std::mem::take(&mut self.spent);
                self.work_per_cpu = spent.work_per_cpu();
                let next = self.persistence.next(self.schedule.thinning(), budget, spent);
                self.schedule.thin_from_next_block(next);
            } else if let Some(cpu_nanos) = cpu_nanos.filter(|_| !on) {
                let quiet = Quiet { cpu_nanos, wall_nanos: lasted };
                let next = self.schedule.thinning().after_quiet(budget, self.work_per_cpu, quiet);
                if next != self.schedule.thinning() {
                    self.schedule.thin(next);
                    self.persistence.forget();
                }
            }
        }
    }

    /// Sampling whole for `step`, a run an operator asked for in progress: unthinned at once (the block
    /// cut), nothing judged, and what sampling costs meanwhile left out of the next judgement.
    fn whole_for(&mut self, step: Duration) {
        self.schedule.thin(Thinning::NONE);
        self.persistence.forget();
        self.begin_slot(true);
        std::thread::sleep(step);
        WORK_NANOS.swap(0, Ordering::Relaxed);
        self.spent = Spent::default();
        self.busy = false;
    }

    /// Begins a slot as the schedule says: sampling switched on or off (on, once unthinned), and the weight
    /// of the samples taken in it, set while sampling is off (a sample taken on carries the thinning of its
    /// slot, never the one before or after). Whether sampling is thinned.
    fn begin_slot(&self, on: bool) -> bool {
        let thinning = self.schedule.thinning();
        let thinned = thinning != Thinning::NONE;
        if !on {
            switch(false);
        }
        if THINNING.swap(thinning.exponent(), Ordering::Relaxed) != thinning.exponent() {
            MOST.fetch_max(thinning.exponent(), Ordering::Relaxed);
        }
        if on {
            switch(true);
        }
        thinned
    }
}
