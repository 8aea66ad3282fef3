//! What is known of processes that ended without cleaning up (killed at an OOM, say): their kept
//! profiles, the provenance beside each, and what each process last wrote of itself.

use serde::{Deserialize, Serialize};

use crate::runs::KeptProfile;

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
pub struct Provenance {
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
