//! The HTTP endpoints: an accept loop that gives each connection its own unsampled thread, with deadlines
//! and size limits (`server`, `connection`), and the routes.

mod auth;
mod connection;
mod controls;
mod dashboard;
mod downloads;
mod live;
mod metrics;
pub(crate) mod query;
mod reply;
mod routes;
mod runs;
mod server;
mod state;
mod symbols;

use std::net::{SocketAddr, TcpListener};

pub(crate) use connection::Request;
#[cfg(feature = "http")]
pub(crate) use connection::{MAX_BODY, MAX_TARGET, body_too_large};
#[cfg(feature = "http")]
pub(crate) use reply::HttpError;
use reply::Response;

pub(crate) use auth::required as token_required;
#[cfg(feature = "fuzzing")]
pub(crate) use connection::parse_head as parse_request_head;
pub(crate) use routes::PREFIX;

/// Sets the token every request must present from now on, if any (once, at start-up).
pub(crate) fn require_token(token: Option<String>) {
    auth::require(token);
}

/// Binds `address` and starts serving; returns the address really bound (useful with port 0).
pub(crate) fn serve(address: &str) -> Result<SocketAddr, String> {
    let listener = TcpListener::bind(address).map_err(|error| format!("cannot listen on {address}: {error}"))?;
    let bound = listener.local_addr().map_err(|error| format!("cannot listen on {address}: {error}"))?;
    server::start(listener, answer).map_err(|error| format!("cannot start the HTTP thread ({error})"))?;
    crate::history::start().map_err(|error| format!("cannot start the memory history thread ({error})"))?;
    Ok(bound)
}

/// Answers a request that came through the program's own HTTP server, as the built-in server would.
#[cfg(feature = "http")]
pub(crate) fn answer_mounted(request: &Request) -> Response {
    if let Err(error) = crate::history::start() {
        crate::report::warn(&format!("The dashboard's memory chart stays empty: cannot start its thread ({error})"));
    }
    reply::guarded(|| answer(request))
}

/// Answers one request: checks its credentials (but for the dashboard page), then routes it.
fn answer(request: &Request) -> Response {
    let allowed =
        if routes::needs_token(&request.target) { auth::check(request.authorization.as_deref()) } else { Ok(()) };
    let routed = allowed.and_then(|()| routes::route(&request.method, &request.target, &request.body));
    match routed {
        Ok(reply) => reply.into_response(),
        Err(error) => error.into_response(),
    }
}
