//! The thread that ends timed runs at their deadlines, unless they end before. One thread serves every run
//! and lives as long as the process: a thread's end makes jemalloc decay the program's main arena (see
//! [`crate::process::threads`]), which would return the program's freed pages at the end of each run.

use super::Profiler;
use super::error::{Cause, Error};
use crate::process::messages;

/// Starts the timer thread of `profiler`, the first time. Called before sampling is switched on: the thread
/// is unsampled before this returns.
pub(super) fn start(profiler: &'static Profiler) -> Result<(), Error> {
    let started = profiler.timer.get_or_init(|| {
        crate::process::threads::spawn("memprof-timer", move || end_runs(profiler)).map_err(Cause::from)
    });
    started.clone().map_err(|error| Error::Thread { purpose: "the runs' timer", error })
}

/// Ends each timed run when its deadline comes, if it is still the current run; waits for the next run.
fn end_runs(profiler: &Profiler) {
    let mut books = profiler.books.lock();
    loop {
        match books.runs.current().and_then(|run| run.deadline.map(|deadline| (run.id, deadline))) {
            Some((id, deadline)) if std::time::Instant::now() >= deadline => match profiler.finish(&mut books) {
                Ok(run) => messages::info(&format!("Heap profiling run {id} ended; profile at {}", run.path.display())),
                Err(error) => messages::warn(&error.to_string()),
            },
            Some((_, deadline)) => {
                profiler.runs_changed.wait_until(&mut books, deadline);
            }
            None => profiler.runs_changed.wait(&mut books),
        }
    }
}
