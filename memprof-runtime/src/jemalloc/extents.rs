//! Which address ranges are jemalloc's: the arenas' extent hooks wrapped so every range jemalloc maps is
//! recorded, and every range it unmaps forgotten.
//!
//! The kernel's resident set cannot tell jemalloc's anonymous mappings from a direct `mmap` or another
//! allocator's (the kernel even merges adjacent ones into one mapping), and `PR_SET_VMA_ANON_NAME` is not
//! available on every kernel. So memprof installs, in every arena, a copy of jemalloc's default extent hooks
//! whose `alloc`, `dalloc` and `destroy` call the default and then note the range in a fixed table. A hook
//! runs inside jemalloc, perhaps with its locks held: it must not allocate, so the table is a fixed array
//! behind a `std` mutex (a futex, no allocation), held only to copy ranges in or out.
//!
//! Ranges jemalloc mapped before [`install_range_hooks`] ran (its first few hundred KiB, at start-up) are
//! not in the table, except those [`claim_range`] adds.

use std::ffi::{c_uint, c_void};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tikv_jemalloc_sys::extent_hooks_t;

use super::arenas::Arenas;
use super::controls::CtlError;

/// What the arena-made hook (inside jemalloc) and the watch's thread share, process-wide.
struct ArenasMade {
    /// A `std` mutex and condition variable (futexes, no allocation): [`arena_made`] runs inside jemalloc.
    watch: Mutex<Watch>,
    /// The process the watch runs in, 0 before it runs: a child of `fork` has no watch, and may have been
    /// forked while the watch held its lock (`watch`), so it never takes that lock.
    watching_process: AtomicU32,
    answered: Condvar,
    /// Where [`arena_made`] tells the watch (an eventfd: a `write` of 8 bytes, no lock, no allocation), so that
    /// the watch's thread can wait for it and for other things at once (`poll`).
    announcements: OnceLock<OwnedFd>,
}

static ARENAS_MADE: ArenasMade = ArenasMade {
    watch: Mutex::new(Watch { announced: 0, answered: 0 }),
    watching_process: AtomicU32::new(0),
    answered: Condvar::new(),
    announcements: OnceLock::new(),
};

/// The recording hooks' state, process-wide (the hooks run inside jemalloc and reach it from there): the
/// ranges recorded, jemalloc's defaults they wrap, and whether they are installed everywhere.
struct RangeHooks {
    /// The ranges jemalloc has mapped and not unmapped.
    table: Mutex<RangeSet<CAPACITY>>,
    /// jemalloc's default hooks, as arena 0 had them; the wrappers call them.
    defaults: OnceLock<extent_hooks_t>,
    /// Where jemalloc's default hooks are: an arena whose `extent_hooks` point there has no hooks of its own.
    default_pointer: OnceLock<usize>,
    /// The hooks installed: the defaults with `alloc`, `dalloc` and `destroy` wrapped. jemalloc keeps a
    /// pointer to them for the life of the process.
    recording: OnceLock<extent_hooks_t>,
    /// Whether they were installed in every arena initialized at start ([`install_range_hooks`]).
    installed: OnceLock<bool>,
    /// An arena was made that may have mapped memory before the hooks reached it (see [`arena_made`]).
    missed: AtomicBool,
}

static RANGE_HOOKS: RangeHooks = RangeHooks {
    table: Mutex::new(RangeSet::new()),
    defaults: OnceLock::new(),
    default_pointer: OnceLock::new(),
    recording: OnceLock::new(),
    installed: OnceLock::new(),
    missed: AtomicBool::new(false),
};

/// How many disjoint ranges the table holds: jemalloc maps in growing steps (`retain`, on by default on
/// 64-bit Linux, keeps the address space it mapped), so a process rarely needs more than a few dozen.
const CAPACITY: usize = 4096;

/// Disjoint, sorted, non-adjacent `[start, end)` ranges in a fixed array: union and difference without
/// allocating.
struct RangeSet<const N: usize> {
    ranges: [(usize, usize); N],
    len: usize,
    /// A range could not be recorded (or forgotten) for want of room: the table is not exact.
    overflowed: bool,
}

impl<const N: usize> RangeSet<N> {
    const fn new() -> Self {
        RangeSet { ranges: [(0, 0); N], len: 0, overflowed: false }
    }

    fn as_slice(&self) -> &[(usize, usize)] {
        &self.ranges[..self.len]
    }

    /// Replaces `self.ranges[first..last]` with `pieces`, or marks the table overflowed when it has no room.
    fn splice(&mut self, first: usize, last: usize, pieces: &[(usize, usize)]) {
        let len = self.len - (last - first) + pieces.len();
        if len > N {
            self.overflowed = true;
            return;
        }
        self.ranges.copy_within(last..self.len, first + pieces.len());
        self.ranges[first..first + pieces.len()].copy_from_slice(pieces);
        self.len = len;
    }

    /// Adds `[start, end)`, merged with every range it overlaps or touches.
    fn insert(&mut self, start: usize, end: usize) {
        if start >= end {
            return;
        }
        let ranges = self.as_slice();
        let first = ranges.partition_point(|range| range.1 < start);
        let last = ranges.partition_point(|range| range.0 <= end);
        let merged =
            if first < last { (start.min(ranges[first].0), end.max(ranges[last - 1].1)) } else { (start, end) };
        self.splice(first, last, &[merged]);
    }

    /// Removes `[start, end)`, cutting the ranges it overlaps.
    fn remove(&mut self, start: usize, end: usize) {
        if start >= end {
            return;
        }
        let ranges = self.as_slice();
        let first = ranges.partition_point(|range| range.1 <= start);
        let last = ranges.partition_point(|range| range.0 < end);
        if first == last {
            return;
        }
        let mut pieces = [(0, 0); 2];
        let mut count = 0;
        if ranges[first].0 < start {
            pieces[count] = (ranges[first].0, start);
            count += 1;
        }
        if ranges[last - 1].1 > end {
            pieces[count] = (end, ranges[last - 1].1);
            count += 1;
        }
        self.splice(first, last, &pieces[..count]);
    }
}

fn with_table<T>(work: impl FnOnce(&mut RangeSet<CAPACITY>) -> T) -> T {
    work(&mut RANGE_HOOKS.table.lock().unwrap_or_else(PoisonError::into_inner))
}

unsafe extern "C" fn recording_alloc(
    hooks: *mut extent_hooks_t,
    new_addr: *mut c_void,
    size: usize,
    alignment: usize,
    zero: *mut bool,
    commit: *mut bool,
    arena: c_uint,
) -> *mut c_void {
    let Some(alloc) = RANGE_HOOKS.defaults.get().and_then(|defaults| defaults.alloc) else {
        return std::ptr::null_mut();
    };
    // SAFETY: jemalloc's own default, called with the arguments jemalloc passed.
    let address = unsafe { alloc(hooks, new_addr, size, alignment, zero, commit, arena) };
    if !address.is_null() {
        note(address, size, true);
    }
    address
}

unsafe extern "C" fn recording_dalloc(
    hooks: *mut extent_hooks_t,
    address: *mut c_void,
    size: usize,
    committed: bool,
    arena: c_uint,
) -> bool {
    let Some(dalloc) = RANGE_HOOKS.defaults.get().and_then(|defaults| defaults.dalloc) else {
        return true;
    };
    // SAFETY: jemalloc's own default, called with the arguments jemalloc passed.
    let kept = unsafe { dalloc(hooks, address, size, committed, arena) };
    if !kept {
        note(address, size, false);
    }
    kept
}

unsafe extern "C" fn recording_destroy(
    hooks: *mut extent_hooks_t,
    address: *mut c_void,
    size: usize,
    committed: bool,
    arena: c_uint,
) {
    if let Some(destroy) = RANGE_HOOKS.defaults.get().and_then(|defaults| defaults.destroy) {
        // SAFETY: jemalloc's own default, called with the arguments jemalloc passed.
        unsafe { destroy(hooks, address, size, committed, arena) };
    }
    note(address, size, false);
}

/// Records that `[address, address + size)` is now jemalloc's (`mapped`) or no longer is.
fn note(address: *mut c_void, size: usize, mapped: bool) {
    let (start, end) = (address as usize, (address as usize).saturating_add(size));
    with_table(|table| if mapped { table.insert(start, end) } else { table.remove(start, end) });
}

/// The recording hooks, made from arena 0's the first time.
pub(crate) fn recording_hooks() -> Result<*mut extent_hooks_t, CtlError> {
    if RANGE_HOOKS.recording.get().is_none() {
        // jemalloc's default hooks, which live as long as the process and are only read here.
        let pointer = super::controls::ARENA_EXTENT_HOOKS.read()?;
        // SAFETY: as above: the defaults, read, never written.
        let defaults = *RANGE_HOOKS.defaults.get_or_init(|| unsafe { *pointer });
        RANGE_HOOKS.default_pointer.get_or_init(|| pointer as usize);
        RANGE_HOOKS.recording.get_or_init(|| extent_hooks_t {
            alloc: Some(recording_alloc),
            dalloc: Some(recording_dalloc),
            destroy: Some(recording_destroy),
            ..defaults
        });
    }
    let hooks = RANGE_HOOKS.recording.get().expect("set above");
    // jemalloc takes a `*mut` but only reads the hooks.
    Ok(std::ptr::from_ref(hooks).cast_mut())
}

/// Whether [`install_range_hooks`] succeeded and every arena since had the hooks before it mapped
/// anything: [`ranges`] then holds jemalloc's mappings.
pub(crate) fn range_hooks_installed() -> bool {
    RANGE_HOOKS.installed.get().is_some_and(|installed| *installed) && !RANGE_HOOKS.missed.load(Ordering::Relaxed)
}

/// Installs the recording hooks in every arena jemalloc has initialized (arena 0, and those of threads
/// that ran before) and initializes one more automatic arena with them, where memprof's threads are born (a new thread takes an initialized arena no thread uses before
/// it makes a new one) before they move to memprof's arena. Arenas made later get the hooks as they are
/// made ([`ArenaWatch`]): memprof costs the same however many arenas jemalloc may make (4 a CPU),
/// where initializing all of them at start cost 90 KiB each and their statistics' reading. Once; later
/// calls answer the first's result.
pub(super) fn install_range_hooks() -> bool {
    *RANGE_HOOKS.installed.get_or_init(install)
}

fn install() -> bool {
    let Ok(hooks) = recording_hooks() else {
        return false;
    };
    let Some(arenas) = Arenas::new() else {
        return false;
    };
    let installed = arenas.hook_unhooked(hooks, RANGE_HOOKS.default_pointer.get().copied(), &mut Vec::new());
    if let Some(spare) = (0..arenas.automatic).find(|&arena| !arenas.initialized(arena)) {
        // SAFETY: written to an automatic arena not yet initialized, it initializes the arena with these
        // hooks, which live as long as the process.
        let _ = unsafe { arenas.hooks_of(spare).write_pointer(hooks) };
    }
    installed > 0
}

/// What the arena-made hook and the watch share: arenas made (announced) and arenas hooked (answered).
struct Watch {
    announced: u64,
    answered: u64,
}

/// How long a thread that made an arena waits for the watch to hook it: it holds jemalloc's lock on the
/// arenas meanwhile (and its control lock, if it made the arena through `arenas.create`, which the watch
/// then waits for: the wait ends, and what the arena maps before the watch hooks it is not recorded).
const HOOKED_WITHIN: Duration = Duration::from_millis(50);

unsafe extern "C" {
    /// jemalloc 5.3's hook called each time an arena other than arena 0 is made (`arena_new`), at the end,
    /// before the arena maps anything for the thread that made it: a test hook of jemalloc's, exported.
    #[link_name = "_rjem_je_test_hooks_arena_new_hook"]
    static mut ARENA_NEW_HOOK: Option<unsafe extern "C" fn()>;
}

/// Called by jemalloc when it has made an arena (holding its lock on the arenas; with its control lock
/// too when made through `arenas.create`): asks the watch to hook it and waits for that, at most
/// [`HOOKED_WITHIN`]. Allocates nothing.
extern "C" fn arena_made() {
    let Some(announcements) = ARENAS_MADE
        .announcements
        .get()
        .filter(|_| ARENAS_MADE.watching_process.load(Ordering::Acquire) == std::process::id())
    else {
        RANGE_HOOKS.missed.store(true, Ordering::Relaxed);
        return;
    };
    let mut watch = ARENAS_MADE.watch.lock().unwrap_or_else(PoisonError::into_inner);
    watch.announced += 1;
    let wanted = watch.announced;
    if rustix::io::write(announcements, &1u64.to_ne_bytes()).is_err() {
        RANGE_HOOKS.missed.store(true, Ordering::Relaxed);
        return;
    }
    let (_watch, waited) = ARENAS_MADE
        .answered
        .wait_timeout_while(watch, HOOKED_WITHIN, |watch| watch.answered < wanted)
        .unwrap_or_else(PoisonError::into_inner);
    if waited.timed_out() {
        RANGE_HOOKS.missed.store(true, Ordering::Relaxed);
    }
}

/// The watch of the arenas jemalloc makes: each is hooked as it is made, by the thread that holds the
/// watch (one of memprof's, for the life of the process), woken through [`ArenaWatch::announcements`].
pub(crate) struct ArenaWatch {
    hooks: *mut extent_hooks_t,
    arenas: Arenas,
    hooked: Vec<bool>,
}

// SAFETY: `hooks` points to hooks that live as long as the process; the watch is used by one thread.
unsafe impl Send for ArenaWatch {}

impl ArenaWatch {
    /// Begins the watch, on the thread that will keep it: from now on each arena made waits for
    /// [`ArenaWatch::answer`]. `None` when the hooks were never installed (or the eventfd cannot be made).
    pub(crate) fn begin() -> Option<ArenaWatch> {
        let (Some(true), Ok(hooks), Some(arenas)) = (RANGE_HOOKS.installed.get(), recording_hooks(), Arenas::new())
        else {
            return None;
        };
        let made =
            rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK);
        if ARENAS_MADE.announcements.set(made.ok()?).is_err() {
            return None; // a watch began already
        }
        let mut watch = ArenaWatch { hooks, arenas, hooked: Vec::new() };
        // SAFETY: jemalloc reads the hook's pointer when it makes an arena; one aligned pointer-sized store.
        unsafe { std::ptr::addr_of_mut!(ARENA_NEW_HOOK).write_volatile(Some(arena_made)) };
        ARENAS_MADE.watching_process.store(std::process::id(), Ordering::Release);
        // Arenas made between the installation and now (this thread's own, say) are hooked late: what they
        // mapped before is not in the table. From now on each arena made waits for the watch to hook it.
        if watch.arenas.hook_unhooked(hooks, RANGE_HOOKS.default_pointer.get().copied(), &mut watch.hooked) > 0 {
            RANGE_HOOKS.missed.store(true, Ordering::Relaxed);
        }
        Some(watch)
    }

    /// Readable when an arena was made and waits to be hooked.
    pub(crate) fn announcements(&self) -> BorrowedFd<'static> {
        ARENAS_MADE.announcements.get().expect("the watch began").as_fd()
    }

    /// Hooks the arenas made since the last answer, and lets the threads that made them go on.
    pub(crate) fn answer(&mut self) {
        let mut count = [0u8; 8];
        let _ = rustix::io::read(self.announcements(), &mut count);
        let seen = ARENAS_MADE.watch.lock().unwrap_or_else(PoisonError::into_inner).announced;
        self.arenas.hook_unhooked(self.hooks, RANGE_HOOKS.default_pointer.get().copied(), &mut self.hooked);
        let mut watch = ARENAS_MADE.watch.lock().unwrap_or_else(PoisonError::into_inner);
        // An arena announced while hooking is answered at the next pass (the eventfd is readable again).
        watch.answered = watch.answered.max(seen);
        ARENAS_MADE.answered.notify_all();
    }
}

/// jemalloc's mapped ranges, as recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Ranges {
    /// Disjoint, sorted `[start, end)` address ranges.
    pub(crate) ranges: Vec<(usize, usize)>,
    /// Every range jemalloc mapped since the hooks were installed is in `ranges` (none was dropped for
    /// want of room in the table).
    pub(crate) complete: bool,
}

/// A copy of the recorded ranges (the copy's room is allocated before the table is locked, so no
/// allocation happens under the lock a hook may wait for).
pub(crate) fn ranges() -> Ranges {
    let mut ranges = Vec::with_capacity(CAPACITY);
    let complete = with_table(|table| {
        ranges.extend_from_slice(table.as_slice());
        !table.overflowed
    });
    Ranges { ranges, complete }
}

#[cfg(test)]
mod tests;
