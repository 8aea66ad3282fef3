//! The table behind the record: every sampled object still live (its stack, size, sequence number and
//! time) and every stack sampled since start-up (its frames and what it allocated), in memory fixed when
//! it is made. No jemalloc in it: the hooks and the tests call it alike.
//!
//! It is written from inside the allocator (jemalloc's sample hooks), so neither [`Table::sampled`] nor
//! [`Table::freed`] allocates, and both take only the table's own spin locks ([`SpinLock`]: the stacks',
//! and one of 16 shards of the live objects), each held for a hash lookup. What
//! does not fit (an object past the objects' capacity, a stack past the stacks' or frames') is counted in
//! [`Dropped`], never waited for. Readers copy what they need under the lock into memory they allocated
//! before taking it.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};

use super::calibration::{Calibration, Sampled, class_of};
use super::spin::SpinLock;
use crate::jemalloc::SizeClass;
use crate::sampler::budget::Thinning;
use padded::Padded;
use peaks::Peaks;
use slots::{Object, Objects, Stack, Stacks, Stamp, hash_frames, zeroed_slots};

/// How much a table holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Capacity {
    /// Live sampled objects.
    pub(crate) objects: usize,
    /// Distinct stacks.
    pub(crate) stacks: usize,
    /// Frames of all stacks together.
    pub(crate) frames: usize,
}

impl Capacity {
    /// Room for `objects` live sampled objects, a quarter as many stacks (at least 16 Ki), 64 frames a
    /// stack.
    pub(crate) const fn for_objects(objects: usize) -> Self {
        let stacks = if objects / 4 > 1 << 14 { objects / 4 } else { 1 << 14 };
        Capacity { objects, stacks, frames: stacks * 64 }
    }

    /// The bytes a table of this capacity holds, whether used or not.
    pub(crate) fn bytes(&self) -> u64 {
        let objects = shard_slots(*self) * SHARDS * size_of::<Object>();
        let stacks = self.stacks * size_of::<Stack>() + 2 * self.stacks.next_power_of_two() * size_of::<u32>();
        (objects + stacks + self.frames * size_of::<usize>()) as u64
    }
}

/// What the table could not hold, since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Dropped {
    /// Samples of objects the objects' part had no room for (their stacks' allocations still count).
    pub(crate) objects: u64,
    /// Samples whose stack the stacks' part had no room for: in no count at all.
    pub(crate) stacks: u64,
}

/// What one stack allocated, or holds: objects sampled, their bytes, and both unbiased (what they stand for),
/// with the variance of the unbiased bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Totals {
    pub(crate) objects: u64,
    pub(crate) bytes: u64,
    pub(crate) unbiased_objects: f64,
    pub(crate) unbiased_bytes: f64,
    /// The variance of [`Self::unbiased_bytes`] as an estimate, estimated from the samples (Horvitz and
    /// Thompson's, for objects each sampled by chance on its own): the sum over them of `w (w - 1) b^2`,
    /// an object of `b` bytes standing for `w`. 0 where nothing was sampled by chance (an unsampled count).
    pub(crate) variance: f64,
}

impl Totals {
    /// What `objects` objects of `bytes` in all stand for, counted as they are (at least one object):
    /// growth and differences, written unsampled (period 1).
    pub(crate) fn unsampled(objects: f64, bytes: f64) -> Self {
        let objects = objects.max(1.0);
        Totals {
            objects: objects.round() as u64,
            bytes: bytes.round() as u64,
            unbiased_objects: objects,
            unbiased_bytes: bytes,
            variance: 0.0,
        }
    }

    /// The error of [`Self::unbiased_bytes`] answers give ([`crate::memory::by_function::sampling_error`]).
    pub(crate) fn error_bytes(&self) -> f64 {
        crate::memory::by_function::sampling_error(self.variance)
    }

    /// Adds `more`'s counts to these.
    pub(crate) fn absorb(&mut self, more: &Totals) {
        self.objects += more.objects;
        self.bytes += more.bytes;
        self.unbiased_objects += more.unbiased_objects;
        self.unbiased_bytes += more.unbiased_bytes;
        self.variance += more.variance;
    }

    /// Adds a sampled object of `bytes`, unbiased at `sample_period`.
    #[cfg(test)]
    pub(super) fn add(&mut self, bytes: u64, sample_period: f64) {
        self.add_scaled(bytes, unbias(bytes, sample_period));
    }

    /// Adds an object of `bytes` that stands for `scale` objects.
    fn add_scaled(&mut self, bytes: u64, scale: f64) {
        self.objects += 1;
        self.bytes += bytes;
        self.unbiased_objects += scale;
        self.unbiased_bytes += scale * bytes as f64;
        self.variance += variance_of_one(bytes, scale);
    }
}

/// What one sampled object of `bytes` standing for `scale` objects adds to the variance of an unbiased
/// total (Horvitz and Thompson's: `w (w - 1) b^2`; none for a weight below 1, which only calibration gives).
pub(crate) fn variance_of_one(bytes: u64, scale: f64) -> f64 {
    scale * (scale - 1.0).max(0.0) * (bytes as f64).powi(2)
}

/// How many objects a sampled object of `bytes` stands for at a mean sampling period of `sample_period` bytes:
/// the chance it was sampled is `1 - exp(-bytes / period)` ([`chance_sampled`]).
pub(crate) fn unbias(bytes: u64, sample_period: f64) -> f64 {
    if sample_period <= 1.0 {
        return 1.0;
    }
    1.0 / chance_sampled(bytes.max(1) as f64 / sample_period)
}

/// `1 - e^-x` for `x >= 0` (0 for anything else): the chance that an object `x` mean sampling intervals long
/// holds a sample. Computed here, to within some 10^-14 of it, rather than through the C library's `exp`:
/// the sample hook calls it once a sample, a few milliseconds apart when sampling is thinned, and a call
/// into libm then finds its code and tables out of every cache (some 1 us a call on the example service,
/// a tenth of a sample's work). Below 1/2 the series of `-expm1(-x)`; above, `e^-x` as `2^-k e^-r` with
/// `x = k ln 2 + r`, `|r| <= ln 2 / 2`; above 40, 1 (`e^-40` is under half a unit in the last place of 1).
pub(crate) fn chance_sampled(x: f64) -> f64 {
    // x's terms up to x^N / N!, the next under 10^-16 of the sum where they are used.
    const N: u32 = 15;
    if x.is_nan() || x <= 0.0 {
        return 0.0;
    }
    if x >= 40.0 {
        return 1.0;
    }
    if x < 0.5 {
        // x - x^2/2! + x^3/3! - ... = x (1 - x/2 (1 - x/3 (1 - ...)))
        let nested = (2..=N).rev().fold(1.0, |inner, n| 1.0 - x / f64::from(n) * inner);
        return x * nested;
    }
    // ln 2 in two parts (fdlibm's): k ln2_hi is exact for the k here.
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    let k = (x / std::f64::consts::LN_2).round();
    let r = (x - k * LN2_HI) - k * LN2_LO;
    // e^-r = 1 - r (1 - r/2 (1 - r/3 (...)))
    let e_minus_r = (1..=N).rev().fold(1.0, |inner, n| 1.0 - r / f64::from(n) * inner);
    // 2^-k, k at most 58: built from its exponent bits.
    let two_to_minus_k = f64::from_bits((1023 - k as u64) << 52);
    1.0 - e_minus_r * two_to_minus_k
}

/// A stack, as a reader sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StackReading {
    pub(crate) frames: Vec<usize>,
    /// Its first sample's sequence number (0 for an index given back): what tells it from a stack that
    /// held its index before.
    pub(crate) born: u64,
    /// Everything it allocated since start-up (monotonic).
    pub(crate) allocated: Totals,
    /// What it holds now, of the objects sampled after the reading's starting point.
    pub(crate) live: Totals,
    /// What [`Self::live`]'s objects older than the reading's age threshold hold, unbiased bytes.
    pub(crate) live_older_bytes: f64,
}

/// What a stack holds now: its live objects (of those sampled from the reading's starting point on), and
/// how many of their unbiased bytes are older than the reading's age threshold.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Held {
    pub(crate) live: Totals,
    pub(crate) older_bytes: f64,
}

/// How many shards the live objects are split into, each behind its own lock: threads sampling or freeing
/// at once rarely wait for each other.
const SHARDS: usize = 16;

/// The slots of each shard: the capacity's objects, rounded up to a power of two, shared out (16 at least).
const fn shard_slots(capacity: Capacity) -> usize {
    let slots = capacity.objects.next_power_of_two() / SHARDS;
    if slots > 16 { slots } else { 16 }
}

/// The table; see the module's documentation.
pub(crate) struct Table {
    stacks: Padded<SpinLock<Stacks>>,
    shards: Box<[Padded<SpinLock<Objects>>]>,
    dropped_objects: AtomicU64,
    dropped_stacks: AtomicU64,
    capacity: Capacity,
    sample_period: f64,
    /// The sequence number the next sample gets.
    next_sequence: Padded<AtomicU64>,
    /// Sampled objects freed so far.
    freed: Padded<AtomicU64>,
    /// The high-water marks of the windows tracked.
    peaks: Peaks,
}

impl Table {
    /// An empty table of `capacity`, for samples taken every `sample_period` bytes on average. Its memory
    /// is reserved, not written: pages are touched as the table fills.
    pub(crate) fn new(capacity: Capacity, sample_period: u64) -> Self {
        let shards = (0..SHARDS)
            .map(|_| Padded(SpinLock::new(Objects { slots: zeroed_slots(shard_slots(capacity)), live: 0 })))
            .collect();
        let stacks = Stacks {
            slots: vec![0; 2 * capacity.stacks.next_power_of_two()].into_boxed_slice(),
            stacks: Vec::with_capacity(capacity.stacks),
            frames: Vec::with_capacity(capacity.frames),
            free: Vec::with_capacity(capacity.stacks),
            given_back: (0, Totals::default()),
        };
        Table {
            stacks: Padded(SpinLock::new(stacks)),
            shards,
            dropped_objects: AtomicU64::new(0),
            dropped_stacks: AtomicU64::new(0),
            capacity,
            sample_period: sample_period as f64,
            next_sequence: Padded(AtomicU64::new(1)),
            freed: Padded(AtomicU64::new(0)),
            peaks: Peaks::default(),
        }
    }

    /// The capacity it was made with.
    pub(crate) fn capacity(&self) -> Capacity {
        self.capacity
    }

    /// Takes every lock and keeps them until [`Table::unlock_after_fork`]: around `fork`, so that the child
    /// never inherits one held by a thread it does not have.
    pub(crate) fn lock_for_fork(&self) {
        // A snapshot's taker holds its lock while it takes the shards': the snapshots' locks come first.
        self.peaks.lock_for_fork();
        self.stacks.lock_for_fork();
        self.shards.iter().for_each(|shard| shard.lock_for_fork());
    }

    /// Releases the locks [`Table::lock_for_fork`] took (in the parent and in the child).
    pub(crate) fn unlock_after_fork(&self) {
        self.shards.iter().for_each(|shard| shard.unlock_after_fork());
        self.stacks.unlock_after_fork();
        self.peaks.unlock_after_fork();
    }

    /// The most live objects it holds (7/8 of its slots).
    pub(crate) fn max_objects(&self) -> usize {
        shard_slots(self.capacity) * 7 / 8 * SHARDS
    }

    /// The sequence number of the next sample: a window starting now holds the samples from it on.
    pub(crate) fn next_sequence(&self) -> u64 {
        self.next_sequence.0.load(Ordering::Acquire)
    }

    fn shard(&self, address: usize) -> &SpinLock<Objects> {
        // The top bits of the address's Fibonacci hash (the slot within the shard takes middle ones): the
        // address bits alone would not do, as jemalloc gives sampled objects pages of their own, spaced
        // by its size classes (16 KiB apart, say).
        &self.shards[((address as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 60) as usize % SHARDS]
    }

    /// Samples taken and sampled objects freed so far: unchanged, the heap changed by less than a few sample
    /// periods, most likely (a change of `n` periods goes unseen with probability `e^-n`).
    pub(crate) fn changes(&self) -> u64 {
        self.next_sequence.0.load(Ordering::Relaxed) + self.freed.0.load(Ordering::Relaxed)
    }

    /// Records a sampled object at `address` of `bytes`, allocated by `frames` at `time`, drawn at
    /// `thinning` (an interval that much longer). Never allocates.
    pub(crate) fn sampled(&self, address: usize, bytes: u64, frames: &[usize], time: u32, thinning: Thinning) {
        let sequence = self.next_sequence.0.fetch_add(1, Ordering::AcqRel);
        // The work that needs no lock is done before taking one: the hash, the unbiasing.
        let (hash, scale) = (hash_frames(frames), self.scale(bytes, thinning));
        let stack = self.stacks.with(|stacks| {
            let stack = stacks.find_or_add(frames, hash, sequence)?;
            let entry = &mut stacks.stacks[stack as usize];
            entry.allocated.add_scaled(bytes, scale);
            entry.last = sequence;
            Some(stack)
        });
        let Some(stack) = stack else {
            self.dropped_stacks.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let object = Object { address, stack, bytes, sequence, stamp: Stamp::new(time, thinning) };
        if !self.shard(address).with(|objects| objects.insert(object)) {
            self.dropped_objects.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.peaks.sampled(sequence, stack, bytes, scale);
    }

    /// Forgets the sampled object at `address`, freed. Never allocates.
    pub(crate) fn freed(&self, address: usize) {
        if let Some(object) = self.shard(address).with(|objects| objects.remove(address)) {
            self.freed.0.fetch_add(1, Ordering::Relaxed);
            self.peaks.freed(object.sequence, object.stack, object.bytes, || self.scale_of(&object));
        }
    }

    /// How many objects a sampled object of `bytes` drawn at `thinning` stands for: the unbiasing at the
    /// interval it was drawn at.
    fn scale(&self, bytes: u64, thinning: Thinning) -> f64 {
        unbias(bytes, self.sample_period * thinning.weight())
    }

    fn scale_of(&self, object: &Object) -> f64 {
        self.scale(object.bytes, object.stamp.thinning())
    }

    /// Starts tracking the high-water mark of the window whose first sequence number is `since` (see
    /// [`peaks`]); its place, or `None` when [`peaks::TRACKED`] windows are tracked already. Allocates.
    pub(crate) fn track_peak(&self, since: u64) -> Option<usize> {
        self.peaks.track(since, self.capacity.stacks)
    }

    /// Stops tracking the window at `place`: what each stack held when the window held the most (by stack
    /// index). Allocates.
    pub(crate) fn end_peak(&self, place: usize) -> peaks::AtPeak {
        self.peaks.end(place)
    }

    /// What the table could not hold, how many objects it holds, and how many stacks.
    pub(crate) fn fill(&self) -> (Dropped, usize, usize) {
        let dropped = Dropped {
            objects: self.dropped_objects.load(Ordering::Relaxed),
            stacks: self.dropped_stacks.load(Ordering::Relaxed),
        };
        let live = self.shards.iter().map(|shard| shard.with(|objects| objects.live)).sum();
        (dropped, live, self.stacks.with(|stacks| stacks.count()))
    }

    /// Every stack sampled since start-up: what it allocated, and what it holds of the objects sampled from
    /// sequence number `since` on; `now` and `older_than` (the table's time unit) measure their ages.
    /// Allocates before taking a lock, never under one.
    pub(crate) fn read(&self, since: u64, now: u32, older_than: u32) -> Vec<StackReading> {
        self.read_with(since, now, older_than, Tally::Sampled).0
    }

    /// [`Self::read`] of every live object, calibrated by size class against jemalloc's `classes` (with the
    /// bytes the threads' caches keep), where given: each object's weight taken by its class's factor (see
    /// [`Calibration`]), the factors made from the very objects the stacks are read from (one pass copies
    /// them), so that a class's stacks add up to its count however fast the heap is replaced meanwhile.
    /// With the variance of the readings' live total: the sampled estimate's, of the objects no factor
    /// applies to (a calibrated class's total is counted, not sampled); each stack's own `variance` is its
    /// objects' at their calibrated weights, an upper bound of its error where it shares a class. And the
    /// calibration made.
    pub(crate) fn read_calibrated(
        &self,
        now: u32,
        classes: Option<(&[SizeClass], u64)>,
    ) -> (Vec<StackReading>, f64, Option<Calibration>) {
        let Some((classes, cached_bytes)) = classes else {
            let (readings, variance) = self.read_with(0, now, u32::MAX, Tally::Sampled);
            return (readings, variance, None);
        };
        let sizes: Vec<u64> = classes.iter().map(|class| class.size).collect();
        let seen = self.live_objects(&sizes);
        let mut by_class = vec![Sampled::default(); sizes.len()];
        for object in seen.iter().filter(|object| object.class != NO_CLASS) {
            let class = &mut by_class[object.class as usize];
            class.objects += 1;
            class.unbiased_objects += object.scale;
        }
        let calibration = Calibration::of(classes, &by_class, cached_bytes);
        let (readings, variance) = self.read_with(0, now, u32::MAX, Tally::Calibrated(&seen, &calibration));
        (readings, variance, Some(calibration))
    }

    /// Every live object, with its class among `sizes` ([`class_of`]) and weight: copied a shard at a time
    /// into memory allocated before (objects sampled meanwhile past it are left out).
    fn live_objects(&self, sizes: &[u64]) -> Vec<Seen> {
        let (_, live, _) = self.fill();
        let mut seen = Vec::with_capacity(live + SLACK * SHARDS);
        for shard in &self.shards {
            shard.with(|objects| {
                for object in objects.slots.iter().filter(|object| object.address != 0) {
                    if seen.len() == seen.capacity() {
                        return;
                    }
                    let class = class_of(sizes, object.bytes).map_or(NO_CLASS, |class| class as u32);
                    seen.push(Seen { stack: object.stack, class, bytes: object.bytes, scale: self.scale_of(object) });
                }
            });
        }
        seen
    }

    fn read_with(&self, since: u64, now: u32, older_than: u32, tally: Tally<'_>) -> (Vec<StackReading>, f64) {
        // Sized for the stacks there are now, and a few more that may come before the copy: those past it
        // are left out of this reading.
        let (count, frame_count) = self.stacks.with(|all| (all.stacks.len(), all.frames.len()));
        let mut stacks = Vec::with_capacity(count + SLACK);
        let mut frames = Vec::with_capacity(frame_count + SLACK * PROF_BT_MAX);
        self.stacks.with(|all| {
            // Stacks reuse the indexes of stacks given back: their frames lie anywhere in `frames`.
            if all.stacks.len() <= stacks.capacity() && all.frames.len() <= frames.capacity() {
                stacks.extend_from_slice(&all.stacks);
                frames.extend_from_slice(&all.frames);
            }
        });
        let mut held = vec![Held::default(); stacks.len()];
        let variance = match tally {
            Tally::Sampled => self.tally(since, now, older_than, &mut held),
            Tally::Calibrated(seen, calibration) => calibrated(seen, calibration, &mut held),
        };
        let readings = stacks
            .iter()
            .zip(held)
            .map(|(stack, held)| StackReading {
                frames: frames[stack.start as usize..][..stack.len as usize].to_vec(),
                born: stack.born,
                allocated: stack.allocated,
                live: held.live,
                live_older_bytes: held.older_bytes,
            })
            .collect();
        (readings, variance)
    }

    /// What each stack holds now (by stack index) of the objects sampled from sequence number `since` on
    /// (0: all), without the frames: the light reading taken every few seconds for the record's history
    /// ([`super::growth`]).
    pub(crate) fn held(&self, since: u64, now: u32, older_than: u32) -> Vec<Held> {
        let mut held = vec![Held::default(); self.stacks.with(|stacks| stacks.stacks.len())];
        self.tally(since, now, older_than, &mut held);
        held
    }

    /// What each stack allocated since it was first sampled (by stack index), without the frames, and when
    /// that was (its first sample's sequence number; 0 for an index given back): the base of a window's
    /// allocations, and how a window tells a stack that took a given-back index from the one it knew.
    pub(crate) fn allocated(&self) -> Vec<(u64, Totals)> {
        let mut allocated = Vec::with_capacity(self.stacks.with(|stacks| stacks.stacks.len()) + SLACK);
        self.stacks.with(|stacks| {
            let copied = stacks.stacks.len().min(allocated.capacity());
            allocated.extend(stacks.stacks[..copied].iter().map(|stack| (stack.born, stack.allocated)));
        });
        allocated
    }

    /// The frames of the stacks at `indexes` (empty for an index past the stacks).
    pub(crate) fn frames(&self, indexes: &[u32]) -> Vec<Vec<usize>> {
        let mut copied = vec![Vec::with_capacity(PROF_BT_MAX); indexes.len()];
        self.stacks.with(|stacks| {
            for (index, frames) in indexes.iter().zip(&mut copied) {
                if let Some(stack) = stacks.stacks.get(*index as usize) {
                    let stored = &stacks.frames[stack.start as usize..][..stack.len as usize];
                    frames.extend_from_slice(&stored[..stored.len().min(PROF_BT_MAX)]);
                }
            }
        });
        copied
    }

    /// The bytes jemalloc gives the live sampled objects smaller than `smallest_large` beyond their size:
    /// each sampled small object is promoted to an extent of `smallest_large` bytes while it lives (a
    /// profiler's cost, not the program's fragmentation).
    pub(crate) fn promoted(&self, smallest_large: u64) -> u64 {
        let promoted = |objects: &mut Objects| -> u64 {
            let small = objects.slots.iter().filter(|object| object.address != 0 && object.bytes < smallest_large);
            small.map(|object| smallest_large - object.bytes).sum()
        };
        self.shards.iter().map(|shard| shard.with(promoted)).sum()
    }

    /// Adds each live object sampled from `since` on to its stack's entry of `held`, a shard at a time;
    /// answers the variance of the total.
    fn tally(&self, since: u64, now: u32, older_than: u32, held: &mut [Held]) -> f64 {
        let mut variance = 0.0;
        for shard in &self.shards {
            shard.with(|objects| {
                for object in objects.slots.iter().filter(|object| object.address != 0 && object.sequence >= since) {
                    let Some(held) = held.get_mut(object.stack as usize) else { continue };
                    let scale = self.scale_of(object);
                    variance += variance_of_one(object.bytes, scale);
                    held.live.add_scaled(object.bytes, scale);
                    if now.saturating_sub(object.stamp.time()) > older_than {
                        held.older_bytes += scale * object.bytes as f64;
                    }
                }
            });
        }
        variance
    }
}

/// How a reading weighs the live objects: each at its sampled weight, or calibrated ([`calibrated`]).
enum Tally<'a> {
    Sampled,
    Calibrated(&'a [Seen], &'a Calibration),
}

/// A live object as a calibrated reading copied it.
struct Seen {
    stack: u32,
    /// Its size class's index ([`NO_CLASS`]: past the largest).
    class: u32,
    bytes: u64,
    scale: f64,
}

/// The class of an object past the largest.
const NO_CLASS: u32 = u32::MAX;

/// Adds each of the `seen` objects to its stack's entry of `held` at its weight taken by `calibration`'s
/// factor where one applies (none counted as older: whole-heap readings ask no age); answers the
/// variance of the total (that of the objects no factor applies to).
fn calibrated(seen: &[Seen], calibration: &Calibration, held: &mut [Held]) -> f64 {
    let mut variance = 0.0;
    for object in seen {
        let Some(held) = held.get_mut(object.stack as usize) else { continue };
        let scale = match calibration.factor_of_class(object.class) {
            Some(factor) => object.scale * factor,
            None => {
                variance += variance_of_one(object.bytes, object.scale);
                object.scale
            }
        };
        held.live.add_scaled(object.bytes, scale);
    }
    variance
}

/// How many stacks a reading makes room for beyond those it counted before copying them.
const SLACK: usize = 64;

/// jemalloc's deepest backtrace by default (`opt.prof_bt_max`): what [`Table::frames`] reserves a stack.
const PROF_BT_MAX: usize = 128;

mod give_back;
mod padded;
pub(crate) mod peaks;
mod slots;
#[cfg(test)]
mod tests;
