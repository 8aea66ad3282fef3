//! Labels from axum: each request's allocations labelled with the route it matched.

use std::task::{Context, Poll};

use axum::extract::{MatchedPath, Request};

use super::future::{Labelled, labelled_as};
use super::in_force::current;
use super::table;

/// The route a request that matched none is labelled with.
pub const UNMATCHED_ROUTE: &str = "(unmatched)";

/// A tower layer for the program's axum router that labels everything a request allocates, in its handler
/// and the layers inside this one, with `route=<the route it matched>` (`/sessions/{id}`, never the raw
/// path, so the label's values stay as few as the routes). One line on the router:
///
/// ```no_run
/// let app: axum::Router = axum::Router::new()
///     .route("/sessions", axum::routing::post(|| async { "opened" }))
///     .layer(memprof_runtime::labels::route_labels());
/// ```
///
/// Compiled out, `memprof::axum::route_labels()` makes a layer whose service is the inner one itself: no
/// code runs.
pub fn route_labels() -> RouteLabels {
    RouteLabels
}

/// The layer [`route_labels`] makes.
#[derive(Debug, Clone, Copy, Default)]
pub struct RouteLabels;

impl<S> tower_layer::Layer<S> for RouteLabels {
    type Service = RouteLabelled<S>;

    fn layer(&self, inner: S) -> RouteLabelled<S> {
        RouteLabelled { inner }
    }
}

/// A service whose responses are computed with the request's route as a label; see [`route_labels`].
#[derive(Debug, Clone)]
pub struct RouteLabelled<S> {
    inner: S,
}

impl<S: tower_service::Service<Request>> tower_service::Service<Request> for RouteLabelled<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = Labelled<S::Future>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let route = request.extensions().get::<MatchedPath>().map_or(UNMATCHED_ROUTE, MatchedPath::as_str);
        let labels = table::intern(current(), &[("route", route)]);
        labelled_as(self.inner.call(request), labels)
    }
}
