//! Exact measures of what a block or a future allocates: [`measure`] and [`measure_future`], for heap
//! budgets in tests (`#[memprof::test]`) and anywhere else.
//!
//! A block is measured on its thread: jemalloc's per-thread byte counters (`thread.allocatedp`,
//! `thread.deallocatedp`, in size classes) and memprof's allocator's per-thread object counts, read before
//! and after, with the block's peak watched meanwhile ([`counting`]). Other threads (other tests of the same
//! binary, run in parallel) never move them. A future is measured over each of its polls, on whichever
//! thread runs it, and the polls summed. Where sampling can run, the block is labelled while it runs, so
//! its samples are its own, and the functions that allocated the most in it are named ([`stacks`]).
//!
//! ```
//! # #[global_allocator] static A: memprof_runtime::Allocator = memprof_runtime::Allocator;
//! let (buffer, usage) = memprof_runtime::measure(|| vec![0u8; 4096]);
//! assert_eq!((usage.allocated_bytes, usage.allocated_objects, usage.live_bytes), (4096, 1, 4096));
//! # drop(buffer);
//! ```

mod budgets;
mod counting;
mod segment;
mod stacks;

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use memprof_wire::usage::{Measured, Usage};

pub use budgets::{budgeted, budgeted_future};
pub use counting::Allocator;
use segment::{Segment, not_counted};

/// Runs `block` and measures what it allocated and freed on this thread, exactly (see [`Usage`]).
///
/// ```
/// # #[global_allocator] static A: memprof_runtime::Allocator = memprof_runtime::Allocator;
/// let ((), usage) = memprof_runtime::measure(|| {
///     let scratch = vec![0u64; 1024];
///     drop(scratch);
/// });
/// assert_eq!((usage.allocated_bytes, usage.freed_bytes, usage.peak_bytes, usage.live_bytes), (8192, 8192, 8192, 0));
/// ```
pub fn measure<T>(block: impl FnOnce() -> T) -> (T, Usage) {
    let (sampled, measured) = not_counted(|| (stacks::Sampled::begin(), measurable().clone()));
    let labels = sampled.as_ref().map(stacks::Sampled::enter);
    let segment = Segment::begin(measured);
    let value = block();
    let usage = not_counted(|| {
        let mut usage = segment.end();
        drop(labels);
        if let Some(sampled) = sampled {
            usage.stacks = sampled.stacks();
        }
        usage
    });
    (value, usage)
}

/// `future`, measured over all its polls, on whatever threads run them: its output with what it allocated
/// and freed (see [`Usage`]; the peak is of the polls' running sum, as if they had run on one thread).
///
/// ```
/// # #[global_allocator] static A: memprof_runtime::Allocator = memprof_runtime::Allocator;
/// use std::task::{Context, Poll, Waker};
///
/// let mut future = std::pin::pin!(memprof_runtime::measure_future(async { vec![0u8; 4096] }));
/// let Poll::Ready((buffer, usage)) = future.as_mut().poll(&mut Context::from_waker(Waker::noop())) else {
///     unreachable!("nothing to wait for")
/// };
/// assert_eq!((buffer.len(), usage.allocated_bytes, usage.live_bytes), (4096, 4096, 4096));
/// ```
pub fn measure_future<F: Future>(future: F) -> MeasuredFuture<F> {
    MeasuredFuture { future, so_far: None, sampled: not_counted(stacks::Sampled::begin) }
}

pin_project_lite::pin_project! {
    /// A future measured over its polls ([`measure_future`]): its output comes with its [`Usage`].
    #[must_use = "futures do nothing unless polled"]
    pub struct MeasuredFuture<F> {
        #[pin]
        future: F,
        so_far: Option<Usage>,
        sampled: Option<stacks::Sampled>,
    }
}

impl<F> std::fmt::Debug for MeasuredFuture<F> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("MeasuredFuture").field("so_far", &self.so_far).finish_non_exhaustive()
    }
}

impl<F: Future> Future for MeasuredFuture<F> {
    type Output = (F::Output, Usage);

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let labels = this.sampled.as_ref().map(stacks::Sampled::enter);
        let segment = Segment::begin(not_counted(|| measurable().clone()));
        let polled = this.future.poll(context);
        not_counted(|| {
            let poll = segment.end();
            drop(labels);
            let so_far = match this.so_far.take() {
                Some(earlier) => earlier.then(&poll),
                None => poll,
            };
            match polled {
                Poll::Pending => {
                    *this.so_far = Some(so_far);
                    Poll::Pending
                }
                Poll::Ready(output) => {
                    let mut usage = so_far;
                    if let Some(sampled) = this.sampled.take() {
                        usage.stacks = sampled.stacks();
                    }
                    Poll::Ready((output, usage))
                }
            }
        })
    }
}

/// What this process can measure, found once by allocating a probe: whether jemalloc serves the global
/// allocator (its byte counters move) and whether it is memprof's [`Allocator`] (its object count moves).
fn measurable() -> &'static Measured {
    static FOUND: OnceLock<Measured> = OnceLock::new();
    FOUND.get_or_init(|| {
        if segment::this_threads_counters().is_none() {
            return Measured::Nothing("jemalloc was built without its statistics".to_owned());
        }
        let segment = Segment::begin(Measured::Exactly);
        drop(std::hint::black_box(Box::new([0u8; 64])));
        let probe = segment.end();
        match (probe.allocated_bytes, probe.allocated_objects) {
            (0, _) => Measured::Nothing(
                "jemalloc is not the global allocator: add memprof::global_allocator!() at the crate's root (a \
                 test crate's too), or #[memprof::main]"
                    .to_owned(),
            ),
            (_, 0) => Measured::BytesOnly(
                "the global allocator is jemalloc without memprof's counts: make it memprof's \
                 (memprof::global_allocator!() instead of tikv_jemallocator::Jemalloc)"
                    .to_owned(),
            ),
            _ => Measured::Exactly,
        }
    })
}
