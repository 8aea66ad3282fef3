//! Why a run could not be started or finished, as the code and the endpoints report it: one type for the
//! runtime and the facade compiled out (where only [`Error::Unavailable`] ever happens).

use std::fmt;
use std::sync::Arc;

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
        error: Cause,
    },
    /// A heap profile could not be written.
    Dump {
        /// Which dump.
        of: DumpOf,
        /// Why, as the file system or jemalloc said it.
        error: Cause,
    },
    /// A thread memprof needs could not be started.
    Thread {
        /// Which thread, such as "the run's timer".
        purpose: &'static str,
        /// Why, as the system said it.
        error: Cause,
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

impl std::error::Error for Error {
    /// The file system's, jemalloc's or the system's own error behind a failed control, dump or thread.
    ///
    /// ```
    /// use std::error::Error as _;
    /// let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
    /// let error = memprof_wire::Error::Dump { of: memprof_wire::DumpOf::Snapshot, error: full.into() };
    /// let source = error.source().unwrap().downcast_ref::<std::io::Error>().unwrap();
    /// assert_eq!(source.kind(), std::io::ErrorKind::StorageFull);
    /// ```
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Control { error, .. } | Error::Dump { error, .. } | Error::Thread { error, .. } => {
                Some(error.error())
            }
            _ => None,
        }
    }
}

/// What an [`Error`] came of, kept whole: the file system's `std::io::Error`, jemalloc's control error, the
/// system's refusal of a thread (the [`std::error::Error::source`] of the `Error`, to downcast). Cheap to
/// clone (shared); two causes are equal when they say the same.
///
/// ```
/// let cause = memprof_wire::Cause::from(std::io::Error::other("disk full"));
/// assert_eq!(cause, memprof_wire::Cause::message("disk full"));
/// assert_eq!(cause.to_string(), "disk full");
/// ```
#[derive(Clone)]
pub struct Cause(Arc<dyn std::error::Error + Send + Sync + 'static>);

impl Cause {
    /// The error itself.
    pub fn error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }

    /// A cause known only by what it says.
    pub fn message(message: impl Into<String>) -> Cause {
        Cause(Arc::from(Box::<dyn std::error::Error + Send + Sync>::from(message.into())))
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for Cause {
    fn from(error: E) -> Self {
        Cause(Arc::new(error))
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, formatter)
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, formatter)
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for Cause {}
