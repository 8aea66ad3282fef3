//! The one bound on expensive work: rendering a profile, symbolizing a live snapshot, answering a symbol
//! lookup, printing jemalloc's statistics. At most [`MAX_JOBS`] run at once, whichever endpoint asks (so a
//! burst of requests cannot take every core, nor the memory of many symbolizers); a request beyond is told
//! to come back (503 with `Retry-After`), never queued. A job allocates from memprof's own arena (also when a
//! mounted endpoint runs it on a thread of the program's), and when it ends that arena's freed pages go back
//! to the system at once, so the program does not stay larger for having been profiled. The program's own
//! arenas are never purged by a job: their freed pages are the program's, and only `POST purge` returns them.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::http::HttpError;
use crate::jemalloc;

/// How many expensive jobs may run at once.
pub(crate) const MAX_JOBS: usize = 2;

static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// A right to do expensive work, held while it runs on one thread: while it is held the thread allocates
/// from memprof's arena; dropping it puts the thread's arena back and returns the job's freed memory to the
/// system.
pub(crate) struct Permit {
    /// The place among [`MAX_JOBS`], given back when dropped (or handed to an answer: [`Permit::into_place`]).
    place: Option<Place>,
    /// The arena the thread used before, put back at the end.
    previous_arena: Option<u32>,
    /// Dropped on the thread that acquired it (the arena binding is the thread's).
    _same_thread: PhantomData<*const ()>,
}

/// One of the [`MAX_JOBS`] places, given back when dropped; it may travel with an answer to the thread that
/// writes it.
pub(crate) struct Place(());

impl Drop for Place {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Permit {
    /// A permit, unless [`MAX_JOBS`] are already out.
    pub(crate) fn acquire() -> Option<Permit> {
        let running = RUNNING.fetch_add(1, Ordering::SeqCst);
        if running < MAX_JOBS {
            // Objects the thread's cache holds come from the arena it used: empty it so the job's
            // allocations come from memprof's arena.
            jemalloc::flush_this_thread_cache();
            let previous_arena = jemalloc::own_arena().and_then(jemalloc::use_arena);
            Some(Permit { place: Some(Place(())), previous_arena, _same_thread: PhantomData })
        } else {
            RUNNING.fetch_sub(1, Ordering::SeqCst);
            None
        }
    }

    /// Ends the job's work on this thread (its arena put back, its freed memory returned) but keeps its place
    /// for an answer to hold until written ([`crate::http::Reply::holding`]): an answer as large as the
    /// job's memory counts against the same bound while a client is slow to read it.
    pub(crate) fn into_place(mut self) -> Place {
        self.place.take().expect("a permit holds its place until dropped")
    }

    /// A permit, or the 503 that says to come back.
    pub(crate) fn or_busy() -> Result<Permit, HttpError> {
        Self::acquire().ok_or_else(busy)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        jemalloc::flush_this_thread_cache();
        if let Some(previous) = self.previous_arena {
            jemalloc::use_arena(previous);
        }
        return_freed_memory();
    }
}

/// Returns to the system the pages memprof's arena freed, with what this thread's cache held of it.
pub(crate) fn return_freed_memory() {
    jemalloc::flush_this_thread_cache();
    if let Some(own) = jemalloc::own_arena() {
        // Failing leaves memprof's freed pages to jemalloc's decay; nothing to tell anyone.
        let _ = jemalloc::purge(own);
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
        // An answer holding a job's place keeps it until the answer is dropped (written).
        let place = Permit::acquire().unwrap().into_place();
        let other = Permit::acquire().unwrap();
        assert!(Permit::acquire().is_none(), "the held answer still counts");
        drop(place);
        assert!(Permit::acquire().is_some());
        drop(other);
    }
}
