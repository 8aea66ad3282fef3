//! The functions that allocated the most in a measured block, from its samples.
//!
//! A measured block is labelled while it runs (`memprof.measure=<n>`, a number no measure running beside
//! it has, reused once it ends), so that its samples in memprof's record are its own; what the label's
//! stacks had allocated when it began is taken off. In a program that started memprof, the record is its
//! continuous sampling's (no measure changes how the program samples); in one that did not (a test
//! binary), the first measure starts sampling at `MEMPROF_MEASURE_SAMPLE` (64 KiB by default), with the
//! record, for the rest of the process.

use std::collections::HashMap;
use std::sync::OnceLock;

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use memprof_analysis::{Analysis, Binaries, LabelSets};
use memprof_wire::usage::AllocatingStack;

use crate::jemalloc;
use crate::labels::Entered;
use crate::sampler::record::{self, table::Table, table::Totals};

/// How many functions a measure names.
const NAMED: usize = 5;

/// A measured block's label, where its samples are recorded, and what its stacks had allocated under that
/// label before it began (the label's number is reused once a measure ends).
pub(super) struct Sampled {
    record: &'static Table,
    number: u64,
    label: u32,
    before: HashMap<Vec<usize>, Totals>,
}

/// What measures share, process-wide: their label numbers, and the record their samples go to.
struct Measures {
    /// The label numbers of measures that ended, to reuse: a process records at most
    /// [`crate::labels::MAX_LABEL_SETS`] label sets, so a number a measure is not what a test suite of
    /// thousands of measures (or a service measuring each request) could afford.
    free_numbers: Mutex<Vec<u64>>,
    /// The next number never used.
    next: AtomicU64,
    /// The record of sampling started for measures (where memprof was not started), once.
    for_measures: OnceLock<Option<&'static Table>>,
}

static MEASURES: Measures =
    Measures { free_numbers: Mutex::new(Vec::new()), next: AtomicU64::new(1), for_measures: OnceLock::new() };

impl Sampled {
    /// A label of its own for a block about to be measured, if its samples can be recorded: one no measure
    /// running now has (its number reused from an ended one), with what its stacks allocated so far.
    pub(super) fn begin() -> Option<Sampled> {
        let record = sampling()?;
        let number =
            MEASURES.free_numbers.lock().pop().unwrap_or_else(|| MEASURES.next.fetch_add(1, Ordering::Relaxed));
        let sampled = jemalloc::unsampled(|| {
            jemalloc::in_own_arena(|| {
                let label = crate::labels::interned(&[("memprof.measure", &number.to_string())]);
                let mut sampled = Sampled { record, number, label, before: HashMap::new() };
                sampled.before = sampled.allocated();
                sampled
            })
        });
        // Past the bound on label sets, every new set is the one overflow set: not the block's own.
        (sampled.label != crate::labels::OVERFLOW).then_some(sampled)
    }

    /// The block's label in force on this thread until the guard drops.
    pub(super) fn enter(&self) -> Entered {
        crate::labels::enter_interned(self.label)
    }

    /// The functions that allocated the most under the block's label, the most first (unsampled, in
    /// memprof's arena: none of this work is the program's).
    pub(super) fn stacks(self) -> Vec<AllocatingStack> {
        jemalloc::unsampled(|| jemalloc::in_own_arena(|| self.read()))
    }

    /// What each stack under the block's label allocated since start-up, by its frames.
    fn allocated(&self) -> HashMap<Vec<usize>, Totals> {
        let label = memprof_analysis::label_address(self.label) as usize;
        let readings = self.record.read(0, record::clock_seconds(), u32::MAX);
        readings
            .into_iter()
            .filter(|reading| reading.frames.last() == Some(&label))
            .map(|reading| (reading.frames, reading.allocated))
            .collect()
    }

    fn read(&self) -> Vec<AllocatingStack> {
        let mine = self
            .allocated()
            .into_iter()
            .filter_map(|(frames, totals)| {
                let before = self.before.get(&frames).copied().unwrap_or_default();
                let bytes = totals.unbiased_bytes - before.unbiased_bytes;
                let objects = totals.unbiased_objects - before.unbiased_objects;
                (bytes >= 1.0).then(|| (frames, Totals::unsampled(objects, bytes)))
            })
            .collect::<Vec<_>>();
        if mine.is_empty() {
            return Vec::new();
        }
        let Ok(text) = record::unsampled_dump(mine.into_iter()) else { return Vec::new() };
        let Ok(analysis) = Analysis::of_dump(&text, &Binaries::this_process(), &LabelSets::default()) else {
            return Vec::new();
        };
        named(&analysis)
    }
}

impl Drop for Sampled {
    /// The label's number is free again once the measure ends (or its future is dropped unfinished).
    fn drop(&mut self) {
        MEASURES.free_numbers.lock().push(self.number);
    }
}

/// The allocating functions of `analysis`'s samples ([`Analysis::allocating_frame`]), their bytes summed,
/// the most first, each with the frames of its largest sample.
fn named(analysis: &Analysis) -> Vec<AllocatingStack> {
    let mut by_function: HashMap<String, (AllocatingStack, f64)> = HashMap::new();
    for sample in analysis.samples.iter().filter(|sample| sample.bytes > 0.0) {
        let function =
            analysis.allocating_frame(sample).map_or_else(|| "?".to_owned(), |frame| frame.function.to_string());
        // memprof's own frames (the measure, the budget's check) are not the program's.
        let frames = || {
            let shown = analysis.shown_frames(sample, false);
            shown.iter().map(|frame| frame.function.to_string()).filter(|name| !is_memprofs(name)).collect()
        };
        let (stack, largest) = by_function
            .entry(function.clone())
            .or_insert_with(|| (AllocatingStack { function, bytes: 0.0, frames: frames() }, sample.bytes));
        stack.bytes += sample.bytes;
        if sample.bytes > *largest {
            *largest = sample.bytes;
            stack.frames = frames();
        }
    }
    let mut stacks: Vec<AllocatingStack> = by_function.into_values().map(|(stack, _)| stack).collect();
    stacks.sort_by(|a, b| b.bytes.total_cmp(&a.bytes));
    stacks.truncate(NAMED);
    stacks
}

/// Whether a function is memprof's own: its runtime's, or a method of its types (`<memprof_runtime::...>`).
fn is_memprofs(function: &str) -> bool {
    function.trim_start_matches('<').starts_with("memprof_runtime::")
}

/// The record measures' samples go to, if they can be sampled: the program's continuous sampling where it
/// started memprof; else sampling started for measures, once, where `MEMPROF_MEASURE_SAMPLE` allows.
fn sampling() -> Option<&'static Table> {
    if crate::startup::was_started() {
        return record::started().filter(|_| jemalloc::profiling_active().unwrap_or(false));
    }
    *MEASURES.for_measures.get_or_init(|| jemalloc::unsampled(start_for_measures))
}

/// Starts sampling for measures, where `MEMPROF_MEASURE_SAMPLE` allows (see
/// [`crate::sampler::Sampler::sample_for_measures`]).
fn start_for_measures() -> Option<&'static Table> {
    let profiler = crate::profiler::Profiler::global();
    profiler.sampler().sample_for_measures(profiler.settings().measure_lg_sample?)
}
