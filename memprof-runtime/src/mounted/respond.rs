//! memprof's endpoints on the program's own HTTP server, over the `http` crate's types (feature `http`):
//! the same routes, token, limits and answers as the built-in server, with no async runtime required.
//! GreptimeDB, Materialize and Neon serve heap profiles from their existing router the same way.
//!
//! [`respond`] blocks while it works (a symbolized profile takes milliseconds to seconds): call it off
//! the async workers (`spawn_blocking`, a thread), or use the `axum` feature's routers, which do. The
//! calling thread's allocations are not sampled while it works, so serving never shows in a profile.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::endpoints::{self, Context};
use crate::http::{self, Fields, HttpError, MAX_BODY, MAX_HEADER_FIELDS, MAX_HEADERS, MAX_TARGET, Request, Wait};
use crate::{jemalloc, process::environment, process::messages};

/// Answers one request for memprof's endpoints. The request's path is the full one the built-in server
/// would see (`/memory-profiler/state`, `/debug/pprof/heap`, ...): a router that strips a prefix puts it
/// back first. The answer to `HEAD` carries a body, which the server drops (hyper does).
///
/// As the built-in server, the endpoints are on only when the switch variable is `true`
/// (`LIBPROCESS_MEMORY_PROFILING`, or the `env` of [`crate::start`]'s options): otherwise every request is
/// answered 404, as when memprof is compiled out. The first request logs whether they are on, and whether
/// a token guards them.
///
/// ```no_run
/// let request = http::Request::get("/memory-profiler/state").body(Vec::new()).unwrap();
/// let response = memprof_runtime::mounted::respond(request);
/// assert_eq!(response.status(), 200);
/// ```
pub fn respond(request: ::http::Request<Vec<u8>>) -> ::http::Response<Vec<u8>> {
    respond_waiting(request, None)
}

/// [`respond`], with a handler's waits (`?seconds=N`) ended early by `waiting` (the client left).
pub(crate) fn respond_waiting(
    request: ::http::Request<Vec<u8>>,
    waiting: Option<Arc<dyn Wait>>,
) -> ::http::Response<Vec<u8>> {
    let context = endpoints::context();
    announce(context);
    jemalloc::unsampled(|| respond_in(context, request, waiting))
}

/// Says once how the mounted endpoints are served.
fn announce(context: &Context) {
    if context.announced.swap(true, Ordering::SeqCst) {
        return;
    }
    if !context.switched_on {
        messages::someone_asked();
        messages::info(&format!(
            "Heap profiling endpoints mounted on the program's own server are off (answered 404): set {}=true to serve them",
            environment::SWITCH
        ));
    } else if context.token.is_some() {
        messages::info("Serving heap profiling endpoints on the program's own server; requests need the token");
    } else {
        messages::warn(
            "Serving heap profiling endpoints on the program's own server with no token: anyone who reaches its port can use them; set MEMPROF_TOKEN to require one",
        );
    }
}

fn respond_in(
    context: &Context,
    request: ::http::Request<Vec<u8>>,
    waiting: Option<Arc<dyn Wait>>,
) -> ::http::Response<Vec<u8>> {
    let (parts, body) = request.into_parts();
    let target = parts.uri.path_and_query().map_or("/", |target| target.as_str());
    if !context.switched_on {
        return refusal(HttpError::not_found(format!(
            "No endpoint at '{}': heap profiling endpoints are off (set {}=true)",
            parts.uri.path(),
            environment::SWITCH
        )));
    }
    let request = match read(&parts, target, body) {
        Ok(request) => Request { waiting, ..request },
        Err(error) => return refusal(error),
    };
    http::guarded(|| endpoints::answer(context, &request)).into_http().unwrap_or_else(|error| {
        refusal(HttpError::internal(format!("Cannot read the profile to send ({error}); start a new run")))
    })
}

/// The request as the built-in server would have read it, with its limits.
fn read(parts: &::http::request::Parts, target: &str, body: Vec<u8>) -> Result<Request, HttpError> {
    if target.len() > MAX_TARGET {
        return Err(http::target_too_long());
    }
    if parts.headers.len() > MAX_HEADER_FIELDS {
        return Err(http::too_many_fields());
    }
    let header_bytes: usize = parts.headers.iter().map(|(name, value)| name.as_str().len() + value.len()).sum();
    if header_bytes > MAX_HEADERS {
        return Err(http::headers_too_large());
    }
    if body.len() > MAX_BODY {
        return Err(http::body_too_large());
    }
    let pairs: Vec<(&str, &[u8])> =
        parts.headers.iter().map(|(name, value)| (name.as_str(), value.as_bytes())).collect();
    let mut fields = Fields::read(pairs.into_iter())?;
    // HTTP/2 carries the host as the URI's authority, not a Host field.
    if fields.host.is_none() {
        fields.host = parts.uri.authority().map(|authority| authority.as_str().to_owned());
    }
    Ok(Request { fields, ..Request::new(parts.method.as_str(), target, body) })
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

    fn respond(on: bool, request: ::http::Request<Vec<u8>>) -> ::http::Response<Vec<u8>> {
        respond_in(&Context::new(None, on), request, None)
    }

    fn get(target: &str) -> ::http::Response<Vec<u8>> {
        respond(true, ::http::Request::get(target).body(Vec::new()).unwrap())
    }

    #[test]
    fn requests_are_routed_and_refused_as_by_the_built_in_server() {
        let missing = get("/memory-profiler/nowhere");
        assert_eq!(missing.status(), 404);
        assert_eq!(missing.headers()["content-type"], "text/plain; charset=utf-8");
        assert!(String::from_utf8_lossy(missing.body()).starts_with("No endpoint at '/memory-profiler/nowhere'"));
        let bad = get("/memory-profiler/start?duration=600");
        assert_eq!(bad.status(), 400);
        let wrong_method = respond(true, ::http::Request::delete("/memory-profiler/state").body(Vec::new()).unwrap());
        assert_eq!(wrong_method.status(), 405);
        assert_eq!(wrong_method.headers()["allow"], "GET, HEAD");
        let page = get("/memory-profiler/");
        assert_eq!(page.status(), 200);
        assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
        let long = get(&format!("/memory-profiler/state?{}", "a".repeat(MAX_TARGET)));
        assert_eq!(long.status(), 414);
        let large = respond(true, ::http::Request::post("/debug/pprof/symbol").body(vec![b'0'; MAX_BODY + 1]).unwrap());
        assert_eq!(large.status(), 413);
        let mut many = ::http::Request::get("/memory-profiler/state");
        for index in 0..=MAX_HEADER_FIELDS {
            many = many.header(format!("x-{index}"), "y");
        }
        let many = respond(true, many.body(Vec::new()).unwrap());
        assert_eq!(many.status(), 431);
        let huge = ::http::Request::get("/memory-profiler/state").header("x-big", "y".repeat(MAX_HEADERS));
        assert_eq!(respond(true, huge.body(Vec::new()).unwrap()).status(), 431);
        let cross_site = ::http::Request::get("/memory-profiler/state").header("sec-fetch-site", "cross-site");
        assert_eq!(respond(true, cross_site.body(Vec::new()).unwrap()).status(), 403);
    }

    #[test]
    fn mounted_endpoints_are_off_unless_switched_on() {
        for target in ["/memory-profiler/state", "/memory-profiler/", "/debug/pprof/heap", "/metrics"] {
            let answer = respond(false, ::http::Request::get(target).body(Vec::new()).unwrap());
            assert_eq!(answer.status(), 404, "{target}");
            let text = String::from_utf8_lossy(answer.body()).into_owned();
            assert!(
                text.ends_with("heap profiling endpoints are off (set LIBPROCESS_MEMORY_PROFILING=true).\n"),
                "{text}"
            );
        }
    }
}
