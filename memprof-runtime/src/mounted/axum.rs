//! memprof's endpoints as `axum` routers, to nest in the program's own (feature `axum`):
//!
//! ```no_run
//! let app: axum::Router = axum::Router::new()
//!     .route("/", axum::routing::get(|| async { "hello" }))
//!     .nest("/memory-profiler", memprof_runtime::mounted::axum::router())
//!     .nest("/debug/pprof", memprof_runtime::mounted::axum::debug_pprof_router());
//! ```
//!
//! Call [`crate::start`] first: it reads the token these routes require from the variable `token_env`
//! names, as the built-in server does (used without it, they take `MEMPROF_TOKEN`'s).
//!
//! Requests are answered as by the built-in server ([`super::respond`]: routes, token, limits),
//! each on a thread of memprof's own whose allocations are never sampled, never on the async workers: a
//! symbolized profile takes milliseconds to seconds of CPU. At most [`MAX_IN_FLIGHT`] are answered at
//! once, by threads of a pool born when needed and ended when idle; beyond, 503 with `Retry-After`. As the
//! built-in server, the routes answer only when the switch variable (`LIBPROCESS_MEMORY_PROFILING`) is `true`, and
//! 404 otherwise.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use axum::routing::any;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use memprof_wire::paths::PREFIX;

use super::respond::{refusal, respond_waiting};
use crate::http::{HttpError, MAX_BODY, Wait, body_too_large, client_gone, wait_unless};
use crate::process::messages;
use crate::process::threads::Pool;

/// The most requests answered at once, as many as the built-in server's connections.
pub const MAX_IN_FLIGHT: usize = 32;

/// The threads that answer, a pool made with the first router (its threads born only while sampling is
/// off); `None` when it could not be made (every request is then answered 503).
static THREADS: LazyLock<Option<Pool>> = LazyLock::new(|| {
    Pool::new("memprof-http-m", MAX_IN_FLIGHT, crate::endpoints::forget_caches)
        .map_err(|error| {
            messages::warn(&format!("The mounted heap profiling endpoints cannot start their threads ({error})"))
        })
        .ok()
});

/// Mesos's endpoints, the dashboard and jeprof's `pprof/*`, to nest at `/memory-profiler`, or wherever the
/// program keeps such things (the dashboard asks for its data where it is served). axum's `nest` routes
/// `/memory-profiler` and the paths below it, but not `/memory-profiler/`: the dashboard is at
/// `/memory-profiler`.
///
/// ```no_run
/// let app: axum::Router = axum::Router::new().nest("/memory-profiler", memprof_runtime::mounted::axum::router());
/// ```
pub fn router() -> Router {
    under(PREFIX)
}

/// Go's `heap`, `allocs` and `symbol`, to nest at `/debug/pprof`, where Parca, Pyroscope and Grafana
/// Alloy scrape by default.
///
/// ```no_run
/// let app: axum::Router = axum::Router::new().nest("/debug/pprof", memprof_runtime::mounted::axum::debug_pprof_router());
/// ```
pub fn debug_pprof_router() -> Router {
    under("/debug/pprof")
}

/// Prometheus's `/metrics`, to nest where the program serves it (a program that nests [`router`] and
/// [`debug_pprof_router`] gets no `/metrics` from them).
///
/// ```no_run
/// let app: axum::Router = axum::Router::new().nest("/metrics", memprof_runtime::mounted::axum::metrics_router());
/// ```
pub fn metrics_router() -> Router {
    under(memprof_wire::paths::METRICS)
}

/// Every endpoint at its own path, to merge into the program's router (not nest): the dashboard at
/// `/memory-profiler` and `/memory-profiler/`, Mesos's endpoints below it, Go's `/debug/pprof/*` and
/// Prometheus's `/metrics`.
///
/// ```no_run
/// let app: axum::Router = axum::Router::new()
///     .route("/", axum::routing::get(|| async { "hello" }))
///     .merge(memprof_runtime::mounted::axum::routes());
/// ```
pub fn routes() -> Router {
    started();
    let handler = |request: Request| answer("", request);
    Router::new()
        .route(PREFIX, any(handler))
        .route(&format!("{PREFIX}/"), any(handler))
        .route(&format!("{PREFIX}/{{*path}}"), any(handler))
        .route("/debug/pprof/{*path}", any(handler))
        .route(memprof_wire::paths::METRICS, any(handler))
}

/// A router that answers every path below it as memprof's path `prefix` + the path.
fn under(prefix: &'static str) -> Router {
    started();
    let handler = move |request: Request| answer(prefix, request);
    Router::new().route("/", any(handler)).route("/{*path}", any(handler))
}

/// Starts the threads that answer.
fn started() {
    LazyLock::force(&THREADS);
}

async fn answer(prefix: &'static str, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, MAX_BODY).await else {
        return refusal(body_too_large()).map(Body::from);
    };
    let inner = parts.uri.path_and_query().map_or("/", |target| target.as_str());
    match format!("{prefix}{inner}").parse() {
        Ok(uri) => parts.uri = uri,
        Err(error) => {
            let error = HttpError::bad_request(format!("Malformed request target ({error})"));
            return refusal(error).map(Body::from);
        }
    }
    let request = ::http::Request::from_parts(parts, body.to_vec());
    off_the_workers(request).await.map(Body::from)
}

/// Where a pool thread sends its answer; a wait ends when the request's task is gone (the client left).
struct Answer(Mutex<Option<oneshot::Sender<::http::Response<Vec<u8>>>>>);

impl Wait for Answer {
    fn wait(&self, duration: Duration) -> Result<(), HttpError> {
        wait_unless(duration, || {
            let gone = self.0.lock().as_ref().is_none_or(oneshot::Sender::is_closed);
            gone.then(client_gone)
        })
    }
}

/// Answers on a thread of memprof's own, unsampled, and waits for it without blocking the async worker.
async fn off_the_workers(request: ::http::Request<Vec<u8>>) -> ::http::Response<Vec<u8>> {
    let Some(threads) = LazyLock::force(&THREADS) else {
        return busy();
    };
    let (answered, answer) = oneshot::channel();
    let sender = Arc::new(Answer(Mutex::new(Some(answered))));
    let waiting: Arc<dyn Wait> = sender.clone();
    let job = Box::new(move || {
        let response = respond_waiting(request, Some(waiting));
        if let Some(answered) = sender.0.lock().take() {
            let _ = answered.send(response);
        }
    });
    if threads.try_run(job).is_err() {
        return busy();
    }
    answer.await.unwrap_or_else(|_| busy())
}

/// 503 with `Retry-After`: every thread for a request is taken.
fn busy() -> ::http::Response<Vec<u8>> {
    let message = format!("More than {MAX_IN_FLIGHT} requests for the heap profiling endpoints are busy; try again");
    refusal(HttpError::busy(message, 1))
}
