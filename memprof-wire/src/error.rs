//! Why a run could not be started or finished, as the code and the endpoints report it: one type for the
//! runtime and the facade compiled out (where only [`Error::Unavailable`] ever happens).

use std::fmt;

/// Why a run could not be started or finished. Each message says what happened and what to do.
///
/// ```
/// let error = memprof_wire::Error::Busy(1795354618996);
/// assert_eq!(error.to_string(), "Heap profiling run 1795354618996 is already active; stop it or wait for it to end");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// Profiling is not enabled in this process (`opt.prof` is false).
    Unavailable(String),
    /// Sampling was switched on by someone else (`MALLOC_CONF=prof_active:true`, or by hand).
    StartedExternally,
    /// Another run is active; it carries that run's id.
    Busy(u64),
    /// No run or profile has this id.
    UnknownRun(u64),
    /// jemalloc refused a control: what memprof was doing, the control's name, and jemalloc's error.
    Control {
        /// What memprof was doing, such as "Cannot switch sampling on".
        doing: &'static str,
        /// The `mallctl` name.
        control: &'static str,
        /// jemalloc's error.
        error: String,
    },
    /// A heap profile could not be written.
    Dump {
        /// Which dump.
        of: DumpOf,
        /// Why, as the file system or jemalloc said it.
        error: String,
    },
    /// A thread memprof needs could not be started.
    Thread {
        /// Which thread, such as "the run's timer".
        purpose: &'static str,
        /// Why.
        error: String,
    },
    /// memprof has shut down (`memprof::shutdown`, or the `memprof::Guard` dropped): nothing more is
    /// profiled or dumped.
    Ending,
}

/// Which heap profile could not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DumpOf {
    /// Run `id`'s; `previous` is the profile still available, if any.
    Run {
        /// The run.
        id: u64,
        /// The newest profile kept, which stays downloadable.
        previous: Option<u64>,
    },
    /// The heap as it is now, outside any run.
    Snapshot,
    /// An automatic dump.
    Automatic,
}

impl Error {
    /// The HTTP status the endpoints answer it with: 409 for a conflict with a run, 404 for an unknown id,
    /// 503 where profiling is unavailable or ending, 500 for jemalloc's or the file system's failures.
    ///
    /// ```
    /// assert_eq!(memprof_wire::Error::Busy(7).status(), 409);
    /// ```
    pub fn status(&self) -> u16 {
        match self {
            Error::Unavailable(_) => 503,
            Error::StartedExternally | Error::Busy(_) => 409,
            Error::UnknownRun(_) => 404,
            Error::Control { .. } | Error::Dump { .. } => 500,
            Error::Thread { .. } | Error::Ending => 503,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unavailable(why) => write!(formatter, "{why}"),
            Error::StartedExternally => formatter.write_str(
                "Heap profiling was started externally (by the jemalloc configuration, such as MALLOC_CONF=prof_active:true); memprof does not start or stop runs over it",
            ),
            Error::Busy(id) => write!(formatter, "Heap profiling run {id} is already active; stop it or wait for it to end"),
            Error::UnknownRun(id) => write!(formatter, "There is no heap profiling run with id {id}"),
            Error::Control { doing, control, error } => write!(formatter, "{doing} ({control}: {error})"),
            Error::Dump { of: DumpOf::Run { id, previous }, error } => {
                write!(formatter, "The heap profile of run {id} could not be written: {error}; ")?;
                match previous {
                    Some(previous) => write!(formatter, "the previous profile (id {previous}) is still available"),
                    None => formatter.write_str("no earlier profile exists"),
                }
            }
            Error::Dump { of: DumpOf::Snapshot, error } => write!(formatter, "The heap could not be dumped: {error}"),
            Error::Dump { of: DumpOf::Automatic, error } => {
                write!(formatter, "The automatic heap dump could not be written: {error}")
            }
            Error::Thread { purpose, error } => write!(formatter, "Cannot start {purpose} thread ({error})"),
            Error::Ending => formatter.write_str(
                "memprof has shut down (memprof::shutdown was called, or the guard memprof::start returned was dropped: keep it in a variable until main returns, `let _memprof = memprof::start(...)`, not `let _ = ...`); nothing more is profiled or dumped",
            ),
        }
    }
}

impl std::error::Error for Error {}
