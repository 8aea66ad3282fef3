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
use std::sync::{Mutex, OnceLock, PoisonError};

use tikv_jemalloc_ctl::raw;
use tikv_jemalloc_sys::extent_hooks_t;

use super::CtlError;

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

static TABLE: Mutex<RangeSet<CAPACITY>> = Mutex::new(RangeSet::new());

/// jemalloc's default hooks, as arena 0 had them; the wrappers call them.
static DEFAULTS: OnceLock<extent_hooks_t> = OnceLock::new();
/// The hooks installed: the defaults with `alloc`, `dalloc` and `destroy` wrapped. jemalloc keeps a
/// pointer to them for the life of the process.
static RECORDING: OnceLock<extent_hooks_t> = OnceLock::new();

fn with_table<T>(work: impl FnOnce(&mut RangeSet<CAPACITY>) -> T) -> T {
    work(&mut TABLE.lock().unwrap_or_else(PoisonError::into_inner))
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
    let Some(alloc) = DEFAULTS.get().and_then(|defaults| defaults.alloc) else {
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
    let Some(dalloc) = DEFAULTS.get().and_then(|defaults| defaults.dalloc) else {
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
    if let Some(destroy) = DEFAULTS.get().and_then(|defaults| defaults.destroy) {
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
    if RECORDING.get().is_none() {
        // SAFETY: `arena.<i>.extent_hooks` is an `extent_hooks_t *`; jemalloc's default hooks live as long
        // as the process, and are only read here.
        let defaults = unsafe { *raw::read::<*mut extent_hooks_t>(b"arena.0.extent_hooks\0")? };
        let defaults = *DEFAULTS.get_or_init(|| defaults);
        RECORDING.get_or_init(|| extent_hooks_t {
            alloc: Some(recording_alloc),
            dalloc: Some(recording_dalloc),
            destroy: Some(recording_destroy),
            ..defaults
        });
    }
    let hooks = RECORDING.get().expect("set above");
    // jemalloc takes a `*mut` but only reads the hooks.
    Ok(std::ptr::from_ref(hooks).cast_mut())
}

/// Whether [`install_range_hooks`] succeeded: [`ranges`] then holds jemalloc's mappings.
pub(crate) fn range_hooks_installed() -> bool {
    INSTALLED.get().is_some_and(|installed| *installed)
}

static INSTALLED: OnceLock<bool> = OnceLock::new();

/// Installs the recording hooks in every automatic arena (initializing those not in use yet, so they map
/// through the hooks from their first extent) and in the arena for huge allocations (made to exist first by
/// one allocation of `opt.oversize_threshold` bytes, whose range is claimed). Once; later calls answer the
/// first's result.
pub(crate) fn install_range_hooks() -> bool {
    *INSTALLED.get_or_init(install)
}

fn install() -> bool {
    let Ok(hooks) = recording_hooks() else {
        return false;
    };
    claim_huge_arena();
    // SAFETY: `arenas.narenas` is an `unsigned`.
    let Ok(arenas) = (unsafe { raw::read::<c_uint>(b"arenas.narenas\0") }) else {
        return false;
    };
    let mut installed = 0;
    for arena in 0..arenas {
        let name = format!("arena.{arena}.extent_hooks\0");
        // SAFETY: `arena.<i>.extent_hooks` is an `extent_hooks_t *`; the hooks live as long as the process.
        // An index jemalloc does not use answers EFAULT: nothing maps through it.
        if unsafe { raw::write(name.as_bytes(), hooks) }.is_ok() {
            installed += 1;
        }
    }
    installed > 0
}

/// Makes jemalloc create its arena for huge allocations (it does on the first one) so its hooks can be
/// replaced, and claims the range that first allocation mapped.
fn claim_huge_arena() {
    // SAFETY: `opt.oversize_threshold` is a `size_t`.
    let Ok(threshold) = (unsafe { raw::read::<usize>(b"opt.oversize_threshold\0") }) else {
        return;
    };
    if threshold == 0 || threshold > 1 << 30 {
        return;
    }
    // SAFETY: a plain allocation of jemalloc's, freed at once and never touched (its pages stay untouched).
    unsafe {
        let probe = tikv_jemalloc_sys::malloc(threshold);
        if !probe.is_null() {
            claim_range(probe as usize, threshold);
            tikv_jemalloc_sys::free(probe);
        }
    }
}

/// Records `[start, start + len)` as jemalloc's (a range it mapped before the hooks were installed).
fn claim_range(start: usize, len: usize) {
    note(start as *mut c_void, len, true);
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
mod tests {
    use super::*;

    fn set<const N: usize>(ranges: &[(usize, usize)]) -> RangeSet<N> {
        let mut set = RangeSet::new();
        for &(start, end) in ranges {
            set.insert(start, end);
        }
        set
    }

    #[test]
    fn insertion_merges_overlapping_and_touching_ranges_and_keeps_order() {
        let mut set = set::<8>(&[(100, 200), (300, 400), (0, 10)]);
        assert_eq!(set.as_slice(), [(0, 10), (100, 200), (300, 400)]);
        set.insert(200, 250);
        assert_eq!(set.as_slice(), [(0, 10), (100, 250), (300, 400)]);
        set.insert(150, 350);
        assert_eq!(set.as_slice(), [(0, 10), (100, 400)]);
        set.insert(5, 500);
        assert_eq!(set.as_slice(), [(0, 500)]);
        set.insert(7, 7);
        assert_eq!(set.as_slice(), [(0, 500)]);
    }

    #[test]
    fn removal_cuts_splits_and_drops_ranges() {
        let mut set = set::<8>(&[(0, 100), (200, 300), (400, 500)]);
        set.remove(50, 60);
        assert_eq!(set.as_slice(), [(0, 50), (60, 100), (200, 300), (400, 500)]);
        set.remove(80, 450);
        assert_eq!(set.as_slice(), [(0, 50), (60, 80), (450, 500)]);
        set.remove(0, 1000);
        assert_eq!(set.as_slice(), []);
        set.remove(10, 20);
        assert!(!set.overflowed);
    }

    #[test]
    fn a_full_table_says_so_instead_of_losing_order() {
        let mut set = set::<2>(&[(0, 10), (20, 30)]);
        set.insert(40, 50);
        assert!(set.overflowed);
        assert_eq!(set.as_slice(), [(0, 10), (20, 30)]);
        set.insert(10, 20);
        assert_eq!(set.as_slice(), [(0, 30)]);
        let mut full = self::set::<2>(&[(0, 100), (200, 300)]);
        full.remove(40, 50);
        assert_eq!(full.as_slice(), [(0, 100), (200, 300)]);
    }

    #[test]
    fn installed_hooks_record_what_jemalloc_maps() {
        assert!(install_range_hooks());
        let block = std::hint::black_box(vec![1u8; 64 << 20]);
        let address = block.as_ptr() as usize;
        let recorded = ranges();
        assert!(recorded.complete);
        assert!(
            recorded.ranges.iter().any(|&(start, end)| start <= address && address + block.len() <= end),
            "{address:#x} in {:x?}",
            recorded.ranges
        );
    }
}
