//! What the endpoints answer, whatever carries the requests (the built-in server in `http/`, or the
//! program's own through `respond` and the `axum` routers): the routes, with the methods and parameters
//! each takes (Mesos's under `/memory-profiler`, Go's under `/debug/pprof`), the token check, and one
//! module per family of handlers. Handlers get a `Context` (the profiler, the token) instead of reaching
//! for process-wide state, so they can be tried on their own.

mod answers;
mod auth;
mod controls;
mod dashboard;
mod downloads;
mod live;
mod metrics;
#[cfg(feature = "http")]
mod mounted;
pub(crate) mod rendered;
mod runs;
mod state;
mod symbols;

use std::sync::OnceLock;

use memprof_wire::paths::{self, PREFIX};

use crate::http::{HttpError, Query, Reply, Request, Response};
use crate::profiler::Profiler;

#[cfg(feature = "axum")]
pub(crate) use mounted::refusal as mounted_refusal;
#[cfg(feature = "http")]
pub use mounted::respond;

/// What handlers work with.
pub(crate) struct Context {
    /// The profiler whose runs and profiles are served.
    pub(crate) profiler: &'static Profiler,
    /// The token every request must present, if any.
    pub(crate) token: Option<String>,
}

/// The context of this process's endpoints, set by [`crate::start`]; a router used without `start` gets
/// the token of `MEMPROF_TOKEN` (never none for want of a call).
static CONTEXT: OnceLock<Context> = OnceLock::new();

/// Sets the context of this process's endpoints (once, at start-up); an empty token counts as none.
pub(crate) fn set_up(token: Option<String>) -> &'static Context {
    CONTEXT.get_or_init(|| Context { profiler: Profiler::global(), token: token.filter(|token| !token.is_empty()) })
}

/// The context of this process's endpoints: [`crate::start`]'s, else one with `MEMPROF_TOKEN`'s token.
#[cfg(any(test, feature = "http"))]
pub(crate) fn context() -> &'static Context {
    set_up(std::env::var(crate::environment::TOKEN).ok())
}

/// Answers one request in `context`: checks its credentials (but for the dashboard page), then routes it.
pub(crate) fn answer(context: &Context, request: &Request) -> Response {
    let allowed = if needs_token(&request.target) {
        auth::check(context.token.as_deref(), request.authorization.as_deref())
    } else {
        Ok(())
    };
    let routed = allowed.and_then(|()| route(context, &request.method, &request.target, &request.body));
    match routed {
        Ok(reply) => reply.into_response(),
        Err(error) => error.into_response(),
    }
}

/// The parameters of the rendered downloads.
const RENDER_PARAMETERS: &[&str] = &["id", "base", "lines", "full"];

/// One endpoint: its full path, whether POST is allowed besides GET, its parameters and its handler.
struct Route {
    path: &'static str,
    accepts_post: bool,
    parameters: &'static [&'static str],
    handle: Handler,
}

/// A handler that reads the query.
type QueryHandler = fn(&Context, &Query) -> Result<Reply, HttpError>;

/// What a handler reads from the request.
enum Handler {
    Query(QueryHandler),
    QueryAndBody(fn(&Context, &Query, &[u8]) -> Result<Reply, HttpError>),
}

/// A read-only endpoint.
const fn get(path: &'static str, parameters: &'static [&'static str], handle: QueryHandler) -> Route {
    Route { path, accepts_post: false, parameters, handle: Handler::Query(handle) }
}

/// An endpoint that changes state: POST is allowed too.
const fn post(path: &'static str, parameters: &'static [&'static str], handle: QueryHandler) -> Route {
    Route { accepts_post: true, ..get(path, parameters, handle) }
}

/// The dashboard's path: the only one that needs no token.
const DASHBOARD: &str = PREFIX;

const ROUTES: &[Route] = &[
    get(DASHBOARD, &[], dashboard::page),
    get(paths::MEMORY, &["since"], dashboard::memory),
    post(paths::START, &["duration"], runs::start),
    post(paths::STOP, &[], runs::stop),
    get(paths::STATE, &[], state::state),
    get(paths::STATISTICS, &["format"], state::statistics),
    post(paths::HEAP_PROFILE, &["active", "trigger_dump"], controls::heap_profile),
    get(paths::DOWNLOAD_RAW, &["id"], downloads::raw),
    get(paths::DOWNLOAD_TEXT, RENDER_PARAMETERS, downloads::text),
    get(paths::DOWNLOAD_GRAPH, RENDER_PARAMETERS, downloads::graph),
    get(paths::DOWNLOAD_FLAMEGRAPH, RENDER_PARAMETERS, downloads::flame_graph),
    get(paths::DOWNLOAD_COLLAPSED, RENDER_PARAMETERS, downloads::collapsed),
    get(paths::DOWNLOAD_PPROF, &["id", "base"], downloads::pprof),
    get(paths::PPROF_HEAP, &[], downloads::raw),
    get(paths::PPROF_CMDLINE, &[], symbols::command_line),
    Route {
        path: paths::PPROF_SYMBOL,
        accepts_post: true,
        parameters: &[],
        handle: Handler::QueryAndBody(symbols::symbol),
    },
    get(paths::DEBUG_PPROF_HEAP, &["seconds", "gc"], live::heap),
    get(paths::DEBUG_PPROF_ALLOCS, &["seconds", "gc"], live::allocs),
    get(paths::METRICS, &[], metrics::metrics),
    Route {
        path: paths::DEBUG_PPROF_SYMBOL,
        accepts_post: true,
        parameters: &[],
        handle: Handler::QueryAndBody(symbols::symbol),
    },
];

/// Whether the request for `url` must carry the token (all but the dashboard page).
fn needs_token(url: &str) -> bool {
    split(url).0 != DASHBOARD
}

/// The path without trailing slashes (ignored, as in Mesos), and the query.
fn split(url: &str) -> (&str, &str) {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    (path.trim_end_matches('/'), query)
}

/// Answers one request, once its credentials are checked.
fn route(context: &Context, method: &str, url: &str, body: &[u8]) -> Result<Reply, HttpError> {
    let (path, query) = split(url);
    let route = ROUTES.iter().find(|route| route.path == path).ok_or_else(|| unknown_path(path))?;
    // HEAD wherever GET is allowed (RFC 9110 9.3.2): the same answer, of which only the head is sent.
    let allowed = matches!((method, route.accepts_post), ("GET" | "HEAD", _) | ("POST", true));
    if !allowed {
        let allow = if route.accepts_post { "GET, HEAD, POST" } else { "GET, HEAD" };
        return Err(HttpError::method_not_allowed(method, allow));
    }
    let query = Query::parse(query, route.parameters)?;
    match route.handle {
        Handler::Query(handle) => handle(context, &query),
        Handler::QueryAndBody(handle) => handle(context, &query, body),
    }
}

fn unknown_path(path: &str) -> HttpError {
    let known: Vec<&str> = ROUTES.iter().map(|route| route.path).collect();
    HttpError::not_found(format!("No endpoint at '{path}'; the endpoints are {}", known.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_paths_list_the_endpoints() {
        let error = route(context(), "GET", "/memory-profiler/strat?duration=5mins", b"").err().unwrap();
        assert_eq!(error.status, 404);
        assert!(error.message.starts_with(
            "No endpoint at '/memory-profiler/strat'; the endpoints are /memory-profiler, /memory-profiler/memory, /memory-profiler/start,"
        ));
    }

    #[test]
    fn a_context_with_a_token_refuses_every_request_without_it_but_the_dashboard_page() {
        let context = Context { profiler: Profiler::global(), token: Some("s3cret".to_owned()) };
        let status = |target: &str, authorization: Option<&str>| {
            let request =
                Request::new("GET".to_owned(), target.to_owned(), authorization.map(str::to_owned), Vec::new());
            answer(&context, &request).status()
        };
        assert_eq!(status("/memory-profiler/state", None), 401);
        assert_eq!(status("/memory-profiler/state", Some("Bearer wrong")), 401);
        assert_eq!(status("/memory-profiler/state", Some("Bearer s3cret")), 200);
        assert_eq!(status("/memory-profiler/", None), 200);
        assert_eq!(status("/memory-profiler/nowhere", Some("Bearer s3cret")), 404);
        let open = Context { profiler: Profiler::global(), token: None };
        let request = Request::new("GET".to_owned(), "/metrics".to_owned(), None, Vec::new());
        assert_eq!(answer(&open, &request).status(), 200);
    }

    #[test]
    fn reads_take_only_get() {
        let error = route(context(), "POST", "/memory-profiler/state/", b"").err().unwrap();
        assert_eq!((error.status, error.message.as_str()), (405, "Method POST is not allowed here; use GET, HEAD"));
        let error = route(context(), "DELETE", "/memory-profiler/stop", b"").err().unwrap();
        assert_eq!(
            (error.status, error.message.as_str()),
            (405, "Method DELETE is not allowed here; use GET, HEAD, POST")
        );
    }
}
