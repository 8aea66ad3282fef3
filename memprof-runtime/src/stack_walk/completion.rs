//! Completing a frame-pointer walk whose chain broke.
//!
//! Code built without frame pointers (glibc, and the C libraries services link: RocksDB, OpenSSL, zstd,
//! SQLite) may hold anything in the frame-pointer register, and a walk that meets such a value stops at
//! the return into that code: the buffers `opendir` allocates in glibc's `__alloc_dir` had no caller.
//! Every walk ends somewhere: at the thread's start when the chain held (glibc's `start_thread` and
//! `__libc_start_call_main`), elsewhere when it broke. The first walk to end at a return address is
//! walked again by the DWARF unwinder, which reads the unwind tables every function has: when it finds no
//! more than the thread's outermost frames beyond that address (`__libc_start_main` and `_start`, or
//! `clone3`), stacks end there, and the address is remembered so that later walks ending there cost
//! nothing more; otherwise the frames it finds beyond complete the stack, as they do for each later walk
//! that ends there. Only samples allocated under such code pay the DWARF walk: by the unwind tables, cached
//! (see [`super::tables`]), or by libgcc's unwinder (some 5 µs) where they cannot.
//!
//! A function without a frame record that leaves the register alone is skipped instead (the walk goes on
//! from its caller's caller's record): that no check here can see.

use std::ffi::c_uint;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::dwarf::unwind_backtrace;

/// What completing broken frame chains keeps, process-wide: the ends seen, and how many were completed.
struct Completion {
    /// Where walks end at a thread's start; 0 for a free place.
    ends: [AtomicUsize; ENDS_KEPT],
    /// Walks completed by the DWARF unwinder.
    completed: AtomicU64,
}

static COMPLETION: Completion =
    Completion { ends: [const { AtomicUsize::new(0) }; ENDS_KEPT], completed: AtomicU64::new(0) };

/// How many return addresses where stacks end are remembered (a process has a few: the main thread's
/// start, the threads' start, a coroutine library's).
const ENDS_KEPT: usize = 64;

/// How many frames beyond where a walk ended still count as the thread's start.
const OUTERMOST_FRAMES: usize = 2;

/// The deepest DWARF walk: jemalloc records at most 128 frames (`PROF_BT_MAX`), and the DWARF walk starts
/// some frames deeper, in memprof's hook and jemalloc.
const DWARF_DEPTH: usize = 160;

/// How many samples' walks the DWARF unwinder completed since start-up (`state`'s `stack_walk`).
pub(crate) fn completed_walks() -> u64 {
    COMPLETION.completed.load(Ordering::Relaxed)
}

/// Completes the walk in `frames` (`count` return addresses, the last where the frame chain ended; room
/// for `max`) where its chain broke; answers the new count. Allocates nothing and takes no lock.
///
/// # Safety
/// `frames` must have room for `max` addresses, `count` of them written, `0 < count <= max`.
pub(super) unsafe fn complete(frames: *mut usize, count: usize, max: usize) -> usize {
    // SAFETY: the caller's promise.
    let walked = unsafe { std::slice::from_raw_parts(frames, count) };
    let last = walked[count - 1];
    if is_end(last) {
        return count;
    }
    let mut found = [0usize; DWARF_DEPTH];
    let depth = walk_whole(&mut found);
    let beyond = beyond_the_walk(walked, &found[..depth]);
    if beyond.len() <= OUTERMOST_FRAMES {
        remember_end(last);
        return count;
    }
    // Up to where the chain's walks end (the thread's start), as the stacks whose chain held: the
    // outermost frames beyond it would make them a root of their own.
    let beyond = &beyond[..beyond.iter().position(|&frame| is_end(frame)).map_or(beyond.len(), |end| end + 1)];
    let added = beyond.len().min(max - count);
    // SAFETY: `count + added <= max`, and `frames` has room for `max` addresses.
    unsafe { std::ptr::copy_nonoverlapping(beyond.as_ptr(), frames.add(count), added) };
    COMPLETION.completed.fetch_add(1, Ordering::Relaxed);
    count + added
}

/// The whole stack into `found`, by the unwind tables where they can walk it (see [`super::tables`]),
/// else by libgcc's unwinder; answers how many addresses were written.
fn walk_whole(found: &mut [usize; DWARF_DEPTH]) -> usize {
    let mut depth = 0;
    let by_tables = super::tables::walk(|address| {
        found[depth] = address;
        depth += 1;
        depth < DWARF_DEPTH
    });
    if by_tables.is_ok() {
        return depth;
    }
    let mut depth: c_uint = 0;
    // SAFETY: `found` has room for `DWARF_DEPTH` addresses; `depth` is writable.
    unsafe { unwind_backtrace(found.as_mut_ptr().cast(), &mut depth, DWARF_DEPTH as c_uint) };
    depth as usize
}

/// What the DWARF walk `found` holds beyond the frame-pointer walk `walked`: the frames after the one where
/// `walked` ended (found where the frame before it matches too, so that recursion does not mislead);
/// nothing where it does not hold that frame.
fn beyond_the_walk<'a>(walked: &[usize], found: &'a [usize]) -> &'a [usize] {
    let last = walked[walked.len() - 1];
    let before = walked.len().checked_sub(2).map(|index| walked[index]);
    let at = (0..found.len())
        .find(|&index| found[index] == last && before.is_none_or(|before| index > 0 && found[index - 1] == before));
    at.map_or(&[], |index| &found[index + 1..])
}

/// Whether walks are known to end at `frame`. The places are taken in order ([`remember_end`]) and never
/// given back, so the first empty one ends the search: a process's few ends lie in the first cache line,
/// and a walk (once a sample, on cold caches when sampling is thinned) reads no other.
fn is_end(frame: usize) -> bool {
    COMPLETION.ends.iter().map(|end| end.load(Ordering::Relaxed)).take_while(|&end| end != 0).any(|end| end == frame)
}

/// Remembers `end` as where stacks end (nothing when the places are all taken: walks ending there are then
/// walked again by the unwinder, at a cost, but never wrong).
fn remember_end(end: usize) {
    for place in &COMPLETION.ends {
        match place.compare_exchange(0, end, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return,
            Err(taken) if taken == end => return,
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frames_beyond_a_broken_walk_are_those_after_its_last_in_the_dwarf_walk() {
        // The DWARF walk starts deeper (memprof's hook, jemalloc) and goes on past the break.
        let found = [0x1, 0x2, 0x10, 0x20, 0x30, 0x40, 0x50];
        assert_eq!(beyond_the_walk(&[0x10, 0x20], &found), [0x30, 0x40, 0x50]);
        assert_eq!(beyond_the_walk(&[0x30], &found), [0x40, 0x50]);
        // Recursion: the last address twice; the one after the same frame counts.
        let recursive = [0x1, 0x10, 0x20, 0x10, 0x30, 0x20, 0x40];
        assert_eq!(beyond_the_walk(&[0x30, 0x20], &recursive), [0x40]);
        assert_eq!(beyond_the_walk(&[0x99], &found), [] as [usize; 0], "not in the DWARF walk");
    }

    #[test]
    fn an_end_is_remembered_once() {
        remember_end(0xe1);
        remember_end(0xe1);
        assert_eq!(COMPLETION.ends.iter().filter(|end| end.load(Ordering::Relaxed) == 0xe1).count(), 1);
    }
}
