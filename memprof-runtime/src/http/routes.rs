//! The endpoints, with the methods and parameters each takes: Mesos's under `/memory-profiler`, and the
//! symbol service of pprof's remote protocol under `/debug/pprof` (and, for jeprof, under the prefix).

use super::query::Query;
use super::reply::{HttpError, Reply};
use super::{controls, dashboard, downloads, live, metrics, runs, state, symbols};

pub(crate) use memprof_wire::paths::{self, PREFIX};

/// The parameters of the rendered downloads.
const RENDER_PARAMETERS: &[&str] = &["id", "base", "lines"];

/// One endpoint: its full path, whether POST is allowed besides GET, its parameters and its handler.
struct Route {
    path: &'static str,
    accepts_post: bool,
    parameters: &'static [&'static str],
    handle: Handler,
}

/// What a handler reads from the request.
enum Handler {
    Query(fn(&Query) -> Result<Reply, HttpError>),
    QueryAndBody(fn(&Query, &[u8]) -> Result<Reply, HttpError>),
}

/// A read-only endpoint.
const fn get(
    path: &'static str,
    parameters: &'static [&'static str],
    handle: fn(&Query) -> Result<Reply, HttpError>,
) -> Route {
    Route { path, accepts_post: false, parameters, handle: Handler::Query(handle) }
}

/// An endpoint that changes state: POST is allowed too.
const fn post(
    path: &'static str,
    parameters: &'static [&'static str],
    handle: fn(&Query) -> Result<Reply, HttpError>,
) -> Route {
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
pub(crate) fn needs_token(url: &str) -> bool {
    split(url).0 != DASHBOARD
}

/// The path without trailing slashes (ignored, as in Mesos), and the query.
fn split(url: &str) -> (&str, &str) {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    (path.trim_end_matches('/'), query)
}

/// Answers one request.
pub(crate) fn route(method: &str, url: &str, body: &[u8]) -> Result<Reply, HttpError> {
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
        Handler::Query(handle) => handle(&query),
        Handler::QueryAndBody(handle) => handle(&query, body),
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
        let error = route("GET", "/memory-profiler/strat?duration=5mins", b"").err().unwrap();
        assert_eq!(error.status, 404);
        assert!(error.message.starts_with(
            "No endpoint at '/memory-profiler/strat'; the endpoints are /memory-profiler, /memory-profiler/memory, /memory-profiler/start,"
        ));
    }

    #[test]
    fn reads_take_only_get() {
        let error = route("POST", "/memory-profiler/state/", b"").err().unwrap();
        assert_eq!((error.status, error.message.as_str()), (405, "Method POST is not allowed here; use GET, HEAD"));
        let error = route("DELETE", "/memory-profiler/stop", b"").err().unwrap();
        assert_eq!(
            (error.status, error.message.as_str()),
            (405, "Method DELETE is not allowed here; use GET, HEAD, POST")
        );
    }
}
