//! What memprof's endpoints say, as typed values: the paths ([`paths`]) and the JSON answers of `start`,
//! `stop`, `state`, `heap_profile` and `memory`, serialized by the server and read back by the `memprof`
//! tool and anyone else's client. The field names are Mesos's where Mesos has the field.
//!
//! ```
//! let answer = r#"{"id":1795354618996,"remaining_seconds":30.0,"message":"Successfully started new heap profiling run."}"#;
//! let started: memprof_wire::Started = serde_json::from_str(answer).unwrap();
//! assert_eq!(started.id, 1795354618996);
//! ```
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]
#![deny(unsafe_code)]

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The endpoints' paths.
///
/// ```
/// assert_eq!(memprof_wire::paths::download("text"), "/memory-profiler/download/text");
/// ```
pub mod paths {
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
}

/// `start`'s answer (Mesos's fields, `id` and `remaining_seconds` as numbers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Started {
    /// The run's id.
    pub id: u64,
    /// Seconds until its timer ends it.
    pub remaining_seconds: Option<f64>,
    /// What happened, and where the profile will be.
    pub message: String,
    /// The run was already active (started by someone else): this start started nothing.
    #[serde(default)]
    pub already_active: bool,
}

/// The answer of `stop`, and of `heap_profile?active=true|false` (which adds `active`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunAnswer {
    /// Whether sampling is on after the request (`heap_profile?active=` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
    /// The run stopped, or the latest one; `null` when there is none.
    pub id: Option<u64>,
    /// What happened.
    pub message: String,
    /// Where that run's profile is, when there is one.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub urls: Option<ProfileUrls>,
}

/// Where a kept profile is downloaded (Mesos's three URLs, and one per format).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileUrls {
    /// `download/raw?id=`.
    pub url_raw_profile: String,
    /// `download/graph?id=`.
    pub url_graph_profile: String,
    /// `download/text?id=`.
    pub url_symbolized_profile: String,
    /// Every format's download, by format name (`raw`, `text`, `collapsed`, ...).
    pub downloads: BTreeMap<String, String>,
}

impl ProfileUrls {
    /// The URLs of profile `id`, in `raw` and each of `formats`.
    ///
    /// ```
    /// let urls = memprof_wire::ProfileUrls::of(7, ["text", "pprof"]);
    /// assert_eq!(urls.url_symbolized_profile, "/memory-profiler/download/text?id=7");
    /// assert_eq!(urls.downloads.len(), 3);
    /// ```
    pub fn of<'a>(id: u64, formats: impl IntoIterator<Item = &'a str>) -> Self {
        let downloads = std::iter::once("raw").chain(formats);
        Self {
            url_raw_profile: paths::download_of(id, "raw"),
            url_graph_profile: paths::download_of(id, "graph"),
            url_symbolized_profile: paths::download_of(id, "text"),
            downloads: downloads.map(|format| (format.to_owned(), paths::download_of(id, format))).collect(),
        }
    }
}

/// A kept profile: a finished run's, or an automatic dump's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptProfile {
    /// Its id.
    pub id: u64,
    /// Who started it: `http`, `manual`, `code: <label>`, `automatic: <reason>`.
    pub started_by: String,
    /// When it started, in Unix seconds.
    pub started: f64,
    /// When it stopped, in Unix seconds.
    pub stopped: f64,
    /// The file.
    pub path: String,
    /// Its downloads.
    #[serde(flatten)]
    pub urls: ProfileUrls,
}

/// A label key as `?by=` and `?label=` take it (and as labels are recorded): ASCII letters, digits and `_`,
/// at most 64 of them; the error says what was given and what is expected.
///
/// ```
/// assert_eq!(memprof_wire::label_key("tenant"), Ok("tenant"));
/// assert!(memprof_wire::label_key("tenant name").is_err());
/// ```
pub fn label_key(key: &str) -> Result<&str, String> {
    let valid =
        !key.is_empty() && key.len() <= 64 && key.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_');
    if valid {
        Ok(key)
    } else {
        Err(format!("'{key}' is not a label key; expected letters, digits and '_' (at most 64)"))
    }
}

/// A label filter, `KEY:VALUE` (`KEY:(none)` for samples without `KEY`), as `?label=` and `memprof
/// --label` take it.
///
/// ```
/// assert_eq!(memprof_wire::label_filter("tenant:acme"), Ok(("tenant".to_owned(), "acme".to_owned())));
/// assert!(memprof_wire::label_filter("tenant").is_err());
/// ```
pub fn label_filter(filter: &str) -> Result<(String, String), String> {
    let (key, value) =
        filter.split_once(':').ok_or_else(|| format!("'{filter}' is not KEY:VALUE (for example tenant:acme)"))?;
    Ok((label_key(key)?.to_owned(), value.to_owned()))
}

/// Whether a host (`host`, `host:port`, `[v6]:port`: a `Host` field or a URL's authority) names this
/// machine's loopback interface: `localhost` (and `*.localhost`, RFC 6761), `127.x.x.x` or `[::1]`. The
/// server answers only such names when it listens on loopback; the tool reaches them without a proxy.
///
/// ```
/// assert!(memprof_wire::is_loopback_host("127.0.0.1:5050"));
/// assert!(memprof_wire::is_loopback_host("[::1]:80"));
/// assert!(memprof_wire::is_loopback_host("app.localhost"));
/// assert!(!memprof_wire::is_loopback_host("localhost.evil.example"));
/// ```
pub fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(bracketed) => bracketed.split_once(']').map_or(bracketed, |(address, _)| address),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|address| address.is_loopback())
}

/// `heap_profile` without parameters: libmtev's switches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switches {
    /// Heap profiling is enabled in this process.
    #[serde(rename = "opt.prof")]
    pub profiling_enabled: bool,
    /// Allocations are being sampled now.
    #[serde(rename = "prof.active")]
    pub profiling_active: Option<bool>,
    /// Threads created from now on are sampled.
    #[serde(rename = "prof.thread_active_init")]
    pub new_threads_sampled: Option<bool>,
    /// The run in progress.
    pub current_run: Option<RunOwner>,
}

/// A run and who started it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOwner {
    /// Its id.
    pub id: u64,
    /// Who started it: `http`, `manual`, `code: <label>`.
    pub started_by: String,
}

/// `labels?id=N`: a kept profile's estimated live bytes under each value of each label key (`(none)` for
/// the samples without the key).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LabelBytes {
    /// The profile.
    pub id: u64,
    /// Its total live bytes.
    pub total_bytes: f64,
    /// Key, then value, then bytes.
    pub keys: std::collections::BTreeMap<String, std::collections::BTreeMap<String, f64>>,
}

/// `state.memory_profiler.labels`: how many distinct label sets the process recorded, of how many it may.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LabelCounts {
    /// Distinct label sets recorded.
    pub sets: u32,
    /// The most it records; past it, new sets are recorded as the overflow set.
    pub max_sets: u32,
    /// How many times labels were entered that made a new set past the bound (recorded as
    /// `memprof_overflow`).
    pub overflowed: u64,
}

/// jemalloc's process-wide counters, in bytes (`stats.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HeapCounters {
    /// Bytes in live allocations.
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
}

/// A growing function over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrowingSeries {
    /// The program's function that allocated (the first frame of its own code).
    pub function: String,
    /// By how much it grew over the readings.
    pub grown_bytes: f64,
    /// What it held at each reading, oldest first.
    pub points: Vec<SeriesPoint>,
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

mod earlier;
mod state;
pub use earlier::{ActiveRun, EarlierProcess, EarlierProfile, LastSeen, ProfileRecord};
pub use state::{
    AutomaticDumpSettings, AutomaticDumps, CurrentRun, Failure, JemallocState, MallocConfSources, ProfilerState,
    SampleRecord, Sampling, StackWalk, State,
};
mod explain;
pub use explain::{
    ClassBytes, Container, DecaySettings, Evidence, Explanation, GrowingStack, HeldAge, MemoryClass, Purged, Verdict,
    VerdictKind, class,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_current_run_is_mesoss_null_id() {
        assert_eq!(serde_json::to_string(&CurrentRun::Idle { id: () }).unwrap(), r#"{"id":null}"#);
        let active: CurrentRun =
            serde_json::from_str(r#"{"id":7,"remaining_seconds":null,"started_by":"code: load"}"#).unwrap();
        assert_eq!(active, CurrentRun::Active { id: 7, remaining_seconds: None, started_by: "code: load".into() });
        assert_eq!(serde_json::from_str::<CurrentRun>(r#"{"id":null}"#).unwrap(), CurrentRun::Idle { id: () });
    }

    #[test]
    fn stop_without_a_run_has_no_urls_and_with_one_has_mesoss_three() {
        let idle = RunAnswer { active: None, id: None, message: "No run.".into(), urls: None };
        assert_eq!(serde_json::to_string(&idle).unwrap(), r#"{"id":null,"message":"No run."}"#);
        let stopped = RunAnswer {
            active: None,
            id: Some(7),
            message: "RunAnswer.".into(),
            urls: Some(ProfileUrls::of(7, ["text"])),
        };
        let json: serde_json::Value = serde_json::to_value(&stopped).unwrap();
        assert_eq!(json["url_raw_profile"], "/memory-profiler/download/raw?id=7");
        assert_eq!(json["downloads"]["text"], "/memory-profiler/download/text?id=7");
        assert_eq!(serde_json::from_value::<RunAnswer>(json).unwrap(), stopped);
    }
}
