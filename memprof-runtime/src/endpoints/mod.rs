//! What the endpoints answer, whatever carries the requests (the built-in server in `http/`, or the
//! program's own through `respond` and the `axum` routers): the routes, with the methods and parameters
//! each takes (Mesos's under `/memory-profiler`, Go's under `/debug/pprof`), the token check, and one
//! module per family of handlers. Handlers get a `Context` (the profiler, the token) instead of reaching
//! for process-wide state, so they can be tried on their own.

mod auth;
mod browsers;
mod context;
mod dashboard;
mod debug_pprof;
mod downloads;
mod explain;
mod freed_pages;
mod growing;
mod heap_now;
mod heap_profile;
pub(crate) mod jobs;
mod metrics;
mod readings;
pub(crate) mod render_cache;
mod runs;
mod state;
mod symbols;
mod to_wire;

#[cfg(feature = "fuzzing")]
pub(crate) use to_wire::describe_earlier;

use memprof_wire::paths::{self, PREFIX};

use crate::http::{HttpError, Query, Reply, Request, Response};
#[cfg(any(test, feature = "http"))]
pub(crate) use context::context;
pub(crate) use context::{Context, set_up};

/// Answers one request in `context`: refuses what pages of other sites send, checks its credentials (but
/// for the dashboard page), then routes it.
pub(crate) fn answer(context: &Context, request: &Request) -> Response {
    // What earlier processes left is known before any answer (the sweep left off the start).
    crate::profiler::Profiler::global().catch_up();
    match checked(context, request).and_then(|()| route(context, request)) {
        Ok(reply) => reply.into_response(),
        Err(error) => error.into_response(),
    }
}

/// The endpoints as the built-in server serves them: every request answered for `Context`.
pub(crate) struct Endpoints(pub(crate) &'static Context);

impl crate::http::Service for Endpoints {
    fn answer(&self, request: &Request) -> Response {
        answer(self.0, request)
    }

    fn is_urgent(&self, request: &Request) -> bool {
        is_urgent(request)
    }

    fn when_idle(&self) -> fn() {
        forget_caches
    }
}

/// Lets go of what answers keep for the next ones (analyses, renders, names of addresses) and returns the
/// memory to the system: called when the endpoints' threads have all been idle a while, so a program whose
/// endpoints are not in use keeps none of their work. The next request computes again what it needs.
pub(crate) fn forget_caches() {
    render_cache::forget_all();
    state::forget_statistics();
    memprof_analysis::forget_cached_symbols();
    jobs::return_freed_memory();
}

/// Whether `request` is for `state` or `stop`: cheap, and what an operator needs most when the server is
/// flooded, so the server answers them even when every place is taken.
pub(crate) fn is_urgent(request: &Request) -> bool {
    let path = split(&request.target).0;
    ROUTES.iter().any(|route| route.urgent && route.path == path)
}

fn checked(context: &Context, request: &Request) -> Result<(), HttpError> {
    if !is_dashboard_page(&request.target) {
        browsers::check(&request.fields)?;
        auth::check(context.token.as_deref(), request.fields.authorization.as_deref())?;
    }
    // A pre-fork server's child serving the mounted routes: the runs' books and the profile directory are
    // the parent's, and their locks may have been held at the fork.
    if let Some(owner) = crate::process::lineage::forked_from() {
        return Err(HttpError::new(503, crate::process::lineage::refusal(owner)));
    }
    Ok(())
}

/// The parameters of the rendered downloads.
const RENDER_PARAMETERS: &[&str] = &["id", "base", "net", "view", "lines", "full", "by", "label"];

/// One endpoint: its full path, the methods it takes, its parameters and its handler.
struct Route {
    path: &'static str,
    methods: Methods,
    /// Answered even when every place of the server is taken (at its door, see [`is_urgent`]): the
    /// operator's way in.
    urgent: bool,
    parameters: &'static [&'static str],
    handle: Handle,
}

/// The methods an endpoint takes; HEAD wherever GET is (RFC 9110 9.3.2: the same answer, of which only the
/// head is sent).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Methods {
    /// Reads.
    Get,
    /// Changes state, and is also a link (Mesos's `start`, `stop`).
    GetOrPost,
    /// Changes state, and is never a link (deleting profiles).
    Post,
}

impl Methods {
    fn allow(self, method: &str) -> bool {
        matches!(
            (method, self),
            ("GET" | "HEAD", Methods::Get | Methods::GetOrPost) | ("POST", Methods::GetOrPost | Methods::Post)
        )
    }

    /// The `Allow` header's value.
    fn names(self) -> &'static str {
        match self {
            Methods::Get => "GET, HEAD",
            Methods::GetOrPost => "GET, HEAD, POST",
            Methods::Post => "POST",
        }
    }
}

/// A handler that reads the query.
type QueryHandler = fn(&Context, &Query) -> Result<Reply, HttpError>;

/// A handler that reads the request too: its body, or its way to wait on the client.
type RequestHandler = fn(&Context, &Query, &Request) -> Result<Reply, HttpError>;

/// A route's handler, by what it reads from the request (the transport calls one function for every
/// request, [`Endpoints`]' `answer`, which finds the route: [`answer`]).
enum Handle {
    Query(QueryHandler),
    Request(RequestHandler),
}

/// A read-only endpoint.
const fn get(path: &'static str, parameters: &'static [&'static str], handle: QueryHandler) -> Route {
    Route { path, methods: Methods::Get, urgent: false, parameters, handle: Handle::Query(handle) }
}

/// An endpoint that changes state: POST is allowed too.
const fn post(path: &'static str, parameters: &'static [&'static str], handle: QueryHandler) -> Route {
    Route { methods: Methods::GetOrPost, ..get(path, parameters, handle) }
}

/// An endpoint that reads the request.
const fn reading(path: &'static str, methods: Methods, handle: RequestHandler) -> Route {
    Route { path, methods, urgent: false, parameters: &[], handle: Handle::Request(handle) }
}

/// An endpoint answered even when every place is taken (see [`Route::urgent`]).
const fn urgent(route: Route) -> Route {
    Route { urgent: true, ..route }
}

/// The dashboard's path: the only one that needs no token.
const DASHBOARD: &str = PREFIX;

const ROUTES: &[Route] = &[
    get(DASHBOARD, &[], dashboard::page),
    get(paths::MEMORY, &["since"], readings::memory),
    post(paths::START, &["duration"], runs::start),
    urgent(post(paths::STOP, &[], runs::stop)),
    urgent(get(paths::STATE, &[], state::state)),
    get(paths::STATISTICS, &["format"], state::statistics),
    post(paths::HEAP_PROFILE, &["active", "trigger_dump", "run"], heap_profile::heap_profile),
    get(paths::DOWNLOAD_RAW, &["id"], downloads::raw),
    get(paths::DOWNLOAD_LABELS, &["id"], downloads::labels),
    get(paths::LABELS, &["id"], downloads::label_bytes),
    get(paths::DOWNLOAD_TEXT, RENDER_PARAMETERS, downloads::text),
    get(paths::DOWNLOAD_GRAPH, RENDER_PARAMETERS, downloads::graph),
    get(paths::DOWNLOAD_FLAMEGRAPH, RENDER_PARAMETERS, downloads::flame_graph),
    get(paths::DOWNLOAD_COLLAPSED, RENDER_PARAMETERS, downloads::collapsed),
    get(paths::DOWNLOAD_PPROF, &["id", "base", "net", "view", "label"], downloads::pprof),
    get(paths::DOWNLOAD_OTLP, &["id", "base", "net", "view", "label"], downloads::otlp),
    get(paths::PPROF_HEAP, &[], downloads::newest_raw),
    get(paths::PPROF_CMDLINE, &[], symbols::command_line),
    reading(paths::PPROF_SYMBOL, Methods::GetOrPost, symbols::symbol),
    Route { parameters: &["seconds", "gc"], ..reading(paths::DEBUG_PPROF_HEAP, Methods::Get, debug_pprof::heap) },
    Route { parameters: &["seconds", "gc"], ..reading(paths::DEBUG_PPROF_ALLOCS, Methods::Get, debug_pprof::allocs) },
    get(paths::METRICS, &[], metrics::metrics),
    reading(paths::DEBUG_PPROF_SYMBOL, Methods::GetOrPost, symbols::symbol),
    Route { methods: Methods::Post, ..get(paths::CLEAR_EARLIER, &[], runs::clear_earlier) },
    get(paths::EXPLAIN, &[], explain::explain),
    Route { methods: Methods::Post, ..get(paths::PURGE, &[], freed_pages::purge) },
    Route {
        methods: Methods::Post,
        ..get(paths::DECAY, &["dirty_ms", "muzzy_ms", "background_thread"], freed_pages::decay)
    },
    get(paths::GROWING, &[], growing::growing),
];

/// Whether `url` is the dashboard page: it holds no data, so it needs no token and may be opened from a
/// link on any page.
fn is_dashboard_page(url: &str) -> bool {
    split(url).0 == DASHBOARD
}

/// The path without trailing slashes (ignored, as in Mesos), and the query.
fn split(url: &str) -> (&str, &str) {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    (path.trim_end_matches('/'), query)
}

/// Answers one request, once its credentials are checked.
fn route(context: &Context, request: &Request) -> Result<Reply, HttpError> {
    let (path, query) = split(&request.target);
    let route = ROUTES.iter().find(|route| route.path == path).ok_or_else(|| unknown_path(path))?;
    let method = request.method.as_str();
    if !route.methods.allow(method) {
        return Err(HttpError::method_not_allowed(method, route.methods.names()));
    }
    let query = Query::parse(query, route.parameters)?;
    match route.handle {
        Handle::Query(handle) => handle(context, &query),
        Handle::Request(handle) => handle(context, &query, request),
    }
}

fn unknown_path(path: &str) -> HttpError {
    let known: Vec<&str> = ROUTES.iter().map(|route| route.path).collect();
    let path = if path.is_empty() { "/" } else { path };
    HttpError::not_found(format!("No endpoint at '{path}'; the endpoints are {}", known.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Fields;
    use crate::profiler::Profiler;

    fn request(method: &str, target: &str) -> Request {
        Request::new(method, target, Vec::new())
    }

    #[test]
    fn unknown_paths_list_the_endpoints() {
        let root = route(context(), &request("GET", "/")).err().unwrap();
        assert!(
            root.message.starts_with("No endpoint at '/'; the endpoints are /memory-profiler,"),
            "{}",
            root.message
        );
        let error = route(context(), &request("GET", "/memory-profiler/strat?duration=5mins")).err().unwrap();
        assert_eq!(error.status, 404);
        assert!(error.message.starts_with(
            "No endpoint at '/memory-profiler/strat'; the endpoints are /memory-profiler, /memory-profiler/memory, /memory-profiler/start,"
        ));
    }

    #[test]
    fn a_context_with_a_token_refuses_every_request_without_it_but_the_dashboard_page() {
        let context = Context::new(Some("s3cret".to_owned()), true);
        let status = |target: &str, authorization: Option<&str>| {
            let fields = Fields { authorization: authorization.map(str::to_owned), ..Fields::default() };
            answer(&context, &Request { fields, ..request("GET", target) }).status()
        };
        assert_eq!(status("/memory-profiler/state", None), 401);
        assert_eq!(status("/memory-profiler/state", Some("Bearer wrong")), 401);
        assert_eq!(status("/memory-profiler/state", Some("Bearer s3cret")), 200);
        assert_eq!(status("/memory-profiler/", None), 200);
        assert_eq!(status("/memory-profiler/nowhere", Some("Bearer s3cret")), 404);
        let open = Context::new(None, true);
        assert_eq!(answer(&open, &request("GET", "/metrics")).status(), 200);
    }

    #[test]
    fn pages_of_other_sites_reach_only_the_dashboard_page() {
        let open = Context::new(None, true);
        let cross_site = |target: &str| {
            let fields = Fields { fetch_site: Some("cross-site".to_owned()), ..Fields::default() };
            answer(&open, &Request { fields, ..request("GET", target) }).status()
        };
        assert_eq!(cross_site("/memory-profiler/start?duration=1days"), 403);
        assert_eq!(cross_site("/memory-profiler/state"), 403);
        assert_eq!(cross_site("/memory-profiler/"), 200);
        assert_eq!(Profiler::global().overview().current.map(|run| run.id), None, "no run was started");
    }

    #[test]
    fn only_state_and_stop_are_urgent_requests() {
        let urgent = |target: &str| is_urgent(&request("GET", target));
        assert!(urgent("/memory-profiler/state") && urgent("/memory-profiler/state/?x=1"));
        assert!(urgent("/memory-profiler/stop"));
        assert!(!urgent("/memory-profiler/start") && !urgent("/metrics") && !urgent("/memory-profiler/"));
        assert!(!urgent("/memory-profiler/download/text") && !urgent("/memory-profiler/stateful"));
    }

    #[test]
    fn reads_take_only_get() {
        let error = route(context(), &request("POST", "/memory-profiler/state/")).err().unwrap();
        assert_eq!((error.status, error.message.as_str()), (405, "Method POST is not allowed here; use GET, HEAD"));
        let error = route(context(), &request("DELETE", "/memory-profiler/stop")).err().unwrap();
        assert_eq!(
            (error.status, error.message.as_str()),
            (405, "Method DELETE is not allowed here; use GET, HEAD, POST")
        );
    }
}
