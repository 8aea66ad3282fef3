//! The runs and their kept profiles: what `start`, `stop` and `heap_profile` answer, and where a profile is
//! downloaded.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::paths;

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
