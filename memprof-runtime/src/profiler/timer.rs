//! The thread that ends a timed run at its deadline, unless the run ends before.

use std::time::Instant;

use super::{Error, Profiler};
use crate::messages;

/// Starts the thread that ends run `id` at `deadline`. Called before sampling is switched on; the thread
/// is unsampled before this returns.
pub(super) fn spawn(profiler: &'static Profiler, id: u64, deadline: Instant) -> Result<(), Error> {
    crate::threads::spawn("memprof-timer", move || end_at(profiler, id, deadline))
        .map_err(|error| Error::Thread { purpose: "the run's timer", error: error.to_string() })
}

/// Waits for `deadline` and ends run `id` then, if it is still the current run.
fn end_at(profiler: &Profiler, id: u64, deadline: Instant) {
    let mut books = profiler.books.lock();
    while books.runs.current().is_some_and(|run| run.id == id) {
        if Instant::now() >= deadline {
            match profiler.finish(&mut books) {
                Ok(run) => messages::info(&format!("Heap profiling run {id} ended; profile at {}", run.path.display())),
                Err(error) => messages::warn(&error.to_string()),
            }
            return;
        }
        profiler.run_ended.wait_until(&mut books, deadline);
    }
}
