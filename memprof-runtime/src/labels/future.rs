//! Labels that follow a future from poll to poll, across the worker threads of an async runtime.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::in_force::{current, replace};
use super::table;

pin_project_lite::pin_project! {
    /// A future with labels in force on every poll; see [`WithLabels::with_labels`].
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct Labelled<F> {
        #[pin]
        future: F,
        labels: u32,
    }
}

/// Labels a future: `labels`, added to those in force where it is made, are in force on every poll.
///
/// ```
/// use memprof_runtime::labels::WithLabels;
///
/// # async fn handle() {}
/// # fn spawn<F: std::future::Future + Send + 'static>(_: F) {}
/// spawn(handle().with_labels(&[("tenant", "acme")]));
/// ```
pub trait WithLabels: Future + Sized {
    /// This future with `labels` in force whenever it is polled.
    fn with_labels(self, labels: &[(&str, &str)]) -> Labelled<Self> {
        labelled_as(self, table::intern(current(), labels))
    }
}

/// `future` with label set `id` in force whenever it is polled: for labels interned before the future is
/// made (from a request the future then takes).
pub(super) fn labelled_as<F: Future>(future: F, id: u32) -> Labelled<F> {
    Labelled { future, labels: id }
}

impl<F: Future> WithLabels for F {}

impl<F: Future> Future for Labelled<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        /// Puts the poller's labels back, also when the poll panics.
        struct Restore(u32);
        impl Drop for Restore {
            fn drop(&mut self) {
                replace(self.0);
            }
        }
        let _restore = Restore(replace(*this.labels));
        this.future.poll(context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    #[test]
    fn a_labelled_future_has_its_labels_on_each_poll_and_the_poller_keeps_its_own() {
        let mut polls = 0;
        let future = std::future::poll_fn(|context| {
            polls += 1;
            let labels = table::snapshot().get(current()).cloned().unwrap_or_default();
            assert_eq!(labels.get("task"), Some("future-test"));
            if polls < 3 {
                context.waker().wake_by_ref();
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        });
        let mut future = std::pin::pin!(future.with_labels(&[("task", "future-test")]));
        let mut context = Context::from_waker(Waker::noop());
        while future.as_mut().poll(&mut context).is_pending() {
            assert_eq!(current(), 0, "between polls the poller's own labels are in force");
        }
        assert_eq!(current(), 0);
    }

    #[test]
    fn a_labelled_future_dropped_between_polls_or_panicking_in_one_leaves_the_pollers_labels() {
        let outer = replace(table::intern(current(), &[("task", "poller-drop-test")]));
        let poller = current();
        let mut context = Context::from_waker(Waker::noop());
        let mut pending = Box::pin(std::future::pending::<()>().with_labels(&[("task", "dropped-drop-test")]));
        assert!(pending.as_mut().poll(&mut context).is_pending());
        assert_eq!(current(), poller);
        drop(pending);
        assert_eq!(current(), poller);
        let panicking = std::panic::catch_unwind(|| {
            let mut future = std::pin::pin!(
                std::future::poll_fn(|_| -> Poll<()> { panic!("inside the poll") })
                    .with_labels(&[("task", "panicking-drop-test")])
            );
            let _ = future.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        });
        assert!(panicking.is_err());
        assert_eq!(current(), poller);
        replace(outer);
    }
}
