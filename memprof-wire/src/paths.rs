//! The endpoints' paths.
//!
//! ```
//! assert_eq!(memprof_wire::paths::download("text"), "/memory-profiler/download/text");
//! ```

/// Where Mesos's endpoints live (and the dashboard page).
pub const PREFIX: &str = "/memory-profiler";
/// Starts a run: `?duration=5mins`.
pub const START: &str = "/memory-profiler/start";
/// Ends the run.
pub const STOP: &str = "/memory-profiler/stop";
/// The profiler's and jemalloc's state: [`crate::State`].
pub const STATE: &str = "/memory-profiler/state";
/// jemalloc's `malloc_stats_print`: JSON, or `?format=text`.
pub const STATISTICS: &str = "/memory-profiler/statistics";
/// libmtev's switches: `?active=true|false`, `?trigger_dump=true`.
pub const HEAP_PROFILE: &str = "/memory-profiler/heap_profile";
/// The dashboard chart's readings: [`crate::Memory`].
pub const MEMORY: &str = "/memory-profiler/memory";
/// A kept profile, as jemalloc dumped it: `?id=`.
pub const DOWNLOAD_RAW: &str = "/memory-profiler/download/raw";
/// A kept profile's live bytes by label: [`crate::LabelBytes`], `?id=`.
pub const LABELS: &str = "/memory-profiler/labels";
/// The label table of a kept profile (`memprof-labels/1`), for `memprof analyze`: `?id=`.
pub const DOWNLOAD_LABELS: &str = "/memory-profiler/download/labels";
/// jeprof's text table.
pub const DOWNLOAD_TEXT: &str = "/memory-profiler/download/text";
/// The SVG call graph.
pub const DOWNLOAD_GRAPH: &str = "/memory-profiler/download/graph";
/// The SVG flame graph.
pub const DOWNLOAD_FLAMEGRAPH: &str = "/memory-profiler/download/flamegraph";
/// Folded stacks.
pub const DOWNLOAD_COLLAPSED: &str = "/memory-profiler/download/collapsed";
/// gzip pprof.
pub const DOWNLOAD_PPROF: &str = "/memory-profiler/download/pprof";
/// OpenTelemetry's profiles (an OTLP export request, protobuf).
pub const DOWNLOAD_OTLP: &str = "/memory-profiler/download/otlp";
/// jeprof's remote protocol: the latest dump, symbols, command line.
pub const PPROF_HEAP: &str = "/memory-profiler/pprof/heap";
/// jeprof's symbol lookups.
pub const PPROF_SYMBOL: &str = "/memory-profiler/pprof/symbol";
/// jeprof's command line of the program.
pub const PPROF_CMDLINE: &str = "/memory-profiler/pprof/cmdline";
/// Go's live heap, as Parca and Alloy scrape it.
pub const DEBUG_PPROF_HEAP: &str = "/debug/pprof/heap";
/// Go's allocations profile.
pub const DEBUG_PPROF_ALLOCS: &str = "/debug/pprof/allocs";
/// pprof's symbol service.
pub const DEBUG_PPROF_SYMBOL: &str = "/debug/pprof/symbol";
/// Prometheus text.
pub const METRICS: &str = "/metrics";
/// Deletes the kept profiles of earlier processes (POST).
pub const CLEAR_EARLIER: &str = "/memory-profiler/clear_earlier";
/// The process's resident memory accounted for, class by class, with a verdict: [`crate::Explanation`].
pub const EXPLAIN: &str = "/memory-profiler/explain";
/// Returns the pages jemalloc keeps freed to the system (POST): [`crate::Purged`].
pub const PURGE: &str = "/memory-profiler/purge";
/// The functions that grew over the continuous record's last hour, over time: [`crate::Growing`].
pub const GROWING: &str = "/memory-profiler/growing";
/// Sets jemalloc's decay times and background thread (POST): [`crate::DecaySettings`].
pub const DECAY: &str = "/memory-profiler/decay";

/// The download of a profile as `format` (`raw`, `text`, `pprof`, ...).
pub fn download(format: &str) -> String {
    format!("{PREFIX}/download/{format}")
}

/// The download of profile `id` as `format`.
///
/// ```
/// assert_eq!(memprof_wire::paths::download_of(7, "raw"), "/memory-profiler/download/raw?id=7");
/// ```
pub fn download_of(id: u64, format: &str) -> String {
    format!("{}?id={id}", download(format))
}
