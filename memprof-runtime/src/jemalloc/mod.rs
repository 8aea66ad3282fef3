//! Typed access to the jemalloc controls memprof uses.
//!
//! Every name comes from the `MALLCTL NAMESPACE` section of jemalloc(3) (5.3). This is the only module of
//! the runtime that calls `mallctl` directly. `unsafe` is confined to it (jemalloc's controls, its extent
//! hooks and arena-made hook), [`crate::profiler::malloc_conf`] (the exported configuration symbol) and
//! [`crate::profiler::unwinder`] (the stack walk), and to one function each where the kernel or a library has no safe
//! binding: mapping the executable ([`crate::process::executable`], [`crate::profiler::allocator_code`]), `mincore`
//! (`memory/residency.rs`), `poll` and a socket's send buffer (`http/server/door.rs`, `http/connection.rs`),
//! and a thread's stack bounds and `madvise` ([`crate::process::threads`]); `lib.rs` exports the configuration
//! symbol for the runtime's own tests.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, c_char};
use std::io;
use std::path::Path;

use tikv_jemalloc_ctl::{raw, stats, stats_print};

mod arena;
mod arenas;
mod extents;
mod memory;

#[cfg(test)]
pub(crate) use memory::ArenaBytes;

pub(crate) use arena::{bind_this_thread_to_own_arena, own_arena, use_arena};
pub(crate) use extents::{range_hooks_installed, ranges, watch_new_arenas};
pub(crate) use memory::{BinUse, HeapReading, bins, decay_settings, heap_reading, set_decay_settings};

/// Installs the hooks that record jemalloc's ranges (see [`extents`]) and creates memprof's own arena with
/// them, before the watch of new arenas starts ([`watch_new_arenas`]): `arenas.create` holds jemalloc's
/// control lock while it makes the arena, which the watch would wait for. Once; later calls answer the
/// first's result.
pub(crate) fn install_range_hooks() -> bool {
    let installed = extents::install_range_hooks();
    own_arena();
    installed
}

/// What a failed `mallctl` call says (jemalloc returns an errno value).
pub(crate) type CtlError = tikv_jemalloc_ctl::Error;

/// Reads a boolean control.
fn read_bool(name: &'static [u8]) -> Result<bool, CtlError> {
    // SAFETY: every name passed here is a `bool` control of jemalloc(3), so the value has the size and
    // representation of a Rust `bool`.
    unsafe { raw::read::<bool>(name) }
}

/// Reads a control of type `T` by a name built at run time.
///
/// # Safety
/// `name` must be a control of jemalloc(3) whose value has the size and representation of `T`.
unsafe fn read<T: Copy>(name: &str) -> Result<T, CtlError> {
    let name = CString::new(name).expect("control names hold no NUL");
    // SAFETY: the caller's promise; the name is NUL-terminated.
    unsafe { raw::read::<T>(name.as_bytes_with_nul()) }
}

/// Writes a control of type `T` by a name built at run time.
///
/// # Safety
/// As [`read`].
unsafe fn write<T>(name: &str, value: T) -> Result<(), CtlError> {
    let name = CString::new(name).expect("control names hold no NUL");
    // SAFETY: the caller's promise; the name is NUL-terminated.
    unsafe { raw::write(name.as_bytes_with_nul(), value) }
}

/// Reads a `const char *` control; `None` when jemalloc holds a NULL pointer or the name is unknown.
fn read_c_string(name: &'static [u8]) -> Option<String> {
    // SAFETY: every name passed here is a `const char *` control of jemalloc(3): the pointer is NULL or
    // points to a NUL-terminated string that lives as long as the process (`opt.*`, `config.*`).
    let pointer = unsafe { raw::read::<*const c_char>(name) }.ok()?;
    if pointer.is_null() {
        return None;
    }
    // SAFETY: non-NULL, NUL-terminated and never freed (see above).
    let text = unsafe { CStr::from_ptr(pointer) };
    Some(text.to_string_lossy().into_owned())
}

/// `config.prof`: jemalloc was built with `--enable-prof`.
pub(crate) fn profiling_compiled_in() -> bool {
    read_bool(b"config.prof\0").unwrap_or(false)
}

/// `opt.prof`: profiling was enabled when the process started (only a configuration string can set it).
pub(crate) fn profiling_enabled() -> bool {
    read_bool(b"opt.prof\0").unwrap_or(false)
}

/// `opt.prof_active`: whether sampling was switched on at start-up.
pub(crate) fn profiling_active_at_start() -> bool {
    read_bool(b"opt.prof_active\0").unwrap_or(false)
}

/// Whether allocations through the global allocator go to this jemalloc: its per-thread counter
/// `thread.allocated` moves when this thread allocates (folly's and Mesos's test).
pub(crate) fn serves_allocations() -> bool {
    let allocated = || {
        // SAFETY: `thread.allocated` is a read-only `uint64_t` (jemalloc(3), with `--enable-stats`).
        unsafe { raw::read::<u64>(b"thread.allocated\0") }
    };
    let Ok(before) = allocated() else {
        return false;
    };
    let probe = std::hint::black_box(vec![0u8; 4096]);
    let after = allocated();
    drop(probe);
    after.is_ok_and(|after| after != before)
}

/// `prof.active`: whether allocations are being sampled now.
pub(crate) fn profiling_active() -> Result<bool, CtlError> {
    read_bool(b"prof.active\0")
}

/// `prof.thread_active_init`: whether threads created from now on are sampled (memprof never clears it).
pub(crate) fn new_threads_sampled() -> Result<bool, CtlError> {
    read_bool(b"prof.thread_active_init\0")
}

/// Writes `prof.active` and returns its previous value.
pub(crate) fn set_profiling_active(active: bool) -> Result<bool, CtlError> {
    // SAFETY: `prof.active` is a read-write `bool` (jemalloc(3)).
    unsafe { raw::update(b"prof.active\0", active) }
}

/// `prof.lg_sample`: the current sampling rate, log2 of the mean bytes between samples.
pub(crate) fn lg_sample() -> Result<usize, CtlError> {
    // SAFETY: `prof.lg_sample` is a read-only `size_t`.
    unsafe { raw::read::<usize>(b"prof.lg_sample\0") }
}

/// `prof.reset`: drops every sample taken so far, keeping the sampling rate `lg_sample`.
pub(crate) fn reset_samples(lg_sample: usize) -> Result<(), CtlError> {
    // SAFETY: `prof.reset` takes a `size_t` (the new `lg_sample`).
    unsafe { raw::write(b"prof.reset\0", lg_sample) }
}

/// `experimental.hooks.prof_backtrace`, read: the address of the stack walk samples use now.
pub(crate) fn backtrace_hook() -> Result<usize, CtlError> {
    // SAFETY: the control holds a function pointer, pointer-sized like `usize`.
    unsafe { raw::read::<usize>(b"experimental.hooks.prof_backtrace\0") }
}

/// Whether jemalloc's own stack walk is a DWARF unwinder's (`config.prof_libgcc` or
/// `config.prof_libunwind`). jemalloc built without either (its musl builds) walks with gcc's
/// `__builtin_frame_address`, which faults on frames without frame pointers.
pub(crate) fn walks_with_an_unwinder() -> bool {
    read_bool(b"config.prof_libgcc\0").unwrap_or(false) || read_bool(b"config.prof_libunwind\0").unwrap_or(false)
}

/// `experimental.hooks.prof_backtrace`: makes `hook` (a `prof_backtrace_hook_t`, as an address) the stack
/// walk of every sample from now on; returns the previous hook's address.
pub(crate) fn replace_backtrace_hook(hook: usize) -> Result<usize, CtlError> {
    // SAFETY: the control holds a function pointer, pointer-sized like `usize`; the caller passes the
    // address of an `extern "C"` function of the `prof_backtrace_hook_t` type, alive for the whole process.
    unsafe { raw::update(b"experimental.hooks.prof_backtrace\0", hook) }
}

/// `experimental.hooks.prof_sample` and `experimental.hooks.prof_sample_free`: makes `sampled` (a
/// `prof_sample_hook_t`, as an address) called with each sampled allocation and `freed` (a
/// `prof_sample_free_hook_t`) with each free of one, from now on (0 removes a hook).
pub(crate) fn set_sample_hooks(sampled: usize, freed: usize) -> Result<(), CtlError> {
    // SAFETY: both controls hold a function pointer, pointer-sized like `usize`; the caller passes the
    // addresses of `extern "C"` functions of the hooks' types, alive for the whole process, or 0. The free
    // hook goes first, so that no object is recorded whose free would not be.
    unsafe {
        raw::write(b"experimental.hooks.prof_sample_free\0", freed)?;
        raw::write(b"experimental.hooks.prof_sample\0", sampled)
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
    // SAFETY: `prof.dump` takes a `const char *` file name; `c_path` outlives the call and jemalloc does
    // not keep the pointer.
    unsafe { raw::write(b"prof.dump\0", c_path.as_ptr()) }.map_err(|error| {
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

/// `MALLCTL_ARENAS_ALL` (jemalloc.h): the arena index that names all arenas at once.
pub(crate) const ALL_ARENAS: u32 = 4096;

/// `arena.<arena>.purge`: returns the unused dirty and muzzy pages of `arena` ([`ALL_ARENAS`] for every
/// one) to the system now, instead of after jemalloc's decay time.
pub(crate) fn purge(arena: u32) -> io::Result<()> {
    void_control(&format!("arena.{arena}.purge"))
}

/// Calls a void control (one that takes no old or new value).
fn void_control(name: &str) -> io::Result<()> {
    let name = CString::new(name).expect("control names hold no NUL");
    // SAFETY: the caller names a void control of jemalloc(3) (`arena.<i>.purge`, `thread.tcache.flush`): it
    // takes no old or new value, so both pointers are NULL and both lengths 0, as jemalloc(3) requires;
    // the name is NUL-terminated.
    let code = unsafe {
        tikv_jemalloc_sys::mallctl(name.as_ptr(), std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), 0)
    };
    if code == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(code)) }
}

/// `thread.prof.active`: whether allocations made by the calling thread are sampled.
///
/// memprof's own threads switch it off, so its work never shows in the profiles it serves.
pub(crate) fn set_this_thread_sampled(sampled: bool) {
    // SAFETY: `thread.prof.active` is a read-write `bool`. It fails with ENOENT when profiling is
    // disabled, which leaves nothing to switch off.
    let _ = unsafe { raw::write(b"thread.prof.active\0", sampled) };
}

/// `thread.prof.active` of the calling thread: whether its allocations are sampled.
#[cfg(test)]
pub(crate) fn this_thread_sampled() -> Result<bool, CtlError> {
    read_bool(b"thread.prof.active\0")
}

/// `thread.tcache.flush`: hands the objects the calling thread's cache holds back to the arenas, so a
/// thread that waits for its next job keeps none of the memory its last one used.
pub(crate) fn flush_this_thread_cache() {
    // It fails harmlessly with EFAULT when the thread has no cache.
    let _ = void_control("thread.tcache.flush");
}

/// Runs `work` with the calling thread's sampling off, then puts it back as it was.
///
/// For memprof's work on a thread of the program's (`Run::stop` dumping the heap while sampling is on):
/// its own allocations must not show in the profile it writes.
pub(crate) fn unsampled<T>(work: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            set_this_thread_sampled(self.0);
        }
    }
    // SAFETY: `thread.prof.active` is a read-write `bool`; ENOENT (profiling disabled) leaves nothing to do.
    let _restore = unsafe { raw::update(b"thread.prof.active\0", false) }.ok().map(Restore);
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
        environment: read_c_string(b"opt.malloc_conf.env_var\0"),
        global: read_c_string(b"opt.malloc_conf.global_var\0"),
        built_in: read_c_string(b"config.malloc_conf\0").filter(|text| !text.is_empty()),
    }
}

/// Bytes allocated since the program started, in all arenas: for every small bin and large size class,
/// `nrequests` times the class's size. Thread caches merge their counts now and then, so it lags a little.
pub(crate) fn bytes_allocated_since_start() -> Result<u64, CtlError> {
    tikv_jemalloc_ctl::epoch::advance()?;
    // SAFETY: `arenas.nbins` and `arenas.nlextents` are `unsigned`; `arenas.bin.<i>.size` and
    // `arenas.lextent.<i>.size` are `size_t`; `stats.arenas.<i>.{bins,lextents}.<j>.nrequests` are
    // `uint64_t` (jemalloc(3)); every name is NUL-terminated and `4096` is `MALLCTL_ARENAS_ALL`.
    unsafe {
        let classes = |count: &[u8], size: &str, requests: &str| -> Result<u64, CtlError> {
            let mut total = 0u64;
            for index in 0..raw::read::<u32>(count)? {
                let size = raw::read::<usize>(format!("{size}.{index}.size\0").as_bytes())?;
                let requests =
                    raw::read::<u64>(format!("stats.arenas.4096.{requests}.{index}.nrequests\0").as_bytes())?;
                total = total.saturating_add(requests.saturating_mul(size as u64));
            }
            Ok(total)
        };
        Ok(classes(b"arenas.nbins\0", "arenas.bin", "bins")?.saturating_add(classes(
            b"arenas.nlextents\0",
            "arenas.lextent",
            "lextents",
        )?))
    }
}

/// The program's memory counters: jemalloc's process-wide ones (`stats.*`, fresh: `epoch` is advanced
/// first) less what memprof's own arena holds, so that nothing memprof keeps is read as the program's live
/// bytes, in their history, by the automatic dumps' thresholds or by a verdict (jemalloc's metadata stays
/// whole).
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
    let Some(own) = own_arena() else {
        return Ok(all);
    };
    let memprofs = memory::arena_counters(own)?;
    Ok(memprof_wire::HeapCounters {
        allocated: all.allocated.saturating_sub(memprofs.allocated),
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
