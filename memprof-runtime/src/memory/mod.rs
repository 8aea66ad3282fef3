//! The process's resident memory explained: what the kernel counts (and so what the OOM killer counts),
//! split class by class into parts that add up to it exactly, with a verdict on its cause.
//!
//! Reading ([`smaps`], [`residency`], jemalloc's counters) is kept apart from classifying ([`classes`],
//! [`verdict`]: pure, tested on recorded readings). jemalloc's part is what the kernel has resident in the
//! ranges jemalloc mapped (recorded by its extent hooks, [`crate::jemalloc::ranges`]), not jemalloc's own
//! estimate (`stats.resident` counts pages never touched).
//!
//! ```ignore
//! let reading = memory::read(0)?;
//! println!("{} of {} bytes are live objects", reading.classified.bytes.objects, reading.classified.bytes.rss);
//! ```

pub(crate) mod by_function;
mod classes;
pub(crate) mod history;
mod leak_rule;
mod residency;
pub(crate) mod rise;
mod smaps;
mod verdict;

use std::io;
use std::time::Instant;

use memprof_wire::{DecaySettings, Evidence, Explanation, Reading};

pub(crate) use classes::Classified;
pub(crate) use leak_rule::{Growth, LiveReading, growth};
pub(crate) use verdict::{Findings, Holders, UNSURE, decay_cost, mib, verdict};

use crate::jemalloc::{self, BinUse, HeapReading};
use residency::Residency;
use smaps::{Kind, Mapping, Status};

/// One reading of the kernel's and jemalloc's figures, classified.
#[derive(Debug, Clone)]
pub(crate) struct MemoryReading {
    /// The resident set by class.
    pub(crate) classified: Classified,
    /// jemalloc's counters at the time.
    pub(crate) heap: HeapReading,
    /// `/proc/self/status`, read just before the mappings.
    pub(crate) status: Status,
    /// How many mappings the process had.
    pub(crate) mappings: usize,
    /// How many ranges jemalloc's hooks recorded, and whether the record is complete.
    pub(crate) ranges: (usize, bool),
    /// Bytes the kernel has resident in jemalloc's ranges.
    pub(crate) in_jemalloc: u64,
    /// How long the reading took, in milliseconds.
    pub(crate) milliseconds: f64,
}

/// Reads and classifies the process's memory now; `promoted` is what the pages of sampled small objects
/// take beyond their size (a profiler's cost, counted as memprof's: see [`classes`]).
pub(crate) fn read(promoted: u64) -> io::Result<MemoryReading> {
    let began = Instant::now();
    let status = smaps::status()?;
    let mappings = smaps::read()?;
    let ranges = jemalloc::ranges();
    let in_jemalloc = resident_in(&mappings, &ranges.ranges);
    let heap = jemalloc::heap_reading(jemalloc::own_arena()).map_err(|error| io::Error::other(error.to_string()))?;
    let classified = classes::classify(&mappings, &in_jemalloc, &heap, promoted, status.threads);
    Ok(MemoryReading {
        classified,
        heap,
        status,
        mappings: mappings.len(),
        ranges: (ranges.ranges.len(), ranges.complete),
        in_jemalloc: in_jemalloc.iter().sum(),
        milliseconds: began.elapsed().as_secs_f64() * 1000.0,
    })
}

/// For each mapping, the bytes the kernel has resident where it meets jemalloc's `ranges` (both sorted).
fn resident_in(mappings: &[Mapping], ranges: &[(usize, usize)]) -> Vec<u64> {
    let mut residency = Residency::new();
    let mut first = 0;
    mappings
        .iter()
        .map(|mapping| {
            if !matches!(mapping.kind, Kind::Anonymous | Kind::Brk) {
                return 0;
            }
            while first < ranges.len() && ranges[first].1 <= mapping.start {
                first += 1;
            }
            ranges[first..]
                .iter()
                .take_while(|range| range.0 < mapping.end)
                .map(|range| {
                    // A mapping gone since smaps was read answers an error: nothing of it is resident.
                    residency.resident_bytes(range.0.max(mapping.start), range.1.min(mapping.end)).unwrap_or(0)
                })
                .sum()
        })
        .collect()
}

/// The kernel's resident set of the process now (`VmRSS`).
pub(crate) fn resident_set() -> io::Result<u64> {
    Ok(smaps::status()?.rss)
}

/// The history's readings as the leak rule reads them.
pub(crate) fn live_readings(history: &[Reading]) -> Vec<LiveReading> {
    history
        .iter()
        .map(|reading| LiveReading {
            time: reading.time,
            allocated: reading.counters.allocated as u64,
            rest: reading.counters.resident.saturating_sub(reading.counters.allocated) as u64,
        })
        .collect()
}

/// What `explain` answers from a reading, the leak rule's answer and the stacks holding live memory.
pub(crate) fn explanation(
    reading: &MemoryReading,
    growth: Option<Growth>,
    stacks: Holders,
    sampling: bool,
    record_losses: Option<String>,
    bins: &[BinUse],
    decay: Option<&DecaySettings>,
) -> Explanation {
    let findings = Findings { classified: &reading.classified, growth, stacks, sampling, record_losses, bins, decay };
    let verdict = verdict(findings);
    Explanation {
        rss_bytes: reading.classified.bytes.rss,
        classes: reading.classified.tree(),
        verdict,
        evidence: evidence(reading, decay),
        container: crate::process::cgroup::container(),
    }
}

/// The figures the classes were made from, for an operator checking them.
fn evidence(reading: &MemoryReading, decay: Option<&DecaySettings>) -> Vec<Evidence> {
    let item =
        |source: &str, name: &str, value: f64| Evidence { source: source.to_owned(), name: name.to_owned(), value };
    let heap = &reading.heap;
    let mut evidence = vec![
        item("/proc/self/status", "VmRSS", reading.status.rss as f64),
        item("/proc/self/status", "RssAnon", reading.status.anonymous as f64),
        item("/proc/self/status", "Threads", reading.status.threads as f64),
        item("/proc/self/smaps", "mappings", reading.mappings as f64),
        item("/proc/self/smaps", "Rss", reading.classified.bytes.rss as f64),
        item("mincore", "resident in jemalloc's ranges", reading.in_jemalloc as f64),
        item("extent hooks", "ranges recorded", reading.ranges.0 as f64),
        item(
            "extent hooks",
            "record complete",
            f64::from(u8::from(reading.ranges.1 && jemalloc::range_hooks_installed())),
        ),
        item("jemalloc", "stats.allocated", heap.all.allocated as f64),
        item("jemalloc", "stats.active", heap.all.active as f64),
        item("jemalloc", "pdirty + pmuzzy", heap.all.free as f64),
        item("jemalloc", "stats.metadata", heap.metadata as f64),
        item("jemalloc", "stats.arenas.<all>.internal", heap.internal as f64),
        item("jemalloc", "stats.resident", heap.resident as f64),
        item("jemalloc", "memprof's arena: allocated", heap.profiler.allocated as f64),
        item("jemalloc", "memprof's arena: active", heap.profiler.active as f64),
        item("memprof", "reading took (ms)", reading.milliseconds),
    ];
    if let Some(decay) = decay {
        evidence.push(item("jemalloc", "arena.0.dirty_decay_ms", decay.dirty_decay_ms as f64));
        evidence.push(item("jemalloc", "arena.0.muzzy_decay_ms", decay.muzzy_decay_ms as f64));
        evidence.push(item("jemalloc", "background_thread", f64::from(u8::from(decay.background_thread))));
    }
    evidence
}
