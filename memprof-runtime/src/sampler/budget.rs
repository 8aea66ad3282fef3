//! The budget of sampling work while sampling is continuous, and how sampling is thinned to keep within it:
//! judging only (no clock, no jemalloc), fed the readings [`super::throttle`] takes.
//!
//! jemalloc samples every 2^lg_sample bytes on average, whatever the allocation rate: a program allocating
//! hard samples hard, and each sample costs a stack walk, jemalloc's bookkeeping and a page of its own
//! (a sampled small object is promoted). Past a budget of sampling work (a share of one core, [`Budget`])
//! memprof thins sampling in bytes: the mean interval becomes 2^(lg_sample + n) ([`Thinning`]; jemalloc
//! takes it through `prof.reset`, which memprof's own record of samples does not need), and each sample
//! stands for what the interval it was drawn at makes it stand for ([`Thinning::weight`]). Every byte
//! allocated is then sampled with the probability its interval says, however the load falls in time, so a
//! storm, a start-up or a cache filling is sampled evenly through: totals stay unbiased, and their noise is
//! what the number of samples allows (thinning in time, one time slot of 2^n sampled, was unbiased only for
//! a load alike in every slot: a 3 s storm read 0.02-2x its truth).
//!
//! Each reading ([`JUDGED_AFTER`] at least) is judged: the work measured at the thinning in force, times
//! what it thins by, is what the load would cost unthinned; the thinning grows to the least that fits the
//! budget when that does not fit (unthinned, two readings running: [`Persistence`], so a burst shorter than
//! a reading is sampled whole), and falls to the least that fits half of it when the load falls. Thinned,
//! a time without samples long enough that the load judged last would have taken several says the load
//! ended ([`ended`]): sampling is unthinned then, within milliseconds of a burst's end; and at once when
//! the threads that took samples while it was thinned have all exited
//! ([`gone_with_its_threads`]).
//!
//! ```ignore
//! // 2 % of a core measured unthinned, against a budget of 0.5 %: sampled every 2^(lg_sample + 2) bytes.
//! let spent = Spent { work_nanos: 20_000_000, wall_nanos: 1_000_000_000 };
//! assert_eq!(Thinning::NONE.next(Budget::DEFAULT, spent).exponent(), 2);
//! ```

mod first_draw;
mod work;
pub(crate) use first_draw::{Change, Prior, Seen, first_allocation_within, rounded};
pub(crate) use work::{BUCKETS as WORK_BUCKETS, Work, bucket as work_bucket};

/// The share of one core sampling may take, measured while it is on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Budget {
    share: f64,
}

impl Budget {
    /// 0.5 % of a core: what Go and JFR spend on their default sampling, give or take; what a value that
    /// is not a budget stands for.
    pub(crate) const DEFAULT: Budget = Budget { share: 0.005 };

    /// The budget `MEMPROF_SAMPLING_BUDGET` names (`2%`, `0.5%`, `0.005`: a share above 0 and at most
    /// 100 %), `Some(None)` for `off` (never thinned); `None` when the text is not one.
    pub(crate) fn parse(text: &str) -> Option<Option<Budget>> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("off") {
            return Some(None);
        }
        let share = match text.strip_suffix('%') {
            Some(percent) => percent.trim().parse::<f64>().map(|percent| percent / 100.0),
            None => text.parse::<f64>(),
        };
        match share {
            Ok(share) if share > 0.0 && share <= 1.0 => Some(Some(Budget { share })),
            _ => None,
        }
    }

    /// The share of one core.
    pub(crate) fn share(self) -> f64 {
        self.share
    }
}

/// What sampling cost over a reading at the thinning in force: the work measured in the sampled allocations,
/// and how long the reading lasted (both in nanoseconds), with the samples taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Spent {
    pub(crate) work_nanos: u64,
    pub(crate) wall_nanos: u64,
    pub(crate) samples: u64,
}

impl Spent {
    /// Whether the reading lasted long enough to be judged ([`JUDGED_AFTER`]).
    pub(crate) fn enough(self) -> bool {
        self.wall_nanos >= JUDGED_AFTER.as_nanos() as u64
    }

    /// The share of one core sampling took.
    fn share(self) -> f64 {
        self.work_nanos as f64 / self.wall_nanos as f64
    }

    /// Samples a nanosecond.
    pub(crate) fn rate(self) -> f64 {
        self.samples as f64 / self.wall_nanos.max(1) as f64
    }
}

/// How long a reading must last before it is judged: shorter ones are kept adding up.
pub(crate) const JUDGED_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

/// How many samples the load of the last judged reading would have taken in a time with none, for that
/// time to say the load ended. A load thinned to its budget takes some 300 samples a second, and each gap
/// between two of them says "ended" wrongly with a chance of e^-n: at 5 (a chance under 1 % a gap, as
/// first chosen), a storm of 3 s was unthinned mid-storm two to ten times and a steady service every
/// second or so, each time sampled unthinned for two readings (20 % of a core, on the storm) before it
/// was thinned again. At 12, once in some nine minutes of such a load; a burst's end is seen after 12 of
/// its gaps (40 ms at 300 samples a second; a scoped burst's end at once, as its threads exit).
const MISSED_SAMPLES: f64 = 12.0;

/// Whether `quiet_nanos` without a sample say the load ended, where the last judged reading took `rate`
/// samples a nanosecond ([`Spent::rate`]): then sampling is unthinned at once, without waiting for a
/// whole reading, so that what comes right after a burst is sampled at the interval its own load allows.
pub(crate) fn ended(rate: f64, quiet_nanos: u64) -> bool {
    rate * quiet_nanos as f64 >= MISSED_SAMPLES
}

/// Whether a thinned load is gone with its threads, as one of the threads that sampled it exits: of the
/// samples taken since sampling was thinned (`all`), `live` were taken by threads still running. It is gone
/// when none was: every thread that sampled it has exited (a burst of threads, scoped or spawned for it,
/// joined).
///
/// Sampling is then unthinned there and then, before the thread that joined them allocates: a thread draws
/// its next distance at its own sample, at the interval in force then, and keeps it until its next, so what
/// it allocates right after the burst would otherwise be sampled as thinly as the burst was until the pacer
/// saw the burst's end ([`ended`]). Not sooner (the threads still running holding a small share of the
/// samples): a thread whose sample hook read the long interval and whose next distance is drawn after the
/// change would have that sample weighed as drawn at the long one, and with hundreds of threads runnable on
/// a few cores, many are preempted just there (a storm of 1,000 threads read up to 2.2 times its truth so).
/// A load that goes on in threads that live on is the pacer's to judge; one that goes on in new threads is
/// thinned again by the next readings ([`Persistence`]).
///
/// ```ignore
/// assert!(!gone_with_its_threads(125, 1000), "one of 8 threads still runs");
/// assert!(gone_with_its_threads(0, 1000), "all joined");
/// ```
pub(crate) fn gone_with_its_threads(live: u64, all: u64) -> bool {
    all > 0 && live == 0
}

/// Sampling every 2^(lg_sample + n) bytes on average ([`Thinning::exponent`]); 0, unthinned, is jemalloc's
/// configured interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Thinning(u8);

impl Thinning {
    /// jemalloc's configured interval.
    pub(crate) const NONE: Thinning = Thinning(0);
    /// The most: 1024 times the configured interval (512 MiB at jemalloc's default 512 KiB).
    pub(crate) const MOST: Thinning = Thinning(10);

    /// The thinning of exponent `n` (at most [`Thinning::MOST`]'s).
    pub(crate) fn of(n: u8) -> Thinning {
        Thinning(n.min(Self::MOST.0))
    }

    /// n, for an interval 2^n times the configured one.
    pub(crate) const fn exponent(self) -> u8 {
        self.0
    }

    /// How many times the configured interval sampling is drawn at: 2^n.
    pub(crate) fn factor(self) -> u32 {
        1 << self.0
    }

    /// 2^n, as a float: what the interval is multiplied by, and roughly what a small sample stands for
    /// beside one unthinned.
    pub(crate) fn weight(self) -> f64 {
        f64::from(self.factor())
    }

    /// The thinning after a reading `spent` at this one, against `budget`: at once the least that fits the
    /// budget when this one does not; at once the least that takes at most half the budget when that is
    /// lower (the load fell: a burst past, the program idle); else this one.
    pub(crate) fn next(self, budget: Budget, spent: Spent) -> Thinning {
        if !spent.enough() {
            return self;
        }
        let unthinned = spent.share() * self.weight();
        if spent.share() > budget.share {
            Self::least_within(unthinned, budget.share)
        } else {
            Self::least_within(unthinned, budget.share / 2.0).min(self)
        }
    }

    /// The least thinning at which a load taking `unthinned` of a core sampled takes at most `share`.
    fn least_within(unthinned: f64, share: f64) -> Thinning {
        let mut thinning = Thinning::NONE;
        while thinning < Self::MOST && unthinned / thinning.weight() > share {
            thinning = Thinning(thinning.0 + 1);
        }
        thinning
    }
}

/// Unthinned sampling judged over readings in a row: a load past the budget is thinned once it has been
/// past it for two readings running, so a burst shorter than a reading (a window's allocations, a
/// request's) is sampled whole, whenever it falls.
///
/// Unthinned because the threads that sampled a thinned load exited ([`gone_with_its_threads`]), the readings
/// after say whether the load went with them: a load thinned again by the two readings that follow went on,
/// or another began at once. Twice so within [`WENT_ON_WITHIN`] readings, it goes on (made by one
/// short-lived thread after another), and then no exit unthins sampling until the pacer itself has (so
/// such a load costs two readings unthinned twice, not two every thread). Once is not enough: a program
/// that starts its next burst as soon as one is joined (a storm, its result kept, the next storm) would
/// otherwise have the next burst's end left to the pacer, and what its joining thread allocates right
/// after sampled at the burst's interval (the 64 MiB kept after a storm of 256 KiB blocks read 0 and 4.85
/// in a run of five so). A burst shorter than a reading after it (what the thread that joined them does
/// next) is sampled whole, as any.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Persistence {
    /// Whether the last reading judged unthinned was past the budget.
    past: bool,
    /// Whether sampling was unthinned as a thinned load's threads exited, and no reading judged since has
    /// been within the budget.
    gone: bool,
    /// Whether the threads that sample a thinned load unthin sampling as the last of them exits.
    exits_unthin: bool,
    /// Readings judged since a load said gone with its threads went on, while fewer than
    /// [`WENT_ON_WITHIN`].
    went_on: Option<u32>,
}

/// How many readings apart two loads said gone with their threads that went on must be for exits to go on
/// unthinning sampling: 2 s.
const WENT_ON_WITHIN: u32 = 20;

impl Default for Persistence {
    fn default() -> Persistence {
        Persistence { past: false, gone: false, exits_unthin: true, went_on: None }
    }
}

impl Persistence {
    /// The thinning after `spent` at `thinning`, as [`Thinning::next`] says, but that unthinned sampling
    /// past the budget for one reading alone stays unthinned.
    pub(crate) fn next(&mut self, thinning: Thinning, budget: Budget, spent: Spent) -> Thinning {
        let next = thinning.next(budget, spent);
        let past = thinning == Thinning::NONE && next != Thinning::NONE;
        if !spent.enough() {
            return thinning;
        }
        let first = past && !self.past;
        self.went_on = self.went_on.map(|readings| readings + 1).filter(|&readings| readings < WENT_ON_WITHIN);
        if past && !first && self.gone {
            // Past the budget two readings running since the exits: the load went on, or another began; the
            // second time within a while, it goes on.
            if self.went_on.is_some() {
                self.exits_unthin = false;
            }
            self.went_on = Some(0);
        }
        if thinning != Thinning::NONE && next == Thinning::NONE {
            // The load fell within the budget: the next one's threads may say its end again.
            (self.exits_unthin, self.went_on) = (true, None);
        }
        (self.past, self.gone) = (past, self.gone && first);
        if first { thinning } else { next }
    }

    /// Starts afresh (a run sampled whole ended, or the load ended): the readings before it are of another
    /// load.
    pub(crate) fn forget(&mut self) {
        *self = Persistence::default();
    }

    /// Starts afresh as a thinned load's threads exited and unthinned sampling: the next readings say
    /// whether it went with them (whether one said gone went on lately is kept).
    pub(crate) fn gone_with_its_threads(&mut self) {
        *self = Persistence { past: false, gone: true, went_on: self.went_on, ..Persistence::default() };
    }

    /// Whether the threads that sample a thinned load unthin sampling as the last of them exits: not after
    /// that was wrong once, until the pacer unthins sampling itself.
    pub(crate) fn exits_unthin(&self) -> bool {
        self.exits_unthin
    }
}

#[cfg(test)]
mod tests;
