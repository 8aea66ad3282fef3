//! The model of runs: who started one ([`Owner`]), the run in progress ([`ActiveRun`]), a profile kept on
//! disk ([`KeptProfile`]). Plain data, below every layer that speaks of runs: the profiler, what the profile
//! root keeps beside profiles ([`crate::profile_root::evidence`]) and the endpoints.

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

/// Who started a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owner {
    /// `/memory-profiler/start`, ended by its timer or `/stop`.
    Http,
    /// `memprof::scope!` or `memprof::Run`, with the label the code gave.
    Code(String),
    /// `heap_profile?active=true` (or `memprof activate`), ended by `active=false` or `/stop`.
    Manual,
    /// An automatic dump (not a run), with the reason it was taken.
    Automatic(String),
    /// A profile an earlier process kept, with who started it there (as [`Owner::name`] said it).
    Earlier(String),
}

impl Owner {
    /// Who started a run, as the endpoints and records say it: `http`, `code: <label>`, `manual`,
    /// `automatic: <reason>`.
    pub(crate) fn name(&self) -> String {
        match self {
            Owner::Http => "http".to_owned(),
            Owner::Code(label) => format!("code: {label}"),
            Owner::Manual => "manual".to_owned(),
            Owner::Automatic(reason) => format!("automatic: {reason}"),
            Owner::Earlier(name) => name.clone(),
        }
    }
}

/// The run in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActiveRun {
    pub(crate) id: u64,
    pub(crate) owner: Owner,
    pub(crate) started: SystemTime,
    pub(crate) deadline: Option<Instant>,
    /// In continuous mode, the record's sequence number at the window's start (its profile holds the
    /// objects sampled from it on); `None` for a run that reset the samples.
    pub(crate) window_start: Option<u64>,
}

impl ActiveRun {
    /// Seconds until the timer ends the run; `None` for runs that end when their code says so.
    pub(crate) fn remaining_seconds(&self) -> Option<f64> {
        self.deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()).as_secs_f64())
    }
}

/// A run that ended with a profile on disk (or an automatic dump, or an earlier process's profile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeptProfile {
    pub(crate) id: u64,
    pub(crate) owner: Owner,
    pub(crate) started: SystemTime,
    pub(crate) stopped: SystemTime,
    pub(crate) path: PathBuf,
}
