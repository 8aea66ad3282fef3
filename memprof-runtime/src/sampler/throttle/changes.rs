//! The latest changes of the thinning, each timed as the samples saw jemalloc make it (reading only: the
//! timing is judged in [`super::super::budget::Change::timed`]).
//!
//! The pacer keeps a change as it asks jemalloc for it (`prof.reset`), before jemalloc draws at it, and times
//! it once the reset returned: with a thousand threads runnable on two cores that took up to 575 ms, and
//! jemalloc changes the interval somewhere in it. Meanwhile every sample's hook reads the interval jemalloc
//! draws at between two readings of the clock ([`Changes::watch`]): the last that saw the old interval and
//! the first that saw the new bound the moment it changed to within the time between two samples. A
//! thread's first sample is weighed from those times ([`super::super::budget::Prior`]).
//!
//! Where no change is being made, what jemalloc draws at is the last change made ([`Changes::in_force`]): a
//! hook reads jemalloc itself only while one is in flight.
//!
//! One writer (the pacer, under its lock), any number of readers without a lock: the kept changes behind
//! a sequence lock (odd while written), what the hooks saw in words that carry the change they are of.
//!
//! ```ignore
//! CHANGES.asked(now_ns, Thinning::of(2));
//! let made = jemalloc::reset_samples(lg_sample + 2).is_ok();
//! CHANGES.made(later_ns, made);
//! ```

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering, fence};

use super::super::budget::{Change, Seen, Thinning};
use crate::process::thread_times;

/// How many of the latest changes are kept.
pub(crate) const KEPT: usize = 64;

/// Bits of a word of what was seen that hold the time, in microseconds after the change was asked (12
/// days); the change's number above them, its low 24 bits (a change a second for half a year apart).
const TIME_BITS: u32 = 40;
const TIME_MASK: u64 = (1 << TIME_BITS) - 1;

/// The word of what was seen of change `number` at `micros` after it was asked.
fn seen_word(number: u64, micros: u64) -> u64 {
    number << TIME_BITS | micros
}

/// Whether `word` is of change `number` (its low 24 bits).
fn of_change(word: u64, number: u64) -> bool {
    word >> TIME_BITS == number & (u64::MAX >> TIME_BITS)
}

/// The changes kept, and what the hooks see of the one being made.
pub(crate) struct Changes {
    /// Odd while the pacer writes a change.
    sequence: AtomicU64,
    /// How many changes were kept since start-up (the last may be in flight).
    made: AtomicU64,
    /// The thinning of the last change made (its exponent): what jemalloc draws at while none is in flight.
    settled: AtomicU8,
    at_ns: [AtomicU64; KEPT],
    by_ns: [AtomicU64; KEPT],
    to: [AtomicU8; KEPT],
    /// The change being made: its number (from 1) above 8 bits holding its exponent and 1; 0 where none is.
    in_flight: AtomicU64,
    /// When it was asked (ns), and what the hooks saw of it: its number above the microseconds after that
    /// the last saw the old interval, and the first saw the new.
    asked_ns: AtomicU64,
    old_until: AtomicU64,
    new_from: AtomicU64,
}

impl Changes {
    /// None yet.
    pub(crate) const fn new() -> Changes {
        Changes {
            sequence: AtomicU64::new(0),
            made: AtomicU64::new(0),
            settled: AtomicU8::new(0),
            at_ns: [const { AtomicU64::new(0) }; KEPT],
            by_ns: [const { AtomicU64::new(0) }; KEPT],
            to: [const { AtomicU8::new(0) }; KEPT],
            in_flight: AtomicU64::new(0),
            asked_ns: AtomicU64::new(0),
            old_until: AtomicU64::new(0),
            new_from: AtomicU64::new(0),
        }
    }

    /// The pacer asks jemalloc for `to` at `asked_ns`: kept at once (no later than unknown), and watched.
    pub(crate) fn asked(&self, asked_ns: u64, to: Thinning) {
        let number = self.made.load(Ordering::Relaxed) + 1;
        self.asked_ns.store(asked_ns, Ordering::Relaxed);
        self.old_until.store(seen_word(number, 0), Ordering::Relaxed);
        self.new_from.store(seen_word(number, TIME_MASK), Ordering::Relaxed);
        self.write(number - 1, Change::asked(to, asked_ns));
        self.in_flight.store(number << 8 | (u64::from(to.exponent()) + 1), Ordering::Release);
        self.made.store(number, Ordering::Release);
    }

    /// jemalloc's reset returned at `done_ns`, having `made` the change in flight or not: the change is timed
    /// from what the hooks saw (one refused is kept as a change to what was in force), and in force from now.
    pub(crate) fn made(&self, done_ns: u64, made: bool) {
        let flight = self.in_flight.load(Ordering::Acquire);
        if flight == 0 {
            return;
        }
        let (asked, asked_ns, seen) = self.seen(flight);
        let to = if made { asked } else { self.in_force() };
        self.write((flight >> 8) - 1, Change::timed(to, asked_ns, done_ns, seen));
        // In force before the change is no longer in flight: a hook that sees none in flight reads it.
        self.settled.store(to.exponent(), Ordering::Release);
        self.in_flight.store(0, Ordering::Release);
    }

    /// The thinning of the last change made: what jemalloc draws at, unless one is in flight.
    pub(crate) fn in_force(&self) -> Thinning {
        Thinning::of(self.settled.load(Ordering::Acquire))
    }

    /// The change in flight `flight`: its thinning, when it was asked, and what the hooks saw of it.
    fn seen(&self, flight: u64) -> (Thinning, u64, Seen) {
        let asked_ns = self.asked_ns.load(Ordering::Relaxed);
        let at = |word: u64| asked_ns.saturating_add((word & TIME_MASK).saturating_mul(1000));
        let of_it = |word: u64| of_change(word, flight >> 8);
        let old_until = self.old_until.load(Ordering::Relaxed);
        let new_from = self.new_from.load(Ordering::Relaxed);
        let mut seen = Seen::NOTHING;
        if of_it(old_until) && old_until & TIME_MASK != 0 {
            seen.old_until_ns = at(old_until);
        }
        if of_it(new_from) && new_from & TIME_MASK != TIME_MASK {
            seen.new_from_ns = at(new_from);
        }
        (Thinning::of(((flight & 0xff) - 1) as u8), asked_ns, seen)
    }

    /// Writes change number `index` (from 0), under the sequence lock.
    fn write(&self, index: u64, change: Change) {
        let slot = index as usize % KEPT;
        self.sequence.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.at_ns[slot].store(change.at_ns, Ordering::Relaxed);
        self.by_ns[slot].store(change.by_ns, Ordering::Relaxed);
        self.to[slot].store(change.to.exponent(), Ordering::Relaxed);
        self.sequence.fetch_add(1, Ordering::Release);
    }

    /// What jemalloc draws at now, as a sample's hook sees it: the last change made where none was asked
    /// meanwhile (no change in flight, and none asked before the reading ended: the change counted as it is
    /// asked, in force before it is no longer in flight); else jemalloc's own word (`read`), and, while a
    /// change is being made, what it saw is kept: the old interval, at the clock read before; the new, at
    /// the clock read after.
    #[inline]
    pub(crate) fn watch(&self, read: impl FnOnce() -> Thinning) -> Thinning {
        let asked = self.made.load(Ordering::Acquire);
        let flight = self.in_flight.load(Ordering::Acquire);
        if flight == 0 {
            let in_force = self.in_force();
            return if self.made.load(Ordering::Acquire) == asked { in_force } else { read() };
        }
        let before = thread_times::boot_clock_ns();
        let now = read();
        self.saw(flight, now, before, thread_times::boot_clock_ns());
        now
    }

    /// A hook saw jemalloc draw at `now` between the clock's `before` and `after`, while the change `flight`
    /// was being made: kept only in that change's words (the pacer may have begun another since).
    fn saw(&self, flight: u64, now: Thinning, before: Option<u64>, after: Option<u64>) {
        let asked_ns = self.asked_ns.load(Ordering::Relaxed);
        let number = flight >> 8;
        let new = u64::from(now.exponent()) + 1 == flight & 0xff;
        let (word, clock, keep): (&AtomicU64, _, fn(u64, u64) -> u64) =
            if new { (&self.new_from, after, u64::min) } else { (&self.old_until, before, u64::max) };
        let Some(clock) = clock else { return };
        // In whole microseconds, rounded outwards (never narrower than seen); at least 1 after the asking: 0
        // and the mask say nothing seen.
        let after_asked = clock.saturating_sub(asked_ns);
        let micros = if new { after_asked.div_ceil(1000) } else { after_asked / 1000 }.clamp(1, TIME_MASK - 1);
        let _ = word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |seen| {
            of_change(seen, number).then(|| seen_word(number, keep(seen & TIME_MASK, micros)))
        });
    }

    /// Whether the thinning ever changed.
    pub(crate) fn any(&self) -> bool {
        self.made.load(Ordering::Relaxed) > 0
    }

    /// The changes kept, oldest first, into `into`, and whether they are every change since start-up;
    /// `None` where one was being written meanwhile.
    pub(crate) fn read<'c>(&self, into: &'c mut [Change; KEPT]) -> Option<(&'c [Change], bool)> {
        let sequence = self.sequence.load(Ordering::Acquire);
        if sequence % 2 == 1 {
            return None;
        }
        let made = self.made.load(Ordering::Acquire);
        let flight = self.in_flight.load(Ordering::Acquire);
        let mut kept = (made as usize).min(KEPT);
        for (slot, index) in into.iter_mut().zip(made as usize - kept..made as usize) {
            let index = index % KEPT;
            *slot = Change {
                at_ns: self.at_ns[index].load(Ordering::Relaxed),
                by_ns: self.by_ns[index].load(Ordering::Relaxed),
                to: Thinning::of(self.to[index].load(Ordering::Relaxed)),
            };
        }
        if flight != 0 && flight >> 8 == made && kept > 0 {
            // The last is being made: from what the hooks saw so far; where none saw jemalloc draw at it yet,
            // not made as far as anyone knows (a reset can wait long for jemalloc's locks).
            let (to, asked_ns, seen) = self.seen(flight);
            if seen.new_from_ns == u64::MAX {
                kept -= 1;
            } else {
                into[kept - 1] = Change::timed(to, asked_ns, u64::MAX, seen);
            }
        }
        fence(Ordering::Acquire);
        (self.sequence.load(Ordering::Relaxed) == sequence).then_some((&into[..kept], made as usize <= KEPT))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_kept_as_asked_and_timed_by_what_the_hooks_saw() {
        let changes = Changes::new();
        let mut into = [Change::asked(Thinning::NONE, 0); KEPT];
        assert!(!changes.any());
        let asked = thread_times::boot_clock_ns().unwrap();
        changes.asked(asked, Thinning::of(3));
        // In flight, seen by no hook yet: not made as far as anyone knows.
        let (kept, complete) = changes.read(&mut into).unwrap();
        assert_eq!((kept, complete), (&[][..], true));
        // A hook sees the old interval, then one the new: made by then.
        assert_eq!(changes.watch(|| Thinning::NONE), Thinning::NONE);
        let between = thread_times::boot_clock_ns().unwrap();
        assert_eq!(changes.watch(|| Thinning::of(3)), Thinning::of(3));
        let (kept, _) = changes.read(&mut into).unwrap();
        assert!(kept[0].by_ns >= between && kept[0].by_ns < u64::MAX, "{kept:?}");
        // Nothing is seen once it is made.
        let done = thread_times::boot_clock_ns().unwrap() + 500_000_000;
        changes.made(done, true);
        changes.watch(|| Thinning::NONE);
        let (kept, _) = changes.read(&mut into).unwrap();
        let change = kept[0];
        assert!(change.by_ns >= between && change.by_ns < done, "{change:?} {between}");
        assert!(change.at_ns >= asked && change.at_ns <= change.by_ns, "{change:?}");
        // Another, seen by nothing: between its asking and its making.
        changes.asked(done, Thinning::NONE);
        changes.made(done + 2_000, true);
        let (kept, _) = changes.read(&mut into).unwrap();
        assert_eq!(kept[1], Change { at_ns: done + 1_000, by_ns: done + 2_000, to: Thinning::NONE });
    }

    #[test]
    fn the_last_change_made_is_in_force_and_jemalloc_is_read_only_while_one_is_in_flight() {
        let changes = Changes::new();
        let unread = || -> Thinning { panic!("jemalloc read with no change in flight") };
        assert_eq!(changes.watch(unread), Thinning::NONE);
        changes.asked(1_000_000, Thinning::of(4));
        // In flight: jemalloc's word, whatever was in force.
        assert_eq!(changes.in_force(), Thinning::NONE);
        assert_eq!(changes.watch(|| Thinning::of(4)), Thinning::of(4));
        changes.made(2_000_000, true);
        assert_eq!((changes.in_force(), changes.watch(unread)), (Thinning::of(4), Thinning::of(4)));
        // A change jemalloc refused leaves the one in force, and is kept as a change to it.
        changes.asked(3_000_000, Thinning::of(6));
        changes.made(4_000_000, false);
        assert_eq!((changes.in_force(), changes.watch(unread)), (Thinning::of(4), Thinning::of(4)));
        let mut into = [Change::asked(Thinning::NONE, 0); KEPT];
        let (kept, _) = changes.read(&mut into).unwrap();
        assert_eq!(kept.iter().map(|change| change.to).collect::<Vec<_>>(), [Thinning::of(4); 2]);
    }

    #[test]
    fn the_words_of_what_was_seen_tell_changes_apart_past_their_24_bits() {
        let number = (1 << 24) + 5;
        assert!(of_change(seen_word(number, 7), number));
        assert!(!of_change(seen_word(number, 7), number + 1));
        assert_eq!(seen_word(number, 7) & TIME_MASK, 7);
    }

    #[test]
    fn a_hook_that_saw_an_earlier_change_leaves_the_next_alone() {
        let changes = Changes::new();
        changes.asked(1_000_000, Thinning::of(1));
        let first = changes.in_flight.load(Ordering::Relaxed);
        changes.made(2_000_000, true);
        changes.asked(3_000_000, Thinning::of(2));
        // A hook that read the first change's flight, then waited to run: what it saw is not the second's.
        changes.saw(first, Thinning::of(1), Some(3_500_000), Some(3_600_000));
        changes.made(5_000_000, true);
        let mut into = [Change::asked(Thinning::NONE, 0); KEPT];
        let (kept, _) = changes.read(&mut into).unwrap();
        assert_eq!(kept[1], Change::timed(Thinning::of(2), 3_000_000, 5_000_000, Seen::NOTHING));
    }
}
