//! memprof's endpoints on the program's own HTTP server, over the `http` crate's types (feature `http`):
//! the same routes, token, limits and answers as the built-in server, with no async runtime required.
//! GreptimeDB, Materialize and Neon serve heap profiles from their existing router the same way.
//!
//! [`respond`] blocks while it works (a symbolized profile takes milliseconds to seconds): call it off
//! the async workers (`spawn_blocking`, a thread), or use the `axum` feature's routers, which do. The
//! calling thread's allocations are not sampled while it works, so serving never shows in a profile.

use crate::http::{self, HttpError, MAX_BODY, MAX_TARGET, Request};
use crate::jemalloc;

/// Answers one request for memprof's endpoints. The request's path is the full one the built-in server
/// would see (`/memory-profiler/state`, `/debug/pprof/heap`, ...): a router that strips a prefix puts it
/// back first. The answer to `HEAD` carries a body, which the server drops (hyper does).
///
/// ```no_run
/// let request = http::Request::get("/memory-profiler/state").body(Vec::new()).unwrap();
/// let response = memprof_runtime::endpoints::respond(request);
/// assert_eq!(response.status(), 200);
/// ```
pub fn respond(request: ::http::Request<Vec<u8>>) -> ::http::Response<Vec<u8>> {
    let (parts, body) = request.into_parts();
    let target = parts.uri.path_and_query().map_or("/", |target| target.as_str());
    if target.len() > MAX_TARGET {
        return refusal(HttpError::new(414, format!("The request target is longer than {MAX_TARGET} bytes")));
    }
    if body.len() > MAX_BODY {
        return refusal(http::body_too_large());
    }
    let authorization = parts
        .headers
        .get(::http::header::AUTHORIZATION)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).trim().to_owned());
    let request = Request::new(parts.method.as_str().to_owned(), target.to_owned(), authorization, body);
    jemalloc::unsampled(|| {
        answer_mounted(&request).into_http().unwrap_or_else(|error| {
            refusal(HttpError::internal(format!("Cannot read the profile to send ({error}); start a new run")))
        })
    })
}

/// Answers a request that came through the program's own HTTP server, as the built-in server would.
fn answer_mounted(request: &Request) -> http::Response {
    if let Err(error) = crate::history::start() {
        crate::report::warn(&format!("The dashboard's memory chart stays empty: cannot start its thread ({error})"));
    }
    http::guarded(|| super::answer(super::context(), request))
}

/// An error as an `http` response.
pub(crate) fn refusal(error: HttpError) -> ::http::Response<Vec<u8>> {
    let status = error.status;
    error.into_response().into_http().unwrap_or_else(|_| {
        let mut response = ::http::Response::new(Vec::new());
        *response.status_mut() = ::http::StatusCode::from_u16(status).unwrap_or_default();
        response
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(target: &str) -> ::http::Response<Vec<u8>> {
        respond(::http::Request::get(target).body(Vec::new()).unwrap())
    }

    #[test]
    fn requests_are_routed_and_refused_as_by_the_built_in_server() {
        let missing = get("/memory-profiler/nowhere");
        assert_eq!(missing.status(), 404);
        assert_eq!(missing.headers()["content-type"], "text/plain; charset=utf-8");
        assert!(String::from_utf8_lossy(missing.body()).starts_with("No endpoint at '/memory-profiler/nowhere'"));
        let bad = get("/memory-profiler/start?duration=600");
        assert_eq!(bad.status(), 400);
        let wrong_method = respond(::http::Request::delete("/memory-profiler/state").body(Vec::new()).unwrap());
        assert_eq!(wrong_method.status(), 405);
        assert_eq!(wrong_method.headers()["allow"], "GET, HEAD");
        let page = get("/memory-profiler/");
        assert_eq!(page.status(), 200);
        assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
        let long = get(&format!("/memory-profiler/state?{}", "a".repeat(MAX_TARGET)));
        assert_eq!(long.status(), 414);
        let large = respond(::http::Request::post("/debug/pprof/symbol").body(vec![b'0'; MAX_BODY + 1]).unwrap());
        assert_eq!(large.status(), 413);
    }
}
