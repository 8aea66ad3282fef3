//! Typed access to the jemalloc controls memprof uses.
//!
//! Every control is declared once, with its type and access, in [`controls`], the only module of the runtime
//! that calls `mallctl`; the functions here give them the meaning the rest of the runtime asks for. Where
//! else `unsafe` stands, and why, is listed at the top of `lib.rs`.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::ffi::{CString, c_uint, c_void};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

use tikv_jemalloc_ctl::{stats, stats_print};

mod arena;
mod arenas;
mod controls;
mod extents;
pub(crate) mod malloc_conf;
mod memory;
mod sources;

use controls::*;
use sources::sampling_off_at_start;

#[cfg(test)]
pub(crate) use memory::ArenaBytes;

pub(crate) use arena::{bind_this_thread_to_own_arena, in_own_arena, own_arena, use_arena};
pub(crate) use extents::{ArenaWatch, range_hooks_installed, ranges};
pub(crate) use memory::{
    BinUse, HeapReading, SizeClass, bins, decay_settings, heap_reading, set_decay_settings, size_classes,
    smallest_large_class,
};

/// Installs the hooks that record jemalloc's ranges (see [`extents`]) and creates memprof's own arena with
/// them, before the watch of new arenas starts ([`ArenaWatch`]): `arenas.create` holds jemalloc's
/// control lock while it makes the arena, which the watch would wait for. Once; later calls answer the
/// first's result.
pub(crate) fn install_range_hooks() -> bool {
    let installed = extents::install_range_hooks();
    own_arena();
    installed
}

pub(crate) use controls::{ALL_ARENAS, CtlError};

/// `config.prof`: jemalloc was built with `--enable-prof`.
pub(crate) fn profiling_compiled_in() -> bool {
    CONFIG_PROF.read().unwrap_or(false)
}

/// `opt.prof`: profiling was enabled when the process started (only a configuration string can set it).
pub(crate) fn profiling_enabled() -> bool {
    OPT_PROF.read().unwrap_or(false)
}

/// `opt.prof_active`: whether sampling was switched on at start-up.
pub(crate) fn profiling_active_at_start() -> bool {
    OPT_PROF_ACTIVE.read().unwrap_or(false)
}

/// Whether allocations through the global allocator go to this jemalloc: its per-thread counter
/// `thread.allocated` moves when this thread allocates (folly's and Mesos's test).
pub(crate) fn serves_allocations() -> bool {
    let allocated = || THREAD_ALLOCATED.read();
    let Ok(before) = allocated() else {
        return false;
    };
    let probe = std::hint::black_box(vec![0u8; 4096]);
    let after = allocated();
    drop(probe);
    after.is_ok_and(|after| after != before)
}

/// `thread.allocated`: the bytes the calling thread allocated so far (in size classes); `None` where
/// jemalloc was built without statistics.
pub(crate) fn this_threads_allocated() -> Option<u64> {
    THREAD_ALLOCATED.read().ok()
}

/// `thread.allocatedp` and `thread.deallocatedp`: where jemalloc counts the bytes the calling thread
/// allocated and freed (in size classes), to read at no cost for as long as the thread lives; `None` where
/// jemalloc was built without statistics.
pub(crate) fn this_threads_byte_counters() -> Option<(*const u64, *const u64)> {
    let allocated = THREAD_ALLOCATEDP.read().ok()?;
    let freed = THREAD_DEALLOCATEDP.read().ok()?;
    (!allocated.is_null() && !freed.is_null()).then_some((allocated.cast_const(), freed.cast_const()))
}

/// `prof.active`: whether allocations are being sampled now.
pub(crate) fn profiling_active() -> Result<bool, CtlError> {
    PROF_ACTIVE.read()
}

/// `prof.thread_active_init`: whether threads created from now on are sampled (memprof never clears it).
pub(crate) fn new_threads_sampled() -> Result<bool, CtlError> {
    PROF_THREAD_ACTIVE_INIT.read()
}

/// Writes `prof.active` and returns its previous value.
pub(crate) fn set_profiling_active(active: bool) -> Result<bool, CtlError> {
    if active {
        SAMPLING_STATE.store(SAMPLING_MAY_BE_ON, Ordering::Release);
        // Inside unsampled work that asked jemalloc nothing: the rest of it must not be sampled either.
        let (depth, before) = LEFT_AS_IT_WAS.get();
        if depth > 0 && before.is_none() {
            let was = THREAD_PROF_ACTIVE.update(false).unwrap_or(false);
            LEFT_AS_IT_WAS.set((depth, Some(was)));
        }
    }
    PROF_ACTIVE.update(active)
}

/// `opt.lg_prof_sample`: the sampling interval configured, log2 of the mean bytes between samples (what
/// continuous sampling's budget thins from, [`crate::sampler::throttle`]: the interval in force is
/// `prof.lg_sample`).
pub(crate) fn lg_sample() -> Result<usize, CtlError> {
    OPT_LG_PROF_SAMPLE.read()
}

/// `prof.lg_sample`, translated once: the sampling interval in force, log2 of the mean bytes between
/// samples, as jemalloc draws each thread's next distance at it (the last `prof.reset`'s).
///
/// ```ignore
/// let in_force = jemalloc::IntervalInForce::new()?;
/// assert!(in_force.lg_sample()? >= jemalloc::lg_sample()?);
/// ```
pub(crate) struct IntervalInForce(Indexed<usize, ReadOnly>);

impl IntervalInForce {
    /// The control, its name translated (no allocation, no lock, each read after).
    pub(crate) fn new() -> Result<IntervalInForce, CtlError> {
        PROF_LG_SAMPLE.at(&[]).map(IntervalInForce)
    }

    /// log2 of the mean bytes between samples now.
    pub(crate) fn lg_sample(&self) -> Result<usize, CtlError> {
        self.0.read()
    }
}

/// `prof.reset`: drops every sample taken so far, drawing sampling distances at `lg_sample` from now on.
pub(crate) fn reset_samples(lg_sample: usize) -> Result<(), CtlError> {
    PROF_RESET.write(lg_sample)
}

/// `experimental.hooks.prof_backtrace`, read: the address of the stack walk samples use now.
pub(crate) fn backtrace_hook() -> Result<usize, CtlError> {
    HOOKS_PROF_BACKTRACE.read().map(|hook| hook as usize)
}

/// Whether jemalloc's own stack walk is a DWARF unwinder's (`config.prof_libgcc` or
/// `config.prof_libunwind`). jemalloc built without either (its musl builds) walks with gcc's
/// `__builtin_frame_address`, which faults on frames without frame pointers.
pub(crate) fn walks_with_an_unwinder() -> bool {
    CONFIG_PROF_LIBGCC.read().unwrap_or(false) || CONFIG_PROF_LIBUNWIND.read().unwrap_or(false)
}

/// `experimental.hooks.prof_backtrace`: makes `hook` (a `prof_backtrace_hook_t`, as an address) the stack
/// walk of every sample from now on; returns the previous hook's address.
pub(crate) fn replace_backtrace_hook(hook: usize) -> Result<usize, CtlError> {
    // SAFETY: the caller passes the address of an `extern "C"` function of the `prof_backtrace_hook_t`
    // type, alive for the whole process.
    unsafe { HOOKS_PROF_BACKTRACE.update_pointer(hook as *const c_void) }.map(|previous| previous as usize)
}

/// `experimental.hooks.prof_sample` and `experimental.hooks.prof_sample_free`: makes `sampled` (a
/// `prof_sample_hook_t`, as an address) called with each sampled allocation and `freed` (a
/// `prof_sample_free_hook_t`) with each free of one, from now on (0 removes a hook).
pub(crate) fn set_sample_hooks(sampled: usize, freed: usize) -> Result<(), CtlError> {
    // SAFETY: the caller passes the addresses of `extern "C"` functions of the hooks' types, alive for the
    // whole process, or 0. The free hook goes first, so that no object is recorded whose free would not be.
    unsafe {
        HOOKS_PROF_SAMPLE_FREE.write_pointer(freed as *const c_void)?;
        HOOKS_PROF_SAMPLE.write_pointer(sampled as *const c_void)
    }
}

/// `prof.dump`: writes the current heap profile to `path`.
pub(crate) fn dump_profile(path: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    // jemalloc creates the file with mode 0644; made first, owner-only, it keeps that mode.
    std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the dump path contains a NUL byte"))?;
    // SAFETY: `c_path` is a NUL-terminated file name that outlives the call; jemalloc does not keep it.
    unsafe { PROF_DUMP.write_pointer(c_path.as_ptr()) }.map_err(|error| {
        // jemalloc answers EFAULT whatever went wrong; the space left is the likeliest cause worth telling.
        let space_left = path
            .parent()
            .and_then(|directory| rustix::fs::statvfs(directory).ok())
            .map(|file_system| {
                format!("; its file system has {} bytes free", file_system.f_bavail * file_system.f_frsize)
            })
            .unwrap_or_default();
        io::Error::other(format!(
            "jemalloc could not write the heap profile to {} ({error}){space_left}",
            path.display()
        ))
    })
}

/// `arena.<arena>.purge`: returns the unused dirty and muzzy pages of `arena` ([`ALL_ARENAS`] for every
/// one) to the system now, instead of after jemalloc's decay time.
pub(crate) fn purge(arena: u32) -> io::Result<()> {
    ARENA_PURGE.at(&[arena as usize]).map_err(|error| io::Error::other(error.to_string()))?.call()
}

/// `thread.prof.active`: whether allocations made by the calling thread are sampled.
///
/// memprof's own threads switch it off, so its work never shows in the profiles it serves.
pub(crate) fn set_this_thread_sampled(sampled: bool) {
    // It fails with ENOENT when profiling is disabled, which leaves nothing to switch off.
    let _ = THREAD_PROF_ACTIVE.write(sampled);
}

/// `thread.prof.active` of the calling thread: whether its allocations are sampled.
#[cfg(test)]
pub(crate) fn this_thread_sampled() -> Result<bool, CtlError> {
    THREAD_PROF_ACTIVE.read()
}

/// `thread.tcache.flush`: hands the objects the calling thread's cache holds back to the arenas, so a
/// thread that waits for its next job keeps none of the memory its last one used.
pub(crate) fn flush_this_thread_cache() {
    // It fails harmlessly with EFAULT when the thread has no cache.
    let _ = THREAD_TCACHE_FLUSH.call();
}

/// Whether sampling may be on anywhere in the process: from the start unless jemalloc's sources left it off
/// ([`sampling_off_at_start`]), else from the first time memprof switches it on.
#[inline]
pub(crate) fn sampling_may_be_on() -> bool {
    const UNKNOWN: u8 = 0;
    match SAMPLING_STATE.load(Ordering::Acquire) {
        UNKNOWN => {
            let told = if sampling_off_at_start() { SAMPLING_OFF_SO_FAR } else { SAMPLING_MAY_BE_ON };
            // A switch made meanwhile wins.
            let _ = SAMPLING_STATE.compare_exchange(UNKNOWN, told, Ordering::AcqRel, Ordering::Acquire);
            SAMPLING_STATE.load(Ordering::Acquire) == SAMPLING_MAY_BE_ON
        }
        state => state == SAMPLING_MAY_BE_ON,
    }
}

/// [`sampling_may_be_on`]'s answer once known: 0 not yet, else one of these.
static SAMPLING_STATE: AtomicU8 = AtomicU8::new(0);
const SAMPLING_OFF_SO_FAR: u8 = 1;
const SAMPLING_MAY_BE_ON: u8 = 2;

thread_local! {
    /// How deep this thread is in [`unsampled`] work that left its sampling as it was (sampling was off
    /// everywhere), and, where sampling was switched on from this thread meanwhile, the thread's sampling
    /// as it was before [`set_profiling_active`] switched it off, to put back when that work ends.
    static LEFT_AS_IT_WAS: Cell<(u32, Option<bool>)> = const { Cell::new((0, None)) };
}

/// Runs `work` with the calling thread's sampling off, then puts it back as it was.
///
/// For memprof's work on a thread of the program's (`Run::stop` dumping the heap while sampling is on):
/// its own allocations must not show in the profile it writes. Where sampling cannot be on (jemalloc's
/// sources left it off at start and memprof has not switched it on since) it asks jemalloc nothing: a
/// program that asks nothing of memprof never makes jemalloc's control table (some 42 page faults); if
/// `work` switches sampling on, this thread's is switched off first, and put back as `work` ends.
pub(crate) fn unsampled<T>(work: impl FnOnce() -> T) -> T {
    if !sampling_may_be_on() {
        struct Leave;
        impl Drop for Leave {
            fn drop(&mut self) {
                let (depth, before) = LEFT_AS_IT_WAS.get();
                if depth == 1
                    && let Some(before) = before
                {
                    set_this_thread_sampled(before);
                    LEFT_AS_IT_WAS.set((0, None));
                } else {
                    LEFT_AS_IT_WAS.set((depth - 1, before));
                }
            }
        }
        let (depth, before) = LEFT_AS_IT_WAS.get();
        LEFT_AS_IT_WAS.set((depth + 1, before));
        let _leave = Leave;
        return work();
    }
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            set_this_thread_sampled(self.0);
        }
    }
    // ENOENT (profiling disabled) leaves nothing to do.
    let _restore = THREAD_PROF_ACTIVE.update(false).ok().map(Restore);
    work()
}

/// The configuration strings jemalloc read at start-up.
pub(crate) struct ConfigSources {
    /// `opt.malloc_conf.env_var`: the environment variable's value, as jemalloc read it.
    pub(crate) environment: Option<String>,
    /// `opt.malloc_conf.global_var`: the exported `malloc_conf` symbol.
    pub(crate) global: Option<String>,
    /// `config.malloc_conf`: the string built into jemalloc (`--with-malloc-conf`).
    pub(crate) built_in: Option<String>,
}

/// Reads where jemalloc's configuration came from.
pub(crate) fn config_sources() -> ConfigSources {
    ConfigSources {
        environment: OPT_MALLOC_CONF_ENV_VAR.read_string(),
        global: OPT_MALLOC_CONF_GLOBAL_VAR.read_string(),
        built_in: CONFIG_MALLOC_CONF.read_string().filter(|text| !text.is_empty()),
    }
}

/// Bytes the program allocated since it started, in every arena but memprof's own: for every small bin and
/// large size class, `nrequests` times the class's size. Thread caches merge their counts now and then, so
/// it lags a little.
pub(crate) fn bytes_allocated_since_start() -> Result<u64, CtlError> {
    tikv_jemalloc_ctl::epoch::advance()?;
    let all = bytes_allocated_in(ALL_ARENAS)?;
    Ok(all.saturating_sub(own_arena().map(bytes_allocated_in).transpose()?.unwrap_or(0)))
}

/// Bytes allocated since start-up in `arena` ([`ALL_ARENAS`] for all), after an `epoch` advance.
fn bytes_allocated_in(arena: u32) -> Result<u64, CtlError> {
    let classes = |count: Control<c_uint, ReadOnly>,
                   size: Control<usize, ReadOnly>,
                   requests: Control<u64, ReadOnly>|
     -> Result<u64, CtlError> {
        let (size, requests) = (size.at(&[0])?, requests.at(&[arena as usize, 0])?);
        let mut total = 0u64;
        for index in 0..count.read()? as usize {
            let bytes = requests.at(&[arena as usize, index]).read()?.saturating_mul(size.at(&[index]).read()? as u64);
            total = total.saturating_add(bytes);
        }
        Ok(total)
    };
    let small = classes(ARENAS_NBINS, ARENAS_BIN_SIZE, STATS_ARENAS_BINS_NREQUESTS)?;
    Ok(small.saturating_add(classes(ARENAS_NLEXTENTS, ARENAS_LEXTENT_SIZE, STATS_ARENAS_LEXTENTS_NREQUESTS)?))
}

/// The program's memory counters: jemalloc's process-wide ones (`stats.*`, fresh: `epoch` is advanced
/// first) less what memprof's own arena holds, so that nothing memprof keeps is read as the program's live
/// bytes, in their history, by the automatic dumps' thresholds or by a verdict (jemalloc's metadata stays
/// whole). The live bytes leave out jemalloc's internal allocations too (each thread's cache, some 28 KiB,
/// and the profiler's records): its metadata, not the program's objects, though `stats.allocated` counts
/// them (memprof's 40 threads sampling continuously made 1.7 MiB of it at start).
pub(crate) fn heap_stats() -> Result<memprof_wire::HeapCounters, CtlError> {
    tikv_jemalloc_ctl::epoch::advance()?;
    let all = memprof_wire::HeapCounters {
        allocated: stats::allocated::read()?,
        active: stats::active::read()?,
        metadata: stats::metadata::read()?,
        resident: stats::resident::read()?,
        mapped: stats::mapped::read()?,
        retained: stats::retained::read()?,
    };
    let all =
        memprof_wire::HeapCounters { allocated: all.allocated.saturating_sub(memory::internal(ALL_ARENAS)?), ..all };
    let Some(own) = own_arena() else {
        return Ok(all);
    };
    let memprofs = memory::arena_counters(own)?;
    Ok(memprof_wire::HeapCounters {
        allocated: all.allocated.saturating_sub(memprofs.allocated.saturating_sub(memory::internal(own)?)),
        active: all.active.saturating_sub(memprofs.active),
        metadata: all.metadata,
        resident: all.resident.saturating_sub(memprofs.resident),
        mapped: all.mapped.saturating_sub(memprofs.mapped),
        retained: all.retained.saturating_sub(memprofs.retained),
    })
}

/// `malloc_stats_print`: jemalloc's complete statistics, as one JSON document (the `J` option) or as the
/// human-readable report.
pub(crate) fn statistics(json: bool) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(64 * 1024);
    let mut options = stats_print::Options::default();
    options.json_format = json;
    stats_print::stats_print(&mut out, options)?;
    Ok(out)
}
