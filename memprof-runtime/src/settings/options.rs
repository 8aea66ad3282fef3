//! What a program chooses of memprof: [`Options`], the attribute's arguments as builder calls.

use crate::process::environment;
use crate::sampler::sampling::Sampling;

/// How many finished profiles are kept on disk and downloadable, unless `keep_runs` says otherwise.
pub(crate) const DEFAULT_KEPT_RUNS: usize = 4;

/// How memprof serves a program: where, when, with which token, how many profiles it keeps, and whether a
/// SIGTERM leaves a final profile. Every setting has a default; the builder methods change one each.
///
/// ```
/// let options = memprof_runtime::Options::new()
///     .http("0.0.0.0:6060")
///     .env("PROFILING")
///     .token_env("PROFILER_TOKEN")
///     .keep_runs(8)
///     .dump_on_sigterm(true);
/// assert_eq!(options, memprof_runtime::Options::new().http("0.0.0.0:6060").env("PROFILING")
///     .token_env("PROFILER_TOKEN").keep_runs(8).dump_on_sigterm(true));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub(in crate::settings) http: String,
    pub(in crate::settings) env: String,
    pub(in crate::settings) token_env: String,
    pub(in crate::settings) keep_runs: u32,
    pub(in crate::settings) dump_on_sigterm: bool,
    pub(in crate::settings) dump_on_sigint: bool,
    pub(in crate::settings) built_in_server: bool,
    pub(in crate::settings) sampling: Option<Sampling>,
}

impl Default for Options {
    #[inline]
    fn default() -> Self {
        Self {
            http: DEFAULT_ADDRESS.to_owned(),
            env: environment::SWITCH.to_owned(),
            token_env: environment::TOKEN.to_owned(),
            keep_runs: DEFAULT_KEPT_RUNS as u32,
            dump_on_sigterm: false,
            dump_on_sigint: false,
            built_in_server: true,
            sampling: None,
        }
    }
}

/// Where the built-in server listens unless told otherwise.
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:5050";

/// The most finished profiles [`Options::keep_runs`] keeps (the attribute's `keep_runs` refuses more):
/// declared once, in the attribute's crate.
///
/// ```
/// assert_eq!(memprof_runtime::MAX_KEEP_RUNS, 1000);
/// ```
pub const MAX_KEEP_RUNS: u32 = memprof_macros::__max_keep_runs!();

impl Options {
    /// The defaults: serve on `127.0.0.1:5050` when `LIBPROCESS_MEMORY_PROFILING=true`, token in
    /// `MEMPROF_TOKEN`, four profiles kept, SIGTERM left to the program.
    #[inline]
    pub fn new() -> Self {
        Self::default()
    }

    /// The address of the built-in server (`host:port`; port 0 picks a free one, which is logged).
    /// `MEMPROF_HTTP` overrides it at run time.
    #[inline]
    pub fn http(mut self, address: impl Into<String>) -> Self {
        self.http = address.into();
        self
    }

    /// The environment variable that switches the built-in server on when it is `true`.
    #[inline]
    pub fn env(mut self, variable: impl Into<String>) -> Self {
        self.env = variable.into();
        self
    }

    /// The environment variable holding the access token; when it is set, every request (to the built-in
    /// server or a mounted router) must send `Authorization: Bearer <token>`.
    pub fn token_env(mut self, variable: impl Into<String>) -> Self {
        self.token_env = variable.into();
        self
    }

    /// How many finished profiles stay downloadable, from 1 to [`MAX_KEEP_RUNS`] (the bounds the attribute's
    /// `keep_runs` takes; a count outside them is brought within); the oldest is deleted past it. Code's runs
    /// (`scope!`, [`crate::Run`]) and the operators' (over HTTP, the CLI) are counted apart, this many each:
    /// a loop of scopes never pushes out the profile an operator just took.
    pub fn keep_runs(mut self, count: u32) -> Self {
        self.keep_runs = count.clamp(1, MAX_KEEP_RUNS);
        self
    }

    /// Whether the switch starts the built-in server (the default); `false` for a program that serves the
    /// endpoints only on its own server, through `memprof::axum`'s routers or `memprof::endpoints::respond`,
    /// which then follow the switch alone.
    ///
    /// ```
    /// let options = memprof_runtime::Options::new().built_in_server(false);
    /// # drop(options);
    /// ```
    pub fn built_in_server(mut self, enabled: bool) -> Self {
        self.built_in_server = enabled;
        self
    }

    /// How sampling runs: [`Sampling::Continuous`], on from start-up with runs as windows over it, or
    /// [`Sampling::OnDemand`], off until a run starts it, each run starting afresh (the attribute's
    /// `sampling = "continuous"` or `"on-demand"`, the words of `MEMPROF_SAMPLING`). Unset, sampling is
    /// continuous when the switch is on and on demand when it is off, unless jemalloc started with
    /// sampling on (`MALLOC_CONF=prof_active:true`: continuous); `MEMPROF_SAMPLING` overrides either. See
    /// docs/endpoints.md, "Continuous profiling".
    ///
    /// ```
    /// // Sampling only during runs, as Mesos does, whatever the switch.
    /// let options = memprof_runtime::Options::new().sampling(memprof_runtime::Sampling::OnDemand);
    /// # drop(options);
    /// ```
    pub fn sampling(mut self, sampling: Sampling) -> Self {
        self.sampling = Some(sampling);
        self
    }

    /// The older spelling of [`Options::sampling`]: `true` is [`Sampling::Continuous`], `false`
    /// [`Sampling::OnDemand`]. The mode has one word everywhere now (`sampling`, `MEMPROF_SAMPLING`,
    /// `state`); the attribute refuses its `continuous = ..` with the new spelling.
    #[deprecated(since = "0.1.0", note = "use `.sampling(Sampling::Continuous)` or `.sampling(Sampling::OnDemand)`")]
    pub fn continuous(self, enabled: bool) -> Self {
        self.sampling(if enabled { Sampling::Continuous } else { Sampling::OnDemand })
    }

    /// On SIGTERM, end memprof as `main` returning would ([`shutdown`](crate::shutdown): a run still active leaves its
    /// profile at `MEMPROF_FINAL_DUMP`, the profile directory is removed), then let the signal terminate
    /// the program as it would have. For programs with no SIGTERM handler of their own; a program that
    /// has one calls [`shutdown`](crate::shutdown) from it instead.
    pub fn dump_on_sigterm(mut self, enabled: bool) -> Self {
        self.dump_on_sigterm = enabled;
        self
    }

    /// The same on SIGINT (Ctrl-C), which ends a batch program or a command-line tool: memprof ends first
    /// (a run in progress leaves its profile at `MEMPROF_FINAL_DUMP`, the profile directory is removed),
    /// then the signal ends the program as it would have.
    ///
    /// ```
    /// let options = memprof_runtime::Options::new().dump_on_sigint(true);
    /// # drop(options);
    /// ```
    pub fn dump_on_sigint(mut self, enabled: bool) -> Self {
        self.dump_on_sigint = enabled;
        self
    }
}
