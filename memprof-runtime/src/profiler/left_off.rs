//! Work left off the program's start (the profile root's sweep), for whichever needs it first to do: once
//! done, asking again costs one atomic load, so every request may ask.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

/// Work left to do, at most one piece.
pub(super) struct LeftOff {
    work: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    /// Whether nothing is left: then [`LeftOff::catch_up`] takes no lock.
    done: AtomicBool,
}

impl Default for LeftOff {
    fn default() -> Self {
        LeftOff { work: Mutex::new(None), done: AtomicBool::new(true) }
    }
}

impl LeftOff {
    /// Leaves `work` for later, in place of any left before.
    pub(super) fn leave(&self, work: Box<dyn FnOnce() + Send>) {
        let mut left = self.work.lock();
        *left = Some(work);
        self.done.store(false, Ordering::Release);
    }

    /// Does the work left, if any; a caller meanwhile waits for it to be done.
    pub(super) fn catch_up(&self) {
        if self.done.load(Ordering::Acquire) {
            return;
        }
        let mut left = self.work.lock();
        if let Some(work) = left.take() {
            work();
        }
        self.done.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn the_work_is_done_once_by_the_first_to_ask() {
        let left = LeftOff::default();
        left.catch_up();
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&runs);
        left.leave(Box::new(move || {
            counted.fetch_add(1, Ordering::Relaxed);
        }));
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| left.catch_up());
            }
        });
        left.catch_up();
        assert_eq!(runs.load(Ordering::Relaxed), 1);
    }
}
