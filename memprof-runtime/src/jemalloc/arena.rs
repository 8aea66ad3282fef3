//! memprof's own arena: everything memprof's threads allocate (profiles rendered, symbol tables, answers,
//! request bodies) comes from an arena the program never uses, so memprof can return its memory by purging
//! that arena alone, never the program's, and `explain` can show what memprof holds as a class of its own.
//! Its decay times are zero: pages it frees go back to the system at once (an answer written long after its
//! job ended, the bodies of refused requests), so memprof never stays larger for having been asked.

use std::sync::OnceLock;

use super::controls::{ARENA_DIRTY_DECAY_MS, ARENA_MUZZY_DECAY_MS, THREAD_ARENA};
use super::extents::recording_hooks;

static OWN: OnceLock<Option<u32>> = OnceLock::new();

/// The index of memprof's arena, created the first time (`arenas.create`, with the hooks that record its
/// ranges); `None` when jemalloc refused.
pub(crate) fn own_arena() -> Option<u32> {
    *OWN.get_or_init(create)
}

fn create() -> Option<u32> {
    let hooks = recording_hooks().ok()?;
    // SAFETY: the recording hooks live as long as the process.
    let index = unsafe { super::controls::create_arena(hooks) }?;
    for decay in [ARENA_DIRTY_DECAY_MS, ARENA_MUZZY_DECAY_MS] {
        // Failing leaves the default decay: memprof's freed pages then wait for the next purge.
        let _ = decay.at(&[index as usize]).and_then(|decay| decay.write(0));
    }
    Some(index)
}

/// Makes the calling thread allocate from `arena` (`thread.arena`); answers the arena it used before.
pub(crate) fn use_arena(arena: u32) -> Option<u32> {
    THREAD_ARENA.update(arena).ok()
}

/// Runs `work` on the calling thread (one of the program's) with its allocations from memprof's arena, then
/// puts the thread's arena back: for what memprof makes there and keeps (the continuous record's table),
/// so that it counts as memprof's (`heap/profiler`), never as the program's live bytes. The thread's cache
/// is flushed on both sides, so that neither arena's cached regions serve the other's allocations.
pub(crate) fn in_own_arena<T>(work: impl FnOnce() -> T) -> T {
    struct Restore(Option<u32>);
    impl Drop for Restore {
        fn drop(&mut self) {
            super::flush_this_thread_cache();
            if let Some(previous) = self.0 {
                use_arena(previous);
            }
        }
    }
    let Some(own) = own_arena() else { return work() };
    super::flush_this_thread_cache();
    let _restore = Restore(use_arena(own));
    work()
}

/// Makes the calling thread, one of memprof's own, allocate from memprof's arena from now on.
pub(crate) fn bind_this_thread_to_own_arena() {
    if let Some(arena) = own_arena() {
        use_arena(arena);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_thread_allocates_from_memprofs_arena() {
        let arena = own_arena().expect("jemalloc creates an arena");
        let thread = std::thread::spawn(move || {
            bind_this_thread_to_own_arena();
            let current = THREAD_ARENA.read().unwrap();
            let block = std::hint::black_box(vec![7u8; 1 << 20]);
            crate::jemalloc::controls::THREAD_TCACHE_FLUSH.call().unwrap();
            let held = crate::jemalloc::memory::heap_reading(Some(arena)).unwrap().profiler.allocated;
            drop(block);
            (current, held)
        });
        let (current, held) = thread.join().unwrap();
        assert_eq!(current, arena);
        assert!(held >= 1 << 20, "{held}");
    }

    #[test]
    fn work_in_memprofs_arena_is_memprofs_and_the_thread_gets_its_arena_back() {
        let arena = own_arena().expect("jemalloc creates an arena");
        let thread = std::thread::spawn(move || {
            let before = THREAD_ARENA.read().unwrap();
            let held = || crate::jemalloc::memory::heap_reading(Some(arena)).unwrap().profiler.allocated;
            let held_before = held();
            let block = in_own_arena(|| std::hint::black_box(vec![7u8; 64 << 20]));
            let held_after = held();
            drop(block);
            (before, THREAD_ARENA.read().unwrap(), held_after.saturating_sub(held_before))
        });
        let (before, after, grown) = thread.join().unwrap();
        assert_ne!(before, arena);
        assert_eq!(after, before);
        // Other tests allocate and free in memprof's arena meanwhile: a few MiB either way.
        assert!(grown >= 56 << 20, "{grown}");
    }
}
