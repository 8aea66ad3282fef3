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

/// An earlier process's kept profiles, as `state` lists them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EarlierProcess {
    /// Its process id (in its own PID namespace).
    pub pid: u32,
    /// When memprof found it had ended, in Unix seconds (it ended before).
    pub ended_before: f64,
    /// The directory its profiles are in.
    pub directory: String,
    /// Why it is thought to have ended, when its profiles tell (an automatic dump at the memory limit).
    pub why: Option<String>,
    /// Its kept profiles, newest first; each downloads as this process's do.
    pub profiles: Vec<EarlierProfile>,
    /// What it last wrote of itself before it ended, when it did (memprof of 2026-11 on).
    #[serde(default)]
    pub last_seen: Option<LastSeen>,
    /// The run that was active when it ended: its profile was never written.
    #[serde(default)]
    pub lost_run: Option<ActiveRun>,
    /// What its kept profiles show of its end, in words: when the newest was taken against when the
    /// process was last seen, how much of its last heap it holds, a lost run, and the switch that would have
    /// kept the heap at the end.
    #[serde(default)]
    pub caption: String,
}

/// What a process writes of itself every few seconds while it lives (`last-seen.json` in its profile
/// directory), so that the next process knows when it was last seen and how big it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastSeen {
    /// When, in Unix seconds.
    pub time: f64,
    /// Live bytes (jemalloc's `stats.allocated`).
    pub allocated_bytes: u64,
    /// jemalloc's resident bytes (`stats.resident`).
    pub resident_bytes: u64,
    /// The process's resident set (`VmRSS`).
    pub rss_bytes: u64,
    /// The run active then, if any.
    pub active_run: Option<ActiveRun>,
    /// The program's path.
    pub binary: Option<String>,
}

/// A run that was active.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActiveRun {
    /// Its id.
    pub id: u64,
    /// Who started it.
    pub started_by: String,
    /// When, in Unix seconds.
    pub started: f64,
}

/// A profile of an earlier process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EarlierProfile {
    /// The profile, its downloads included.
    #[serde(flatten)]
    pub profile: KeptProfile,
    /// The program that wrote it, if recorded.
    pub binary: Option<String>,
    /// Whether it was written by this very build (same GNU build id), so that this process symbolizes
    /// it; otherwise only the raw download is served, for `memprof analyze --binary <that build>`.
    pub same_build: bool,
    /// The process's live bytes when it was written, when recorded.
    #[serde(default)]
    pub allocated_bytes: Option<u64>,
    /// How long before the process was last seen it was written, in seconds, when both are known.
    #[serde(default)]
    pub before_end_seconds: Option<f64>,
}

/// What is recorded beside each kept profile (`<name>.json`), so that a later process can tell what it
/// was after this one is gone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileRecord {
    /// The profile's id.
    pub id: u64,
    /// Who started it (as [`KeptProfile::started_by`]).
    pub started_by: String,
    /// When it started, in Unix seconds.
    pub started: f64,
    /// When it stopped, in Unix seconds.
    pub stopped: f64,
    /// The process that wrote it.
    pub pid: u32,
    /// The program's path.
    pub binary: Option<String>,
    /// The program's GNU build id, in hexadecimal.
    pub build_id: Option<String>,
    /// The process's live bytes when the profile was written (jemalloc's `stats.allocated`).
    #[serde(default)]
    pub allocated: Option<u64>,
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

/// `state`: Mesos's object, plus what memprof adds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// The profiler.
    pub memory_profiler: ProfilerState,
    /// jemalloc's configuration and switches.
    pub jemalloc: JemallocState,
}

/// `state.memory_profiler`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfilerState {
    /// Always true: memprof is jemalloc's.
    pub jemalloc_detected: bool,
    /// Where profiles are written (Mesos's field).
    pub tmp_dir: String,
    /// The run in progress.
    pub current_run: CurrentRun,
    /// The newest kept profile of a run.
    pub latest_run: Option<KeptProfile>,
    /// The kept profiles of runs, newest first.
    pub runs: Vec<KeptProfile>,
    /// How many are kept.
    pub keep_runs: usize,
    /// Whether requests need the token.
    pub auth_required: bool,
    /// Automatic dumps: their settings in force, and the kept dumps, newest first.
    pub automatic_dumps: AutomaticDumps,
    /// The last run that failed to write its profile.
    pub last_failure: Option<Failure>,
    /// Whether sampling was switched on outside memprof's runs.
    pub started_externally: bool,
    /// log2 of the mean bytes between samples.
    pub lg_prof_sample: Option<usize>,
    /// How samples walk the stack.
    pub stack_walk: StackWalk,
    /// Mean bytes between samples.
    pub sample_period_bytes: Option<u64>,
    /// Problems an operator should know about.
    pub warnings: Vec<String>,
    /// Profiles kept from earlier processes that ended without cleaning up (killed, crashed), newest
    /// process first: the heap before an OOM kill, say.
    #[serde(default)]
    pub earlier_processes: Vec<EarlierProcess>,
    /// The allocation labels recorded so far.
    #[serde(default)]
    pub labels: LabelCounts,
    /// jemalloc's counters now.
    pub heap: Option<HeapCounters>,
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

/// The run in progress, or `{"id": null}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CurrentRun {
    /// A run is active.
    Active {
        /// Its id.
        id: u64,
        /// Seconds until its timer ends it; `null` for runs that end when their code says so.
        remaining_seconds: Option<f64>,
        /// Who started it.
        started_by: String,
    },
    /// No run: `{"id": null}`.
    Idle {
        /// Always `null`.
        id: (),
    },
}

/// `state.memory_profiler.automatic_dumps`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutomaticDumps {
    /// The settings in force (`MEMPROF_DUMP_*`), or `null` when off.
    pub settings: Option<AutomaticDumpSettings>,
    /// The kept dumps, newest first.
    pub dumps: Vec<KeptProfile>,
}

/// When automatic dumps are taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutomaticDumpSettings {
    /// A dump each time this many bytes were allocated.
    pub every_bytes: Option<u64>,
    /// A dump at each new high-water mark this share above the last one.
    pub high_water_step: Option<f64>,
    /// A dump when the resident set crosses this share of the memory limit.
    pub resident_share: Option<f64>,
    /// How many dumps are kept.
    pub keep: usize,
    /// How many bytes of dumps are kept.
    pub max_bytes: u64,
}

/// A run whose profile could not be written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Its id.
    pub id: u64,
    /// Why.
    pub error: String,
}

/// `state.memory_profiler.stack_walk`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackWalk {
    /// `frame pointers` or `libgcc`.
    pub method: String,
    /// Why libgcc, when it is.
    pub why: Option<String>,
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

/// `state.jemalloc`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JemallocState {
    /// Where jemalloc's configuration came from.
    pub malloc_conf: MallocConfSources,
    /// `opt.prof`.
    pub profiling_enabled: bool,
    /// `prof.active`.
    pub profiling_active: bool,
}

/// The configuration strings jemalloc read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MallocConfSources {
    /// The environment's (Mesos's field).
    pub environment: Option<String>,
    /// The one built into jemalloc (Mesos's field).
    pub build_options: Option<String>,
    /// The exported `malloc_conf` symbol's.
    pub exported: Option<String>,
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

mod explain;
pub use explain::{
    ClassBytes, Container, DecaySettings, Evidence, Explanation, GrowingStack, MemoryClass, Purged, Verdict,
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
