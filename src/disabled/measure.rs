//! Measures and heap budgets compiled out: the block runs, nothing is measured, and budgets are not checked
//! (said once).

use std::future::Future;
use std::pin::Pin;
use std::sync::Once;
use std::task::{Context, Poll};

use memprof_wire::usage::{Budget, Usage};

/// Why nothing is measured.
const COMPILED_OUT: &str = "memprof is compiled out (its `enabled` feature is off, or the platform is not Linux)";

/// Runs `block`; compiled out, nothing is measured ([`Usage::nothing`]).
///
/// ```
/// let (sum, usage) = memprof::measure(|| (0..10u64).sum::<u64>());
/// assert_eq!(sum, 45);
/// # #[cfg(not(all(target_os = "linux", feature = "enabled")))]
/// assert_eq!(usage.allocated_bytes, 0);
/// ```
pub fn measure<T>(block: impl FnOnce() -> T) -> (T, Usage) {
    (block(), Usage::nothing(COMPILED_OUT))
}

/// `future`, its output paired with a [`Usage`] that measured nothing (compiled out).
pub fn measure_future<F: Future>(future: F) -> MeasuredFuture<F> {
    MeasuredFuture { future }
}

pin_project_lite::pin_project! {
    /// A future whose output comes with a [`Usage`]; compiled out, an empty one.
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct MeasuredFuture<F> {
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for MeasuredFuture<F> {
    type Output = (F::Output, Usage);

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().future.poll(context).map(|output| (output, Usage::nothing(COMPILED_OUT)))
    }
}

/// Says once that budgets are not checked.
fn unchecked(test: &str) {
    static SAID: Once = Once::new();
    SAID.call_once(|| eprintln!("[memprof] heap budgets are not checked ({test} and others): {COMPILED_OUT}"));
}

/// Runs the test's body; its budgets are not checked (compiled out).
pub fn budgeted<T>(test: &str, _budgets: &[Budget], body: impl FnOnce() -> T) -> T {
    unchecked(test);
    body()
}

/// Runs the async test's body; its budgets are not checked (compiled out).
pub async fn budgeted_future<F: Future>(test: &str, _budgets: &[Budget], body: F) -> F::Output {
    unchecked(test);
    body.await
}
