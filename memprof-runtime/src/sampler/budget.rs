//! The budget of sampling work while sampling is continuous, and how sampling is thinned to keep within it:
//! judging only (no clock, no jemalloc), fed the readings [`super::throttle`] takes.
//!
//! jemalloc samples every 2^lg_sample bytes on average, whatever the allocation rate: a program allocating
//! hard samples hard, and each sample costs a stack walk, jemalloc's bookkeeping and a page of its own
//! (a sampled small object is promoted). Its interval changes only through `prof.reset`, which drops every
//! sample; so past a budget of sampling work (a share of one core, [`Budget`]) memprof thins sampling
//! in time instead: time is cut into slots ([`SLOT`]), grouped in blocks of 2^n slots, and sampling is on
//! in one slot of each block, drawn at random ([`Schedule`]). Every allocation then falls in a slot that was
//! on with probability exactly 2^-n, whatever its timing, so a sample taken at thinning n stands for 2^n
//! times what it would alone ([`Thinning::weight`]): totals stay unbiased, and the effective interval is
//! 2^(lg_sample + n) bytes. Each reading (100 ms unthinned; a sampled slot, thinned) is judged: the
//! thinning grows to the least that fits the budget when the work measured while sampling was on exceeds
//! it (unthinned, two readings running: [`Persistence`], so a burst shorter than a reading is sampled
//! whole), and falls to the least that fits half of it when the load falls. A slot sampling is off in is
//! judged too, by the process's CPU time in it ([`Thinning::after_quiet`]), so sampling thickens within a
//! slot of a load's end rather than a block's. Within a block, which slot is sampled is drawn: for a
//! steady load every slot holds about as much, so thinned totals are close as well as unbiased.
//!
//! ```ignore
//! // 2 % of a core measured while sampling was on, against a budget of 0.5 %: 1 slot in 4.
//! let spent = Spent { work_nanos: 20_000_000, sampled_nanos: 1_000_000_000, cpu_nanos: 1_000_000_000 };
//! assert_eq!(Thinning::NONE.next(Budget::DEFAULT, spent).exponent(), 2);
//! ```

use std::time::Duration;

/// How long a slot lasts: sampling is switched on or off for a slot at a time (short, so that a thinned
/// block, [`Thinning::MOST`]'s included, lasts seconds: the load is judged again within one).
pub(crate) const SLOT: Duration = Duration::from_millis(10);

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

/// What sampling cost over a reading: the work measured in the sampled allocations, and how long sampling
/// was on meanwhile (both in nanoseconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Spent {
    pub(crate) work_nanos: u64,
    pub(crate) sampled_nanos: u64,
    /// The CPU time the whole process took meanwhile, the work included.
    pub(crate) cpu_nanos: u64,
}

impl Spent {
    /// Whether sampling was on long enough for the reading to be judged ([`JUDGED_AFTER`]).
    pub(crate) fn enough(self) -> bool {
        self.sampled_nanos >= JUDGED_AFTER.as_nanos() as u64
    }

    /// The share of one core sampling took while on: what it would take unthinned.
    fn unthinned_share(self) -> f64 {
        self.work_nanos as f64 / self.sampled_nanos as f64
    }

    /// Sampling's work for each nanosecond of the rest of the process's CPU time, while it was on: what the
    /// same load would cost sampled, read from its CPU time alone (see [`Thinning::after_quiet`]). Work
    /// measured past the CPU time (a thread preempted inside a sample) counts as [`MOST_WORK_PER_CPU`].
    pub(crate) fn work_per_cpu(self) -> f64 {
        let rest = self.cpu_nanos.saturating_sub(self.work_nanos);
        if rest == 0 {
            return MOST_WORK_PER_CPU;
        }
        (self.work_nanos as f64 / rest as f64).min(MOST_WORK_PER_CPU)
    }
}

/// The most sampling's work is taken to cost for each nanosecond of the program's own CPU time: more than
/// any reading gives where jemalloc samples every allocation (some 40 here, a debug build).
pub(crate) const MOST_WORK_PER_CPU: f64 = 1000.0;

/// A slot with sampling off, read from the process's CPU clock: how long it lasted, and the CPU time the
/// process took in it (both in nanoseconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Quiet {
    pub(crate) cpu_nanos: u64,
    pub(crate) wall_nanos: u64,
}

/// How long sampling must have been on before a reading is judged (a slot): shorter ones are kept adding up.
pub(crate) const JUDGED_AFTER: Duration = SLOT;

/// Sampling on in one slot of every 2^n ([`Thinning::exponent`]); 0, unthinned, is sampling always on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Thinning(u8);

impl Thinning {
    /// Sampling always on.
    pub(crate) const NONE: Thinning = Thinning(0);
    /// The most: one slot in 1024 (one 10 ms slot every 10 s, each sample weighing 1024).
    pub(crate) const MOST: Thinning = Thinning(10);

    /// The thinning of exponent `n` (at most [`Thinning::MOST`]'s).
    pub(crate) fn of(n: u8) -> Thinning {
        Thinning(n.min(Self::MOST.0))
    }

    /// n, for sampling on in one slot of 2^n.
    pub(crate) fn exponent(self) -> u8 {
        self.0
    }

    /// How many slots a block holds: 2^n.
    pub(crate) fn factor(self) -> u32 {
        1 << self.0
    }

    /// What a sample taken at this thinning stands for, beside what its size makes it stand for: 2^n.
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
        let unthinned = spent.unthinned_share();
        if unthinned / self.weight() > budget.share {
            Self::least_within(unthinned, budget.share)
        } else {
            Self::least_within(unthinned, budget.share / 2.0).min(self)
        }
    }

    /// The thinning after a slot with sampling off (`quiet`): the least that would take at most half the
    /// budget, had the process's CPU time in the slot been sampled at `work_per_cpu` (what
    /// [`Spent::work_per_cpu`] read when sampling was last on), when that is lower than this one (the load
    /// stopped: the program idle, or busy with less allocating); else this one. So sampling comes back
    /// within a slot of a burst's end instead of a block (up to 10 s), where no sampled slot could see it.
    pub(crate) fn after_quiet(self, budget: Budget, work_per_cpu: f64, quiet: Quiet) -> Thinning {
        if quiet.wall_nanos == 0 {
            return self;
        }
        let unthinned = work_per_cpu * quiet.cpu_nanos as f64 / quiet.wall_nanos as f64;
        Self::least_within(unthinned, budget.share / 2.0).min(self)
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
/// past it for two readings running (within two looks), so a burst shorter than a reading (a window's
/// allocations, a request's) is sampled whole, whenever it falls.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Persistence {
    /// Whether the last reading judged unthinned was past the budget.
    past: bool,
}

impl Persistence {
    /// The thinning after `spent` at `thinning`, as [`Thinning::next`] says, but that unthinned sampling
    /// past the budget for one reading alone stays unthinned.
    pub(crate) fn next(&mut self, thinning: Thinning, budget: Budget, spent: Spent) -> Thinning {
        let next = thinning.next(budget, spent);
        let past = thinning == Thinning::NONE && next != Thinning::NONE;
        let first = past && !self.past;
        if spent.enough() {
            self.past = past;
        }
        if first { thinning } else { next }
    }

    /// Starts afresh, as sampling is unthinned by a quiet slot: the readings before it are of a load gone.
    pub(crate) fn forget(&mut self) {
        self.past = false;
    }
}

/// Which slots sampling is on in: one of each block of 2^n, at a place drawn when the block starts.
///
/// A sample stands for 2^n only if its slot was on with probability 2^-n given all that decided the
/// thinning, so a judgement made on what a sampled slot measured takes effect when its block ends
/// ([`Schedule::thin_from_next_block`]): cutting the block there would give the slots left in it, off
/// since the sampled one came, a second chance. A quiet slot's judgement ([`Thinning::after_quiet`], read
/// from the CPU clock whatever the draw) cuts the block at once ([`Schedule::thin`]).
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    thinning: Thinning,
    /// The thinning the next block takes, when a judgement changed it.
    next_block: Option<Thinning>,
    /// The slot of the current block sampling is on in, and the slot now.
    on_at: u32,
    now: u32,
    random: u64,
}

impl Schedule {
    /// A schedule at no thinning, its draws seeded with `seed` (any value).
    pub(crate) fn new(seed: u64) -> Schedule {
        Schedule { thinning: Thinning::NONE, next_block: None, on_at: 0, now: 0, random: seed | 1 }
    }

    /// The thinning in force.
    pub(crate) fn thinning(&self) -> Thinning {
        self.thinning
    }

    /// Changes the thinning now: a new block starts with the next slot.
    pub(crate) fn thin(&mut self, thinning: Thinning) {
        self.next_block = None;
        if thinning != self.thinning {
            self.thinning = thinning;
            self.now = thinning.factor() - 1;
        }
    }

    /// Changes the thinning from the next block on (unthinned, a block is a slot: the next one).
    pub(crate) fn thin_from_next_block(&mut self, thinning: Thinning) {
        self.next_block = (thinning != self.thinning).then_some(thinning);
    }

    /// Moves to the next slot: whether sampling is on in it.
    pub(crate) fn next_slot(&mut self) -> bool {
        self.now += 1;
        if self.now >= self.thinning.factor() {
            if let Some(thinning) = self.next_block.take() {
                self.thinning = thinning;
            }
            self.now = 0;
            self.on_at = (self.draw() % u64::from(self.thinning.factor())) as u32;
        }
        self.now == self.on_at
    }

    /// xorshift64*: cheap, and uncorrelated with anything the program does.
    fn draw(&mut self) -> u64 {
        self.random ^= self.random >> 12;
        self.random ^= self.random << 25;
        self.random ^= self.random >> 27;
        self.random.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[cfg(test)]
mod tests;
