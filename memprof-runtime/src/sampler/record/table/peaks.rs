//! The high-water marks of windows: for each window tracked (at most [`TRACKED`] at once), what each stack
//! holds of it (its objects sampled from its start on, still live, unbiased) and in all, kept up to date by
//! every sample and free with a few atomic additions, and a copy of the per-stack figures taken when the
//! window held the most.
//!
//! The most a noisy running estimate ever reads is above what the heap ever held (at 512 KiB a sample, the
//! example service's 20 MiB read as 27-32 MB): choosing the moment by the same samples one reports keeps
//! their luckiest moment. So the samples are split in two halves by their sequence numbers' hash, each
//! half's running total chooses the moments of *its* highs, and at each the *other* half's per-stack
//! figures are copied: those figures never chose their moment, so what they read there is unbiased, and
//! the two copies added make one estimate of the whole heap near its high, as noisy as one reading (the
//! halves cancel where both highs are one moment, on a plateau). A half's new high [`STEP`] above its last
//! copy (2 %, or 256 KiB, whichever is more: a copy may lag its half's high by that much, so the peak reads
//! at most some 2 % low) takes a copy, by the thread whose sample made it: one figure pair per stack
//! (256 KiB for the default 16 Ki stacks, whatever the objects; some 350 copies a half as a window grows
//! from 1 MiB to 1 GiB). Each half keeps the variance of its estimate too (the sum of its live objects'
//! `w (w - 1) b^2`), copied with its figures: the two copies' variances added are the peak's, as the two
//! halves' samples are drawn apart and neither chose the moment it is read at. Nothing here allocates in the
//! hooks: a place's memory is made the first time it is used, and kept for the process's life (a hook may
//! still be adding to a place as its window ends).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use super::super::spin::SpinLock;
use super::{Held, Totals, variance_of_one};

/// How many windows may be tracked at once; a window opened while all places are taken has no peak.
pub(crate) const TRACKED: usize = 4;

/// A copy is taken when a half holds this share more than at its last one (1/50: 2 %)...
const STEP: u64 = 50;
/// ... or at least this many bytes more.
const SMALLEST_STEP: u64 = 1 << 18;

/// A window's place while it is being set up: no hook counts into it.
const SETTING_UP: u64 = u64::MAX;

/// Unbiased object counts are kept in 1/1024ths.
const OBJECT_UNIT: f64 = 1024.0;

/// Variances are kept in units of 2^20 square bytes (a KiB squared): a u64 holds some 10^13 objects of 1 MiB
/// each standing for two.
const VARIANCE_UNIT: f64 = (1u64 << 20) as f64;

/// What each stack holds of a window, unbiased: bytes and objects (in [`OBJECT_UNIT`]s), two per stack.
type Figures = Box<[AtomicU64]>;

/// The *other* half's figures (by stack) and variance (in [`VARIANCE_UNIT`]s) at a half's last copy.
#[derive(Default)]
struct Copied {
    figures: Vec<u64>,
    variance: u64,
}

/// What a window held near its high-water mark: by stack, and the variance of its total's estimate.
#[derive(Debug)]
pub(crate) struct AtPeak {
    /// By stack index.
    pub(crate) held: Vec<Held>,
    /// The variance of the total's estimate, square bytes.
    pub(crate) variance: f64,
}

/// One half of a window's samples.
struct Half {
    /// The unbiased bytes its samples hold now.
    live: AtomicU64,
    /// What they held at its last copy.
    mark: AtomicU64,
    /// The variance of `live` as an estimate, in [`VARIANCE_UNIT`]s.
    variance: AtomicU64,
    /// Now, by stack.
    now: OnceLock<Figures>,
    /// What the *other* half held at this half's last copy; its lock also keeps two copies from being taken
    /// at once.
    highest: SpinLock<Copied>,
}

/// One window's high-water mark.
struct Peak {
    /// The window's first sequence number; 0 for a free place, [`SETTING_UP`] while it is made ready.
    since: AtomicU64,
    halves: [Half; 2],
}

/// The tracked windows' high-water marks.
pub(crate) struct Peaks {
    places: [Peak; TRACKED],
}

impl Default for Peaks {
    fn default() -> Self {
        let half = || Half {
            live: AtomicU64::new(0),
            mark: AtomicU64::new(0),
            variance: AtomicU64::new(0),
            now: OnceLock::new(),
            highest: SpinLock::new(Copied::default()),
        };
        Peaks { places: std::array::from_fn(|_| Peak { since: AtomicU64::new(0), halves: [half(), half()] }) }
    }
}

/// The half a sample with sequence number `sequence` is in: a bit of a mixing hash (splitmix64's), which
/// looks as random as a coin. Random it must be: a balanced split (every other sample, or a Fibonacci
/// hash's top bit) halves the same luck, and each half's highs would choose the other's lucky moments too.
fn half_of(sequence: u64) -> usize {
    let mut bits = sequence.wrapping_add(0x9e37_79b9_7f4a_7c15);
    bits = (bits ^ (bits >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    bits = (bits ^ (bits >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((bits ^ (bits >> 31)) & 1) as usize
}

impl Peaks {
    /// Starts tracking the window whose first sequence number is `since`, for `stacks` stacks; its place,
    /// or `None` when all are taken. Allocates the place's memory the first time (outside the hooks).
    pub(crate) fn track(&self, since: u64, stacks: usize) -> Option<usize> {
        let (place, peak) = self.places.iter().enumerate().find(|(_, peak)| {
            peak.since.compare_exchange(0, SETTING_UP, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        })?;
        for half in &peak.halves {
            let now = half.now.get_or_init(|| (0..2 * stacks).map(|_| AtomicU64::new(0)).collect());
            now.iter().for_each(|figure| figure.store(0, Ordering::Relaxed));
            half.highest.with(|highest| {
                highest.figures.clear();
                highest.figures.resize(now.len(), 0);
                highest.variance = 0;
            });
            half.live.store(0, Ordering::Relaxed);
            half.mark.store(0, Ordering::Relaxed);
            half.variance.store(0, Ordering::Relaxed);
        }
        peak.since.store(since, Ordering::Release);
        Some(place)
    }

    /// A sampled object of `bytes` standing for `scale` objects, of stack `stack`, with sequence number
    /// `sequence`: added to the windows it belongs to; a half past its next step copies the other's figures.
    pub(crate) fn sampled(&self, sequence: u64, stack: u32, bytes: u64, scale: f64) {
        let (this, other) = (half_of(sequence), 1 - half_of(sequence));
        for peak in &self.places {
            let half = &peak.halves[this];
            let (Some(now), Some(figure)) = (half.now.get(), counted(peak, half, sequence, stack)) else { continue };
            let unbiased = (scale * bytes as f64) as u64;
            now[figure].fetch_add(unbiased, Ordering::Relaxed);
            now[figure + 1].fetch_add((scale * OBJECT_UNIT) as u64, Ordering::Relaxed);
            half.variance.fetch_add(variance_units(bytes, scale), Ordering::Relaxed);
            let live = half.live.fetch_add(unbiased, Ordering::AcqRel) + unbiased;
            let mark = half.mark.load(Ordering::Relaxed);
            if live >= mark + (mark / STEP).max(SMALLEST_STEP)
                && let Some(others) = peak.halves[other].now.get()
            {
                half.highest.with(|highest| {
                    // Another thread may have copied a higher mark meanwhile.
                    if live > half.mark.load(Ordering::Relaxed) {
                        copy(&peak.halves[other], others, highest);
                        half.mark.store(live, Ordering::Relaxed);
                    }
                });
            }
        }
    }

    /// A sampled object of `bytes` standing for `scale()` objects (asked only where a window counts it), of
    /// stack `stack`, with sequence number `sequence`, was freed.
    pub(crate) fn freed(&self, sequence: u64, stack: u32, bytes: u64, scale: impl Fn() -> f64) {
        let mut known = None;
        for peak in &self.places {
            let half = &peak.halves[half_of(sequence)];
            let (Some(now), Some(figure)) = (half.now.get(), counted(peak, half, sequence, stack)) else { continue };
            let scale = *known.get_or_insert_with(&scale);
            let unbiased = (scale * bytes as f64) as u64;
            // Saturating: an object sampled as its window was set up may have been left out of it.
            let less = |by: u64| move |value: u64| Some(value.saturating_sub(by));
            let _ = now[figure].fetch_update(Ordering::Relaxed, Ordering::Relaxed, less(unbiased));
            let _ =
                now[figure + 1].fetch_update(Ordering::Relaxed, Ordering::Relaxed, less((scale * OBJECT_UNIT) as u64));
            let _ = half.live.fetch_update(Ordering::AcqRel, Ordering::Relaxed, less(unbiased));
            let _ =
                half.variance.fetch_update(Ordering::Relaxed, Ordering::Relaxed, less(variance_units(bytes, scale)));
        }
    }

    /// Whether a tracked window holds anything of `stack`, now or at a copy: such a stack is not given back
    /// (its index would name another stack in the window's peak).
    pub(crate) fn holds(&self, stack: u32) -> bool {
        let figure = 2 * stack as usize;
        self.places.iter().any(|peak| {
            let since = peak.since.load(Ordering::Acquire);
            since != 0
                && (since == SETTING_UP
                    || peak.halves.iter().any(|half| {
                        let now = half.now.get().and_then(|now| now.get(figure));
                        now.is_some_and(|figure| figure.load(Ordering::Relaxed) != 0)
                            || half.highest.with(|highest| highest.figures.get(figure).is_some_and(|&bytes| bytes != 0))
                    }))
        })
    }

    /// Takes every copy's lock until [`Peaks::unlock_after_fork`] (see `Table::lock_for_fork`).
    pub(crate) fn lock_for_fork(&self) {
        self.places.iter().flat_map(|peak| &peak.halves).for_each(|half| half.highest.lock_for_fork());
    }

    /// Releases the locks [`Peaks::lock_for_fork`] took.
    pub(crate) fn unlock_after_fork(&self) {
        self.places.iter().flat_map(|peak| &peak.halves).for_each(|half| half.highest.unlock_after_fork());
    }

    /// Stops tracking the window at `place` and answers what each stack held (by stack index) near its
    /// high-water mark, and the variance of the total: each half's copy of the other's (taken now, if the
    /// half holds the most now), added. Allocates (outside the hooks).
    pub(crate) fn end(&self, place: usize) -> AtPeak {
        let peak = &self.places[place];
        let mut copies = [0, 1].map(|this| {
            let half = &peak.halves[this];
            let mut copied =
                half.highest.with(|highest| Copied { figures: highest.figures.clone(), variance: highest.variance });
            if let Some(others) = peak.halves[1 - this].now.get()
                && half.live.load(Ordering::Acquire) >= half.mark.load(Ordering::Acquire)
            {
                copy(&peak.halves[1 - this], others, &mut copied);
            }
            copied
        });
        peak.since.store(0, Ordering::Release);
        let [first, second] = &mut copies;
        first.figures.iter_mut().zip(second.figures.iter()).for_each(|(sum, more)| *sum += more);
        let variance = (first.variance + second.variance) as f64 * VARIANCE_UNIT;
        let held = first
            .figures
            .chunks_exact(2)
            .map(|pair| {
                let objects = pair[1] as f64 / OBJECT_UNIT;
                let live = Totals {
                    objects: objects.round() as u64,
                    bytes: pair[0],
                    unbiased_objects: objects,
                    unbiased_bytes: pair[0] as f64,
                    // A peak keeps sums by stack, not its objects: each stack's error is not known,
                    // only the total's.
                    variance: 0.0,
                };
                Held { live, older_bytes: 0.0 }
            })
            .collect();
        AtPeak { held, variance }
    }
}

/// Where `stack`'s figures are in `half` of `peak`'s, when an object with sequence number `sequence`
/// counts in its window.
fn counted(peak: &Peak, half: &Half, sequence: u64, stack: u32) -> Option<usize> {
    let since = peak.since.load(Ordering::Acquire);
    let figure = 2 * stack as usize;
    (since != 0 && since != SETTING_UP && sequence >= since && figure + 1 < half.now.get()?.len()).then_some(figure)
}

/// Copies what `other` (a half, whose figures are `now`) holds into `highest`.
fn copy(other: &Half, now: &[AtomicU64], highest: &mut Copied) {
    for (figure, copied) in now.iter().zip(highest.figures.iter_mut()) {
        *copied = figure.load(Ordering::Relaxed);
    }
    highest.variance = other.variance.load(Ordering::Relaxed);
}

/// What an object of `bytes` standing for `scale` objects adds to a half's variance, in [`VARIANCE_UNIT`]s.
fn variance_units(bytes: u64, scale: f64) -> u64 {
    (variance_of_one(bytes, scale) / VARIANCE_UNIT) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// A plateau: 64 objects of 1 MiB on two stacks held, then freed; an object sampled before the window
    /// is not its. The peak reads what was held, less the few objects one half took after the other's
    /// last copy.
    #[test]
    fn a_plateau_reads_what_was_held_and_the_place_is_freed() {
        let peaks = Peaks::default();
        let place = peaks.track(10, 2).unwrap();
        peaks.sampled(9, 0, 64 * MIB, 1.0);
        for sequence in 10..74 {
            peaks.sampled(sequence, (sequence % 2) as u32, MIB, 1.0);
        }
        for sequence in 10..74 {
            peaks.freed(sequence, (sequence % 2) as u32, MIB, || 1.0);
        }
        peaks.freed(9, 0, 64 * MIB, || 1.0);
        let held = peaks.end(place).held;
        let total: f64 = held.iter().map(|held| held.live.unbiased_bytes).sum();
        assert!(total >= (60 * MIB) as f64 && total <= (64 * MIB) as f64, "{}", total / MIB as f64);
        assert!(held.iter().all(|held| held.live.unbiased_bytes >= (28 * MIB) as f64), "{held:?}");
        assert_eq!(peaks.track(20, 2), Some(0), "the place is free again");
    }

    /// A heap holding a steady 20 MiB of 4 KiB objects, churned for 40,000 allocations and sampled every
    /// 512 KiB on average (some 40 sampled objects live at a time: a reading's error is some 16 %): the
    /// most the running estimate ever read is far above 20 MiB (+34 % on average), the peak's copies are not,
    /// over 200 windows; the error said with each peak holds the truth about 95 times in 100.
    #[test]
    fn the_peak_of_a_steady_heap_is_not_biased_upward() {
        let period = 512.0 * 1024.0;
        let (object, live_objects) = (4096u64, 5120usize);
        let chance = 1.0 - (-(object as f64) / period).exp();
        let mut random = super::super::tests::uniform_draws(0x9e37_79b9_7f4a_7c15);
        let (mut peaks_read, mut maxima_read, mut covered) = (Vec::new(), Vec::new(), 0);
        for window in 0..200u64 {
            // The record's sequence numbers go on from window to window.
            let first = 1 + window * 1_000_003;
            let peaks = Peaks::default();
            let place = peaks.track(first, 1).unwrap();
            // Each live object: the sequence number it was sampled with, if it was.
            let mut heap: Vec<Option<u64>> = Vec::with_capacity(live_objects);
            let (mut sequence, mut estimate, mut most) = (first, 0.0f64, 0.0f64);
            for step in 0..(live_objects + 40_000) {
                if step >= live_objects {
                    let index = (random() * heap.len() as f64) as usize;
                    if let Some(freed) = heap.swap_remove(index) {
                        peaks.freed(freed, 0, object, || 1.0 / chance);
                        estimate -= object as f64 / chance;
                    }
                }
                let sampled = (random() < chance).then(|| {
                    sequence += 1;
                    peaks.sampled(sequence, 0, object, 1.0 / chance);
                    estimate += object as f64 / chance;
                    sequence
                });
                heap.push(sampled);
                if step >= live_objects {
                    most = most.max(estimate);
                }
            }
            let at_peak = peaks.end(place);
            let read = at_peak.held[0].live.unbiased_bytes;
            // The error said with it: two standard errors from the variance beside it.
            covered += usize::from((read - (20 * MIB) as f64).abs() <= 2.0 * at_peak.variance.sqrt());
            peaks_read.push(read / (20 * MIB) as f64);
            maxima_read.push(most / (20 * MIB) as f64);
        }
        let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len() as f64;
        assert!(mean(&maxima_read) > 1.25, "the running estimate's most: {:.2}", mean(&maxima_read));
        // A window's peak errs by some 17 % (one reading's error): the mean of 200 by some 1.2 %.
        let peak = mean(&peaks_read);
        assert!((peak - 1.0).abs() < 0.05, "the peak's mean over 200 windows: {peak:.3} of the 20 MiB held");
        // The error said holds the truth about 95 times in 100 (a copy lags its moment by up to 2 %, so a
        // little less).
        println!("the peak's error said held the 20 MiB in {covered} of 200 windows");
        assert!((170..=200).contains(&covered), "{covered} of 200");
    }

    /// The variance said with a peak is the two copies': near a plateau of 64 objects of 1 MiB each standing
    /// for two, each half's copy has the variance of the objects it held (`2 (2 - 1) MiB^2` each).
    #[test]
    fn a_peak_carries_the_variance_of_its_two_copies() {
        let peaks = Peaks::default();
        let place = peaks.track(1, 1).unwrap();
        for sequence in 1..65 {
            peaks.sampled(sequence, 0, MIB, 2.0);
        }
        for sequence in 1..65 {
            peaks.freed(sequence, 0, MIB, || 2.0);
        }
        let at_peak = peaks.end(place);
        let one = 2.0 * (MIB as f64).powi(2);
        let total: f64 = at_peak.held.iter().map(|held| held.live.unbiased_bytes).sum();
        assert!((56.0 * one..=64.0 * one).contains(&at_peak.variance), "{} objects' worth", at_peak.variance / one);
        // As many objects' variance as the objects the peak reads.
        let objects = total / (2.0 * MIB as f64);
        assert!((at_peak.variance / one - objects).abs() < 1e-6, "{} against {objects}", at_peak.variance / one);
    }

    #[test]
    fn the_end_counts_when_it_is_the_highest() {
        let peaks = Peaks::default();
        let place = peaks.track(1, 1).unwrap();
        peaks.sampled(1, 0, 4096, 1.0);
        assert_eq!(peaks.end(place).held[0].live.unbiased_bytes, 4096.0, "below the first step, at its end");
    }

    #[test]
    fn at_most_four_windows_are_tracked() {
        let peaks = Peaks::default();
        let places: Vec<_> = (1..=5).map(|since| peaks.track(since, 1)).collect();
        assert_eq!(places, [Some(0), Some(1), Some(2), Some(3), None]);
    }
}
