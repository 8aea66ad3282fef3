//! Profiling runs started from code: [`Run`] and the guard behind `memprof::scope!`.

use std::path::{Path, PathBuf};

use crate::process::messages;
use crate::profiler::{Error, KeptProfile, Owner, Profiler, Started};

/// A profiling run bracketed by code. It ends when [`Run::stop`] is called or when it is dropped, also
/// on `?` and panics; its profile then becomes the latest downloadable one.
///
/// ```no_run
/// let run = memprof_runtime::Run::start("load")?;
/// let table: Vec<u64> = (0..1_000_000).collect();
/// let profile = run.stop()?;
/// println!("run {} profiled {} items: {}", profile.id(), table.len(), profile.path().display());
/// # Ok::<(), memprof_runtime::Error>(())
/// ```
#[derive(Debug)]
#[must_use = "the run ends when it is dropped"]
pub struct Run {
    id: u64,
    label: String,
    ended: bool,
    /// Whether it is a window over continuous sampling, which other runs and windows may overlap.
    window: bool,
}

impl Run {
    /// Starts a run named `label`. On demand, fails when profiling is unavailable or another run is
    /// active; with continuous sampling it is a window, which may overlap any other run or window.
    pub fn start(label: impl Into<String>) -> Result<Run, Error> {
        let label = label.into();
        let profiler = Profiler::global();
        if let Some(window) = profiler.open_window(Owner::Code(label.clone()))? {
            return Ok(Run { id: window.id, label, ended: false, window: true });
        }
        match profiler.start(Owner::Code(label.clone()), None)? {
            Started::New(run) => Ok(Run { id: run.id, label, ended: false, window: false }),
            Started::AlreadyActive(run) => Err(Error::Busy(run.id)),
        }
    }

    /// The run's id, as the HTTP endpoints name it.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Ends the run and returns its profile.
    pub fn stop(mut self) -> Result<Profile, Error> {
        self.ended = true;
        self.end()
    }

    fn end(&self) -> Result<Profile, Error> {
        if self.window {
            return Profiler::global().close_window(self.id).map(|window| Profile::from(&window));
        }
        match Profiler::global().stop(Some(self.id))? {
            Some(run) => Ok(Profile::from(&run)),
            None => Err(Error::UnknownRun(self.id)),
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if !self.ended {
            match self.end() {
                Ok(profile) => messages::info(&format!(
                    "Heap profiling run {} (\"{}\") ended; profile at {}",
                    profile.id,
                    self.label,
                    profile.path.display()
                )),
                Err(error) => messages::warn(&format!("Heap profiling run {} (\"{}\"): {error}", self.id, self.label)),
            }
        }
    }
}

/// A heap profile on disk, in jemalloc's `heap_v2` format.
///
/// ```no_run
/// if let Some(profile) = memprof_runtime::Profile::latest() {
///     println!("latest profile: run {} at {}", profile.id(), profile.path().display());
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    id: u64,
    path: PathBuf,
}

impl Profile {
    /// The profile of the run that ended last, if any is kept.
    pub fn latest() -> Option<Profile> {
        Profiler::global().overview().latest().map(Profile::from)
    }

    /// The id of the run that produced it.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Where the file is. It is removed when the program ends or when newer runs push it out: to keep it,
    /// [`Profile::save`] it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Copies the profile to `to` (a file path), where memprof never removes it; analyze it later with
    /// `memprof analyze <file> --binary <this program>`.
    ///
    /// ```no_run
    /// let run = memprof_runtime::Run::start("import")?;
    /// let rows: Vec<Vec<u8>> = (0..1024).map(|_| vec![0; 1024]).collect();
    /// run.stop()?.save("/var/tmp/import.heap")?;
    /// # drop(rows);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn save(&self, to: impl AsRef<Path>) -> std::io::Result<()> {
        std::fs::copy(&self.path, to.as_ref()).map(drop)
    }
}

impl From<&KeptProfile> for Profile {
    fn from(run: &KeptProfile) -> Self {
        Profile { id: run.id, path: run.path.clone() }
    }
}

/// The guard `memprof::scope!` holds around its block: a [`Run`], or nothing (with the reason reported)
/// when a run cannot start.
///
/// ```no_run
/// let scope = memprof_runtime::Scope::enter("load");
/// let table: Vec<u64> = (0..1_000).collect();
/// drop(scope);
/// # drop(table);
/// ```
#[doc(hidden)]
#[derive(Debug)]
pub struct Scope {
    _run: Option<Run>,
}

impl Scope {
    /// Starts a run named `label`, or reports why the block runs unprofiled.
    pub fn enter(label: &str) -> Scope {
        match Run::start(label) {
            Ok(run) => Scope { _run: Some(run) },
            Err(error) => {
                let advice = match error {
                    Error::Busy(_) | Error::StartedExternally => {
                        "; one run profiles the whole process at a time, so concurrent blocks cannot each have their own: profile them together in one timed run (/memory-profiler/start) and tell them apart by their stacks"
                    }
                    _ => "",
                };
                messages::warn(&format!("memprof::scope!(\"{label}\") runs unprofiled: {error}{advice}"));
                Scope { _run: None }
            }
        }
    }
}
