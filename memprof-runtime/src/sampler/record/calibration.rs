//! What the whole heap holds now, calibrated by size class: jemalloc counts every live object of each size
//! class exactly (`curregs`, `curlextents`), and the record's samples say how a class's objects are shared
//! among the stacks that allocated them. Each live sampled object of a class then stands for the class's
//! exact count over the objects the class's samples stand for, not for one over its chance of being
//! sampled alone (post-stratification): a class's count is exact, its stacks' shares sampled (and its
//! bytes exact where its objects are of one size: every small class; a large object's size is in pages,
//! up to a quarter under its class's, and each sampled one counts at its own).
//!
//! Sampled alone, a heap replaced every few milliseconds at an interval the budget lengthened is a handful
//! of live samples, each standing for megabytes (the example service's 20 MiB read 0.4 to 1.6 of itself
//! from 2 to 12 samples); calibrated, a class one stack fills reads exact from one sample. Valid only where
//! the record saw the heap from its start (continuous sampling begun at start-up): objects allocated before
//! sampling began are in the counts and in no sample, and would be shared among the class's stacks.
//!
//! What the counts hold beyond the program's objects, and so shares among the stacks sampled in a class:
//! what the threads' caches keep of freed objects (jemalloc's `tcache_bytes`, said with every calibrated
//! answer) and jemalloc's internal allocations in the program's arenas (the threads' cache stacks, the
//! profiler's records). A class with live objects and no live sample is in no stack: its bytes are said.
//!
//! The factors and the stacks are made from one copy of the live samples, so a class's stacks add up to
//! its count; jemalloc's counts are read a moment before (a heap replaced every fraction of a millisecond
//! reads within a percent or so of what it holds as the samples are copied).
//!
//! Pure: readings in, factors out; [`crate::jemalloc::size_classes`] reads the counts.
//!
//! ```ignore
//! // 64 KiB objects, 256 live; 3 live samples standing for 100 objects: each stands for 256/100 more.
//! let classes = [SizeClass { size: 65536, live: 256, small: false }];
//! let calibration = Calibration::of(&classes, &[Sampled { objects: 3, unbiased_objects: 100.0 }], 0);
//! assert_eq!(calibration.factor_of_class(0), Some(2.56));
//! ```

use crate::jemalloc::SizeClass;

/// What the record's live samples hold of one size class.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Sampled {
    /// Live sampled objects.
    pub(crate) objects: u64,
    /// The objects they stand for, each unbiased at the interval it was drawn at.
    pub(crate) unbiased_objects: f64,
}

/// The factor each live sampled object's weight takes, by its size class; see the module's documentation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Calibration {
    /// Each class's factor: its exact count over the objects its samples stand for (0 where none).
    factors: Vec<f64>,
    /// Bytes of the classes with live objects and no live sample, at most (each large object counted at
    /// its class's size, which it may be up to a quarter under): in no stack.
    pub(crate) unreached_bytes: u64,
    /// Bytes the threads' caches keep, freed, counted in their classes.
    pub(crate) cached_bytes: u64,
}

impl Calibration {
    /// The calibration of what `classes` hold (jemalloc's counts, ascending by size) by what the record's
    /// live samples hold of each (`sampled`, alike in order), the threads' caches keeping `cached_bytes`.
    ///
    /// jemalloc gives a sampled small object an extent of the smallest large class while it lives: its
    /// class's count lacks it and the smallest large class's holds it; both are put right here from the
    /// record's own count of them. A class whose count is below its live samples (a sample freed as the
    /// counts were read) counts as holding them.
    pub(crate) fn of(classes: &[SizeClass], sampled: &[Sampled], cached_bytes: u64) -> Self {
        let promoted: u64 =
            classes.iter().zip(sampled).filter(|(class, _)| class.small).map(|(_, small)| small.objects).sum();
        let smallest_large = classes.iter().position(|class| !class.small);
        let (mut factors, mut unreached_bytes) = (Vec::with_capacity(classes.len()), 0u64);
        for (index, (class, sampled)) in
            classes.iter().zip(sampled.iter().chain(std::iter::repeat(&Sampled::default()))).enumerate()
        {
            let live = if class.small {
                class.live + sampled.objects
            } else if Some(index) == smallest_large {
                class.live.saturating_sub(promoted)
            } else {
                class.live
            };
            let live = live.max(sampled.objects);
            if sampled.objects == 0 || sampled.unbiased_objects <= 0.0 {
                unreached_bytes = unreached_bytes.saturating_add(live.saturating_mul(class.size));
                factors.push(0.0);
            } else {
                factors.push(live as f64 / sampled.unbiased_objects);
            }
        }
        Calibration { factors, unreached_bytes, cached_bytes }
    }

    /// The factor of a live sampled object of the class at `class` (among the classes it was made of;
    /// [`class_of`] an object's): `None` past the last class, and for a class no sample had reached when the
    /// calibration was made (an object sampled since keeps its sampled weight).
    pub(crate) fn factor_of_class(&self, class: u32) -> Option<f64> {
        self.factors.get(class as usize).copied().filter(|factor| *factor > 0.0)
    }

    /// What it left out, as readers are told it ([`memprof_analysis::Calibrated::said`]) and the file
    /// beside a kept profile keeps it.
    pub(crate) fn left_out(&self) -> memprof_analysis::Calibrated {
        memprof_analysis::Calibrated { unreached_bytes: self.unreached_bytes, cached_bytes: self.cached_bytes }
    }

    /// How an OTLP export's in-use profiles were calibrated, as its profiles' attributes (beside
    /// `memprof.sampling.*`'s intervals): the bytes in no stack, and the cached bytes counted.
    pub(crate) fn attributes(&self) -> [(String, String); 3] {
        [
            ("memprof.sampling.inuse.calibrated".to_owned(), "size_class".to_owned()),
            ("memprof.sampling.inuse.unreached_bytes".to_owned(), self.unreached_bytes.to_string()),
            ("memprof.sampling.inuse.cached_bytes".to_owned(), self.cached_bytes.to_string()),
        ]
    }
}

/// The index of the class of an object of `bytes` among `sizes` (ascending): the least class it fits in,
/// as jemalloc counts it. A small object's usable size is its class's; a large one's is its size rounded up
/// to pages (this jemalloc's `disable_large_size_classes`), counted in the class above it. `None` past the
/// largest class.
pub(crate) fn class_of(sizes: &[u64], bytes: u64) -> Option<usize> {
    Some(sizes.partition_point(|&size| size < bytes)).filter(|&class| class < sizes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(size: u64, live: u64, small: bool) -> SizeClass {
        SizeClass { size, live, small }
    }

    fn sampled(objects: u64, unbiased_objects: f64) -> Sampled {
        Sampled { objects, unbiased_objects }
    }

    /// The factor of a live sampled object of `bytes` (its usable size) among `classes`.
    fn factor(calibration: &Calibration, classes: &[SizeClass], bytes: u64) -> Option<f64> {
        let sizes: Vec<u64> = classes.iter().map(|class| class.size).collect();
        calibration.factor_of_class(class_of(&sizes, bytes)? as u32)
    }

    /// Read from the example service 4 s after its start (release, the default budget, thinned by 8): its
    /// 256 sessions of 64 KiB and 128 index blocks of 32 KiB live, the 32 KiB class's count holding what
    /// the main thread's cache keeps of freed blocks, 4 and 8 KiB responses freed at once (only cached).
    #[test]
    fn a_class_one_stack_fills_reads_exact_from_a_few_samples() {
        let classes = [
            class(4096, 20, true),
            class(8192, 20, true),
            class(16384, 0, false),
            class(32768, 131, false),
            class(65536, 256, false),
        ];
        // 5 sessions sampled standing for 9 each, 1 index block standing for 17: 45 and 17 objects.
        let samples = [sampled(0, 0.0), sampled(0, 0.0), sampled(0, 0.0), sampled(1, 17.0), sampled(5, 45.0)];
        let calibration = Calibration::of(&classes, &samples, 3 * 32768 + 20 * 4096 + 20 * 8192);
        let sessions = 5.0 * 9.0 * factor(&calibration, &classes, 65536).unwrap() * 65536.0;
        let index = 17.0 * factor(&calibration, &classes, 32768).unwrap() * 32768.0;
        assert!((sessions - 256.0 * 65536.0).abs() < 1.0, "{sessions}");
        assert!((index - 131.0 * 32768.0).abs() < 1.0, "{index}");
        assert_eq!(calibration.unreached_bytes, 20 * 4096 + 20 * 8192, "the responses the cache keeps are in no stack");
        assert_eq!(
            factor(&calibration, &classes, 16384),
            None,
            "no sample reached it: one sampled since keeps its weight"
        );
        assert_eq!(factor(&calibration, &classes, 65536 + 4096), None, "past the largest class");
        // A large object's usable size is its size in pages, counted in the class above it.
        assert_eq!(factor(&calibration, &classes, 61440), factor(&calibration, &classes, 65536));
        assert_eq!(class_of(&[8, 16, 16384, 20480], 16), Some(1));
        assert_eq!(class_of(&[8, 16, 16384, 20480], 17 << 10), Some(3));
    }

    #[test]
    fn sampled_small_objects_are_counted_in_their_class_not_the_smallest_large_one() {
        // Two live samples of 64 B objects, promoted to 16 KiB extents: jemalloc counts 998 regions of 64 B
        // and 12 extents of 16 KiB, of which 2 are theirs.
        let classes = [class(64, 998, true), class(16384, 12, false)];
        let calibration = Calibration::of(&classes, &[sampled(2, 1000.0), sampled(1, 5.0)], 0);
        assert_eq!(factor(&calibration, &classes, 64), Some(1.0), "1000 live, as the samples say");
        assert_eq!(factor(&calibration, &classes, 16384), Some(2.0), "10 live of the program's own");
    }

    #[test]
    fn a_count_below_the_samples_counts_them() {
        let classes = [class(1 << 20, 0, false)];
        let calibration = Calibration::of(&classes, &[sampled(2, 2.5)], 0);
        assert_eq!(factor(&calibration, &classes, 1 << 20), Some(2.0 / 2.5));
    }

    /// Post-stratification's promise, checked by simulation: two stacks share a class unevenly, and a third
    /// fills one of its own; sampled at 2^19 bytes again and again, each stack's calibrated estimate is
    /// unbiased, and no further from the truth than the sampled estimate alone, the lone stack's exact.
    #[test]
    fn calibrated_estimates_are_unbiased_and_no_wider_than_sampled_ones() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut uniform = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let period = f64::from(1 << 19);
        // (stack, size, live objects)
        let heap = [(0usize, 65536u64, 200u64), (1, 65536, 56), (2, 32768, 128)];
        let classes = [class(32768, 128, false), class(65536, 256, false)];
        let truth: Vec<f64> = heap.iter().map(|&(_, size, live)| (size * live) as f64).collect();
        let (runs, mut calibrated_error, mut sampled_error) = (4000, [0.0f64; 3], [0.0f64; 3]);
        let (mut calibrated_sum, mut lone_off) = ([0.0f64; 3], 0);
        for _ in 0..runs {
            let mut by_class = [Sampled::default(); 2];
            let mut samples: Vec<(usize, u64, f64)> = Vec::new();
            for &(stack, size, live) in &heap {
                let chance = 1.0 - (-(size as f64) / period).exp();
                for _ in 0..live {
                    if uniform() < chance {
                        let class = usize::from(size == 65536);
                        by_class[class].objects += 1;
                        by_class[class].unbiased_objects += 1.0 / chance;
                        samples.push((stack, size, 1.0 / chance));
                    }
                }
            }
            let calibration = Calibration::of(&classes, &by_class, 0);
            for stack in 0..3 {
                let mine = samples.iter().filter(|sample| sample.0 == stack);
                let sampled: f64 = mine.clone().map(|&(_, size, weight)| weight * size as f64).sum();
                let calibrated: f64 = mine
                    .map(|&(_, size, weight)| weight * factor(&calibration, &classes, size).unwrap() * size as f64)
                    .sum();
                calibrated_sum[stack] += calibrated;
                // The lone stack of its class reads exact whenever a sample reached the class.
                lone_off += usize::from(stack == 2 && by_class[0].objects > 0 && (calibrated - truth[2]).abs() > 1.0);
                calibrated_error[stack] += (calibrated - truth[stack]).powi(2);
                sampled_error[stack] += (sampled - truth[stack]).powi(2);
            }
        }
        for stack in 0..3 {
            let mean = calibrated_sum[stack] / f64::from(runs);
            let (calibrated, sampled) = (calibrated_error[stack].sqrt(), sampled_error[stack].sqrt());
            assert!((mean / truth[stack] - 1.0).abs() < 0.02, "stack {stack}: mean {mean} of {}", truth[stack]);
            assert!(calibrated <= sampled, "stack {stack}: {calibrated} against {sampled}");
        }
        assert_eq!(lone_off, 0, "runs where the lone stack of its class read other than exact");
    }
}
