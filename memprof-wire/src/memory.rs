//! jemalloc's counters over time, as the dashboard charts them, and the functions that grew.

use serde::{Deserialize, Serialize};

use crate::explain::ClassBytes;

/// jemalloc's process-wide counters, in bytes (`stats.*`), less memprof's own arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HeapCounters {
    /// Bytes in the program's live allocations (`stats.allocated` less jemalloc's internal allocations, its
    /// threads' caches and the profiler's records, which `metadata` counts).
    pub allocated: usize,
    /// Bytes in active pages.
    pub active: usize,
    /// Bytes of jemalloc's own metadata.
    pub metadata: usize,
    /// Bytes in resident pages.
    pub resident: usize,
    /// Bytes in mapped extents.
    pub mapped: usize,
    /// Bytes kept for reuse.
    pub retained: usize,
}

/// `memory`: the dashboard chart's readings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// Seconds between readings.
    pub interval_seconds: u64,
    /// How many readings are kept.
    pub capacity: usize,
    /// The readings after `since`, oldest first.
    pub readings: Vec<Reading>,
}

/// `growing`: the functions whose live sampled memory grew steadily over the continuous record's last hour
/// (the most first), each with what it held at every reading; empty when none grew or sampling is not
/// continuous.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Growing {
    /// Whether sampling is continuous (else there is no record to read).
    pub continuous: bool,
    /// The growing functions.
    pub series: Vec<GrowingSeries>,
    /// What the record could not hold, when it missed samples (said with the fix): the series may miss
    /// what grew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed: Option<String>,
    /// Why the functions named may be dependencies' (the program has no debug info to tell its own code
    /// by), with the fix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsure: Option<String>,
}

/// A growing function over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrowingSeries {
    /// The program's function that allocated (the first frame of its own code).
    pub function: String,
    /// By how much it grew over the readings.
    pub grown_bytes: f64,
    /// The error of `grown_bytes` from sampling, as [`crate::GrowingStack::error_bytes`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grown_error_bytes: Option<f64>,
    /// What it held at each reading, oldest first.
    pub points: Vec<SeriesPoint>,
    /// Whether it grew and stopped (flat for a minute or more), rather than growing now.
    #[serde(default)]
    pub stopped: bool,
}

/// What a function held at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SeriesPoint {
    /// When, in Unix milliseconds.
    pub time: u64,
    /// Estimated live bytes.
    pub bytes: f64,
}

/// One reading of jemalloc's counters, and of the process's memory classes when they were read then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reading {
    /// When, in Unix milliseconds.
    pub time: u64,
    /// The counters.
    #[serde(flatten)]
    pub counters: HeapCounters,
    /// The resident set by class (`explain`'s leaves), when it was read at this time: readings are spaced
    /// so that reading the kernel's per-mapping figures costs under 0.5 % of a core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classes: Option<ClassBytes>,
}
