//! What `#[memprof::main]` runs first in `main`: check jemalloc's configuration, serve the endpoints when
//! asked to, and clean up when `main` returns.

use crate::http;
use crate::profiler::Profiler;
use crate::report;

/// The attribute's arguments, as the expanded `main` passes them.
///
/// ```
/// let options = memprof_runtime::Options {
///     http: "127.0.0.1:5050",
///     env: "LIBPROCESS_MEMORY_PROFILING",
///     token_env: "MEMPROF_TOKEN",
///     lg_prof_sample: 19,
///     keep_runs: 4,
/// };
/// assert_eq!(options.http, "127.0.0.1:5050");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The address to serve the endpoints on, unless `MEMPROF_ADDR` says otherwise.
    pub http: &'static str,
    /// The environment variable that switches the endpoints on when it is `true`.
    pub env: &'static str,
    /// The environment variable holding the access token (`MEMPROF_TOKEN` unless the attribute says);
    /// when it is set, every request must send `Authorization: Bearer <token>`.
    pub token_env: &'static str,
    /// The sampling rate the attribute asked for (the environment may override it).
    pub lg_prof_sample: u32,
    /// How many finished profiles stay downloadable (the oldest is deleted past it); at least 1.
    pub keep_runs: u32,
}

/// The environment variable that overrides the attribute's `http` address at run time.
///
/// ```text
/// MEMPROF_ADDR=0.0.0.0:6060 LIBPROCESS_MEMORY_PROFILING=true ./service
/// ```
pub const ADDRESS_VARIABLE: &str = "MEMPROF_ADDR";

/// Set-up at the start of `main`. Reports configuration problems once, never panics; keep the returned
/// guard alive until `main` returns.
///
/// ```no_run
/// let _guard = memprof_runtime::start(memprof_runtime::Options {
///     http: "127.0.0.1:5050",
///     env: "LIBPROCESS_MEMORY_PROFILING",
///     token_env: "MEMPROF_TOKEN",
///     lg_prof_sample: 19,
///     keep_runs: 4,
/// });
/// ```
pub fn start(options: Options) -> Guard {
    let profiler = Profiler::global();
    profiler.keep_runs(options.keep_runs as usize);
    for warning in &profiler.config.warnings {
        report::warn(warning);
    }
    if let Ok(actual) = crate::jemalloc::lg_sample()
        && profiler.config.profiling_enabled
        && actual != options.lg_prof_sample as usize
    {
        report::info(&format!(
            "Sampling every 2^{actual} bytes on average, as the environment asks (the attribute says 2^{})",
            options.lg_prof_sample
        ));
    }
    if let crate::unwinder::Unwinder::Libgcc(reason) = &profiler.unwinder
        && profiler.config.profiling_enabled
    {
        report::info(&format!("Samples walk the stack with libgcc: {reason}"));
    }
    match crate::autodump::Settings::from_environment() {
        Ok(Some(settings)) if profiler.config.profiling_enabled => match crate::autodump::spawn(settings) {
            Ok(()) => report::info("Automatic heap dumps are on (MEMPROF_DUMP_*)"),
            Err(error) => report::warn(&format!("Automatic heap dumps are off: {error}")),
        },
        Ok(Some(_)) => report::warn("Automatic heap dumps are off: heap profiling is disabled"),
        Ok(None) => {}
        Err(error) => report::warn(&format!("Automatic heap dumps are off: {error}")),
    }
    if endpoints_wanted(options.env) {
        let address = std::env::var(ADDRESS_VARIABLE).unwrap_or_else(|_| options.http.to_owned());
        let token = std::env::var(options.token_env).ok().filter(|token| !token.is_empty());
        let protected = token.is_some();
        match http::serve(&address, token) {
            Ok(bound) => {
                report::info(&format!("Serving heap profiling endpoints on http://{bound}{}/", http::PREFIX));
                if !protected && !bound.ip().is_loopback() {
                    report::warn(&format!(
                        "The heap profiling endpoints on {bound} are open to anyone who can reach it: profiles show code addresses and the heap's shape, and runs spend CPU and disk; set {} to require a token, or bind 127.0.0.1",
                        options.token_env
                    ));
                }
            }
            Err(error) => {
                report::warn(&format!("Heap profiling endpoints are not served: {error}; the program runs on"))
            }
        }
    }
    Guard { _private: () }
}

/// Whether the environment variable `name` asks for the endpoints (`true`); anything but `true`, `false`
/// or unset is reported.
fn endpoints_wanted(name: &str) -> bool {
    match std::env::var(name) {
        Ok(value) if value == "true" => true,
        Ok(value) if value == "false" || value.is_empty() => false,
        Ok(value) => {
            report::warn(&format!(
                "{name}={value:?} is neither true nor false; heap profiling endpoints are not served"
            ));
            false
        }
        Err(_) => false,
    }
}

/// Returned by [`start`]; when dropped (as `main` returns) it ends any run and removes the profile
/// directory, so no files are left behind.
///
/// ```no_run
/// # let options = memprof_runtime::Options { http: "127.0.0.1:0", env: "X", token_env: "MEMPROF_TOKEN", lg_prof_sample: 19, keep_runs: 4 };
/// let guard = memprof_runtime::start(options);
/// drop(guard); // profiles removed
/// ```
#[must_use = "profiles are removed when the guard is dropped"]
#[derive(Debug)]
pub struct Guard {
    _private: (),
}

impl Drop for Guard {
    fn drop(&mut self) {
        Profiler::global().shut_down();
    }
}
