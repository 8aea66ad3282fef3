//! What a reading's samples cost, sample by sample: the work of each measured on its thread's wall clock,
//! counted in buckets by its order of magnitude, so that the few measured long because the thread was not
//! running count as what a sample costs; and, where most were not running, no more than what the few
//! timed on their threads' CPU clocks say ([`Work::spent`]).

use super::Spent;

/// How many buckets: a sample's work of 2^b to 2^(b+1) nanoseconds falls in bucket b, the last taking all
/// longer (2^31 ns: 2 s).
pub(crate) const BUCKETS: usize = 32;

/// The bucket of a sample's work of `nanos` nanoseconds: the binary order of magnitude.
///
/// ```ignore
/// assert_eq!((bucket(0), bucket(1), bucket(1023), bucket(1024), bucket(u64::MAX)), (0, 0, 9, 10, 31));
/// ```
pub(crate) fn bucket(nanos: u64) -> usize {
    ((u64::BITS - 1 - (nanos | 1).leading_zeros()) as usize).min(BUCKETS - 1)
}

/// How many buckets past the median one a sample's work may lie and still count as measured: up to 8
/// times the median sample's (at least 4 times). A sample whose work is measured longer, and longer than
/// any sample's work ([`NOT_WORK_FROM`]), was not running all that time: its thread was preempted inside
/// the hooks, or waited for a lock held by a thread preempted (with 8 threads sampling on 2 cores, the
/// median sample 10 us, some tenths measured 3-4 ms, a time slice). Counted as measured, those readings
/// said sampling took 5-10 % of a core where it took under 0.5 %, and thinned a storm 1024 times where 64
/// held the budget.
const KEPT_PAST_MEDIAN: usize = 2;

/// The bucket from which a sample's measured time can be a time slice rather than work: 2^17 ns, 131 us.
/// Samples that really cost more than most (a stack through C code completed by the DWARF walk, some
/// 20-50 us, where most take 2-10 us) lie below it and count as measured, however many of them there are:
/// the budget must hold for a program whose dearer samples are a large minority.
const NOT_WORK_FROM: usize = 17;

/// How many of a reading's samples must have been timed on their threads' CPU clocks for what those say to
/// bound what the wall clock says ([`Work::spent`]).
const CPU_TIMED_ENOUGH: u64 = 8;

/// How many times what the CPU-timed samples say the reading's samples cost what the wall clock may say at
/// most: what a few samples say of many is noisy (their costs spread over an order of magnitude), and
/// where the threads ran as they sampled the two clocks agree, the wall clock's reading left as it is.
const CPU_MARGIN: u64 = 2;

/// A reading's samples by their work ([`bucket`]): how many in each bucket, and their work in all; of them,
/// how many were timed on their thread's CPU clock too, and their work on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Work {
    pub(crate) counts: [u64; BUCKETS],
    pub(crate) nanos: [u64; BUCKETS],
    pub(crate) cpu_timed: u64,
    pub(crate) cpu_nanos: u64,
}

impl Default for Work {
    fn default() -> Self {
        Work { counts: [0; BUCKETS], nanos: [0; BUCKETS], cpu_timed: 0, cpu_nanos: 0 }
    }
}

impl Work {
    /// Adds `more`'s samples to these (readings shorter than one judged add up).
    pub(crate) fn absorb(&mut self, more: &Work) {
        for bucket in 0..BUCKETS {
            self.counts[bucket] += more.counts[bucket];
            self.nanos[bucket] += more.nanos[bucket];
        }
        self.cpu_timed += more.cpu_timed;
        self.cpu_nanos += more.cpu_nanos;
    }

    /// The samples.
    pub(crate) fn samples(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// What these samples cost over a reading of `wall_nanos`: each sample's work as measured, but that a
    /// sample measured more than [`KEPT_PAST_MEDIAN`] buckets past the median sample's, and at least
    /// [`NOT_WORK_FROM`]'s, counts as the mean of those that were not (not running, not working); and in
    /// all no more than [`CPU_MARGIN`] times what the samples timed on their threads' CPU clocks say, where
    /// there are [`CPU_TIMED_ENOUGH`] (most samples waited: the median one too).
    pub(crate) fn spent(&self, wall_nanos: u64) -> Spent {
        let mut spent = self.spent_by_the_wall_clock(wall_nanos);
        if self.cpu_timed >= CPU_TIMED_ENOUGH {
            let by_cpu = self.cpu_nanos as f64 / self.cpu_timed as f64 * spent.samples as f64;
            spent.work_nanos = spent.work_nanos.min((by_cpu * CPU_MARGIN as f64) as u64);
        }
        spent
    }

    /// What these samples cost as the wall clock says, the samples it measured while they were not running
    /// counted as typical ones.
    fn spent_by_the_wall_clock(&self, wall_nanos: u64) -> Spent {
        let samples = self.samples();
        let mut seen = 0;
        let Some(median) = (0..BUCKETS).find(|&bucket| {
            seen += self.counts[bucket];
            2 * seen > samples
        }) else {
            return Spent { work_nanos: 0, wall_nanos, samples };
        };
        let kept = (median + KEPT_PAST_MEDIAN + 1).clamp(NOT_WORK_FROM, BUCKETS);
        let (kept_count, kept_nanos): (u64, u64) = (self.counts[..kept].iter().sum(), self.nanos[..kept].iter().sum());
        let left_out = samples - kept_count;
        let work_nanos = kept_nanos + (kept_nanos as f64 / kept_count.max(1) as f64 * left_out as f64) as u64;
        Spent { work_nanos, wall_nanos, samples }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(samples: &[(u64, u64)]) -> Work {
        let mut work = Work::default();
        for &(count, nanos) in samples {
            work.counts[bucket(nanos)] += count;
            work.nanos[bucket(nanos)] += count * nanos;
        }
        work
    }

    #[test]
    fn buckets_are_binary_orders_of_magnitude() {
        assert_eq!((bucket(0), bucket(1), bucket(2), bucket(3)), (0, 0, 1, 1));
        assert_eq!((bucket(1023), bucket(1024), bucket(10_000)), (9, 10, 13));
        assert_eq!((bucket(1 << 31), bucket(u64::MAX)), (31, 31));
    }

    /// Recorded on the storm of 8 threads on 2 cores (64 B blocks, one reading at 2^6): 16 samples, 8.5 ms
    /// of wall clock in the hooks, of which two samples 3.9 and 4.1 ms (time slices).
    #[test]
    fn a_sample_measured_long_while_its_thread_was_not_running_counts_as_a_typical_one() {
        let reading = work(&[(6, 9_000), (5, 12_000), (3, 30_000), (2, 4_000_000)]);
        let spent = reading.spent(100_000_000);
        assert_eq!(spent.samples, 16);
        let typical = (6 * 9_000 + 5 * 12_000 + 3 * 30_000) as f64 / 14.0;
        assert_eq!(spent.work_nanos, (typical * 16.0) as u64, "the two time slices left out: {spent:?}");
        assert!(spent.work_nanos < 300_000, "under 0.3 % of a core, not 8 %: {spent:?}");
    }

    #[test]
    fn a_load_whose_samples_all_cost_alike_or_spread_within_eightfold_is_counted_as_measured() {
        let alike = work(&[(100, 8_000)]);
        assert_eq!(alike.spent(1).work_nanos, 800_000);
        // The example service's start: most samples 6-11 us, some touching fresh pages of the record.
        let spread = work(&[(50, 6_000), (30, 11_000), (20, 25_000)]);
        assert_eq!(spread.spent(1).work_nanos, 50 * 6_000 + 30 * 11_000 + 20 * 25_000);
        // Half the samples dear: the median (the upper one) is among them, nothing is left out.
        let halves = work(&[(50, 2_000), (50, 200_000)]);
        assert_eq!(halves.spent(1).work_nanos, 50 * 2_000 + 50 * 200_000);
    }

    /// A program whose samples through C code are completed by the DWARF walk (40 us) and are three in ten,
    /// the others 2 us: the dear ones are work, and the budget counts them all.
    #[test]
    fn a_large_minority_of_dear_samples_is_work_however_far_past_the_median() {
        let reading = work(&[(70, 2_000), (30, 40_000)]);
        assert_eq!(reading.spent(1).work_nanos, 70 * 2_000 + 30 * 40_000);
        // A time slice among them is not.
        let sliced = work(&[(70, 2_000), (29, 40_000), (1, 3_000_000)]);
        assert_eq!(sliced.spent(1).work_nanos, ((70 * 2_000 + 29 * 40_000) as f64 / 99.0 * 100.0) as u64);
    }

    /// Shaped as the storm of 1,000 threads on 2 cores (debug build) read: the wall clock's median sample
    /// some 3 ms inside the hooks (waiting to run, or behind a lock whose holder was), `state` saying a
    /// sample's work was 886 ms; the samples timed on their CPU clocks some 100-190 us.
    #[test]
    fn where_most_samples_waited_the_cpu_clock_bounds_the_wall_clock() {
        let mut storm = work(&[(300, 3_000_000), (100, 8_000_000), (50, 40_000)]);
        (storm.cpu_timed, storm.cpu_nanos) = (14, 14 * 150_000);
        let spent = storm.spent(100_000_000);
        assert_eq!(spent.work_nanos, 2 * 150_000 * 450, "{spent:?}");
        // Too few CPU-timed to say: the wall clock's reading stands.
        storm.cpu_timed = CPU_TIMED_ENOUGH - 1;
        assert_eq!(storm.spent(1).work_nanos, 300 * 3_000_000 + 100 * 8_000_000 + 50 * 40_000);
    }

    #[test]
    fn where_the_threads_ran_as_they_sampled_the_cpu_clock_changes_nothing() {
        let mut reading = work(&[(70, 2_000), (29, 40_000), (1, 3_000_000)]);
        // The CPU-timed ones cheaper than the mean by chance: within the margin, nothing changes.
        (reading.cpu_timed, reading.cpu_nanos) = (10, 10 * 7_000);
        assert_eq!(reading.spent(1).work_nanos, ((70 * 2_000 + 29 * 40_000) as f64 / 99.0 * 100.0) as u64);
    }

    #[test]
    fn no_samples_cost_nothing_and_readings_add_up() {
        assert_eq!(Work::default().spent(7), Spent { work_nanos: 0, wall_nanos: 7, samples: 0 });
        let mut reading = work(&[(3, 8_000)]);
        let mut more = work(&[(1, 8_000), (1, 5_000_000)]);
        (more.cpu_timed, more.cpu_nanos) = (1, 7_000);
        reading.absorb(&more);
        assert_eq!(reading.samples(), 5);
        assert_eq!((reading.cpu_timed, reading.cpu_nanos), (1, 7_000));
        assert_eq!(reading.spent(1).work_nanos, 5 * 8_000);
    }
}
