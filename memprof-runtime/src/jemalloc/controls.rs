//! Every jemalloc control memprof uses, declared once: its name (from the `MALLCTL NAMESPACE` section of
//! jemalloc(3), 5.3), the type of its value and whether it is read, written, both, or called with no value.
//! A new control is one line of [`controls!`]. This is the only place that calls `mallctl`: the rest of the
//! runtime reads and writes through the typed [`Control`]s below, so a value of the wrong size can never
//! be passed.
//!
//! A control named with an index (`arena.<i>.purge`, `stats.arenas.<i>.bins.<j>.curregs`) is declared with
//! `0` in each index's place and reached with [`Control::at`], which translates the name once
//! (`mallctlnametomib`) and puts the indexes in.
//!
//! ```ignore
//! let active: bool = PROF_ACTIVE.read()?;
//! let regions = STATS_ARENAS_BINS_CURREGS.at(&[ALL_ARENAS as usize, bin])?.read()?;
//! ```

use std::ffi::{CStr, c_char, c_uint, c_void};
use std::io;
use std::marker::PhantomData;

use tikv_jemalloc_ctl::raw;
use tikv_jemalloc_sys::extent_hooks_t;

/// `MALLCTL_ARENAS_ALL` (jemalloc.h): the arena index that names all arenas at once.
pub(crate) const ALL_ARENAS: u32 = 4096;

/// What a failed `mallctl` call says (jemalloc returns an errno value).
pub(crate) type CtlError = tikv_jemalloc_ctl::Error;

/// A control that is only read.
pub(crate) enum ReadOnly {}
/// A control that is only written.
pub(crate) enum WriteOnly {}
/// A control read and written.
pub(crate) enum ReadWrite {}
/// A control called with no old and no new value (an action, or an existence check).
pub(crate) enum NoValue {}

/// Controls whose value may be read.
pub(crate) trait Readable {}
impl Readable for ReadOnly {}
impl Readable for ReadWrite {}

/// Controls whose value may be written.
pub(crate) trait Writable {}
impl Writable for WriteOnly {}
impl Writable for ReadWrite {}

/// A value jemalloc takes by copy, with no lifetime to promise: writing one is safe.
pub(crate) trait Plain: Copy {}
impl Plain for bool {}
impl Plain for c_uint {}
impl Plain for u64 {}
impl Plain for usize {}
impl Plain for isize {}

/// One of jemalloc's controls: its name, the type `T` of its value and its access `A`.
pub(crate) struct Control<T, A> {
    name: &'static CStr,
    value: PhantomData<fn() -> (T, A)>,
}

impl<T, A> Control<T, A> {
    const fn new(name: &'static CStr) -> Self {
        Self { name, value: PhantomData }
    }

    /// The control for the arena, bin or size class `indexes` names, in the order of the `0`s of its
    /// name; translated once here, to be read or written as often as needed.
    pub(crate) fn at(&self, indexes: &[usize]) -> Result<Indexed<T, A>, CtlError> {
        let parts = || self.name.to_bytes().split(|byte| *byte == b'.');
        let depth = parts().count().min(MAX_DEPTH);
        let mut mib = [0; MAX_DEPTH];
        raw::name_to_mib(self.name.to_bytes_with_nul(), &mut mib[..depth])?;
        let mut places = [usize::MAX; MAX_INDEXES];
        for (place, (position, _)) in places.iter_mut().zip(parts().enumerate().filter(|(_, part)| *part == b"0")) {
            *place = position;
        }
        Ok(Indexed { mib, depth, places, value: PhantomData }.at(indexes))
    }
}

impl<T: Copy, A: Readable> Control<T, A> {
    /// The value now.
    pub(crate) fn read(&self) -> Result<T, CtlError> {
        // SAFETY: the table declares each control with the type jemalloc(3) gives its value; the name is
        // NUL-terminated.
        unsafe { raw::read::<T>(self.name.to_bytes_with_nul()) }
    }
}

impl<T: Plain, A: Writable> Control<T, A> {
    /// Sets the value.
    pub(crate) fn write(&self, value: T) -> Result<(), CtlError> {
        // SAFETY: as `read`; a plain value is copied by jemalloc and holds no pointer.
        unsafe { raw::write(self.name.to_bytes_with_nul(), value) }
    }
}

impl<T: Plain> Control<T, ReadWrite> {
    /// Sets the value, answering the one before.
    pub(crate) fn update(&self, value: T) -> Result<T, CtlError> {
        // SAFETY: as `write`.
        unsafe { raw::update(self.name.to_bytes_with_nul(), value) }
    }
}

impl<T: Copy, A: Writable> Control<T, A> {
    /// Sets a value that is a pointer (a hook, a file name), answering the one before where the control is
    /// read too.
    ///
    /// # Safety
    /// What `value` points to must be what jemalloc(3) says the control takes, and live as long as
    /// jemalloc may use it (for the rest of the process, for hooks).
    pub(crate) unsafe fn write_pointer(&self, value: T) -> Result<(), CtlError> {
        // SAFETY: the type is the table's; the pointee is the caller's promise.
        unsafe { raw::write(self.name.to_bytes_with_nul(), value) }
    }
}

impl<T: Copy> Control<T, ReadWrite> {
    /// Sets a pointer value, answering the one before, in one call.
    ///
    /// # Safety
    /// As [`Control::write_pointer`].
    pub(crate) unsafe fn update_pointer(&self, value: T) -> Result<T, CtlError> {
        // SAFETY: the type is the table's; the pointee is the caller's promise.
        unsafe { raw::update(self.name.to_bytes_with_nul(), value) }
    }
}

impl Control<(), NoValue> {
    /// Calls the control with no old and no new value.
    pub(crate) fn call(&self) -> io::Result<()> {
        call_by_name(self.name)
    }
}

impl Control<*const c_char, ReadOnly> {
    /// A `const char *` control (`opt.*`, `config.*`) as text; `None` for a NULL pointer or a name jemalloc
    /// does not know.
    pub(crate) fn read_string(&self) -> Option<String> {
        let pointer = self.read().ok()?;
        if pointer.is_null() {
            return None;
        }
        // SAFETY: the controls of this type in the table are jemalloc's option and configuration strings:
        // non-NULL, NUL-terminated and never freed.
        Some(unsafe { CStr::from_ptr(pointer) }.to_string_lossy().into_owned())
    }
}

/// The deepest control name memprof uses has 6 components.
const MAX_DEPTH: usize = 6;
/// ... and 2 indexes.
const MAX_INDEXES: usize = 2;

/// A control with its indexes put in (see [`Control::at`]).
pub(crate) struct Indexed<T, A> {
    mib: [usize; MAX_DEPTH],
    depth: usize,
    /// Where the indexes go in `mib`, in order (`usize::MAX` past the last).
    places: [usize; MAX_INDEXES],
    value: PhantomData<fn() -> (T, A)>,
}

impl<T, A> Indexed<T, A> {
    fn mib(&self) -> &[usize] {
        &self.mib[..self.depth]
    }

    /// The same control for other indexes (another arena, another bin): no name translated again.
    pub(crate) fn at(&self, indexes: &[usize]) -> Self {
        let mut mib = self.mib;
        for (place, index) in self.places.iter().zip(indexes).filter(|(place, _)| **place < MAX_DEPTH) {
            mib[*place] = *index;
        }
        Self { mib, depth: self.depth, places: self.places, value: PhantomData }
    }
}

impl<T: Copy, A: Readable> Indexed<T, A> {
    /// The value now.
    pub(crate) fn read(&self) -> Result<T, CtlError> {
        // SAFETY: as `Control::read`.
        unsafe { raw::read_mib::<T>(self.mib()) }
    }
}

impl<T: Plain, A: Writable> Indexed<T, A> {
    /// Sets the value.
    pub(crate) fn write(&self, value: T) -> Result<(), CtlError> {
        // SAFETY: as `Control::write`.
        unsafe { raw::write_mib(self.mib(), value) }
    }
}

impl<T: Copy, A: Writable> Indexed<T, A> {
    /// As [`Control::write_pointer`].
    ///
    /// # Safety
    /// As [`Control::write_pointer`].
    pub(crate) unsafe fn write_pointer(&self, value: T) -> Result<(), CtlError> {
        // SAFETY: the type is the table's; the pointee is the caller's promise.
        unsafe { raw::write_mib(self.mib(), value) }
    }
}

impl Indexed<(), NoValue> {
    /// Calls the control with no old and no new value: `Ok` when it exists and did its work.
    pub(crate) fn call(&self) -> io::Result<()> {
        let null = std::ptr::null_mut();
        // SAFETY: a control of no value takes NULL old and new pointers and lengths of 0 (jemalloc(3)).
        let code = unsafe {
            tikv_jemalloc_sys::mallctlbymib(self.mib().as_ptr(), self.depth, null, std::ptr::null_mut(), null, 0)
        };
        if code == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(code)) }
    }
}

fn call_by_name(name: &CStr) -> io::Result<()> {
    let null = std::ptr::null_mut();
    // SAFETY: as `Indexed::call`; the name is NUL-terminated.
    let code = unsafe { tikv_jemalloc_sys::mallctl(name.as_ptr(), null, std::ptr::null_mut(), null, 0) };
    if code == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(code)) }
}

/// `arenas.create`: makes an arena whose extents are served by `hooks`, answering its index.
///
/// # Safety
/// `hooks` must point to hooks that live as long as the process.
pub(crate) unsafe fn create_arena(hooks: *mut extent_hooks_t) -> Option<c_uint> {
    let (mut hooks, mut index) = (hooks, 0 as c_uint);
    let mut index_len = size_of::<c_uint>();
    // SAFETY: `arenas.create` reads an optional `extent_hooks_t *` and answers the new arena's `unsigned`
    // index (jemalloc(3)); both pointers and lengths match those types; the hooks' life is the caller's.
    let code = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arenas.create".as_ptr(),
            (&raw mut index).cast::<c_void>(),
            &mut index_len,
            (&raw mut hooks).cast::<c_void>(),
            size_of::<*mut extent_hooks_t>(),
        )
    };
    (code == 0).then_some(index)
}

/// Declares controls: `NAME: Access Type = c"jemalloc.name";`, each with its doc comment.
macro_rules! controls {
    ($($(#[$doc:meta])* $constant:ident: $access:ident $value:ty = $name:literal;)*) => {
        $($(#[$doc])* pub(crate) const $constant: Control<$value, $access> = Control::new($name);)*
    };
}

controls! {
    /// Built with `--enable-prof`.
    CONFIG_PROF: ReadOnly bool = c"config.prof";
    /// jemalloc walks stacks with libgcc's unwinder.
    CONFIG_PROF_LIBGCC: ReadOnly bool = c"config.prof_libgcc";
    /// jemalloc walks stacks with libunwind.
    CONFIG_PROF_LIBUNWIND: ReadOnly bool = c"config.prof_libunwind";
    /// The configuration string built into jemalloc (`--with-malloc-conf`).
    CONFIG_MALLOC_CONF: ReadOnly *const c_char = c"config.malloc_conf";
    /// Profiling enabled at start-up (only a configuration string sets it).
    OPT_PROF: ReadOnly bool = c"opt.prof";
    /// Sampling switched on at start-up.
    OPT_PROF_ACTIVE: ReadOnly bool = c"opt.prof_active";
    /// The automatic arenas are `0..opt.narenas`.
    OPT_NARENAS: ReadOnly c_uint = c"opt.narenas";
    /// The environment variable's configuration, as jemalloc read it.
    OPT_MALLOC_CONF_ENV_VAR: ReadOnly *const c_char = c"opt.malloc_conf.env_var";
    /// The exported `malloc_conf` symbol's configuration.
    OPT_MALLOC_CONF_GLOBAL_VAR: ReadOnly *const c_char = c"opt.malloc_conf.global_var";
    /// Sampling on now.
    PROF_ACTIVE: ReadWrite bool = c"prof.active";
    /// Whether threads created from now on are sampled (memprof never clears it).
    PROF_THREAD_ACTIVE_INIT: ReadOnly bool = c"prof.thread_active_init";
    /// log2 of the mean bytes between samples, as configured (memprof's budget lengthens the interval in
    /// force, `prof.lg_sample`, from it).
    OPT_LG_PROF_SAMPLE: ReadOnly usize = c"opt.lg_prof_sample";
    /// log2 of the mean bytes between samples in force now (the last `prof.reset`'s).
    PROF_LG_SAMPLE: ReadOnly usize = c"prof.lg_sample";
    /// Drops every sample taken so far, with the sampling rate to keep.
    PROF_RESET: WriteOnly usize = c"prof.reset";
    /// Writes the heap profile to the file named.
    PROF_DUMP: WriteOnly *const c_char = c"prof.dump";
    /// The stack walk of every sample (a `prof_backtrace_hook_t`).
    HOOKS_PROF_BACKTRACE: ReadWrite *const c_void = c"experimental.hooks.prof_backtrace";
    /// Called with each sampled allocation (a `prof_sample_hook_t`).
    HOOKS_PROF_SAMPLE: WriteOnly *const c_void = c"experimental.hooks.prof_sample";
    /// Called with each free of a sampled object (a `prof_sample_free_hook_t`).
    HOOKS_PROF_SAMPLE_FREE: WriteOnly *const c_void = c"experimental.hooks.prof_sample_free";
    /// Bytes the calling thread has allocated.
    THREAD_ALLOCATED: ReadOnly u64 = c"thread.allocated";
    /// Where the calling thread's count of bytes allocated lives (valid for the thread's life).
    THREAD_ALLOCATEDP: ReadOnly *mut u64 = c"thread.allocatedp";
    /// Where the calling thread's count of bytes freed lives (valid for the thread's life).
    THREAD_DEALLOCATEDP: ReadOnly *mut u64 = c"thread.deallocatedp";
    /// Whether the calling thread's allocations are sampled.
    THREAD_PROF_ACTIVE: ReadWrite bool = c"thread.prof.active";
    /// The arena the calling thread allocates from.
    THREAD_ARENA: ReadWrite c_uint = c"thread.arena";
    /// Hands the calling thread's cached objects back to the arenas.
    THREAD_TCACHE_FLUSH: NoValue () = c"thread.tcache.flush";
    /// Whether background threads purge.
    BACKGROUND_THREAD: ReadWrite bool = c"background_thread";
    /// The page size jemalloc counts pages in.
    ARENAS_PAGE: ReadOnly usize = c"arenas.page";
    /// Arenas made so far.
    ARENAS_NARENAS: ReadOnly c_uint = c"arenas.narenas";
    /// Small size classes.
    ARENAS_NBINS: ReadOnly c_uint = c"arenas.nbins";
    /// Large size classes.
    ARENAS_NLEXTENTS: ReadOnly c_uint = c"arenas.nlextents";
    /// The dirty decay time arenas made from now on take.
    ARENAS_DIRTY_DECAY_MS: ReadWrite isize = c"arenas.dirty_decay_ms";
    /// The muzzy decay time arenas made from now on take.
    ARENAS_MUZZY_DECAY_MS: ReadWrite isize = c"arenas.muzzy_decay_ms";
    /// A small size class's size.
    ARENAS_BIN_SIZE: ReadOnly usize = c"arenas.bin.0.size";
    /// A small size class's regions a slab.
    ARENAS_BIN_NREGS: ReadOnly c_uint = c"arenas.bin.0.nregs";
    /// A small size class's slab size.
    ARENAS_BIN_SLAB_SIZE: ReadOnly usize = c"arenas.bin.0.slab_size";
    /// A large size class's size.
    ARENAS_LEXTENT_SIZE: ReadOnly usize = c"arenas.lextent.0.size";
    /// Returns an arena's unused pages now.
    ARENA_PURGE: NoValue () = c"arena.0.purge";
    /// An arena's dirty decay time.
    ARENA_DIRTY_DECAY_MS: ReadWrite isize = c"arena.0.dirty_decay_ms";
    /// An arena's muzzy decay time.
    ARENA_MUZZY_DECAY_MS: ReadWrite isize = c"arena.0.muzzy_decay_ms";
    /// An arena's extent hooks.
    ARENA_EXTENT_HOOKS: ReadWrite *mut extent_hooks_t = c"arena.0.extent_hooks";
    /// Called with no value, whether an arena exists (never initializing it).
    ARENA_NAME: NoValue () = c"arena.0.name";
    /// jemalloc's metadata.
    STATS_METADATA: ReadOnly usize = c"stats.metadata";
    /// What jemalloc has resident, an upper bound.
    STATS_RESIDENT: ReadOnly usize = c"stats.resident";
    /// An arena's internal allocations (the heap profiler's records).
    STATS_ARENAS_INTERNAL: ReadOnly usize = c"stats.arenas.0.internal";
    /// An arena's live small allocations.
    STATS_ARENAS_SMALL_ALLOCATED: ReadOnly usize = c"stats.arenas.0.small.allocated";
    /// An arena's live large allocations.
    STATS_ARENAS_LARGE_ALLOCATED: ReadOnly usize = c"stats.arenas.0.large.allocated";
    /// An arena's pages in use.
    STATS_ARENAS_PACTIVE: ReadOnly usize = c"stats.arenas.0.pactive";
    /// An arena's dirty pages.
    STATS_ARENAS_PDIRTY: ReadOnly usize = c"stats.arenas.0.pdirty";
    /// An arena's muzzy pages.
    STATS_ARENAS_PMUZZY: ReadOnly usize = c"stats.arenas.0.pmuzzy";
    /// An arena's resident bytes.
    STATS_ARENAS_RESIDENT: ReadOnly usize = c"stats.arenas.0.resident";
    /// An arena's mapped bytes.
    STATS_ARENAS_MAPPED: ReadOnly usize = c"stats.arenas.0.mapped";
    /// An arena's retained bytes.
    STATS_ARENAS_RETAINED: ReadOnly usize = c"stats.arenas.0.retained";
    /// An arena's slabs of a small size class.
    STATS_ARENAS_BINS_CURSLABS: ReadOnly usize = c"stats.arenas.0.bins.0.curslabs";
    /// An arena's live regions of a small size class.
    STATS_ARENAS_BINS_CURREGS: ReadOnly usize = c"stats.arenas.0.bins.0.curregs";
    /// An arena's requests of a small size class since start-up.
    STATS_ARENAS_BINS_NREQUESTS: ReadOnly u64 = c"stats.arenas.0.bins.0.nrequests";
    /// An arena's live extents of a large size class.
    STATS_ARENAS_LEXTENTS_CURLEXTENTS: ReadOnly usize = c"stats.arenas.0.lextents.0.curlextents";
    /// The bytes an arena's threads' caches hold, freed by the program and kept for its next allocations.
    STATS_ARENAS_TCACHE_BYTES: ReadOnly usize = c"stats.arenas.0.tcache_bytes";
    /// An arena's requests of a large size class since start-up.
    STATS_ARENAS_LEXTENTS_NREQUESTS: ReadOnly u64 = c"stats.arenas.0.lextents.0.nrequests";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_take_the_places_of_the_zeros() {
        let arenas = ARENAS_NARENAS.read().unwrap();
        assert!(arenas >= 1);
        let size = |bin: usize| ARENAS_BIN_SIZE.at(&[bin]).unwrap().read().unwrap();
        assert_eq!((size(0), size(1)), (8, 16), "jemalloc's first two size classes");
        let all = STATS_ARENAS_BINS_NREQUESTS.at(&[4096, 0]).unwrap();
        assert!(all.read().is_ok());
        assert!(ARENA_NAME.at(&[0]).unwrap().call().is_ok(), "arena 0 exists");
        assert!(ARENA_NAME.at(&[0]).unwrap().at(&[arenas as usize + 100]).call().is_err());
        let bins = STATS_ARENAS_BINS_CURREGS.at(&[4096, 0]).unwrap();
        assert_eq!(bins.at(&[4096, 3]).mib(), STATS_ARENAS_BINS_CURREGS.at(&[4096, 3]).unwrap().mib());
        assert!(PROF_ACTIVE.read().is_ok() && CONFIG_PROF.read().unwrap());
    }
}
