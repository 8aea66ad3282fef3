//! Keeps continuous sampling within its budget (judged in [`super::budget`]): measures the work of each
//! sampled allocation, and, in the counters' thread's place of its sleep ([`Pacer::pace`]), changes
//! jemalloc's sampling interval (`prof.reset`) as the budget needs.
//!
//! A sampled allocation's work is measured on its own thread, from memprof's backtrace hook (the walk's
//! start, [`crate::stack_walk::work_clock`]) to the record's sample hook (the object recorded,
//! [`work_ended`]): the walk,
//! jemalloc's bookkeeping of the stack and the promoted page, the record; two reads of the vDSO's clock
//! each, nothing taken, nothing allocated, counted by its order of magnitude ([`Work`]: a sample measured
//! far longer than the median one was not running), and some on their thread's CPU clock too
//! ([`crate::stack_walk::work_clock::CPU_TIMED_ONE_IN`]: what the wall clock says is taken up to twice what
//! those say, for with a thousand threads runnable on two cores most samples wait inside the hooks). The
//! free of a sampled object is not measured.
//!
//! jemalloc draws each thread's distance to its next sample as it takes one (and at the thread's first
//! allocation), at the interval in force then, and keeps it whatever the interval becomes. So a sample
//! stands for what the interval its distance was drawn at makes it stand for: each thread remembers the
//! thinning jemalloc drew at as its last sample's hook returned ([`next_drawn`]: the last change made, or,
//! while one is being made, read from jemalloc itself, the pacer's word lagging jemalloc's when the pacer
//! waits to run), and its next sample carries that one into the record, which weighs it so
//! ([`thinning_of_this_sample`]). A thread's first sample carries the thinning in force as it is taken
//! where the interval has not changed since the thread was born; else what the kernel's accounts of the
//! thread and the bytes it allocated say of the thinning its first distance was drawn at
//! ([`super::budget::Prior`]), against the latest changes of the interval kept with their times.
//!
//! Thinned, each thread counts the samples it takes ([`Sampler`]), and takes them off as it exits (its
//! thread-local's destructor runs before the thread is joined): the last of them to exit, its load gone
//! with its threads ([`gone_with_its_threads`]), unthins sampling itself, before the thread that joined
//! them allocates, and the pacer judges afresh from there ([`Persistence`] keeping whether such a load
//! went on lately).
//!
//! While a run an operator asked for is in progress (`/start`, `heap_profile?active=true`), sampling is
//! whole, as on demand ([`sample_whole`]): its profile is what the operator came for, and its length is
//! theirs; the budget judges again from its end.

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::budget::{
    Budget, Change, Persistence, Prior, Thinning, WORK_BUCKETS, Work, ended, first_allocation_within,
    gone_with_its_threads, rounded, work_bucket,
};
use crate::jemalloc;
use crate::process::thread_times;

mod changes;
use changes::Changes;

/// What the budget's pacer and the sample hooks share, process-wide: the budget armed, the work measured,
/// the thinning in force and what it was at most.
struct Pacing {
    /// The budget and jemalloc's configured interval (log2), once continuous sampling armed it ([`arm`]);
    /// `None` inside: sampling is never thinned.
    budget: OnceLock<Option<(Budget, usize)>>,
    /// The sampled allocations since the pacer last took them, by their work ([`Work`]): how many in each
    /// bucket, and their work in nanoseconds.
    work_counts: [AtomicU64; WORK_BUCKETS],
    work_nanos: [AtomicU64; WORK_BUCKETS],
    /// Of them, those timed on their thread's CPU clock too, and their work on it (ns).
    cpu_timed: AtomicU64,
    cpu_nanos: AtomicU64,
    /// Whether a run an operator asked for is in progress: sampling whole meanwhile.
    whole: AtomicBool,
    /// The most sampling was thinned since start-up (its exponent).
    most: AtomicU8,
    /// How long sampling was thinned since start-up, in all (ns).
    thinned_nanos: AtomicU64,
    /// The work of one sample over the last reading judged, on average (ns; 0: none judged yet).
    sample_work_nanos: AtomicU64,
    /// Held while the interval changes (the pacer's, a run's start): the interval and the weight change
    /// together.
    changing: parking_lot::Mutex<()>,
    /// The number of the time sampling is thinned, from leaving unthinned to returning to it.
    thinned_time: AtomicU32,
    /// The samples taken in it, and those of them by threads still running.
    thinned_samples: AtomicU64,
    live_samples: AtomicU64,
    /// Set when a thread's exit unthinned sampling, its load gone with its threads: the pacer's readings
    /// were of that load.
    gone: AtomicBool,
    /// Whether threads' exits may unthin sampling ([`Persistence::exits_unthin`]).
    exits_unthin: AtomicBool,
    /// The latest changes of the thinning, timed as the samples saw them made, the last made in force
    /// ([`Changes`]).
    changes: Changes,
    /// `prof.lg_sample`, translated once continuous sampling armed the budget ([`drawn_now`]).
    in_force: OnceLock<jemalloc::IntervalInForce>,
}

static PACING: Pacing = Pacing {
    budget: OnceLock::new(),
    work_counts: [const { AtomicU64::new(0) }; WORK_BUCKETS],
    work_nanos: [const { AtomicU64::new(0) }; WORK_BUCKETS],
    cpu_timed: AtomicU64::new(0),
    cpu_nanos: AtomicU64::new(0),
    whole: AtomicBool::new(false),
    most: AtomicU8::new(0),
    thinned_nanos: AtomicU64::new(0),
    sample_work_nanos: AtomicU64::new(0),
    changing: parking_lot::Mutex::new(()),
    thinned_time: AtomicU32::new(0),
    thinned_samples: AtomicU64::new(0),
    live_samples: AtomicU64::new(0),
    gone: AtomicBool::new(false),
    exits_unthin: AtomicBool::new(true),
    changes: Changes::new(),
    in_force: OnceLock::new(),
};

/// How often the pacer takes what sampling cost unthinned (a reading is judged once [`super::budget::JUDGED_AFTER`] long).
const LOOK: Duration = Duration::from_millis(100);

/// How often it takes it thinned, to see a load's end within milliseconds ([`ended`]).
const THINNED_LOOK: Duration = Duration::from_millis(10);

/// A thread's thinning before its first sample: not known.
const UNKNOWN: u8 = u8::MAX;

thread_local! {
    /// The thinning in force at this thread's last sample: its distance to the next was drawn at it.
    static DRAWN_AT: Cell<u8> = const { Cell::new(UNKNOWN) };
    /// The samples this thread took while sampling was thinned, and in which thinned time.
    static SAMPLER: Sampler = const { Sampler { time: Cell::new(0), samples: Cell::new(0) } };
}

/// A thread's samples in a thinned time ([`Pacing::live_samples`]): taken off as it exits, and, where what
/// is left of the load is gone with its threads, sampling unthinned.
struct Sampler {
    time: Cell<u32>,
    samples: Cell<u64>,
}

impl Sampler {
    /// Counts a sample this thread took thinned.
    fn sampled_thinned(&self) {
        let time = PACING.thinned_time.load(Ordering::Relaxed);
        if self.time.replace(time) != time {
            self.samples.set(0);
        }
        self.samples.set(self.samples.get() + 1);
        PACING.thinned_samples.fetch_add(1, Ordering::Relaxed);
        PACING.live_samples.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        if self.samples.get() == 0 || self.time.get() != PACING.thinned_time.load(Ordering::Relaxed) {
            return;
        }
        let taken = self.samples.get();
        let left = PACING
            .live_samples
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |live| Some(live.saturating_sub(taken)))
            .map_or(0, |live| live.saturating_sub(taken));
        if gone_with_its_threads(left, PACING.thinned_samples.load(Ordering::Relaxed))
            && thinning() != Thinning::NONE
            && PACING.exits_unthin.load(Ordering::Relaxed)
            && !PACING.whole.load(Ordering::Acquire)
        {
            thin(Thinning::NONE);
            PACING.gone.store(true, Ordering::Release);
        }
    }
}

/// Keeps sampling within `budget` from now on (`None`: never thinned): called once, as continuous sampling
/// starts; later calls change nothing.
pub(crate) fn arm(budget: Option<Budget>) {
    let armed = budget.and_then(|budget| Some((budget, jemalloc::lg_sample().ok()?)));
    if armed.is_some()
        && let Ok(in_force) = jemalloc::IntervalInForce::new()
    {
        let _ = PACING.in_force.set(in_force);
    }
    if PACING.budget.set(armed).is_ok() && armed.is_some() {
        crate::stack_walk::work_clock::switch_on();
    }
}

/// The budget armed, if any.
pub(crate) fn budget() -> Option<Budget> {
    armed().map(|(budget, _)| budget)
}

fn armed() -> Option<(Budget, usize)> {
    PACING.budget.get().copied().flatten()
}

/// Samples whole while `whole`: a run an operator asked for is in progress. Whole at once (the pacer may be
/// busy reading the counters), and kept whole by the pacer until it ends.
pub(crate) fn sample_whole(whole: bool) {
    PACING.whole.store(whole, Ordering::Release);
    if whole {
        thin(Thinning::NONE);
    }
}

/// This thread's sampled allocation's work ends (the record's sample hook, last thing): counted, where it
/// was timed ([`crate::stack_walk::work_clock`], started by the walk's hook).
#[inline]
pub(crate) fn work_ended() {
    if let Some(work) = crate::stack_walk::work_clock::stop() {
        let nanos = work.wall.as_nanos() as u64;
        let bucket = work_bucket(nanos);
        PACING.work_counts[bucket].fetch_add(1, Ordering::Relaxed);
        PACING.work_nanos[bucket].fetch_add(nanos, Ordering::Relaxed);
        if let Some(cpu) = work.cpu {
            PACING.cpu_timed.fetch_add(1, Ordering::Relaxed);
            PACING.cpu_nanos.fetch_add(cpu.as_nanos() as u64, Ordering::Relaxed);
        }
    }
}

/// The thinning jemalloc draws sampling distances at now: the last change made's (while the pacer makes one,
/// jemalloc may draw at either).
pub(crate) fn thinning() -> Thinning {
    PACING.changes.in_force()
}

/// The thinning the sample this thread is taking at `address` was drawn at (the record's sample hook, first
/// thing): the one jemalloc drew at as the thread's last sample's hook returned ([`next_drawn`]); for its
/// first, the one in force now where the thinning never changed since the thread was born, else
/// [`first_draw`]'s.
#[inline]
pub(crate) fn thinning_of_this_sample(address: usize) -> Thinning {
    match DRAWN_AT.try_with(Cell::get) {
        // What it reads of jemalloc is seen of a change being made, before the changes are read.
        Ok(UNKNOWN) if PACING.changes.any() => first_draw(PACING.changes.watch(drawn_now), address),
        Ok(UNKNOWN) | Err(_) => PACING.changes.watch(drawn_now),
        Ok(drawn_at) => Thinning::of(drawn_at),
    }
}

/// Remembers the thinning jemalloc draws this thread's next distance at, read as the sample hook returns
/// (its last thing: jemalloc draws the distance a few instructions later, so the interval can change
/// between the two only where the thread is preempted just there; read as the hook began, a thread
/// waiting to run behind a thousand others read the interval 150 ms before it drew, and a distance drawn
/// unthinned counted 1,024 times); counts the sample where thinned.
#[inline]
pub(crate) fn next_drawn() {
    let now = PACING.changes.watch(drawn_now);
    // A thread exiting meanwhile has nothing to keep.
    let _ = DRAWN_AT.try_with(|drawn_at| drawn_at.set(now.exponent()));
    if now != Thinning::NONE {
        let _ = SAMPLER.try_with(Sampler::sampled_thinned);
    }
}

/// The thinning jemalloc draws distances at now, as jemalloc holds it (`prof.lg_sample` against the
/// configured interval): the one the distance drawn as a sample's hook returns is drawn at, read while a
/// change is being made ([`Changes::watch`]). Not the pacer's [`thinning`], which changes as `prof.reset`
/// returns: with hundreds of threads runnable on a few cores, the pacer can wait a second or more to run
/// again between the two, and every sample taken meanwhile would have its next distance drawn at the new
/// interval and be counted at the old one (a storm of 1,000 threads in a debug build read 0.32 of its
/// truth so: its samples drawn at 4 times the interval, each counted once).
fn drawn_now() -> Thinning {
    let read = armed().zip(PACING.in_force.get()).and_then(|((_, configured), in_force)| {
        let in_force = in_force.lg_sample().ok()?;
        Some(Thinning::of(u8::try_from(in_force.saturating_sub(configured)).unwrap_or(u8::MAX)))
    });
    read.unwrap_or_else(thinning)
}

/// What a thread's first sample stands for, as a thinning ([`super::budget::Prior`]): `now` where the
/// thinning did not change since the thread was born, or where what that takes cannot be read (the
/// kernel's accounts of the thread, the changes kept reaching back to its birth, the configured
/// interval). Once a thread, after the thinning first changed: two small files read.
#[cold]
fn first_draw(now: Thinning, address: usize) -> Thinning {
    let mut kept = [Change::asked(Thinning::NONE, 0); changes::KEPT];
    let (Some((changes, complete)), Some(thread), Some((_, lg_sample))) =
        (PACING.changes.read(&mut kept), thread_times::this_thread(), armed())
    else {
        return now;
    };
    if changes.last().is_none_or(|last| last.by_ns < thread.born_ns) {
        return now;
    }
    let (from, to) = first_allocation_within(&thread);
    // Before this allocation (jemalloc counts it once the hooks return).
    let before = jemalloc::this_threads_allocated().unwrap_or(0);
    let interval = 1 << lg_sample;
    let prior = Prior::over(changes, complete, from, to)
        .filter(|prior| prior.explains(before, interval))
        .or_else(|| Prior::over(changes, complete, thread.born_ns, thread.now_ns));
    let Some(prior) = prior else { return now };
    // One draw of a uniform in 0..1 for the rounding: the address and the time mixed (splitmix64's finish).
    let mut mixed = (address as u64 ^ thread.now_ns).wrapping_add(0x9e37_79b9_7f4a_7c15);
    mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    let uniform = ((mixed ^ (mixed >> 31)) >> 11) as f64 / (1u64 << 53) as f64;
    rounded(prior.first_sample_factor(before, interval), uniform)
}

/// Whether sampling is on (`prof.active`; thinned, it is on).
pub(crate) fn sampling_on() -> Result<bool, jemalloc::CtlError> {
    jemalloc::profiling_active()
}

/// What `state` says of the budget: the budget, the thinning now, the most since start-up, how long
/// sampling was thinned in all, and what a sample's work was over the last reading judged (what the budget
/// weighs: where it is long, few samples fit).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Report {
    pub(crate) budget: Budget,
    pub(crate) now: Thinning,
    pub(crate) most: Thinning,
    pub(crate) thinned: Duration,
    pub(crate) sample_work: Option<Duration>,
}

/// The budget's report, when one is armed.
pub(crate) fn report() -> Option<Report> {
    Some(Report {
        budget: budget()?,
        now: thinning(),
        most: Thinning::of(PACING.most.load(Ordering::Relaxed)),
        thinned: Duration::from_nanos(PACING.thinned_nanos.load(Ordering::Relaxed)),
        sample_work: Some(PACING.sample_work_nanos.load(Ordering::Relaxed))
            .filter(|&nanos| nanos > 0)
            .map(Duration::from_nanos),
    })
}

/// What a profile from the record says once sampling was thinned: how much, what its samples weigh, and
/// what no sample may have reached: a thread draws its next distance at the interval of its last sample
/// and keeps it (a thread that sampled while a thousand others stormed read 0 for the 64 MiB it allocated
/// after, in most storms of a process), and an error from the samples cannot see what none reached.
pub(crate) fn thinned_note() -> Option<String> {
    let report = report().filter(|report| report.most != Thinning::NONE)?;
    let longest = jemalloc::lg_sample().map_or(0, |lg_sample| 1u64 << lg_sample) * u64::from(report.most.factor());
    Some(format!(
        "sampling was thinned to keep within its budget ({} % of a core; MEMPROF_SAMPLING_BUDGET): its interval \
         was up to {} times jemalloc's, for {:.1} s in all since start-up ({} times now); each sample stands for \
         what the interval it was drawn at makes it stand for, so totals stay unbiased, with more noise; a thread \
         keeps the distance to its next sample drawn then ({:.0} MiB on average at the longest interval), so a \
         stack that allocated less than that may show in no sample, and the error said, from the samples, does \
         not cover it",
        report.budget.share() * 100.0,
        report.most.factor(),
        report.thinned.as_secs_f64(),
        report.now.factor(),
        longest as f64 / f64::from(1 << 20),
    ))
}

/// How profiles were sampled, as OTLP profile attributes: jemalloc's configured interval, and with a
/// budget armed, the budget, the interval now and the longest since start-up, and how long sampling was
/// thinned (a pushed export's `period` is the configured interval; each sample weighs what its own said).
pub(crate) fn sampling_attributes() -> Vec<(String, String)> {
    let configured = jemalloc::lg_sample().map_or(0, |lg_sample| 1u64 << lg_sample);
    let mut attributes = vec![("memprof.sampling.interval_bytes.configured".to_owned(), configured.to_string())];
    if let Some(report) = report() {
        attributes.extend([
            ("memprof.sampling.budget_share".to_owned(), report.budget.share().to_string()),
            (
                "memprof.sampling.interval_bytes.now".to_owned(),
                (configured * u64::from(report.now.factor())).to_string(),
            ),
            (
                "memprof.sampling.interval_bytes.most".to_owned(),
                (configured * u64::from(report.most.factor())).to_string(),
            ),
            ("memprof.sampling.thinned_seconds".to_owned(), format!("{:.1}", report.thinned.as_secs_f64())),
        ]);
    }
    attributes
}

/// Makes jemalloc draw sampling distances at `thinning` from now on (`prof.reset`: jemalloc's own samples
/// are dropped, memprof's record keeps every one), unless it does already.
fn thin(thinning: Thinning) {
    let Some((_, lg_sample)) = armed() else { return };
    let _changing = PACING.changing.lock();
    let before = self::thinning();
    if thinning == before {
        return;
    }
    if before == Thinning::NONE {
        // A new thinned time: its samples counted from none.
        PACING.thinned_time.fetch_add(1, Ordering::Relaxed);
        PACING.thinned_samples.store(0, Ordering::Relaxed);
        PACING.live_samples.store(0, Ordering::Relaxed);
    }
    // Kept as it is asked, before jemalloc draws at it (a thread's first sample must not see the new interval
    // before the change), and timed once made ([`Changes`]).
    let Some(asked_ns) = thread_times::boot_clock_ns() else { return };
    PACING.changes.asked(asked_ns, thinning);
    let made = jemalloc::reset_samples(lg_sample + usize::from(thinning.exponent())).is_ok();
    PACING.changes.made(thread_times::boot_clock_ns().unwrap_or(asked_ns), made);
    PACING.most.fetch_max(self::thinning().exponent(), Ordering::Relaxed);
}

/// The sampled allocations' work since the last call, taken.
fn taken_work() -> Work {
    let mut work = Work::default();
    for bucket in 0..WORK_BUCKETS {
        work.counts[bucket] = PACING.work_counts[bucket].swap(0, Ordering::Relaxed);
        work.nanos[bucket] = PACING.work_nanos[bucket].swap(0, Ordering::Relaxed);
    }
    work.cpu_timed = PACING.cpu_timed.swap(0, Ordering::Relaxed);
    work.cpu_nanos = PACING.cpu_nanos.swap(0, Ordering::Relaxed);
    work
}

/// The counters' thread's pace: its period waited, sampling thinned meanwhile as the budget needs.
#[derive(Default)]
pub(crate) struct Pacer {
    /// What sampling cost since the last judgement, and how long that was.
    work: Work,
    wall_nanos: u64,
    persistence: Persistence,
    /// Samples a nanosecond the load judged last takes at the thinning it was given, and how long none was
    /// taken since.
    rate: f64,
    quiet_nanos: u64,
}

impl Pacer {
    /// A pacer at no thinning.
    pub(crate) fn new() -> Pacer {
        Pacer::default()
    }

    /// Waits `period`, judging what sampling cost every [`LOOK`] and thinning it as the budget says, and,
    /// thinned, looking every [`THINNED_LOOK`] whether the load ended (no budget armed: asleep).
    pub(crate) fn pace(&mut self, period: Duration) {
        let Some(budget) = budget() else { return std::thread::sleep(period) };
        let started = Instant::now();
        while let Some(left) = period.checked_sub(started.elapsed()).filter(|left| !left.is_zero()) {
            let thinned = thinning() != Thinning::NONE;
            let step = Instant::now();
            std::thread::sleep(if thinned { THINNED_LOOK } else { LOOK }.min(left));
            let lasted = step.elapsed().as_nanos() as u64;
            let work = taken_work();
            let samples = work.samples();
            if thinned {
                PACING.thinned_nanos.fetch_add(lasted, Ordering::Relaxed);
            }
            if PACING.gone.swap(false, Ordering::Acquire) {
                // The load's threads exited and unthinned sampling: what was read was of it, and the next
                // readings say whether it went with them.
                self.forget_readings();
                self.persistence.gone_with_its_threads();
                PACING.exits_unthin.store(self.persistence.exits_unthin(), Ordering::Relaxed);
                continue;
            }
            if PACING.whole.load(Ordering::Acquire) {
                // A run sampled whole: nothing judged, and what sampling costs meanwhile left out.
                thin(Thinning::NONE);
                self.start_afresh();
                continue;
            }
            self.quiet_nanos = if samples == 0 { self.quiet_nanos + lasted } else { 0 };
            if thinned && ended(self.rate, self.quiet_nanos) {
                thin(Thinning::NONE);
                self.start_afresh();
                continue;
            }
            self.work.absorb(&work);
            self.wall_nanos += lasted;
            let spent = self.work.spent(self.wall_nanos);
            if spent.enough() {
                (self.work, self.wall_nanos) = (Work::default(), 0);
                let judged = thinning();
                if let Some(per_sample) = spent.work_nanos.checked_div(spent.samples) {
                    PACING.sample_work_nanos.store(per_sample.max(1), Ordering::Relaxed);
                }
                let next = self.persistence.next(judged, budget, spent);
                PACING.exits_unthin.store(self.persistence.exits_unthin(), Ordering::Relaxed);
                // The load judged, sampled at the thinning it is given.
                self.rate = spent.rate() * judged.weight() / next.weight();
                thin(next);
            }
        }
    }

    /// Forgets the readings so far and what they said: they were of a load gone.
    fn start_afresh(&mut self) {
        self.persistence.forget();
        PACING.exits_unthin.store(self.persistence.exits_unthin(), Ordering::Relaxed);
        self.forget_readings();
    }

    /// Forgets the readings so far.
    fn forget_readings(&mut self) {
        (self.work, self.wall_nanos, self.rate, self.quiet_nanos) = (Work::default(), 0, 0.0, 0);
    }
}
