//! The arenas' controls by index (`arena.<i>.extent_hooks`, `arena.<i>.name`), read and written through
//! `mallctlbymib`: whether an arena exists (without initializing it), and installing hooks in those that
//! have jemalloc's default ones.

use std::ffi::c_uint;

use tikv_jemalloc_ctl::raw;
use tikv_jemalloc_sys::extent_hooks_t;

/// The arenas' controls, by index (`mallctlbymib`: no name parsed per arena).
pub(super) struct Arenas {
    /// `arena.<i>.extent_hooks`.
    pub(super) hooks: [usize; 3],
    /// `arena.<i>.name`: answers EFAULT, without initializing it, for an arena not initialized.
    name: [usize; 3],
    /// `opt.narenas`: automatic arenas are `0..automatic`.
    pub(super) automatic: u32,
}

impl Arenas {
    pub(super) fn new() -> Option<Self> {
        let (mut hooks, mut name) = ([0; 3], [0; 3]);
        raw::name_to_mib(b"arena.0.extent_hooks\0", &mut hooks).ok()?;
        raw::name_to_mib(b"arena.0.name\0", &mut name).ok()?;
        // SAFETY: `opt.narenas` is an `unsigned`.
        let automatic = unsafe { raw::read::<c_uint>(b"opt.narenas\0") }.ok()?;
        Some(Arenas { hooks, name, automatic })
    }

    pub(super) fn at(&self, mib: &[usize; 3], arena: u32) -> [usize; 3] {
        [mib[0], arena as usize, mib[2]]
    }

    /// Whether `arena` exists (reading its name, which never initializes it).
    pub(super) fn initialized(&self, arena: u32) -> bool {
        let mib = self.at(&self.name, arena);
        // SAFETY: with no old and no new value, `arena.<i>.name` only checks that the arena exists.
        let code = unsafe {
            tikv_jemalloc_sys::mallctlbymib(
                mib.as_ptr(),
                mib.len(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
        code == 0
    }

    /// Installs `hooks` in every initialized arena that has jemalloc's default hooks and is not in
    /// `hooked` (indexes already seen with hooks, memprof's or a program's own), noting them there; how
    /// many were installed.
    pub(super) fn hook_unhooked(
        &self,
        hooks: *mut extent_hooks_t,
        default: Option<usize>,
        hooked: &mut Vec<bool>,
    ) -> usize {
        // SAFETY: `arenas.narenas` is an `unsigned`.
        let Ok(count) = (unsafe { raw::read::<c_uint>(b"arenas.narenas\0") }) else {
            return 0;
        };
        hooked.resize(hooked.len().max(count as usize), false);
        let mut installed = 0;
        for arena in 0..count {
            if hooked[arena as usize] {
                continue;
            }
            let mib = self.at(&self.hooks, arena);
            // SAFETY: `arena.<i>.extent_hooks` is an `extent_hooks_t *`; read, it initializes nothing.
            let Ok(current) = (unsafe { raw::read_mib::<*mut extent_hooks_t>(&mib) }) else {
                continue;
            };
            if Some(current as usize) != default {
                // memprof's, or the program's own hooks: never replaced.
                hooked[arena as usize] = self.initialized(arena);
                continue;
            }
            // SAFETY: as above; the arena exists, so the write only replaces its hooks, which live as long
            // as the process.
            if self.initialized(arena) && unsafe { raw::write_mib(&mib, hooks) }.is_ok() {
                hooked[arena as usize] = true;
                installed += 1;
            }
        }
        installed
    }
}
