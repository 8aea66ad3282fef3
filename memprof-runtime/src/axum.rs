//! memprof's endpoints as `axum` routers, to nest in the program's own (feature `axum`):
//!
//! ```no_run
//! let app: axum::Router = axum::Router::new()
//!     .route("/", axum::routing::get(|| async { "hello" }))
//!     .nest("/memory-profiler", memprof_runtime::axum::router())
//!     .nest("/debug/pprof", memprof_runtime::axum::debug_pprof_router());
//! ```
//!
//! Call [`crate::start`] first: it reads the token these routes require from the variable `token_env`
//! names, as the built-in server does (used without it, they take `MEMPROF_TOKEN`'s).
//!
//! Requests are answered as by the built-in server ([`crate::endpoints::respond`]: routes, token, limits),
//! each on a thread of memprof's own whose allocations are never sampled, never on the async workers: a
//! symbolized profile takes milliseconds to seconds of CPU. At most [`MAX_IN_FLIGHT`] are answered at
//! once; beyond, 503 with `Retry-After`.

use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use axum::routing::any;

use memprof_wire::paths::PREFIX;

use crate::http::{HttpError, MAX_BODY, body_too_large};
use crate::{endpoints, jemalloc};

/// The most requests answered at once, as many as the built-in server's connections.
pub const MAX_IN_FLIGHT: usize = 32;

/// Requests being answered now.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Mesos's endpoints, the dashboard and jeprof's `pprof/*`, to nest at `/memory-profiler` (the dashboard
/// page asks for its data there). axum's `nest` routes `/memory-profiler` and the paths below it, but not
/// `/memory-profiler/`: the dashboard is at `/memory-profiler`.
///
/// ```no_run
/// let app: axum::Router = axum::Router::new().nest("/memory-profiler", memprof_runtime::axum::router());
/// ```
pub fn router() -> Router {
    under(PREFIX)
}

/// Go's `heap`, `allocs` and `symbol`, to nest at `/debug/pprof`, where Parca, Pyroscope and Grafana
/// Alloy scrape by default.
///
/// ```no_run
/// let app: axum::Router = axum::Router::new().nest("/debug/pprof", memprof_runtime::axum::debug_pprof_router());
/// ```
pub fn debug_pprof_router() -> Router {
    under("/debug/pprof")
}

/// A router that answers every path below it as memprof's path `prefix` + the path.
fn under(prefix: &'static str) -> Router {
    let handler = move |request: Request| answer(prefix, request);
    Router::new().route("/", any(handler)).route("/{*path}", any(handler))
}

async fn answer(prefix: &'static str, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, MAX_BODY).await else {
        return endpoints::mounted_refusal(body_too_large()).map(Body::from);
    };
    let inner = parts.uri.path_and_query().map_or("/", |target| target.as_str());
    match format!("{prefix}{inner}").parse() {
        Ok(uri) => parts.uri = uri,
        Err(error) => {
            let error = HttpError::bad_request(format!("Malformed request target ({error})"));
            return endpoints::mounted_refusal(error).map(Body::from);
        }
    }
    let request = ::http::Request::from_parts(parts, body.to_vec());
    off_the_workers(request).await.map(Body::from)
}

/// Answers on a thread of memprof's own, unsampled, and waits for it without blocking the async worker.
async fn off_the_workers(request: ::http::Request<Vec<u8>>) -> ::http::Response<Vec<u8>> {
    struct Place;
    impl Drop for Place {
        fn drop(&mut self) {
            IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
        }
    }
    if IN_FLIGHT.fetch_add(1, Ordering::SeqCst) >= MAX_IN_FLIGHT {
        drop(Place);
        return busy();
    }
    let place = Place;
    let (answered, answer) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name("memprof-http-m".to_owned()).spawn(move || {
        jemalloc::set_this_thread_sampled(false);
        let _place = place;
        let _ = answered.send(endpoints::respond(request));
    });
    if spawned.is_err() {
        return busy();
    }
    answer.await.unwrap_or_else(|_| busy())
}

/// 503 with `Retry-After`: every place for a request is taken, or no thread can be started.
fn busy() -> ::http::Response<Vec<u8>> {
    let message = format!("More than {MAX_IN_FLIGHT} requests for the heap profiling endpoints are busy; try again");
    endpoints::mounted_refusal(HttpError::busy(message, 1))
}
