//! memprof's analysis of jemalloc heap profiles, usable on its own: parse a `heap_v2` dump
//! ([`HeapProfile`]), symbolize it against the binaries it was taken from ([`Analysis`]), and render it
//! as jeprof's text table, folded stacks, a flame graph, a call graph or pprof's protobuf ([`Format`]).
//! It needs no jemalloc and no server, so the offline `memprof analyze` tool builds without jemalloc's C
//! sources, on any platform, and a program can render profiles from its own code.
//!
//! ```no_run
//! use memprof_analysis::{Analysis, Binaries, Format, HeapProfile, RenderOptions};
//!
//! let profile = HeapProfile::parse(&std::fs::read_to_string("memprof.1795354618996.heap")?)?;
//! let analysis = Analysis::new(&profile, &Binaries::replacing(["target/release/service"]));
//! let pprof = Format::Pprof.render(&analysis, None, &RenderOptions::default())?;
//! std::fs::write("heap.pb.gz", pprof)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]
#![deny(unsafe_code)]

mod analysis;
#[cfg(test)]
mod fixtures;
mod heap_profile;
mod known_variance;
mod labels;
mod render;
mod truncated;

pub use analysis::{
    Analysis, Binaries, Frame, Location, Measure, Module, Sample, forget_cached_symbols,
    function_names_in_this_process, is_allocation_plumbing,
};
pub use heap_profile::{Counts, HeapProfile, Mapping, ParseError, Stack};
pub use known_variance::{
    Calibrated, MAX_VARIANCE_FILE, parse_calibrated, parse_variance, parse_variance_file, variance_path, variance_text,
};

/// The environment variables symbolizing reads (with the `debuginfod` feature, on Linux): elfutils'
/// debuginfod client's, for stripped binaries' debug info.
///
/// ```
/// assert!(memprof_analysis::DEBUGINFOD_VARIABLES.contains(&"DEBUGINFOD_URLS"));
/// ```
pub const DEBUGINFOD_VARIABLES: [&str; 4] =
    ["DEBUGINFOD_URLS", "DEBUGINFOD_CACHE_PATH", "DEBUGINFOD_TIMEOUT", "DEBUGINFOD_MAXSIZE"];
pub use labels::{
    LABEL_ADDRESS_BASE, LabelSet, LabelSets, NO_LABEL, NO_LABEL_SPELLED, label_address, label_id, labels_path,
};
pub use render::{Format, OtlpResource, RenderError, RenderOptions};
pub use truncated::{MOST_COUNTED, TRUNCATED_ADDRESS_BASE, truncated_address, truncated_frames, truncated_name};
