//! The record of sampled objects, kept in continuous mode: what makes a run a window over samples that
//! never stop, and gives Go's scrapers `alloc_*` without `prof_accum`.
//!
//! jemalloc's dump holds every live sampled object, whenever it was sampled; its only way to start afresh,
//! `prof.reset`, drops every earlier sample, live ones too. So memprof keeps its own record beside
//! jemalloc's, fed by jemalloc's experimental sample hooks (`experimental.hooks.prof_sample` and
//! `prof_sample_free`, jemalloc 5.3): each sampled object still live, with its stack, size, time and a
//! sequence number, and each stack with everything it allocated since start-up. A window (a run in
//! continuous mode) is the sequence number at its start; its profile is the live objects sampled from it
//! on, written as jemalloc writes a dump ([`heap_v2`]), so every format reads it.
//!
//! Chosen over windows as differences of dumps: the difference of two dumps is net growth, not "allocated
//! during the window and still live at its end" (an object allocated before the window and freed during it
//! cancels one allocated during it), and `alloc_*` from dumps need `prof_accum`, which keeps every
//! backtrace ever seen for the process's life. The record is bounded instead ([`DEFAULT_CAPACITY`]): what
//! does not fit is counted and said (`state`), and no allocation ever waits on it beyond a hash lookup.
//!
//! The hooks run inside the allocator, with jemalloc's re-entrancy guard up: they neither allocate nor take
//! any lock but the table's spin lock, which `fork` never leaves held in the child.
#![allow(unsafe_code)]

pub(crate) mod calibration;
pub(crate) mod growth;
pub(crate) mod heap_v2;
mod spin;
pub(crate) mod table;
mod window;

pub(crate) use window::Window;

use std::ffi::{c_uint, c_void};
use std::io;
use std::path::Path;
use std::sync::OnceLock;

use parking_lot::Mutex;

use calibration::Calibration;
use growth::{Growth, History, Reading};
use table::{Capacity, Held, Table, Totals};

use crate::jemalloc;
use crate::profile_root::storage::write_owner_only;

/// The record's history of readings, and where the last reading was in the record's sequence.
struct Watched {
    /// What the stacks held over the last hour ([`growth`]).
    history: Mutex<History>,
    /// The record's next sequence number at the history's latest reading: stacks with no sample since are idle.
    sequence_at_last_reading: std::sync::atomic::AtomicU64,
}

static WATCHED: Watched = Watched {
    history: Mutex::new(History { readings: std::collections::VecDeque::new() }),
    sequence_at_last_reading: std::sync::atomic::AtomicU64::new(0),
};

/// The record's size unless `MEMPROF_RECORD_OBJECTS` says otherwise: 64 Ki live sampled objects (at
/// 512 KiB a sample, some 32 GiB of heap), 16 Ki stacks and 1 Mi frames: 10.9 MiB reserved, its pages
/// touched as it fills.
pub(crate) const DEFAULT_CAPACITY: Capacity = Capacity::for_objects(1 << 16);

/// The live sampled objects `MEMPROF_RECORD_OBJECTS` may ask for (at most 512 MiB of slots).
pub(crate) const RECORD_OBJECTS_RANGE: std::ops::RangeInclusive<u64> = 1024..=1 << 24;

/// The most the program's heap may hold as the record starts, or one sampling interval if more, for what
/// the heap holds to be calibrated by size class: what it held then is in the counts and in no sample.
const SAW_THE_HEAP_START: u64 = 1 << 20;

/// The record, once continuous mode began, and its clock.
struct Record {
    /// The table of sampled objects.
    table: OnceLock<Table>,
    /// The coarse monotonic clock's second the record's clock counts from ([`clock_seconds`]).
    clock_start: OnceLock<u64>,
    /// Whether the program's heap was under [`SAW_THE_HEAP_START`] as the record started: nearly every
    /// object live since could be sampled, so what the heap holds is calibrated by size class ([`calibration`]).
    saw_the_heap_start: OnceLock<bool>,
    /// What the latest dump of the whole heap held, and when, for the note said with it ([`estimate_note`]).
    heap_written: parking_lot::Mutex<Option<(std::time::Instant, HeapNow)>>,
}

static RECORD: Record = Record {
    table: OnceLock::new(),
    clock_start: OnceLock::new(),
    saw_the_heap_start: OnceLock::new(),
    heap_written: parking_lot::Mutex::new(None),
};

/// What one reading of the whole heap held in all: its stacks' live totals, their variance, and its
/// calibration where it was calibrated.
#[derive(Debug, Clone)]
pub(crate) struct HeapNow {
    held: Totals,
    variance: f64,
    calibration: Option<Calibration>,
}

impl HeapNow {
    fn of(readings: &[table::StackReading], variance: f64, calibration: Option<Calibration>) -> HeapNow {
        let mut held = Totals::default();
        readings.iter().for_each(|stack| held.absorb(&stack.live));
        HeapNow { held, variance, calibration }
    }
}

/// What the latest dump of the whole heap ([`write_profile`] from the start) held, where it was written
/// since `since`, taken: the note said with that dump is of the same reading ([`estimate_note`]), not of one
/// a moment later.
pub(crate) fn heap_written_since(since: std::time::Instant) -> Option<HeapNow> {
    RECORD.heap_written.lock().take().filter(|(at, _)| *at >= since).map(|(_, heap)| heap)
}

/// Starts keeping the record: makes it (in memprof's arena, unsampled) and installs jemalloc's sample
/// hooks. Call before sampling is switched on: objects sampled earlier are not in it. Once; later calls
/// answer the first's record.
pub(crate) fn start(capacity: Capacity) -> Result<&'static Table, jemalloc::CtlError> {
    start_at(capacity, jemalloc::lg_sample()?)
}

/// Starts keeping the record, as [`start`] does, of samples taken every 2^`lg_sample` bytes on average (the
/// interval sampling runs at: a measure's, where memprof was not started).
pub(crate) fn start_at(capacity: Capacity, lg_sample: usize) -> Result<&'static Table, jemalloc::CtlError> {
    if let Some(record) = RECORD.table.get() {
        return Ok(record);
    }
    let sample_period = 1u64 << lg_sample;
    let heap_before = jemalloc::heap_stats().map_or(u64::MAX, |heap| heap.allocated as u64);
    let _ = RECORD.saw_the_heap_start.set(heap_before <= sample_period.max(SAW_THE_HEAP_START));
    let record = RECORD
        .table
        .get_or_init(|| jemalloc::unsampled(|| jemalloc::in_own_arena(|| Table::new(capacity, sample_period))));
    // SAFETY: the three handlers are `extern "C"` functions that only take and release the table's lock.
    unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(after_fork)) };
    clock_seconds();
    jemalloc::set_sample_hooks(sampled as *const () as usize, freed as *const () as usize)?;
    Ok(record)
}

/// What the record could not hold since it started, said with the fix: every answer built from it carries
/// this (profiles' notes, pprof's comments, `explain`'s verdict, `state`'s warnings). `None` when it held
/// every sample.
pub(crate) fn losses(record: &Table) -> Option<String> {
    let (dropped, live, stacks) = record.fill();
    if dropped.objects == 0 && dropped.stacks == 0 {
        return None;
    }
    let capacity = record.capacity();
    Some(format!(
        "memprof's record of samples was full: it had no room for {} sampled objects and {} samples' stacks \
         since it started (it holds {live} of {} objects and {stacks} of {} stacks), so windows, their views, \
         the growth it names and Go's scrapes miss them; set MEMPROF_RECORD_OBJECTS above {} for a larger record",
        dropped.objects,
        dropped.stacks,
        record.max_objects(),
        capacity.stacks,
        capacity.objects
    ))
}

/// What every stack holds now and allocated since start-up (as [`Table::read`] from sequence number 0),
/// calibrated by size class where the record started with the program ([`calibration`]: objects in no
/// sample would otherwise be shared among the sampled) and jemalloc's counts can be read; with the variance
/// of the live total and the calibration. Reads some 240 of jemalloc's counters and copies every live
/// sample.
fn whole_heap(record: &Table) -> (Vec<table::StackReading>, f64, Option<Calibration>) {
    let counts = (RECORD.saw_the_heap_start.get() == Some(&true)).then(jemalloc::size_classes).and_then(Result::ok);
    record.read_calibrated(clock_seconds(), counts.as_ref().map(|(classes, cached)| (classes.as_slice(), *cached)))
}

/// How far the record's estimates of what is held now and of what was allocated since it started may be
/// from the truth: each total with its sampling error, two standard errors of its samples' variance
/// ([`Totals::error_bytes`]), for the pprof served to scrapers (`go tool pprof -comments`). What is held,
/// calibrated, is jemalloc's count of the classes sampled: what no live sample reached, and what the
/// threads' caches keep among it, are said. Of `heap` where given (what the dump served with the note held:
/// [`heap_written_since`]), else of a reading made for it.
pub(crate) fn estimate_note(record: &Table, heap: Option<HeapNow>) -> String {
    let HeapNow { held, variance, calibration } = heap.unwrap_or_else(|| {
        let (readings, variance, calibration) = whole_heap(record);
        HeapNow::of(&readings, variance, calibration)
    });
    let mut allocated = Totals::default();
    record.allocated().iter().for_each(|(_, totals)| allocated.absorb(totals));
    let mib = |bytes: f64| bytes / f64::from(1 << 20);
    let calibrated = calibration.map_or_else(String::new, |calibration| calibration.left_out().said());
    format!(
        "sampled estimates, each within its error of the truth about 95 times in 100 (two standard errors): \
         in use {:.1} MiB +- {:.1} MiB from {} samples{calibrated}, allocated since sampling began {:.1} MiB +- \
         {:.1} MiB from {} samples",
        mib(held.unbiased_bytes),
        mib(crate::memory::by_function::sampling_error(variance)),
        held.objects,
        mib(allocated.unbiased_bytes),
        mib(allocated.error_bytes()),
        allocated.objects
    )
}

/// What every profile from the record says first: what it could not hold ([`losses`]), and how much
/// sampling was thinned ([`crate::sampler::throttle`]).
pub(crate) fn cautions(record: &Table) -> impl Iterator<Item = String> {
    losses(record).into_iter().chain(crate::sampler::throttle::thinned_note())
}

/// The pages jemalloc gives the live sampled small objects beyond their size (see [`Table::promoted`]), as
/// far as the record knows them; 0 without a record (sampling never ran, so nothing was promoted).
pub(crate) fn promoted_bytes() -> u64 {
    started().map_or(0, |record| record.promoted(jemalloc::smallest_large_class()))
}

/// The record, if started (by continuous sampling, or by a first run on demand for its views).
pub(crate) fn started() -> Option<&'static Table> {
    RECORD.table.get()
}

/// Seconds since the record began, from the kernel's coarse monotonic clock (no system call, no lock).
pub(crate) fn clock_seconds() -> u32 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid `timespec` to write; CLOCK_MONOTONIC_COARSE exists on every Linux since 2.6.32.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut now) };
    let seconds = now.tv_sec as u64;
    let start = *RECORD.clock_start.get_or_init(|| seconds);
    u32::try_from(seconds.saturating_sub(start)).unwrap_or(u32::MAX)
}

/// jemalloc's `prof_sample_hook_t`.
unsafe extern "C" fn sampled(
    address: *const c_void,
    _size: usize,
    backtrace: *mut *mut c_void,
    length: c_uint,
    usable: usize,
) {
    let Some(record) = RECORD.table.get() else { return };
    let frames = if backtrace.is_null() {
        &[][..]
    } else {
        // SAFETY: jemalloc passes its backtrace's `length` frames, alive for the call; a pointer and a
        // `usize` have the same layout.
        unsafe { std::slice::from_raw_parts(backtrace.cast::<usize>(), length as usize) }
    };
    let thinning = crate::sampler::throttle::thinning_of_this_sample(address as usize);
    record.sampled(address as usize, usable as u64, frames, clock_seconds(), thinning);
    crate::sampler::throttle::work_ended();
    crate::sampler::throttle::next_drawn();
}

/// jemalloc's `prof_sample_free_hook_t`.
unsafe extern "C" fn freed(address: *const c_void, _usable: usize) {
    if let Some(record) = RECORD.table.get() {
        record.freed(address as usize);
    }
}

extern "C" fn before_fork() {
    if let Some(record) = RECORD.table.get() {
        record.lock_for_fork();
    }
}

extern "C" fn after_fork() {
    if let Some(record) = RECORD.table.get() {
        record.unlock_after_fork();
    }
}

/// Writes the record as a `heap_v2` dump at `path` (owner-only): the live objects sampled from sequence
/// number `since` on, with `content`. Call unsampled (the caller's allocations must not reach the record).
pub(crate) fn write_profile(record: &Table, path: &Path, since: u64, content: heap_v2::Content) -> io::Result<()> {
    let sample_period = 1 << jemalloc::lg_sample().map_err(io::Error::other)?;
    // The whole heap is calibrated by size class where the record allows, and written as the estimates it
    // then is (period 1: a reader unbiasing a calibrated share as a sample would read a stack smaller than
    // an interval as one interval); a window's objects are a part of each class the counts cannot tell apart.
    let (readings, variance, sample_period, left_out) = match since {
        0 => {
            let (readings, variance, calibration) = whole_heap(record);
            let left_out = calibration.as_ref().map(Calibration::left_out);
            let heap = HeapNow::of(&readings, variance, calibration);
            *RECORD.heap_written.lock() = Some((std::time::Instant::now(), heap));
            match left_out {
                Some(_) => (readings.into_iter().map(counted).collect(), variance, 1, left_out),
                None => (readings, variance, sample_period, None),
            }
        }
        _ => {
            let readings = record.read(since, clock_seconds(), u32::MAX);
            let variance = readings.iter().map(|reading| reading.live.variance).sum();
            (readings, variance, sample_period, None)
        }
    };
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let text = heap_v2::write(&readings, content, sample_period, &maps);
    write_owner_only(path, text.as_bytes())?;
    // What it holds is an estimate from samples each weighed by the interval it was drawn at: its variance
    // beside it, for the error downloads say (the file's one period cannot tell thinned samples apart), and
    // what the calibration left out.
    crate::profile_root::storage::write_variance(path, variance, left_out);
    Ok(())
}

/// `stacks` (frames, and the unbiased counts they hold) as a `heap_v2` dump with this process's mappings,
/// unsampled (period 1): the counts are read back as they are.
pub(crate) fn unsampled_dump(stacks: impl Iterator<Item = (Vec<usize>, table::Totals)>) -> io::Result<String> {
    let stacks: Vec<table::StackReading> = stacks
        .map(|(frames, live)| table::StackReading {
            frames,
            born: 0,
            allocated: table::Totals::default(),
            live,
            live_older_bytes: 0.0,
        })
        .collect();
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    Ok(heap_v2::write(&stacks, heap_v2::Content::Live, 1, &maps))
}

/// Takes a reading of what each stack holds into the history, when [`growth::PERIOD_SECONDS`] passed since
/// the last, and gives back the stacks idle since the last reading when the record is nearly full
/// ([`Table::give_back_idle`]), forgetting their history: called by the counters' thread every second.
pub(crate) fn read_when_due(record: &Table) {
    use std::sync::atomic::Ordering;
    let now = clock_seconds();
    if WATCHED.history.lock().newest().is_some_and(|newest| now < newest + growth::PERIOD_SECONDS) {
        return;
    }
    let sequence = record.next_sequence();
    let held = record.held(0, now, u32::MAX);
    let given_back = record.give_back_idle(WATCHED.sequence_at_last_reading.swap(sequence, Ordering::Relaxed), &held);
    let reading =
        Reading::of(now, held.iter().enumerate().map(|(stack, held)| (stack as u32, held.live.unbiased_bytes)));
    let mut history = WATCHED.history.lock();
    history.forget(&given_back);
    history.push(reading);
}

/// Forgets the history (on demand, sampling switched off: what the stacks held across a time nothing was
/// sampled is no growth, and the next run's is watched from its start).
pub(crate) fn forget_history() {
    WATCHED.history.lock().readings.clear();
}

/// What the stacks at `indexes` held at each reading of the history: (Unix milliseconds, bytes of each).
pub(crate) fn history_of(indexes: &[u32]) -> Vec<(u64, Vec<f32>)> {
    let (now, unix_now) = (clock_seconds(), crate::profile_root::untrusted::unix_seconds(std::time::SystemTime::now()));
    let unix_ms = |time: u32| ((unix_now - f64::from(now.saturating_sub(time))) * 1000.0).max(0.0) as u64;
    WATCHED.history.lock().of(indexes).into_iter().map(|(time, bytes)| (unix_ms(time), bytes)).collect()
}

/// A stack that grew steadily over the history: its frames, its growth, and what it holds now (with the
/// bytes older than `older_than` seconds).
pub(crate) struct Grower {
    pub(crate) frames: Vec<usize>,
    pub(crate) growth: Growth,
    pub(crate) held: Held,
}

/// The stacks that grew steadily over the last hour, the most grown first, with how old what they hold is:
/// older than `older_than(seconds watched)` seconds, and that age.
pub(crate) fn growers(record: &Table, older_than: impl FnOnce(u32) -> u32) -> (Vec<Grower>, u32) {
    let growing = WATCHED.history.lock().growing();
    let Some(watched) = growing.first().map(|growth| growth.seconds) else { return (Vec::new(), 0) };
    let older_than = older_than(watched);
    let held = record.held(0, clock_seconds(), older_than);
    let indexes: Vec<u32> = growing.iter().map(|growth| growth.stack).collect();
    let frames = record.frames(&indexes);
    let growers = growing
        .into_iter()
        .zip(frames)
        .map(|(growth, frames)| Grower {
            held: held.get(growth.stack as usize).copied().unwrap_or_default(),
            frames,
            growth,
        })
        .collect();
    (growers, older_than)
}

/// `growers` as a `heap_v2` dump with this process's mappings, each stack holding `bytes` of its grower
/// (its growth, say), unsampled (period 1): what names them, and what an automatic dump leaves beside it.
pub(crate) fn growers_as_dump(growers: &[Grower], bytes: &dyn Fn(&Grower) -> f64) -> io::Result<String> {
    unsampled_dump(growers.iter().map(|grower| (grower.frames.clone(), table::Totals::unsampled(1.0, bytes(grower)))))
}

/// What every stack holds and has allocated as a window starts: the bases of its net growth and of its
/// allocations, with each stack's first sample (a stack that took a given-back index since has none).
#[derive(Debug, Clone, Default)]
struct Base {
    /// The record's sequence number as the window started: the samples taken since are counted from it.
    since: u64,
    born: Vec<u64>,
    live: Vec<table::Totals>,
    allocated: Vec<table::Totals>,
    /// Where its high-water mark is tracked ([`Table::track_peak`]), unless every place was taken.
    peak: Option<usize>,
}

/// What each stack holds now (by stack index): the base a window's net growth is measured from.
pub(crate) fn live_now(record: &Table) -> Vec<table::Totals> {
    record.held(0, clock_seconds(), u32::MAX).into_iter().map(|held| held.live).collect()
}

/// The base of a window starting now, at sequence number `since`; its high-water mark tracked from now on.
fn base_now(record: &Table, since: u64) -> Base {
    let live = live_now(record);
    let (born, allocated) = record.allocated().into_iter().unzip();
    Base { since, born, live, allocated, peak: record.track_peak(since) }
}

impl Base {
    /// The base of the stack at `index`, first sampled at `born`: `None` where the index held another stack
    /// (or none) as the window started.
    fn of<'a>(&self, of: &'a [table::Totals], index: usize, born: u64) -> Option<&'a table::Totals> {
        (self.born.get(index) == Some(&born)).then(|| of.get(index)).flatten()
    }
}

/// Writes what every stack held when the window tracked at `place` held the most, at `path` (a `heap_v2`
/// dump of unbiased counts, period 1), with the variance of its total beside it, and stops tracking it.
fn write_peak(record: &Table, place: usize, path: &Path) -> io::Result<()> {
    let at_peak = record.end_peak(place);
    let (indexes, totals): (Vec<u32>, Vec<table::Totals>) = at_peak
        .held
        .iter()
        .enumerate()
        .filter(|(_, held)| held.live.unbiased_bytes >= 1.0)
        .map(|(index, held)| {
            (index as u32, table::Totals::unsampled(held.live.unbiased_objects, held.live.unbiased_bytes))
        })
        .unzip();
    write_stacks(record, &indexes, totals, path)?;
    crate::profile_root::storage::write_variance(path, at_peak.variance, None);
    Ok(())
}

/// Writes what every stack allocated since `base` (a window's start), freed or not, at `path`: a `heap_v2`
/// dump of unbiased counts (period 1).
fn write_allocations(record: &Table, base: &Base, path: &Path) -> io::Result<()> {
    let (mut indexes, mut totals, mut variance) = (Vec::new(), Vec::new(), 0.0);
    for (index, (born, now)) in record.allocated().iter().enumerate() {
        let before = base.of(&base.allocated, index, *born);
        let (objects, bytes) = grown(now, before);
        if bytes >= 1.0 {
            indexes.push(index as u32);
            totals.push(table::Totals::unsampled(objects, bytes));
            // What a stack allocated only grows: the samples since the base are the ones added since.
            variance += now.variance - before.map_or(0.0, |before| before.variance);
        }
    }
    write_stacks(record, &indexes, totals, path)?;
    crate::profile_root::storage::write_variance(path, variance.max(0.0), None);
    Ok(())
}

/// `reading` with its live and allocated totals as the unbiased counts they stand for, to be written
/// unsampled (period 1); a total under a byte as none.
fn counted(reading: table::StackReading) -> table::StackReading {
    let counted = |totals: table::Totals| {
        if totals.unbiased_bytes >= 1.0 {
            table::Totals::unsampled(totals.unbiased_objects, totals.unbiased_bytes)
        } else {
            table::Totals::default()
        }
    };
    table::StackReading { allocated: counted(reading.allocated), live: counted(reading.live), ..reading }
}

/// How much `now` is above `before` (none: zero), unbiased objects and bytes; negative where it is below.
fn grown(now: &table::Totals, before: Option<&table::Totals>) -> (f64, f64) {
    let before = before.copied().unwrap_or_default();
    (now.unbiased_objects - before.unbiased_objects, now.unbiased_bytes - before.unbiased_bytes)
}

/// What every stack allocated, by index with its first sample's sequence number: where an interval of
/// OTLP pushes ends ([`interval_dump`]).
pub(crate) type AllocatedByStack = Vec<(u64, table::Totals)>;

/// An interval's dump ([`interval_dump`]): its text, where the interval ends, and how what is in use in it
/// was calibrated, if it was.
pub(crate) struct IntervalDump {
    pub(crate) text: String,
    pub(crate) ends_at: AllocatedByStack,
    pub(crate) calibration: Option<Calibration>,
}

/// The heap now, and what each stack allocated since `before` (where the previous interval ended; empty
/// for the first), as an unsampled `heap_v2` dump (unbiased counts, period 1): an interval's profiles
/// for OTLP (in use at its end, calibrated where the record allows, allocated during it); with where this
/// interval ends. Call unsampled.
pub(crate) fn interval_dump(record: &Table, before: &[(u64, table::Totals)]) -> io::Result<IntervalDump> {
    let (readings, _, calibration) = whole_heap(record);
    let ends_at = readings.iter().map(|reading| (reading.born, reading.allocated)).collect();
    let stacks: Vec<table::StackReading> = readings
        .into_iter()
        .enumerate()
        .map(|(index, reading)| {
            let earlier = before.get(index).filter(|(born, _)| *born == reading.born).map(|(_, totals)| totals);
            let allocated = grown(&reading.allocated, earlier);
            counted(table::StackReading { allocated: table::Totals::unsampled(allocated.0, allocated.1), ..reading })
        })
        .collect();
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    Ok(IntervalDump {
        text: heap_v2::write(&stacks, heap_v2::Content::LiveAndAllocated, 1, &maps),
        ends_at,
        calibration,
    })
}

/// Writes the stacks at `indexes` with `totals` at `path`, as an unsampled `heap_v2` dump, owner-only.
fn write_stacks(record: &Table, indexes: &[u32], totals: Vec<table::Totals>, path: &Path) -> io::Result<()> {
    let text = unsampled_dump(record.frames(indexes).into_iter().zip(totals))?;
    write_owner_only(path, text.as_bytes())
}

/// Writes the net growth of every stack since `base` ([`live_now`] at a window's start): what grew at
/// `grown`, what shrank at `shrunk`, each a `heap_v2` dump of unbiased counts (period 1), so that the net
/// growth is the first minus the second (as `base=` diffs read); beside each, the variance of its stacks'
/// net growth ([`net_variance`]), so the difference says its error (the sum of the two).
fn write_net_growth(record: &Table, base: &Base, grown_path: &Path, shrunk_path: &Path) -> io::Result<()> {
    let now = clock_seconds();
    let live = record.held(0, now, u32::MAX);
    let sampled_since = record.held(base.since, now, u32::MAX);
    let born = record.allocated();
    let mut sides: [(Vec<u32>, Vec<table::Totals>, f64); 2] = Default::default();
    for (index, held) in live.iter().enumerate() {
        let born = born.get(index).map_or(0, |(born, _)| *born);
        let before = base.of(&base.live, index, born);
        let (objects, bytes) = grown(&held.live, before);
        if bytes.abs() < 1.0 {
            continue;
        }
        let since = sampled_since.get(index).map_or(0.0, |since| since.live.variance);
        let side = &mut sides[usize::from(bytes < 0.0)];
        side.0.push(index as u32);
        side.1.push(table::Totals::unsampled(objects.abs(), bytes.abs()));
        side.2 += net_variance(since, before.map_or(0.0, |before| before.variance), held.live.variance);
    }
    for ((indexes, totals, variance), path) in sides.into_iter().zip([grown_path, shrunk_path]) {
        write_stacks(record, &indexes, totals, path)?;
        crate::profile_root::storage::write_variance(path, variance, None);
    }
    Ok(())
}

/// The variance of a stack's net growth over a window, from the variances (each the sum of `w (w - 1) b^2`
/// over its sampled objects) of what it holds now of the objects sampled since the window started
/// (`since`), of what it held as it started (`at_start`) and of what it holds now (`now`). The objects held
/// at both ends cancel in the difference; those sampled since and held now, and those held at the start and
/// freed since, each count once: `since + (at_start - (now - since))`.
///
/// ```ignore
/// // 4 held throughout, 1 sampled since and held, 2 freed since:
/// assert_eq!(net_variance(1.0, 4.0 + 2.0, 4.0 + 1.0), 1.0 + 2.0);
/// ```
fn net_variance(since: f64, at_start: f64, now: f64) -> f64 {
    (2.0 * since + at_start - now).max(0.0)
}

#[cfg(test)]
mod tests;
