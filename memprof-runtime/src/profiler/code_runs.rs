//! Profiling runs started from code: [`Run`] and the guard behind `memprof::scope!`.

use std::path::{Path, PathBuf};

use crate::process::messages;
use crate::profile_root::files::Beside;
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
    /// active; with continuous sampling it is a window, which may overlap any other run or window. Fails
    /// in a child of `fork`: memprof profiles the process that set it up.
    pub fn start(label: impl Into<String>) -> Result<Run, Error> {
        let label = label.into();
        if let Some(owner) = crate::process::lineage::forked_from() {
            return Err(Error::Unavailable(crate::process::lineage::refusal(owner)));
        }
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
        if let Some(owner) = crate::process::lineage::forked_from() {
            return Err(Error::Unavailable(crate::process::lineage::refusal(owner)));
        }
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
        // A run the parent started, dropped in a child of `fork` (returning through a `scope!`): the parent's.
        if !self.ended && !crate::process::lineage::forked_child() {
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
    /// The profile of the run that ended last, if any is kept (none in a child of `fork`).
    pub fn latest() -> Option<Profile> {
        if crate::process::lineage::forked_child() {
            return None;
        }
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

    /// Where what the run allocated, freed or not, by stack, is kept beside its profile (a `heap_v2` dump,
    /// for `memprof analyze` as the profile is; the answer of `download/...?view=allocated`): a batch job's
    /// question, where [`Profile::path`] holds only what was still live at the run's end. `None` where none
    /// is kept (a profile kept in memory). Removed with the profile.
    ///
    /// ```no_run
    /// let run = memprof_runtime::Run::start("import")?;
    /// let rows: Vec<Vec<u8>> = (0..1024).map(|_| vec![0; 1024]).collect();
    /// drop(rows);
    /// let profile = run.stop()?;
    /// if let Some(allocated) = profile.allocated_path() {
    ///     std::fs::copy(allocated, "/var/tmp/import.allocated.heap")?;
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn allocated_path(&self) -> Option<PathBuf> {
        Some(Beside::Allocated.of(&self.path)).filter(|path| path.is_file())
    }

    /// Where what the run held at its high-water mark is kept beside its profile (the stacks holding memory
    /// when its live bytes peaked, an unbiased estimate as close as one reading of the heap; `view=peak`);
    /// `None` where none is kept.
    pub fn peak_path(&self) -> Option<PathBuf> {
        Some(Beside::Peak.of(&self.path)).filter(|path| path.is_file())
    }
}

impl From<&KeptProfile> for Profile {
    fn from(run: &KeptProfile) -> Self {
        Profile { id: run.id, path: run.path.clone() }
    }
}

/// Whether `scope!` blocks profile: as `MEMPROF_SCOPES` says, else when profiling was asked for at run time
/// (the endpoints' switch). A command-line tool run without either then profiles nothing, makes no profile
/// directory and pays one atomic load a scope.
fn scopes_on() -> bool {
    let settings = crate::settings::get();
    settings.scopes.unwrap_or(settings.switched_on)
}

/// The guard `memprof::scope!` holds around its block: a [`Run`], or nothing when `scope!` blocks do not
/// profile in this process ([`scopes_on`]) or a run cannot start (the reason reported).
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
        if !scopes_on() || crate::process::lineage::forked_child() {
            return Scope { _run: None };
        }
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
