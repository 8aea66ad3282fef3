//! A spin lock for code that runs inside the allocator: taking it never allocates and never parks (a
//! parked thread's first wait allocates its parking data), and `fork` can take it for the child's sake.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

/// `T` behind a spin lock: spins, then yields, for critical sections of a hash lookup.
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is only reached through `with`, by one thread at a time (the lock).
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub(crate) fn new(value: T) -> Self {
        Self { locked: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    fn acquire(&self) {
        let mut spins = 0u32;
        while self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Runs `work` under the lock.
    pub(crate) fn with<R>(&self, work: impl FnOnce(&mut T) -> R) -> R {
        struct Unlock<'a>(&'a AtomicBool);
        impl Drop for Unlock<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        self.acquire();
        let _unlock = Unlock(&self.locked);
        // SAFETY: the lock is held until `_unlock` drops, so this is the only reference.
        work(unsafe { &mut *self.value.get() })
    }

    /// Takes the lock and keeps it until [`SpinLock::unlock_after_fork`]: around `fork`, so that the child
    /// never inherits it held by a thread it does not have.
    pub(crate) fn lock_for_fork(&self) {
        self.acquire();
    }

    /// Releases the lock [`SpinLock::lock_for_fork`] took (in the parent and in the child).
    pub(crate) fn unlock_after_fork(&self) {
        self.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_counting_under_the_lock_lose_no_count() {
        let counter = SpinLock::new(0u64);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| (0..100_000).for_each(|_| counter.with(|count| *count += 1)));
            }
        });
        assert_eq!(counter.with(|count| *count), 400_000);
    }
}
