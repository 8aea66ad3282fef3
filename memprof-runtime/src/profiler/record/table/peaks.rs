//! The high-water marks of windows: for each window tracked (at most [`TRACKED`] at once), what each stack
//! holds of it (its objects sampled from its start on, still live, unbiased) and in all, kept up to date by
//! every sample and free with a few atomic additions, and a copy of the per-stack figures taken when the
//! window held the most. A new high [`STEP`] above the last copy (or 1 MiB, whichever is more) takes a new
//! copy, by the thread whose sample made it: a copy of one figure pair per stack (256 KiB for the default
//! 16 Ki stacks, whatever the objects), some 140 times as a window grows from 1 MiB to 1 GiB. Nothing here
//! allocates in the hooks: a place's memory is made the first time it is used, and kept for the process's
//! life (a hook may still be adding to a place as its window ends).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use super::super::spin::SpinLock;
use super::{Held, Totals};

/// How many windows may be tracked at once; a window opened while all places are taken has no peak.
pub(crate) const TRACKED: usize = 4;

/// A copy is taken when the window holds this share more than at the last one (1/20: 5 %)...
const STEP: u64 = 20;
/// ... or at least this many bytes more.
const SMALLEST_STEP: u64 = 1 << 20;

/// A window's place while it is being set up: no hook counts into it.
const SETTING_UP: u64 = u64::MAX;

/// Unbiased object counts are kept in 1/1024ths.
const OBJECT_UNIT: f64 = 1024.0;

/// What each stack holds of a window, unbiased: bytes and objects (in [`OBJECT_UNIT`]s), two per stack.
type Figures = Box<[AtomicU64]>;

/// One window's high-water mark.
struct Peak {
    /// The window's first sequence number; 0 for a free place, [`SETTING_UP`] while it is made ready.
    since: AtomicU64,
    /// The unbiased bytes it holds now.
    live: AtomicU64,
    /// What it held at the last copy.
    mark: AtomicU64,
    /// Now, by stack.
    now: OnceLock<Figures>,
    /// At the last copy, by stack; its lock also keeps two copies from being taken at once.
    highest: SpinLock<Vec<u64>>,
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
            now: OnceLock::new(),
            highest: SpinLock::new(Vec::new()),
        };
        Peaks { places: std::array::from_fn(|_| free()) }
    }
}

impl Peaks {
    /// Starts tracking the window whose first sequence number is `since`, for `stacks` stacks; its place,
    /// or `None` when all are taken. Allocates the place's memory the first time (outside the hooks).
    pub(crate) fn track(&self, since: u64, stacks: usize) -> Option<usize> {
        let (place, peak) = self.places.iter().enumerate().find(|(_, peak)| {
            peak.since.compare_exchange(0, SETTING_UP, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        })?;
        let now = peak.now.get_or_init(|| (0..2 * stacks).map(|_| AtomicU64::new(0)).collect());
        now.iter().for_each(|figure| figure.store(0, Ordering::Relaxed));
        peak.highest.with(|highest| {
            highest.clear();
            highest.resize(now.len(), 0);
        });
        peak.live.store(0, Ordering::Relaxed);
        peak.mark.store(0, Ordering::Relaxed);
        peak.since.store(since, Ordering::Release);
        Some(place)
    }

    /// A sampled object of `bytes` standing for `scale` objects, of stack `stack`, with sequence number
    /// `sequence`: added to the windows it belongs to; a window past its next step copies its figures.
    pub(crate) fn sampled(&self, sequence: u64, stack: u32, bytes: u64, scale: f64) {
        for peak in &self.places {
            let (Some(now), Some(figure)) = (peak.now.get(), counted(peak, sequence, stack)) else { continue };
            let unbiased = (scale * bytes as f64) as u64;
            now[figure].fetch_add(unbiased, Ordering::Relaxed);
            now[figure + 1].fetch_add((scale * OBJECT_UNIT) as u64, Ordering::Relaxed);
            let live = peak.live.fetch_add(unbiased, Ordering::AcqRel) + unbiased;
            let mark = peak.mark.load(Ordering::Relaxed);
            if live >= mark + (mark / STEP).max(SMALLEST_STEP) {
                peak.highest.with(|highest| {
                    // Another thread may have copied a higher mark meanwhile.
                    if live > peak.mark.load(Ordering::Relaxed) {
                        copy(now, highest);
                        peak.mark.store(live, Ordering::Relaxed);
                    }
                });
            }
        }
    }

    /// A sampled object of `bytes` standing for `scale` objects, of stack `stack`, with sequence number
    /// `sequence`, was freed.
    pub(crate) fn freed(&self, sequence: u64, stack: u32, bytes: u64, scale: f64) {
        for peak in &self.places {
            let (Some(now), Some(figure)) = (peak.now.get(), counted(peak, sequence, stack)) else { continue };
            let unbiased = (scale * bytes as f64) as u64;
            // Saturating: an object sampled as its window was set up may have been left out of it.
            let less = |by: u64| move |value: u64| Some(value.saturating_sub(by));
            let _ = now[figure].fetch_update(Ordering::Relaxed, Ordering::Relaxed, less(unbiased));
            let _ =
                now[figure + 1].fetch_update(Ordering::Relaxed, Ordering::Relaxed, less((scale * OBJECT_UNIT) as u64));
            let _ = peak.live.fetch_update(Ordering::AcqRel, Ordering::Relaxed, less(unbiased));
        }
    }

    /// Whether a tracked window holds anything of `stack`, now or at its last copy: such a stack is not
    /// given back (its index would name another stack in the window's peak).
    pub(crate) fn holds(&self, stack: u32) -> bool {
        let figure = 2 * stack as usize;
        self.places.iter().any(|peak| {
            let since = peak.since.load(Ordering::Acquire);
            let now = peak.now.get().and_then(|now| now.get(figure)).is_some_and(|f| f.load(Ordering::Relaxed) != 0);
            since != 0
                && (since == SETTING_UP
                    || now
                    || peak.highest.with(|highest| highest.get(figure).is_some_and(|&bytes| bytes != 0)))
        })
    }

    /// Takes every copy's lock until [`Peaks::unlock_after_fork`] (see `Table::lock_for_fork`).
    pub(crate) fn lock_for_fork(&self) {
        self.places.iter().for_each(|peak| peak.highest.lock_for_fork());
    }

    /// Releases the locks [`Peaks::lock_for_fork`] took.
    pub(crate) fn unlock_after_fork(&self) {
        self.places.iter().for_each(|peak| peak.highest.unlock_after_fork());
    }

    /// Stops tracking the window at `place` and answers what each stack held (by stack index) when it held
    /// the most: the last copy, or now if that is more. Allocates (outside the hooks).
    pub(crate) fn end(&self, place: usize) -> Vec<Held> {
        let peak = &self.places[place];
        let mut figures = peak.highest.with(|highest| highest.clone());
        if let Some(now) = peak.now.get()
            && peak.live.load(Ordering::Acquire) >= peak.mark.load(Ordering::Acquire)
        {
            copy(now, &mut figures);
        }
        peak.since.store(0, Ordering::Release);
        figures
            .chunks_exact(2)
            .map(|pair| {
                let objects = pair[1] as f64 / OBJECT_UNIT;
                let live = Totals {
                    objects: objects.round() as u64,
                    bytes: pair[0],
                    unbiased_objects: objects,
                    unbiased_bytes: pair[0] as f64,
                };
                Held { live, older_bytes: 0.0 }
            })
            .collect()
    }
}

/// Where `stack`'s figures are in `peak`'s, when an object with sequence number `sequence` counts in its
/// window.
fn counted(peak: &Peak, sequence: u64, stack: u32) -> Option<usize> {
    let since = peak.since.load(Ordering::Acquire);
    let figure = 2 * stack as usize;
    (since != 0 && since != SETTING_UP && sequence >= since && figure + 1 < peak.now.get()?.len()).then_some(figure)
}

/// Copies the figures `now` into `highest`.
fn copy(now: &[AtomicU64], highest: &mut [u64]) {
    for (figure, copied) in now.iter().zip(highest.iter_mut()) {
        *copied = figure.load(Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn copies_come_at_each_step_up_and_the_highest_is_kept() {
        let peaks = Peaks::default();
        let place = peaks.track(10, 2).unwrap();
        peaks.sampled(9, 0, 64 * MIB, 1.0);
        // Stack 0: 3 MiB in 512 KiB objects, each standing for two; stack 1: 1 MiB.
        for sequence in 11..14 {
            peaks.sampled(sequence, 0, 512 << 10, 2.0);
        }
        peaks.sampled(14, 1, MIB, 1.0);
        peaks.freed(11, 0, 512 << 10, 2.0);
        peaks.freed(9, 0, 64 * MIB, 1.0);
        let held = peaks.end(place);
        assert_eq!(held[0].live.unbiased_bytes, (3 * MIB) as f64, "the copy at 4 MiB, not the end's 3");
        assert_eq!(held[0].live.unbiased_objects, 6.0);
        assert_eq!(held[1].live.unbiased_bytes, MIB as f64);
        assert_eq!(peaks.track(20, 2), Some(0), "the place is free again");
    }

    #[test]
    fn the_end_counts_when_it_is_the_highest() {
        let peaks = Peaks::default();
        let place = peaks.track(1, 1).unwrap();
        peaks.sampled(1, 0, 4096, 1.0);
        assert_eq!(peaks.end(place)[0].live.unbiased_bytes, 4096.0, "below the first step, at its end");
    }

    #[test]
    fn at_most_four_windows_are_tracked() {
        let peaks = Peaks::default();
        let places: Vec<_> = (1..=5).map(|since| peaks.track(since, 1)).collect();
        assert_eq!(places, [Some(0), Some(1), Some(2), Some(3), None]);
    }
}
