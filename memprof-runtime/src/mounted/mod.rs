//! memprof's endpoints on the program's own HTTP server, answered as by the built-in one (routes, token,
//! limits, the switch): over the `http` crate's types ([`respond`], feature `http`), and as axum routers
//! (`axum`, with the feature `axum`).
//!
//! ```no_run
//! let request = http::Request::get("/memory-profiler/state").body(Vec::new()).unwrap();
//! let response = memprof_runtime::mounted::respond(request);
//! ```

#[cfg(feature = "axum")]
pub mod axum;
mod respond;

pub use respond::respond;
