//! The transport: an accept loop that gives each connection its own unsampled thread, with deadlines and
//! size limits (`server`, `connection`), requests' queries (`query`) and what is written back (`reply`).
//! What is answered is [`crate::endpoints`]'s business.

mod connection;
pub(crate) mod query;
mod reply;
mod server;

use std::net::{SocketAddr, TcpListener};

pub(crate) use connection::Request;
#[cfg(feature = "fuzzing")]
pub(crate) use connection::parse_head as parse_request_head;
#[cfg(feature = "http")]
pub(crate) use connection::{MAX_BODY, MAX_TARGET, body_too_large};
pub(crate) use query::Query;
#[cfg(feature = "http")]
pub(crate) use reply::guarded;
pub(crate) use reply::{HttpError, Reply, Response};
pub(crate) use server::Handler;

/// Binds `address` and answers each request with `handle`; returns the address really bound (useful with
/// port 0).
pub(crate) fn serve(address: &str, handle: Handler) -> Result<SocketAddr, String> {
    let listener = TcpListener::bind(address).map_err(|error| format!("cannot listen on {address}: {error}"))?;
    let bound = listener.local_addr().map_err(|error| format!("cannot listen on {address}: {error}"))?;
    server::start(listener, handle).map_err(|error| format!("cannot start the HTTP thread ({error})"))?;
    Ok(bound)
}
