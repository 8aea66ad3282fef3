//! The HTTP endpoints: a few named tiny_http worker threads, each answering requests one at a time.

mod auth;
mod controls;
mod downloads;
mod live;
mod metrics;
pub(crate) mod query;
mod reply;
mod routes;
mod runs;
mod state;
mod symbols;

use std::io::Read;
use std::net::SocketAddr;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::thread;

use tiny_http::{Request, Server};

use crate::jemalloc;
use reply::HttpError;

pub(crate) use auth::required as token_required;
pub(crate) use routes::PREFIX;

/// Worker threads: a slow download or dump on one leaves `state` and `stop` answered by the others.
const WORKERS: usize = 4;

/// Binds `address` and starts the workers; returns the address really bound (useful with port 0). With a
/// `token`, every request must present it.
pub(crate) fn serve(address: &str, token: Option<String>) -> Result<SocketAddr, String> {
    auth::require(token);
    let server = Server::http(address).map_err(|error| format!("cannot listen on {address}: {error}"))?;
    let bound = server.server_addr().to_ip().ok_or_else(|| format!("{address} is not an IP address"))?;
    let server = Arc::new(server);
    for index in 0..WORKERS {
        let server = Arc::clone(&server);
        thread::Builder::new()
            .name(format!("memprof-http-{index}"))
            .spawn(move || {
                jemalloc::set_this_thread_sampled(false);
                for request in server.incoming_requests() {
                    answer(request);
                }
            })
            .map_err(|error| format!("cannot start the HTTP thread ({error})"))?;
    }
    Ok(bound)
}

/// The largest request body read (a symbol lookup of some 50,000 addresses).
const MAX_BODY: u64 = 1 << 20;
/// The longest request target (path and query) answered.
const MAX_TARGET: usize = 8 << 10;
/// The most header bytes (names and values) answered.
const MAX_HEADERS: usize = 16 << 10;

/// 414 or 431 for a request larger than any memprof endpoint needs.
fn check_size(request: &Request) -> Result<(), HttpError> {
    if request.url().len() > MAX_TARGET {
        return Err(HttpError::new(414, format!("The request target is longer than {MAX_TARGET} bytes")));
    }
    let headers: usize =
        request.headers().iter().map(|header| header.field.as_str().as_str().len() + header.value.as_str().len()).sum();
    if headers > MAX_HEADERS {
        return Err(HttpError::new(431, format!("The request headers are larger than {MAX_HEADERS} bytes")));
    }
    Ok(())
}

/// Answers one request; a panic in a handler becomes a 500 and the worker lives on.
fn answer(mut request: Request) {
    let mut body = Vec::new();
    let read = request.as_reader().take(MAX_BODY + 1).read_to_end(&mut body);
    let outcome = match read {
        _ if let Err(refused) = check_size(&request).and_then(|()| auth::check(&request)) => Ok(Err(refused)),
        Err(error) => Ok(Err(HttpError::bad_request(format!("Cannot read the request body ({error})")))),
        Ok(_) if body.len() as u64 > MAX_BODY => {
            Ok(Err(HttpError::new(413, format!("The request body is larger than {MAX_BODY} bytes"))))
        }
        Ok(_) => panic::catch_unwind(AssertUnwindSafe(|| routes::route(request.method(), request.url(), &body))),
    };
    let response = match outcome {
        Ok(Ok(reply)) => reply.into_response(),
        Ok(Err(error)) => error.into_response(),
        Err(_) => {
            HttpError::internal("memprof failed while answering this request; see the program's log").into_response()
        }
    };
    // A client that went away is not an error of ours.
    let _ = request.respond(response);
}
