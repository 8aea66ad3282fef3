//! The label set in force on each thread: one thread-local id the backtrace hook reads with each sample,
//! and every way of entering labels (guards, labelled futures, spans) sets.

use std::cell::Cell;

thread_local! {
    /// The id of the label set in force on this thread (0: none). Const-initialised and without a
    /// destructor, so the backtrace hook reads it straight from thread-local storage.
    static CURRENT: Cell<u32> = const { Cell::new(0) };
}

/// The label set in force on this thread, as the backtrace hook records it.
#[inline]
pub(crate) fn current() -> u32 {
    CURRENT.try_with(Cell::get).unwrap_or(0)
}

/// Makes set `id` the one in force on this thread and returns the one it replaces.
#[inline]
pub(super) fn replace(id: u32) -> u32 {
    CURRENT.try_with(|current| current.replace(id)).unwrap_or(0)
}
