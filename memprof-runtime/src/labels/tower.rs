//! Labels from the requests of any tower service (tonic, hyper, tower-http stacks): everything a request
//! allocates labelled with what the program reads from its head.

use std::task::{Context, Poll};

use super::future::{Labelled, labelled_as};
use super::in_force::{current, replace};
use super::table;

/// A tower layer that labels everything each request allocates (in the services inside it, its handler,
/// and the response's making) with the labels `labels` reads from the request's URI and headers: a
/// tenant from a header or gRPC metadata, a gRPC method from the path. The labels are in force while the
/// inner service is called and on every poll of its future, on whichever worker polls it.
///
/// ```no_run
/// // A tonic server: each call labelled with its caller's tenant (the `x-tenant` metadata) and its method.
/// let layer = memprof_runtime::labels::request_labels(|uri, headers| {
///     let tenant = headers.get("x-tenant").and_then(|value| value.to_str().ok()).unwrap_or("(unknown)");
///     vec![("tenant", tenant.to_owned()), ("method", uri.path().to_owned())]
/// });
/// // tonic::transport::Server::builder().layer(layer).add_service(...)
/// # drop(layer);
/// ```
///
/// As any label, read values that repeat (a tenant, a method), not ones that never do (a request id).
/// Compiled out, `memprof::tower::request_labels` makes a layer whose service is the inner one itself: no
/// code runs.
pub fn request_labels<F>(labels: F) -> RequestLabels<F>
where
    F: Fn(&http::Uri, &http::HeaderMap) -> Vec<(&'static str, String)> + Clone,
{
    RequestLabels { labels }
}

/// The layer [`request_labels`] makes.
#[derive(Debug, Clone, Copy)]
pub struct RequestLabels<F> {
    labels: F,
}

impl<S, F: Clone> tower_layer::Layer<S> for RequestLabels<F> {
    type Service = RequestLabelled<S, F>;

    fn layer(&self, inner: S) -> RequestLabelled<S, F> {
        RequestLabelled { inner, labels: self.labels.clone() }
    }
}

/// A service whose requests are served with their labels in force; see [`request_labels`].
#[derive(Debug, Clone, Copy)]
pub struct RequestLabelled<S, F> {
    inner: S,
    labels: F,
}

impl<S, F, B> tower_service::Service<http::Request<B>> for RequestLabelled<S, F>
where
    S: tower_service::Service<http::Request<B>>,
    F: Fn(&http::Uri, &http::HeaderMap) -> Vec<(&'static str, String)>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Labelled<S::Future>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let pairs = (self.labels)(request.uri(), request.headers());
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(key, value)| (*key, value.as_str())).collect();
        let labels = table::intern(current(), &pairs);
        let outer = replace(labels);
        let future = self.inner.call(request);
        replace(outer);
        labelled_as(future, labels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_layer::Layer;
    use tower_service::Service;

    /// A service that answers the label set in force when it was called and when its future was polled.
    #[derive(Clone, Copy)]
    struct InForce;

    impl Service<http::Request<()>> for InForce {
        type Response = (u32, u32);
        type Error = std::convert::Infallible;
        type Future = std::pin::Pin<Box<dyn Future<Output = Result<(u32, u32), Self::Error>>>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            let called = current();
            Box::pin(async move { Ok((called, current())) })
        }
    }

    #[test]
    fn a_request_is_served_under_the_labels_read_from_its_head_and_the_thread_keeps_its_own() {
        let layer = request_labels(|uri, headers| {
            let tenant = headers.get("x-tenant").and_then(|value| value.to_str().ok()).unwrap_or("(unknown)");
            vec![("tenant", tenant.to_owned()), ("method", uri.path().to_owned())]
        });
        let mut service = layer.layer(InForce);
        let request = http::Request::builder().uri("/shop.Carts/Add").header("x-tenant", "acme-tower-test");
        let future = service.call(request.body(()).unwrap());
        assert_eq!(current(), 0, "the calling thread's labels are its own again");
        let waker = std::task::Waker::noop();
        let Poll::Ready(Ok((called, polled))) = std::pin::pin!(future).poll(&mut Context::from_waker(waker)) else {
            panic!("ready at once")
        };
        assert_eq!(called, polled);
        let set = table::snapshot().get(polled).cloned().unwrap();
        assert_eq!(set.to_string(), "method=/shop.Carts/Add,tenant=acme-tower-test");
    }
}
