//! The high-water marks of windows: for each window tracked (at most [`TRACKED`] at once), the unbiased
//! bytes it holds (sampled from its start on, still live), kept up to date by every sample and free, and
//! what each stack held when that was highest. A new high taken [`STEP`] above the last snapshot (or 1 MiB,
//! whichever is more) takes a new snapshot, by the thread whose sample made it: as a window grows from 1 MiB
//! to 1 GiB that is some 140 snapshots, each a scan of the live objects (tens of µs), never an allocation:
//! the snapshot's memory is the window's, made when it starts.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::super::spin::SpinLock;
use super::Held;

/// How many windows may be tracked at once; a window opened while all places are taken has no peak.
pub(crate) const TRACKED: usize = 4;

/// A snapshot is taken when the window holds this share more than at the last one...
const STEP: u64 = 20;
/// ... or at least this many bytes more.
const SMALLEST_STEP: u64 = 1 << 20;

/// One window's high-water mark.
struct Peak {
    /// The window's first sequence number; 0 for a free place.
    since: AtomicU64,
    /// The unbiased bytes it holds now.
    live: AtomicU64,
    /// What it held at the last snapshot.
    mark: AtomicU64,
    /// A snapshot is being taken.
    taking: AtomicBool,
    /// What each stack held at the last snapshot.
    snapshot: SpinLock<Box<[Held]>>,
}

/// The tracked windows' high-water marks.
pub(crate) struct Peaks {
    places: [Peak; TRACKED],
}

impl Default for Peaks {
    fn default() -> Self {
        let free = || Peak {
            since: AtomicU64::new(0),
            live: AtomicU64::new(0),
            mark: AtomicU64::new(0),
            taking: AtomicBool::new(false),
            snapshot: SpinLock::new(Box::default()),
        };
        Peaks { places: std::array::from_fn(|_| free()) }
    }
}

impl Peaks {
    /// Starts tracking the window whose first sequence number is `since`, with room for `stacks` stacks;
    /// its place, or `None` when all are taken. Allocates (outside the hooks).
    pub(crate) fn track(&self, since: u64, stacks: usize) -> Option<usize> {
        let snapshot = vec![Held::default(); stacks].into_boxed_slice();
        for (place, peak) in self.places.iter().enumerate() {
            if peak.since.compare_exchange(0, since, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                peak.live.store(0, Ordering::Relaxed);
                peak.mark.store(0, Ordering::Relaxed);
                peak.snapshot.with(move |held| *held = snapshot);
                return Some(place);
            }
        }
        None
    }

    /// A sampled object of `unbiased` bytes with sequence number `sequence`: added to the windows it
    /// belongs to; a window past its next step takes a snapshot with `take` (which fills the stacks' holdings
    /// of the objects sampled from a sequence number on).
    pub(crate) fn sampled(&self, sequence: u64, unbiased: u64, take: impl Fn(u64, &mut [Held])) {
        for peak in &self.places {
            let since = peak.since.load(Ordering::Acquire);
            if since == 0 || sequence < since {
                continue;
            }
            let live = peak.live.fetch_add(unbiased, Ordering::AcqRel) + unbiased;
            let mark = peak.mark.load(Ordering::Relaxed);
            if live >= mark + (mark / STEP).max(SMALLEST_STEP) && !peak.taking.swap(true, Ordering::AcqRel) {
                peak.snapshot.with(|held| {
                    held.iter_mut().for_each(|held| *held = Held::default());
                    take(since, held);
                });
                peak.mark.store(live, Ordering::Relaxed);
                peak.taking.store(false, Ordering::Release);
            }
        }
    }

    /// A sampled object of `unbiased` bytes with sequence number `sequence` was freed.
    pub(crate) fn freed(&self, sequence: u64, unbiased: u64) {
        for peak in &self.places {
            let since = peak.since.load(Ordering::Acquire);
            if since != 0 && sequence >= since {
                // Saturating: an object sampled before a place was reused is not the new window's.
                let _ = peak
                    .live
                    .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |live| Some(live.saturating_sub(unbiased)));
            }
        }
    }

    /// Takes every snapshot's lock until [`Peaks::unlock_after_fork`] (see `Table::lock_for_fork`).
    pub(crate) fn lock_for_fork(&self) {
        self.places.iter().for_each(|peak| peak.snapshot.lock_for_fork());
    }

    /// Releases the locks [`Peaks::lock_for_fork`] took.
    pub(crate) fn unlock_after_fork(&self) {
        self.places.iter().for_each(|peak| peak.snapshot.unlock_after_fork());
    }

    /// Stops tracking the window at `place` and answers what each stack held at its highest: the last
    /// snapshot, or what it holds now (taken with `take`) if that is more. Allocates (outside the hooks).
    pub(crate) fn end(&self, place: usize, take: impl Fn(u64, &mut [Held])) -> Vec<Held> {
        let peak = &self.places[place];
        let since = peak.since.load(Ordering::Acquire);
        let mut held = peak.snapshot.with(|held| held.to_vec());
        if peak.live.load(Ordering::Acquire) >= peak.mark.load(Ordering::Acquire) {
            held.iter_mut().for_each(|held| *held = Held::default());
            take(since, &mut held);
        }
        peak.snapshot.with(|held| *held = Box::default());
        peak.since.store(0, Ordering::Release);
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `take` that says how many times it was called, each stack holding `bytes`.
    fn counting(calls: &AtomicU64, bytes: f64) -> impl Fn(u64, &mut [Held]) + '_ {
        move |_, held| {
            calls.fetch_add(1, Ordering::Relaxed);
            held.iter_mut().for_each(|held| held.live.unbiased_bytes = bytes);
        }
    }

    #[test]
    fn snapshots_come_at_each_step_up_and_the_highest_is_kept() {
        let peaks = Peaks::default();
        let place = peaks.track(10, 2).unwrap();
        let calls = AtomicU64::new(0);
        peaks.sampled(9, 64 << 20, counting(&calls, 1.0));
        assert_eq!(calls.load(Ordering::Relaxed), 0, "sampled before the window");
        for _ in 0..4 {
            peaks.sampled(11, 512 << 10, counting(&calls, 2.0));
        }
        assert_eq!(calls.load(Ordering::Relaxed), 2, "at 1 MiB and at 2 MiB");
        peaks.freed(11, 2 << 20);
        peaks.sampled(12, 512 << 10, counting(&calls, 3.0));
        assert_eq!(calls.load(Ordering::Relaxed), 2, "below the mark again");
        let held = peaks.end(place, counting(&calls, 4.0));
        assert_eq!(held[0].live.unbiased_bytes, 2.0, "the snapshot at the peak, not the end");
        assert_eq!(peaks.track(20, 1), Some(0), "the place is free again");
    }

    #[test]
    fn at_most_four_windows_are_tracked() {
        let peaks = Peaks::default();
        let places: Vec<_> = (1..=5).map(|since| peaks.track(since, 1)).collect();
        assert_eq!(places, [Some(0), Some(1), Some(2), Some(3), None]);
    }
}
