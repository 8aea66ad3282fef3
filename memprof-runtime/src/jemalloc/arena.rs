//! memprof's own arena: everything memprof's threads allocate (profiles rendered, symbol tables, answers,
//! request bodies) comes from an arena the program never uses, so memprof can return its memory by purging
//! that arena alone, never the program's, and `explain` can show what memprof holds as a class of its own.
//! Its decay times are zero: pages it frees go back to the system at once (an answer written long after its
//! job ended, the bodies of refused requests), so memprof never stays larger for having been asked.

use std::ffi::{c_uint, c_void};
use std::sync::OnceLock;

use tikv_jemalloc_ctl::raw;

use super::extents::recording_hooks;

static OWN: OnceLock<Option<u32>> = OnceLock::new();

/// The index of memprof's arena, created the first time (`arenas.create`, with the hooks that record its
/// ranges); `None` when jemalloc refused.
pub(crate) fn own_arena() -> Option<u32> {
    *OWN.get_or_init(create)
}

fn create() -> Option<u32> {
    let mut hooks = recording_hooks().ok()?;
    let mut index: c_uint = 0;
    let mut index_len = size_of::<c_uint>();
    // SAFETY: `arenas.create` reads an optional `extent_hooks_t *` and answers the new arena's `unsigned`
    // index (jemalloc(3)); both pointers and lengths match those types, and the hooks live as long as the
    // process.
    let code = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arenas.create".as_ptr(),
            (&raw mut index).cast::<c_void>(),
            &mut index_len,
            (&raw mut hooks).cast::<c_void>(),
            size_of_val(&hooks),
        )
    };
    if code != 0 {
        return None;
    }
    for kind in ["dirty", "muzzy"] {
        // SAFETY: `arena.<i>.{dirty,muzzy}_decay_ms` are read-write `ssize_t`s. Failing leaves the default
        // decay: memprof's freed pages then wait for the next purge.
        let _ = unsafe { super::write(&format!("arena.{index}.{kind}_decay_ms"), 0isize) };
    }
    Some(index)
}

/// Makes the calling thread allocate from `arena` (`thread.arena`); answers the arena it used before.
pub(crate) fn use_arena(arena: u32) -> Option<u32> {
    // SAFETY: `thread.arena` is a read-write `unsigned`.
    unsafe { raw::update(b"thread.arena\0", arena) }.ok()
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
            // SAFETY: `thread.arena` is a read-write `unsigned`.
            let current = unsafe { raw::read::<c_uint>(b"thread.arena\0") }.unwrap();
            let block = std::hint::black_box(vec![7u8; 1 << 20]);
            super::super::flush_this_thread_cache();
            let held = super::super::heap_reading(Some(arena)).unwrap().profiler.allocated;
            drop(block);
            (current, held)
        });
        let (current, held) = thread.join().unwrap();
        assert_eq!(current, arena);
        assert!(held >= 1 << 20, "{held}");
    }
}
