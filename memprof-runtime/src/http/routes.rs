//! The endpoints under `/memory-profiler`, with the methods and parameters each takes.

use tiny_http::Method;

use super::query::Query;
use super::reply::{HttpError, Reply};
use super::{downloads, runs, state};

/// Where every endpoint lives.
pub(crate) const PREFIX: &str = "/memory-profiler";

/// One endpoint: its path below [`PREFIX`], whether it changes state (then POST is allowed besides GET),
/// its parameters and its handler.
struct Route {
    path: &'static str,
    changes_state: bool,
    parameters: &'static [&'static str],
    handle: fn(&Query) -> Result<Reply, HttpError>,
}

const ROUTES: &[Route] = &[
    Route { path: "/start", changes_state: true, parameters: &["duration"], handle: runs::start },
    Route { path: "/stop", changes_state: true, parameters: &[], handle: runs::stop },
    Route { path: "/state", changes_state: false, parameters: &[], handle: state::state },
    Route { path: "/statistics", changes_state: false, parameters: &[], handle: state::statistics },
    Route { path: "/download/raw", changes_state: false, parameters: &["id"], handle: downloads::raw },
    Route { path: "/download/text", changes_state: false, parameters: &["id"], handle: downloads::text },
    Route { path: "/download/graph", changes_state: false, parameters: &["id"], handle: downloads::graph },
];

/// Answers one request. Trailing slashes are ignored, as in Mesos.
pub(crate) fn route(method: &Method, url: &str) -> Result<Reply, HttpError> {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let path = path.trim_end_matches('/');
    let route = path
        .strip_prefix(PREFIX)
        .and_then(|rest| ROUTES.iter().find(|route| route.path == rest))
        .ok_or_else(|| unknown_path(path))?;
    let allowed = matches!((method, route.changes_state), (Method::Get, _) | (Method::Post, true));
    if !allowed {
        let allow = if route.changes_state { "GET, POST" } else { "GET" };
        return Err(HttpError::method_not_allowed(method.as_str(), allow));
    }
    (route.handle)(&Query::parse(query, route.parameters)?)
}

fn unknown_path(path: &str) -> HttpError {
    let known: Vec<String> = ROUTES.iter().map(|route| format!("{PREFIX}{}", route.path)).collect();
    HttpError::not_found(format!("No endpoint at '{path}'; the endpoints are {}", known.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_paths_list_the_endpoints() {
        let error = route(&Method::Get, "/memory-profiler/strat?duration=5mins").err().unwrap();
        assert_eq!(error.status, 404);
        assert!(error.message.starts_with(
            "No endpoint at '/memory-profiler/strat'; the endpoints are /memory-profiler/start, /memory-profiler/stop,"
        ));
    }

    #[test]
    fn reads_take_only_get() {
        let error = route(&Method::Post, "/memory-profiler/state/").err().unwrap();
        assert_eq!((error.status, error.message.as_str()), (405, "Method POST is not allowed here; use GET"));
        let error = route(&Method::Delete, "/memory-profiler/stop").err().unwrap();
        assert_eq!((error.status, error.message.as_str()), (405, "Method DELETE is not allowed here; use GET, POST"));
    }
}
