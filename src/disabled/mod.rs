//! What the API is when the profiler is compiled out (no `enabled` feature): the same names, doing
//! nothing, so a program that calls [`start`], starts a [`Run`] or mounts the routers builds either way.

pub(crate) mod labels;
mod measure;
mod runs;

pub use measure::{MeasuredFuture, measure, measure_future};
pub use measure::{budgeted, budgeted_future};
pub use runs::{Profile, Run};

/// The settings [`start`] takes; compiled out, they are kept nowhere.
///
/// ```
/// let options = memprof::Options::new().http("127.0.0.1:6060").keep_runs(8);
/// let _guard = memprof::start(options);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// The switch variable named (`env`), if any: said where `enabled` is on a platform memprof does not
    /// profile on.
    switch: Option<String>,
}

impl Options {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in server's address; ignored.
    pub fn http(self, _address: impl Into<String>) -> Self {
        self
    }

    /// The variable that switches the built-in server on; ignored (but where memprof does not profile with
    /// `enabled` on, a switch set `true` is told so).
    pub fn env(self, variable: impl Into<String>) -> Self {
        Options { switch: Some(variable.into()) }
    }

    /// The variable holding the access token; ignored.
    pub fn token_env(self, _variable: impl Into<String>) -> Self {
        self
    }

    /// How many finished profiles are kept; ignored.
    pub fn keep_runs(self, _count: u32) -> Self {
        self
    }

    /// Whether SIGTERM ends memprof first; ignored.
    pub fn dump_on_sigterm(self, _enabled: bool) -> Self {
        self
    }

    /// Whether SIGINT (Ctrl-C) ends memprof first; ignored.
    pub fn dump_on_sigint(self, _enabled: bool) -> Self {
        self
    }

    /// How sampling runs; ignored.
    pub fn sampling(self, _sampling: Sampling) -> Self {
        self
    }

    /// Whether sampling is continuous; ignored.
    #[deprecated(since = "0.1.0", note = "use `.sampling(Sampling::Continuous)` or `.sampling(Sampling::OnDemand)`")]
    pub fn continuous(self, _enabled: bool) -> Self {
        self
    }

    /// Whether the switch starts the built-in server; ignored.
    pub fn built_in_server(self, _enabled: bool) -> Self {
        self
    }
}

/// How sampling would run, compiled in; compiled out, nothing samples.
///
/// ```
/// assert_eq!(memprof::Sampling::Continuous.name(), "continuous");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// Off until a run starts it.
    OnDemand,
    /// On from start-up; runs are windows over it.
    Continuous,
}

impl Sampling {
    /// Its name in `MEMPROF_SAMPLING` and in the attribute's `sampling`.
    pub fn name(self) -> &'static str {
        match self {
            Sampling::OnDemand => "on-demand",
            Sampling::Continuous => "continuous",
        }
    }
}

/// Compiled out: does nothing.
///
/// ```
/// let _guard = memprof::start(memprof::Options::new());
/// ```
pub fn start(_options: Options) -> Guard {
    Guard { _private: () }
}

/// [`start`] where `enabled` is on but memprof does not profile (Windows, macOS, the BSDs): says once, on
/// stderr, when the switch is `true`, that heap profiling is not available here; else nothing.
#[cfg(feature = "enabled")]
#[doc(hidden)]
pub fn start_where_nothing_profiles(options: Options) -> Guard {
    // The runtime's default switch (memprof-runtime's `environment::SWITCH`).
    let switch = options.switch.as_deref().unwrap_or("LIBPROCESS_MEMORY_PROFILING");
    if std::env::var(switch).is_ok_and(|value| value.trim() == "true") {
        eprintln!(
            "[memprof] WARN {switch}=true, but heap profiling is not available on this platform (memprof profiles on \
             Linux); the program runs without it"
        );
    }
    start(options)
}

/// Compiled out: does nothing.
///
/// ```
/// memprof::shutdown();
/// ```
pub fn shutdown() {}

/// Returned by [`start`]; compiled out, it holds nothing.
///
/// ```
/// let guard = memprof::start(memprof::Options::new());
/// drop(guard);
/// ```
#[must_use = "profiles are removed when the guard is dropped"]
#[derive(Debug)]
pub struct Guard {
    _private: (),
}

/// Compiled out: every request is answered 404.
///
/// ```
/// let request = http::Request::get("/memory-profiler/state").body(Vec::new()).unwrap();
/// assert_eq!(memprof::endpoints::respond(request).status(), 404);
/// ```
#[cfg(feature = "http")]
pub fn respond(_request: http::Request<Vec<u8>>) -> http::Response<Vec<u8>> {
    let mut response = http::Response::new(b"memprof is compiled out of this program.\n".to_vec());
    *response.status_mut() = http::StatusCode::NOT_FOUND;
    response
}

/// Compiled out: an empty router.
///
/// ```
/// let app: axum::Router = axum::Router::new().merge(memprof::axum::routes());
/// ```
#[cfg(feature = "axum")]
pub fn routes() -> axum::Router {
    axum::Router::new()
}

/// Compiled out: an empty router.
///
/// ```
/// let app: axum::Router = axum::Router::new().nest("/memory-profiler", memprof::axum::router());
/// ```
#[cfg(feature = "axum")]
pub fn router() -> axum::Router {
    axum::Router::new()
}

/// Compiled out: an empty router.
///
/// ```
/// let app: axum::Router = axum::Router::new().nest("/debug/pprof", memprof::axum::debug_pprof_router());
/// ```
#[cfg(feature = "axum")]
pub fn debug_pprof_router() -> axum::Router {
    axum::Router::new()
}

/// Compiled out: an empty router.
///
/// ```
/// let app: axum::Router = axum::Router::new().nest("/metrics", memprof::axum::metrics_router());
/// ```
#[cfg(feature = "axum")]
pub fn metrics_router() -> axum::Router {
    axum::Router::new()
}

/// Compiled out: a layer that adds nothing (its service is the inner one itself); `labels` is never
/// called.
///
/// ```
/// let layer = memprof::tower::request_labels(|_, _| vec![("tenant", "acme".to_owned())]);
/// # drop(layer);
/// ```
#[cfg(feature = "tower")]
pub fn request_labels<F>(labels: F) -> RequestLabels<F>
where
    F: Fn(&http::Uri, &http::HeaderMap) -> Vec<(&'static str, String)> + Clone,
{
    drop(labels);
    RequestLabels { labels: std::marker::PhantomData }
}

/// The layer [`request_labels`] makes; compiled out, its service is the inner one itself.
///
/// ```
/// let layer: memprof::tower::RequestLabels<fn(&http::Uri, &http::HeaderMap) -> Vec<(&'static str, String)>> =
///     memprof::tower::request_labels(|_, _| Vec::new());
/// # drop(layer);
/// ```
#[cfg(feature = "tower")]
pub struct RequestLabels<F> {
    labels: std::marker::PhantomData<fn() -> F>,
}

#[cfg(feature = "tower")]
impl<F> Clone for RequestLabels<F> {
    fn clone(&self) -> Self {
        *self
    }
}

#[cfg(feature = "tower")]
impl<F> Copy for RequestLabels<F> {}

#[cfg(feature = "tower")]
impl<F> std::fmt::Debug for RequestLabels<F> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("RequestLabels")
    }
}

#[cfg(feature = "tower")]
impl<S, F> tower_layer::Layer<S> for RequestLabels<F> {
    type Service = S;

    fn layer(&self, inner: S) -> S {
        inner
    }
}

/// A service labelled by [`request_labels`]; compiled out, the service itself.
#[cfg(feature = "tower")]
pub type RequestLabelled<S, F> = <RequestLabels<F> as tower_layer::Layer<S>>::Service;

/// Compiled out: a layer that adds nothing (its service is the inner one itself).
///
/// ```
/// let app: axum::Router = axum::Router::new().layer(memprof::axum::route_labels());
/// ```
#[cfg(feature = "axum")]
pub fn route_labels() -> RouteLabels {
    RouteLabels
}

/// The layer [`route_labels`] makes; compiled out, its service is the inner one itself.
#[cfg(feature = "axum")]
#[derive(Debug, Clone, Copy, Default)]
pub struct RouteLabels;

#[cfg(feature = "axum")]
impl<S> tower_layer::Layer<S> for RouteLabels {
    type Service = S;

    fn layer(&self, inner: S) -> S {
        inner
    }
}

/// A service labelled by [`route_labels`]; compiled out, the service itself.
#[cfg(feature = "axum")]
pub type RouteLabelled<S> = S;

/// How many requests the mounted endpoints answer at once (compiled out, none are: every router is empty).
#[cfg(feature = "axum")]
pub const MAX_IN_FLIGHT: usize = 32;
