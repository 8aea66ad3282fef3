//! Production-grade jemalloc heap profiling for any Rust service, with one attribute.
//!
//! ```no_run
//! #[memprof::main(http = "127.0.0.1:5050", env = "LIBPROCESS_MEMORY_PROFILING")]
//! fn main() {
//!     let cache: Vec<Vec<u8>> = memprof::scope!("warm-up", (0..64).map(|_| vec![0; 4096]).collect());
//!     println!("{} buffers", cache.len());
//! }
//! ```
//!
//! Run it with `LIBPROCESS_MEMORY_PROFILING=true` and drive it like Mesos's libprocess profiler:
//! `curl '127.0.0.1:5050/memory-profiler/start?duration=30secs'`, then `.../download/raw`.
//!
//! The default feature `enabled` compiles the profiler in, on Linux. Without it (`default-features = false`),
//! and on every other platform (Windows, macOS, the BSDs: a crate using memprof builds there unchanged),
//! the attribute leaves `main` as written, `scope!` is just its block, and neither jemalloc nor an HTTP
//! server is compiled.
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

/// Arms jemalloc heap profiling for the whole program and serves the profiling endpoints when asked to.
///
/// Arguments, all optional:
/// - `http = "127.0.0.1:5050"`: where to serve; `MEMPROF_HTTP` overrides it at run time (port 0: any free
///   port; the bound address is logged).
/// - `env = "LIBPROCESS_MEMORY_PROFILING"`: the endpoints are served only when this variable is `true`.
/// - `token_env = "PROFILER_TOKEN"`: the variable holding the access token (default `MEMPROF_TOKEN`); when it
///   is set, every request must send `Authorization: Bearer <token>`.
/// - `lg_prof_sample = 19`: a sample every 2^19 bytes (512 KiB) allocated, on average.
/// - `keep_runs = 4`: how many finished profiles stay downloadable.
/// - `allocator = false`: for a program that declares its own `#[global_allocator]` (tikv-jemallocator):
///   no allocator and no `malloc_conf` are emitted; add [`malloc_conf!`] beside the allocator, or start the
///   program with `MALLOC_CONF=prof:true,prof_active:false`. What is missing is reported at start and in
///   `state`.
/// - `dump_on_sigterm = true`: SIGTERM ends memprof as returning from `main` does (a run still active
///   leaves its profile at `MEMPROF_FINAL_DUMP`, the profile directory is removed), then the program; for
///   programs with no SIGTERM handler of their own ([`Options::dump_on_sigterm`]).
/// - `dump_on_sigint = true`: the same on SIGINT, the Ctrl-C that ends a batch program or a command-line
///   tool ([`Options::dump_on_sigint`]).
/// - `sampling = "on-demand"`: sampling only during runs (Mesos's way); `"continuous"`: on from start-up,
///   with every run a window over it (Go's and TiKV's way, for the questions about the past: the weekend's
///   leak, the heap before an OOM kill): the words of `MEMPROF_SAMPLING`, which overrides it. Unset,
///   sampling is continuous when the switch is on and on demand when it is off (continuous either way if
///   `MALLOC_CONF` has `prof_active:true`) ([`Options::sampling`]). The older `continuous = true` is
///   refused with this spelling.
/// - `crate = "::memprof"`: where the `memprof` crate is, for crates that re-export it.
///
/// It goes on `fn main()` or `fn main() -> Result<..>`. For an async runtime, put it below the runtime's
/// attribute: `#[tokio::main] #[memprof::main] async fn main()`. A program that sets up its logger first,
/// so that memprof's start-up messages go to it, uses [`allocator!`] and [`start`] instead.
///
/// # Equivalent code
///
/// ```ignore
/// memprof::__private::allocator!();
/// memprof::__private::malloc_conf!(memprof::__private::MallocConf::new(c"prof:true,prof_active:false,lg_prof_sample:17"));
/// fn main() {
///     let __memprof_guard = memprof::__private::start(memprof::__private::Options::new().http("0.0.0.0:6060"));
///     /* the body of main */
/// }
/// ```
///
/// `allocator!` makes tikv-jemallocator the `#[global_allocator]`, and `malloc_conf!` exports the symbol
/// that jemalloc reads before its first allocation. Only the arguments given become [`Options`] calls. The
/// guard removes the profiles when `main` returns.
///
/// ```no_run
/// #[memprof::main(http = "0.0.0.0:6060", lg_prof_sample = 17)]
/// fn main() -> Result<(), std::io::Error> {
///     let config = std::fs::read_to_string("/etc/hostname")?;
///     println!("{config}");
///     Ok(())
/// }
/// ```
#[doc(inline)]
pub use memprof_macros::main;

/// A test whose heap budgets are checked after its body: what it allocated, freed, held at its peak and
/// left live, measured exactly on its own thread ([`measure`]), so tests run in parallel in one binary each
/// measure their own.
///
/// Budgets, any of them, comma-separated: `allocated`, `freed`, `live`, `peak` (bytes: a size such as
/// `"1 MiB"`, `"256 KiB"`, `"1GB"`, or a whole number), `allocated_objects`, `freed_objects` (counts),
/// each with `<=`, `<`, `==`, `>=` or `>`. `crate = "::memprof"` names where the crate is, for crates that
/// re-export it. A broken budget fails the test with the budget, the measure and the functions that
/// allocated the most in it (sampled while it ran; see `MEMPROF_MEASURE_SAMPLE`). A malformed budget is a
/// compile error on its tokens.
///
/// It adds `#[test]` unless a test attribute is already there (`#[should_panic]`, `#[ignore]` and the like
/// stay as written). An async test goes below its runtime's attribute, measured over every poll on
/// whichever thread ran it. The test crate's allocator must be memprof's: [`global_allocator!`] at its
/// root. Compiled out, the test runs and its budgets are not checked (said once).
///
/// ```no_run
/// memprof::global_allocator!();
///
/// #[memprof::test(allocated <= "64 KiB", peak <= "16 KiB", live == 0)]
/// fn parsing_a_line_stays_small() {
///     let fields: Vec<&str> = "a,b,c".split(',').collect();
///     assert_eq!(fields.len(), 3);
/// }
/// # fn main() {}
/// ```
///
/// An async test, with its runtime's attribute below (here tokio's, a dependency of the test crate):
///
/// ```ignore
/// #[memprof::test(peak <= "4 KiB", live == 0)]
/// #[tokio::test(flavor = "multi_thread")]
/// async fn a_handler_frees_what_it_allocates() {
///     let body = vec![0u8; 4096];
///     tokio::task::yield_now().await;
///     drop(body);
/// }
/// ```
#[doc(inline)]
pub use memprof_macros::test;

/// What a block or a future allocated ([`measure`], [`measure_future`]).
#[doc(inline)]
pub use memprof_wire::usage::{AllocatingStack, Measured, Usage};

#[cfg(profiling)]
#[doc(inline)]
pub use memprof_runtime::{
    Guard, MeasuredFuture, Options, Profile, Run, Sampling, measure, measure_future, shutdown, start,
};
/// Why a run could not be started or finished (compiled out: always [`Error::Unavailable`]).
#[doc(inline)]
pub use memprof_wire::{Cause, DumpOf, Error};

/// Reading heap profiles in a program of its own (memprof-analysis): parse a jemalloc dump, symbolize it,
/// split it by label and render it in any format (feature `analysis`, on with `enabled`). Reading profiles
/// needs no profiler: a tool built with `default-features = false, features = ["analysis"]` reads them
/// alike.
///
/// ```no_run
/// use memprof::analysis::{Analysis, Binaries, Format, HeapProfile, RenderOptions};
///
/// let profile = HeapProfile::parse(&std::fs::read_to_string("memprof.1795354618996.heap")?)?;
/// let analysis = Analysis::new(&profile, &Binaries::this_process());
/// let text = Format::Text.render(&analysis, None, &RenderOptions::default())?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "analysis")]
pub mod analysis {
    #[doc(inline)]
    pub use memprof_analysis::{
        Analysis, Binaries, Counts, Format, Frame, HeapProfile, LabelSet, LabelSets, Location, Mapping, Measure,
        Module, NO_LABEL, NO_LABEL_SPELLED, ParseError, RenderError, RenderOptions, Sample, Stack, label_id,
        labels_path,
    };
}

#[cfg(not(profiling))]
mod disabled;
#[cfg(not(profiling))]
pub use disabled::{Guard, MeasuredFuture, Options, Profile, Run, Sampling, measure, measure_future, shutdown, start};

/// Allocation labels: heap profiles split by tenant, route or task. Everything allocated while labels are in
/// force is recorded with them; every format can split (`?by=tenant`) or filter (`?label=tenant:acme`) by
/// them, and pprof carries them as tags (`go tool pprof -tags`). Compiled out (without `enabled`), labels
/// cost nothing: [`labels::with`] runs its closure, [`labels::enter`] returns a guard of no size, and
/// [`labels::WithLabels::with_labels`] returns the future itself.
///
/// ```
/// use memprof::labels::{self, WithLabels};
///
/// let session = labels::with(&[("tenant", "acme")], || vec![0u8; 64 * 1024]);
/// let _route = labels::enter(&[("route", "/sessions")]);
/// let task = async { vec![0u8; 1024] }.with_labels(&[("tenant", "initech")]);
/// # drop((session, task));
/// ```
pub mod labels {
    #[cfg(profiling)]
    #[doc(inline)]
    pub use memprof_runtime::labels::{Entered, Labelled, Labels, MAX_LABEL_SETS, WithLabels, enter, with};

    #[cfg(not(profiling))]
    pub use crate::disabled::labels::{Entered, Labelled, Labels, MAX_LABEL_SETS, WithLabels, enter, with};

    #[cfg(all(feature = "tracing", profiling))]
    #[doc(inline)]
    pub use memprof_runtime::labels::LabelLayer;

    #[cfg(all(feature = "tracing", not(profiling)))]
    pub use crate::disabled::labels::LabelLayer;
}

/// memprof's endpoints as a handler over the `http` crate's types, for the program's own HTTP server
/// (feature `http`). Compiled out (without `enabled`), every request is answered 404.
#[cfg(feature = "http")]
pub mod endpoints {
    #[cfg(profiling)]
    #[doc(inline)]
    pub use memprof_runtime::mounted::respond;

    #[cfg(not(profiling))]
    pub use crate::disabled::respond;
}

/// memprof's endpoints as axum routers for the program's own (feature `axum`): every endpoint at its own
/// path to merge (`.merge(memprof::axum::routes())`: the dashboard at `/memory-profiler/` too, and
/// `/metrics`), or routers to nest (`.nest("/memory-profiler", memprof::axum::router())`,
/// `.nest("/debug/pprof", memprof::axum::debug_pprof_router())`, `.nest("/metrics",
/// memprof::axum::metrics_router())`). Compiled out (without `enabled`), they are
/// empty routers.
#[cfg(feature = "axum")]
pub mod axum {
    #[cfg(profiling)]
    #[doc(inline)]
    pub use memprof_runtime::labels::{RouteLabelled, RouteLabels, route_labels};
    #[cfg(profiling)]
    #[doc(inline)]
    pub use memprof_runtime::mounted::axum::{MAX_IN_FLIGHT, debug_pprof_router, metrics_router, router, routes};

    #[cfg(not(profiling))]
    pub use crate::disabled::{
        MAX_IN_FLIGHT, RouteLabelled, RouteLabels, debug_pprof_router, metrics_router, route_labels, router, routes,
    };

    /// memprof on the program's router in a method call each, which compiled out is the router itself: no
    /// code at all, where `.merge(routes())` and `.layer(route_labels())` still instantiate axum's merge and
    /// layer for the empty stand-ins.
    ///
    /// ```
    /// use memprof::axum::RouterExt;
    ///
    /// let app: axum::Router = axum::Router::new()
    ///     .route("/", axum::routing::get(|| async { "hello" }))
    ///     .memprof_route_labels()
    ///     .memprof_endpoints();
    /// ```
    pub trait RouterExt: Sized {
        /// Every endpoint at its own path, as `.merge(memprof::axum::routes())`.
        fn memprof_endpoints(self) -> Self;
        /// Each request labelled with its route, as `.layer(memprof::axum::route_labels())`.
        fn memprof_route_labels(self) -> Self;
    }

    impl RouterExt for ::axum::Router {
        #[inline]
        fn memprof_endpoints(self) -> Self {
            #[cfg(profiling)]
            return self.merge(routes());
            #[cfg(not(profiling))]
            self
        }

        #[inline]
        fn memprof_route_labels(self) -> Self {
            #[cfg(profiling)]
            return self.layer(route_labels());
            #[cfg(not(profiling))]
            self
        }
    }
}

/// Labels from the requests of any tower service (feature `tower`): tonic, hyper, tower-http stacks. One
/// layer on the server labels everything a request allocates with what the program reads from its head.
/// Compiled out (without `enabled`), [`request_labels`](tower::request_labels) makes a layer whose service
/// is the inner one itself: no code runs.
///
/// ```
/// let layer = memprof::tower::request_labels(|uri, headers| {
///     let tenant = headers.get("x-tenant").and_then(|value| value.to_str().ok()).unwrap_or("(unknown)");
///     vec![("tenant", tenant.to_owned()), ("method", uri.path().to_owned())]
/// });
/// // tonic::transport::Server::builder().layer(layer).add_service(...)
/// # drop(layer);
/// ```
#[cfg(feature = "tower")]
pub mod tower {
    #[cfg(profiling)]
    #[doc(inline)]
    pub use memprof_runtime::labels::{RequestLabelled, RequestLabels, request_labels};

    #[cfg(not(profiling))]
    pub use crate::disabled::{RequestLabelled, RequestLabels, request_labels};
}

/// Makes jemalloc the global allocator, armed for heap profiling and counting each thread's objects for
/// [`measure`], as `#[memprof::main]` installs it: for a crate without the attribute (a test crate, whose
/// heap budgets [`test`] checks; a program that calls [`start`] itself, to set up its logger first). Goes at
/// the crate root. The configuration string defaults to `prof:true,prof_active:false`; any other must keep
/// `prof:true`. Compiled out, it is nothing.
///
/// ```no_run
/// memprof::global_allocator!();
///
/// fn main() {
///     // env_logger::init();  // first: memprof's start-up messages then go to the logger
///     let _memprof = memprof::start(memprof::Options::new().http("127.0.0.1:6060"));
/// }
/// ```
#[cfg(profiling)]
#[macro_export]
macro_rules! global_allocator {
    ($($conf:literal)?) => {
        $crate::__private::allocator!();
        $crate::malloc_conf!($($conf)?);
    };
}

/// Compiled out (the `enabled` feature is off): nothing.
#[cfg(not(profiling))]
#[macro_export]
macro_rules! global_allocator {
    ($($conf:literal)?) => {};
}

/// The older name of [`global_allocator!`], the same macro.
#[macro_export]
macro_rules! allocator {
    ($($conf:literal)?) => {
        $crate::global_allocator!($($conf)?);
    };
}

/// Exports the `malloc_conf` symbol jemalloc reads before its first allocation, for a program that
/// declares its own `#[global_allocator]` (tikv-jemallocator 0.7, the version memprof links: two versions
/// of jemalloc cannot be linked into one program). Goes at the crate root of the binary, beside the
/// allocator (`examples/axum-service` builds and runs this shape; the example below is not compiled
/// here, where tikv-jemallocator is not a dependency of the program). The string defaults to `prof:true,prof_active:false`; add your own keys to it (all of them:
/// a program exports one `malloc_conf`). Compiled out, it is nothing.
///
/// ```ignore
/// #[global_allocator]
/// static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
///
/// memprof::malloc_conf!("prof:true,prof_active:false,background_thread:true");
///
/// #[memprof::main(allocator = false)]
/// fn main() {}
/// ```
#[cfg(profiling)]
#[macro_export]
macro_rules! malloc_conf {
    () => {
        $crate::__private::malloc_conf!($crate::__private::MallocConf::PROFILING);
    };
    ($conf:literal) => {
        $crate::__private::malloc_conf!($crate::__private::MallocConf::with_nul(concat!($conf, "\0").as_bytes()));
    };
}

/// Compiled out (the `enabled` feature is off): nothing.
#[cfg(not(profiling))]
#[macro_export]
macro_rules! malloc_conf {
    ($($conf:literal)?) => {};
}

/// Profiles one block: a run starts before it and ends after it (also on `?` and panics), and the
/// block's value is returned. The profile becomes the latest downloadable one ([`Profile::latest`]); it is
/// removed when `main` returns unless saved where memprof never removes it ([`Profile::save`]).
///
/// What it measures: the memory allocated while the block ran and still held when it ended, by the whole
/// process (every thread, not only the block's), sampled as jemalloc samples (one sample every 512 KiB
/// allocated on average). One run profiles the process at a time: if a run is already active (another
/// scope on another thread, a timed run), or profiling is unavailable, the block runs unprofiled and the
/// reason is logged with what to do instead. Without the `enabled` feature it is just the block.
///
/// It profiles only when profiling is asked for at run time: `MEMPROF_SCOPES=true`, or the endpoints'
/// switch (`LIBPROCESS_MEMORY_PROFILING=true`, or the attribute's `env`); otherwise it is the block and
/// one atomic load, with no profile directory made (a command-line tool run thousands of times a day pays
/// nothing). `MEMPROF_SCOPES=false` keeps scopes off even with the endpoints on. [`Run`] always profiles.
///
/// ```no_run
/// # #[memprof::main] fn main() {
/// let index: Vec<u64> = memprof::scope!("build index", (0..1_000_000).collect());
/// if let Some(profile) = memprof::Profile::latest() {
///     println!("{} entries; profile {} at {}", index.len(), profile.id(), profile.path().display());
/// }
/// # }
/// ```
#[cfg(profiling)]
#[macro_export]
macro_rules! scope {
    ($label:expr, $body:expr $(,)?) => {{
        let __memprof_scope = $crate::__private::Scope::enter($label);
        $body
    }};
}

/// Profiles one block; compiled out (the `enabled` feature is off), it is just the block.
///
/// ```
/// let sum: u64 = memprof::scope!("sum", (0..10u64).sum());
/// assert_eq!(sum, 45);
/// ```
#[cfg(not(profiling))]
#[macro_export]
macro_rules! scope {
    ($label:expr, $body:expr $(,)?) => {
        $body
    };
}

/// What the expansion of `#[memprof::main]` and `scope!` names; not a public API.
#[doc(hidden)]
pub mod __private {
    #[cfg(not(profiling))]
    pub use crate::disabled::{budgeted, budgeted_future};
    #[cfg(profiling)]
    pub use memprof_runtime::{
        __private::{MallocConf, allocator, budgeted, budgeted_future, malloc_conf},
        Options, Sampling, Scope, start,
    };
    pub use memprof_wire::usage::{Budget, Comparison, Quantity};

    // `enabled` on a platform memprof does not profile on: the attribute's expansion (made by a proc-macro
    // built for the host) names these, and they do nothing but say so where the switch is on.
    #[cfg(all(feature = "enabled", not(profiling)))]
    pub use crate::{
        __memprof_nothing as allocator, __memprof_nothing as malloc_conf, Options, Sampling,
        disabled::start_where_nothing_profiles as start,
    };
}

/// Expands to nothing, whatever it is given: the allocator and `malloc_conf` where memprof does not profile.
#[doc(hidden)]
#[macro_export]
macro_rules! __memprof_nothing {
    ($($anything:tt)*) => {};
}
