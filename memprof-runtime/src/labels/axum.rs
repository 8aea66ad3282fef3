//! Labels from axum: each request's allocations labelled with the route it matched.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;

use super::WithLabels;

/// The route a request that matched none is labelled with.
pub const UNMATCHED_ROUTE: &str = "(unmatched)";

/// axum middleware that labels everything a request allocates, in its handler and the layers inside this
/// one, with `route=<the route it matched>` (`/sessions/{id}`, never the raw path, so the label's values
/// stay as few as the routes). One line on the program's router:
///
/// ```no_run
/// let app: axum::Router = axum::Router::new()
///     .route("/sessions", axum::routing::post(|| async { "opened" }))
///     .layer(axum::middleware::from_fn(memprof_runtime::labels::label_by_route));
/// ```
pub async fn label_by_route(request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map_or(UNMATCHED_ROUTE, MatchedPath::as_str).to_owned();
    next.run(request).with_labels(&[("route", &route)]).await
}
