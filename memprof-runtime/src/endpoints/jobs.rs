//! The one bound on expensive work: rendering a profile, symbolizing a live snapshot, answering a symbol
//! lookup, printing jemalloc's statistics. At most [`MAX_JOBS`] run at once, whichever endpoint asks (so a
//! burst of requests cannot take every core, nor the memory of many symbolizers); a request beyond is told
//! to come back (503 with `Retry-After`), never queued. When a job ends, the memory it freed goes back to
//! the system at once, so the program does not stay larger for having been profiled.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::http::HttpError;
use crate::jemalloc;

/// How many expensive jobs may run at once.
pub(crate) const MAX_JOBS: usize = 2;

static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// A right to do expensive work, held while it runs; dropping it returns the job's freed memory to the
/// system.
pub(crate) struct Permit(());

impl Permit {
    /// A permit, unless [`MAX_JOBS`] are already out.
    pub(crate) fn acquire() -> Option<Permit> {
        let running = RUNNING.fetch_add(1, Ordering::SeqCst);
        if running < MAX_JOBS {
            Some(Permit(()))
        } else {
            RUNNING.fetch_sub(1, Ordering::SeqCst);
            None
        }
    }

    /// A permit, or the 503 that says to come back.
    pub(crate) fn or_busy() -> Result<Permit, HttpError> {
        Self::acquire().ok_or_else(busy)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::SeqCst);
        jemalloc::flush_this_thread_cache();
        jemalloc::release_unused_memory();
    }
}

/// 503: [`MAX_JOBS`] other expensive jobs take the capacity; the client retries.
pub(crate) fn busy() -> HttpError {
    HttpError::busy(
        format!("{MAX_JOBS} other profiles or symbol lookups are being worked on; try again in a second"),
        1,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_two_jobs_run_at_once() {
        let first = Permit::acquire().unwrap();
        let second = Permit::acquire().unwrap();
        assert!(Permit::acquire().is_none());
        assert_eq!(Permit::or_busy().err().map(|error| error.status), Some(503));
        drop(first);
        let third = Permit::acquire();
        assert!(third.is_some());
        drop((second, third));
    }
}
