//! What a thread's first sample stands for when the thinning changed during the thread's life.
//!
//! jemalloc draws a thread's first distance to a sample at its first allocation, at the interval in force
//! then, and memprof sees nothing of that allocation: the first sample it sees of the thread may come after
//! the interval changed (a storm's threads born unthinned, first sampled once it is thinned 64 times, stood
//! for 64 times what they were drawn at, and a storm of 1,000 threads read 0.26-2.14 of its truth). Where
//! the thinning changed since the thread was born, the kernel's accounts of the thread bound when it first
//! ran, and so when it first allocated ([`first_allocation_within`], for a thread that allocates as it
//! starts); each thinning in force then is as likely as the share of that time it held ([`Prior`]); and
//! the bytes the thread allocated before the sample weigh each: a first sample after 30 MiB was hardly
//! drawn at 512 KiB. The sample stands for the reciprocal of the rate of sampling expected, at what the
//! thread had allocated ([`Prior::first_sample_factor`]): unbiased over the threads whose first allocation
//! falls within those bounds as the prior says. Where no thinning of those bounds can have drawn a distance
//! as long as the thread went ([`Prior::explains`]: a thread that blocked between its start and its first
//! allocation), every thinning in force since its birth is as likely as the time it held.
//!
//! ```ignore
//! // Born unthinned, first run after sampling was thinned 64 times, sampled after 40 MiB: 64 times.
//! let prior = Prior::over(&changes, true, 1_000, 2_000).unwrap();
//! assert!((prior.first_sample_factor(40 << 20, 1 << 19) - 64.0).abs() < 1.0);
//! ```

use super::Thinning;
use crate::process::thread_times::ThreadTimes;

/// A change of the thinning to `to`: jemalloc draws at it from `at_ns` on the boot clock as near as it is
/// known, and from `by_ns` at the latest (`u64::MAX` while it is being made).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) at_ns: u64,
    pub(crate) by_ns: u64,
    pub(crate) to: Thinning,
}

/// What the samples taken while a change was being made saw of it: the last moment one saw jemalloc still
/// drawing at the interval before it, and the first one saw it drawing at the new (boot clock, ns; `0` and
/// `u64::MAX` where none did).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) old_until_ns: u64,
    pub(crate) new_from_ns: u64,
}

impl Seen {
    /// Nothing seen.
    pub(crate) const NOTHING: Seen = Seen { old_until_ns: 0, new_from_ns: u64::MAX };
}

impl Change {
    /// A change to `to` asked of jemalloc at `asked_ns` and not yet made.
    pub(crate) fn asked(to: Thinning, asked_ns: u64) -> Change {
        Change { at_ns: asked_ns, by_ns: u64::MAX, to }
    }

    /// A change to `to` asked at `asked_ns` and made by `done_ns` (`prof.reset` returned: jemalloc changes
    /// the interval once it holds its locks, then expires every thread's samples, and the pacer may wait
    /// long to run again, a second with a thousand threads runnable), timed within those by what the
    /// samples taken meanwhile saw: no sooner than the last that saw the old interval, no later than the
    /// first that saw the new, at the middle of what is left (where they contradict each other, a sample
    /// having waited to run between its reading and its clock's, at the first that saw the new).
    ///
    /// ```ignore
    /// let seen = Seen { old_until_ns: 120, new_from_ns: 140 };
    /// let timed = Change::timed(Thinning::of(2), 100, 600, seen);
    /// assert_eq!(timed, Change { at_ns: 130, by_ns: 140, to: Thinning::of(2) });
    /// ```
    pub(crate) fn timed(to: Thinning, asked_ns: u64, done_ns: u64, seen: Seen) -> Change {
        let by_ns = done_ns.min(seen.new_from_ns).max(asked_ns);
        let from_ns = asked_ns.max(seen.old_until_ns).min(by_ns);
        Change { at_ns: from_ns + (by_ns - from_ns) / 2, by_ns, to }
    }
}

/// How many mean intervals past a distance drawn is too unlikely to have been (e^-20: two in a billion).
const UNLIKELY_PAST: f64 = 20.0;

/// How late the scheduler's account of the time a thread ran may be (it updates it at its ticks: 10 ms at
/// the lowest tick rate, 100 Hz).
const RAN_LATE_BY_NS: u64 = 10_000_000;

/// When the thread, as the kernel accounts it, first ran (on the boot clock, ns, from and to): from its
/// birth on; and, where it ran in one slice, when that slice began (what it ran, as late as the account
/// may be); else no later than its birth and every wait to run it had (the first is among them) and than
/// what it ran before now.
pub(crate) fn first_allocation_within(thread: &ThreadTimes) -> (u64, u64) {
    let began = thread.now_ns.saturating_sub(thread.ran_ns);
    let mut from = thread.born_ns;
    let mut to = began.min(thread.born_ns.saturating_add(thread.tick_ns).saturating_add(thread.waited_ns));
    if thread.slices <= 1 {
        from = from.max(began.saturating_sub(RAN_LATE_BY_NS));
        to = began;
    }
    (from, to.max(from).min(thread.now_ns.max(from)))
}

/// How likely each thinning is to be the one a thread's first distance was drawn at, before the bytes it
/// allocated are weighed: the share of its first allocation's time bounds each held.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Prior([f64; Thinning::MOST.exponent() as usize + 1]);

impl Prior {
    /// The shares of `from..=to` (boot clock, ns) each thinning held, from `changes` (oldest first), which
    /// hold every change since start-up where `complete` (unthinned before the first), else only the latest;
    /// `None` where they do not reach back to `from`.
    pub(crate) fn over(changes: &[Change], complete: bool, from: u64, to: u64) -> Option<Prior> {
        let before = changes.iter().take_while(|change| change.at_ns <= from).last();
        let mut held = match before {
            Some(change) => change.to,
            None if complete => Thinning::NONE,
            None => return None,
        };
        let mut shares = [0.0; Thinning::MOST.exponent() as usize + 1];
        if to <= from {
            shares[usize::from(held.exponent())] = 1.0;
            return Some(Prior(shares));
        }
        let mut since = from;
        for change in changes.iter().filter(|change| change.at_ns > from && change.at_ns < to) {
            shares[usize::from(held.exponent())] += (change.at_ns - since) as f64;
            (held, since) = (change.to, change.at_ns);
        }
        shares[usize::from(held.exponent())] += (to - since) as f64;
        let all: f64 = shares.iter().sum();
        Some(Prior(shares.map(|share| share / all)))
    }

    /// Whether some thinning the prior holds can have drawn a distance of `before` bytes or more at the
    /// configured interval of `interval` bytes with a chance better than e^-[`UNLIKELY_PAST`]: where none
    /// can, the bounds it was taken over were wrong (a thread that blocked between its start and its first
    /// allocation: it first allocated later than it first ran).
    pub(crate) fn explains(&self, before: u64, interval: u64) -> bool {
        (0..self.0.len())
            .filter(|&n| self.0[n] > 0.0)
            .any(|n| (before as f64) < UNLIKELY_PAST * interval as f64 * f64::from(1u32 << n))
    }

    /// What a first sample, taken after the thread allocated `before` bytes, stands for, in times the
    /// configured interval of `interval` bytes: 1 over the rate of sampling expected of the thinnings the
    /// prior holds, each weighed by its chance to draw a distance past `before` (a rate of 2^-n at thinning n).
    pub(crate) fn first_sample_factor(&self, before: u64, interval: u64) -> f64 {
        let beyond = |n: usize| before as f64 / (interval as f64 * f64::from(1u32 << n));
        // Relative to the least likely to have let `before` pass unsampled: no underflow of them all.
        let least = (0..self.0.len()).filter(|&n| self.0[n] > 0.0).map(beyond).fold(f64::INFINITY, f64::min);
        let (mut weight, mut rate) = (0.0, 0.0);
        for (n, &share) in self.0.iter().enumerate().filter(|(_, share)| **share > 0.0) {
            let likely = share * (least - beyond(n)).exp();
            weight += likely;
            rate += likely / f64::from(1u32 << n);
        }
        if rate > 0.0 { weight / rate } else { 1.0 }
    }
}

/// The thinning a sample standing for `factor` times the configured interval is recorded at (which keeps
/// whole exponents): the one below or the one above, chosen by `uniform` in 0..1 so that it stands for
/// `factor` on average.
pub(crate) fn rounded(factor: f64, uniform: f64) -> Thinning {
    let factor = factor.clamp(1.0, Thinning::MOST.weight());
    let below = Thinning::of(factor.log2().floor() as u8);
    if below == Thinning::MOST {
        return below;
    }
    // factor = p * 2^b + (1 - p) * 2^(b+1): above with chance factor / 2^b - 1.
    let above = factor / below.weight() - 1.0;
    if uniform < above { Thinning::of(below.exponent() + 1) } else { below }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn change(at_ms: u64, to: u8) -> Change {
        Change { at_ns: at_ms * MS, by_ns: at_ms * MS, to: Thinning::of(to) }
    }

    #[test]
    fn a_change_is_timed_between_what_the_samples_saw_within_its_asking_and_its_making() {
        let to = Thinning::of(2);
        // Recorded: a reset asked with a thousand threads runnable returned 575 ms later.
        let (asked, done) = (100 * MS, 675 * MS);
        assert_eq!(Change::timed(to, asked, done, Seen::NOTHING), Change { at_ns: 387_500_000, by_ns: done, to });
        let seen = Seen { old_until_ns: 120 * MS, new_from_ns: 123 * MS };
        assert_eq!(Change::timed(to, asked, done, seen), Change { at_ns: 121_500_000, by_ns: 123 * MS, to });
        // Seen before it was asked, or after it was made: the asking and the making bound it.
        let outside = Seen { old_until_ns: 50 * MS, new_from_ns: 900 * MS };
        assert_eq!(Change::timed(to, asked, done, outside), Change::timed(to, asked, done, Seen::NOTHING));
        // A sample that saw the old interval, its clock read late: at the first that saw the new.
        let late = Seen { old_until_ns: 300 * MS, new_from_ns: 200 * MS };
        assert_eq!(Change::timed(to, asked, done, late), Change { at_ns: 200 * MS, by_ns: 200 * MS, to });
        assert_eq!(Change::asked(to, asked), Change { at_ns: asked, by_ns: u64::MAX, to });
    }

    #[test]
    fn a_thread_in_its_first_slice_began_as_long_ago_as_it_ran() {
        let thread = ThreadTimes {
            now_ns: 900 * MS,
            born_ns: 100 * MS,
            tick_ns: 10 * MS,
            ran_ns: 2 * MS,
            waited_ns: 797 * MS,
            slices: 1,
        };
        assert_eq!(first_allocation_within(&thread), (888 * MS, 898 * MS));
        // Preempted since: from its birth to its birth and its waits (here sooner than now less what it ran).
        let thread = ThreadTimes { slices: 4, waited_ns: 300 * MS, ..thread };
        assert_eq!(first_allocation_within(&thread), (100 * MS, 410 * MS));
        // The accounts contradicting each other (a wait not accounted): never past now, never before birth.
        let thread = ThreadTimes { ran_ns: 950 * MS, ..thread };
        assert_eq!(first_allocation_within(&thread), (100 * MS, 100 * MS));
    }

    #[test]
    fn the_prior_is_the_share_of_the_time_each_thinning_held() {
        let changes = [change(200, 6), change(300, 4), change(1000, 0)];
        let shares = |prior: Prior| prior.0.iter().map(|share| (share * 100.0).round() as u32).collect::<Vec<_>>();
        let prior = Prior::over(&changes, true, 100 * MS, 500 * MS).unwrap();
        assert_eq!(shares(prior), [25, 0, 0, 0, 50, 0, 25, 0, 0, 0, 0]);
        // Within one thinning, or at one instant: that one.
        assert_eq!(shares(Prior::over(&changes, true, 210 * MS, 290 * MS).unwrap())[6], 100);
        assert_eq!(shares(Prior::over(&changes, true, 50 * MS, 50 * MS).unwrap())[0], 100);
        // Changes that do not reach back that far (the oldest overwritten) say nothing.
        assert_eq!(Prior::over(&changes, false, 100 * MS, 500 * MS), None);
        assert!(Prior::over(&changes, false, 250 * MS, 500 * MS).is_some());
    }

    #[test]
    fn the_bytes_before_the_first_sample_say_which_interval_drew_it() {
        let interval = 1 << 19;
        let certain = |n: u8| Prior::over(&[change(0, n)], true, MS, 2 * MS).unwrap();
        assert!((certain(6).first_sample_factor(1 << 20, interval) - 64.0).abs() < 1e-9);
        assert!((certain(0).first_sample_factor(100 << 20, interval) - 1.0).abs() < 1e-9);
        // Half the time unthinned, half thinned 64 times: after 40 MiB the unthinned interval is ruled out,
        // after 100 KiB the sampled rate is nearly the mean of both (the harmonic weight: ~2, not 32).
        let even = Prior::over(&[change(0, 0), change(10, 6)], true, 5 * MS, 15 * MS).unwrap();
        assert!((even.first_sample_factor(40 << 20, interval) - 64.0).abs() < 0.01, "{even:?}");
        let soon = even.first_sample_factor(100 << 10, interval);
        assert!((1.5..2.5).contains(&soon), "{soon}");
    }

    /// Whatever a thread's first allocation bounds, the weights are unbiased where its draw falls as the
    /// prior says: the mean of factor over draws, each sampled with the chance its weight makes up for, is
    /// the bytes. Simulated: threads allocating 8 MiB each, drawn unthinned or at 2^6 half the time each.
    #[test]
    fn first_samples_weighed_so_add_up_to_what_the_threads_allocated() {
        let interval: u64 = 1 << 19;
        let prior = Prior::over(&[change(0, 0), change(10, 6)], true, 5 * MS, 15 * MS).unwrap();
        let allocated: u64 = 8 << 20;
        let (mut estimate, threads) = (0.0, 200_000);
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut uniform = || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        for thread in 0..threads {
            let n = if thread % 2 == 0 { 0 } else { 6 };
            let mean = (interval << n) as f64;
            // The first distance; later samples are drawn at a known interval, counted at it.
            let first = -mean * uniform().ln();
            if first < allocated as f64 {
                estimate += prior.first_sample_factor(first as u64, interval) * interval as f64;
                let rest = (allocated as f64 - first) / mean;
                estimate += rest * mean;
            }
        }
        let truth = threads as f64 * allocated as f64;
        assert!((estimate / truth - 1.0).abs() < 0.02, "{}", estimate / truth);
    }

    #[test]
    fn a_distance_no_thinning_of_the_bounds_draws_says_the_bounds_were_wrong() {
        let interval = 1 << 19;
        // Recorded: born unthinned, its first run 155 ms later at the latest; sampled after 300 MB while
        // thinned 1024 times (it blocked before its first allocation, till thinning reached 1024).
        let changes = [change(161, 6), change(336, 8), change(444, 10)];
        let window = Prior::over(&changes, true, 0, 155 * MS).unwrap();
        assert!(window.explains(700 << 10, interval) && !window.explains(300 << 20, interval));
        let life = Prior::over(&changes, true, 0, 900 * MS).unwrap();
        assert!(life.explains(300 << 20, interval));
        let factor = life.first_sample_factor(300 << 20, interval);
        assert!((800.0..1024.0).contains(&factor), "{factor}");
    }

    #[test]
    fn a_factor_between_thinnings_is_one_or_the_other_as_often_as_it_lies_between() {
        assert_eq!(rounded(64.0, 0.99), Thinning::of(6));
        assert_eq!((rounded(3.0, 0.49), rounded(3.0, 0.51)), (Thinning::of(2), Thinning::of(1)));
        assert_eq!((rounded(0.3, 0.0), rounded(5000.0, 0.0)), (Thinning::NONE, Thinning::MOST));
        let mean = (0..1000).map(|step| rounded(5.0, (f64::from(step) + 0.5) / 1000.0).weight()).sum::<f64>() / 1000.0;
        assert!((mean - 5.0).abs() < 0.01, "{mean}");
    }
}
