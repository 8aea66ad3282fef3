//! The transport: an accept loop that hands each connection to a thread of its pool (or lets it wait at a
//! door it polls), with deadlines and
//! size limits (`server`, `connection`), request heads (`head`, pure parsing), the request handlers see
//! (`request`), queries (`query`) and what is written back (`reply`). It knows nothing of profiles: what is
//! answered is [`crate::endpoints`]'s business.

mod bodies;
mod connection;
mod head;
pub(crate) mod query;
mod reply;
mod request;
mod server;

use std::net::{SocketAddr, TcpListener};

pub(crate) use head::Fields;
#[cfg(feature = "fuzzing")]
pub(crate) use head::parse_head as parse_request_head;
#[cfg(feature = "http")]
pub(crate) use head::{
    MAX_BODY, MAX_HEADER_FIELDS, MAX_HEADERS, MAX_TARGET, body_too_large, headers_too_large, target_too_long,
    too_many_fields,
};
pub(crate) use query::Query;
#[cfg(test)]
pub(crate) use reply::Framing;
#[cfg(feature = "http")]
pub(crate) use reply::guarded;
pub(crate) use reply::{HttpError, Reply, Response};
pub(crate) use request::Request;
#[cfg(feature = "http")]
pub(crate) use request::Wait;
#[cfg(feature = "axum")]
pub(crate) use request::{client_gone, wait_unless};
pub(crate) use server::{Opening, Service};

/// Binds `address` and serves `service` there, from when the [`Opening`] returned is dropped; returns the
/// address really bound (useful with port 0).
pub(crate) fn serve(address: &str, service: std::sync::Arc<dyn Service>) -> Result<(SocketAddr, Opening), String> {
    let listener = TcpListener::bind(address).map_err(|error| format!("cannot listen on {address}: {error}"))?;
    let bound = listener.local_addr().map_err(|error| format!("cannot listen on {address}: {error}"))?;
    let opening =
        server::start(listener, service).map_err(|error| format!("cannot start the HTTP threads ({error})"))?;
    Ok((bound, opening))
}
