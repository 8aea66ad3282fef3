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
//! The default feature `enabled` compiles the profiler in. Without it (`default-features = false`) the
//! attribute leaves `main` as written, `scope!` is just its block, and neither jemalloc nor an HTTP server
//! is compiled.
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

/// Arms jemalloc heap profiling for the whole program and serves the profiling endpoints when asked to.
///
/// Arguments, all optional:
/// - `http = "127.0.0.1:5050"`: where to serve; `MEMPROF_ADDR` overrides it at run time (port 0: any free
///   port; the bound address is logged).
/// - `env = "LIBPROCESS_MEMORY_PROFILING"`: the endpoints are served only when this variable is `true`.
/// - `token_env = "PROFILER_TOKEN"`: the variable holding the access token (default `MEMPROF_TOKEN`); when it
///   is set, every request must send `Authorization: Bearer <token>`.
/// - `lg_prof_sample = 19`: a sample every 2^19 bytes (512 KiB) allocated, on average.
/// - `keep_runs = 4`: how many finished profiles stay downloadable.
/// - `crate = "::memprof"`: where the `memprof` crate is, for crates that re-export it.
///
/// It goes on `fn main()` or `fn main() -> Result<..>`. For an async runtime, put it below the runtime's
/// attribute: `#[tokio::main] #[memprof::main] async fn main()`.
///
/// # Equivalent code
///
/// ```ignore
/// memprof::__private::install!(c"prof:true,prof_active:false,lg_prof_sample:19");
/// fn main() {
///     let __memprof_guard = memprof::__private::start(memprof::__private::Options {
///         http: "127.0.0.1:5050",
///         env: "LIBPROCESS_MEMORY_PROFILING",
///         token_env: "MEMPROF_TOKEN",
///         lg_prof_sample: 19,
///         keep_runs: 4,
///     });
///     /* the body of main */
/// }
/// ```
///
/// `install!` makes tikv-jemallocator the `#[global_allocator]` and exports the `malloc_conf` symbol that
/// jemalloc reads before its first allocation. The guard removes the profiles when `main` returns.
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

#[cfg(feature = "enabled")]
#[doc(inline)]
pub use memprof_runtime::{
    Analysis, Binaries, Counts, Error, Format, Frame, HeapProfile, Location, Mapping, Module, ParseError, Profile,
    RenderError, RenderOptions, Run, Sample, Stack,
};

/// Profiles one block: a run starts before it and ends after it (also on `?` and panics), and the
/// block's value is returned. The profile becomes the latest downloadable one ([`Profile::latest`]).
///
/// If a run is already active, or profiling is unavailable, the block runs unprofiled and the reason is
/// logged. Without the `enabled` feature it is just the block.
///
/// ```no_run
/// # #[memprof::main] fn main() {
/// let index: Vec<u64> = memprof::scope!("build index", (0..1_000_000).collect());
/// # #[cfg(feature = "enabled")]
/// if let Some(profile) = memprof::Profile::latest() {
///     println!("{} entries; profile {} at {}", index.len(), profile.id(), profile.path().display());
/// }
/// # }
/// ```
#[cfg(feature = "enabled")]
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
#[cfg(not(feature = "enabled"))]
#[macro_export]
macro_rules! scope {
    ($label:expr, $body:expr $(,)?) => {
        $body
    };
}

/// What the expansion of `#[memprof::main]` and `scope!` names; not a public API.
#[doc(hidden)]
pub mod __private {
    #[cfg(feature = "enabled")]
    pub use memprof_runtime::{__private::install, Options, Scope, start};
}
