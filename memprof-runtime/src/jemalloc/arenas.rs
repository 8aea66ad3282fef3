//! The arenas' controls by index (`arena.<i>.extent_hooks`, `arena.<i>.name`), read and written through
//! `mallctlbymib`: whether an arena exists (without initializing it), and installing hooks in those that
//! have jemalloc's default ones.

use tikv_jemalloc_sys::extent_hooks_t;

use super::controls::{ARENA_EXTENT_HOOKS, ARENA_NAME, ARENAS_NARENAS, Indexed, NoValue, OPT_NARENAS, ReadWrite};

/// The arenas' controls, by index (`mallctlbymib`: no name parsed per arena).
pub(super) struct Arenas {
    /// `arena.<i>.extent_hooks`.
    hooks: Indexed<*mut extent_hooks_t, ReadWrite>,
    /// `arena.<i>.name`: answers EFAULT, without initializing it, for an arena not initialized.
    name: Indexed<(), NoValue>,
    /// `opt.narenas`: automatic arenas are `0..automatic`.
    pub(super) automatic: u32,
}

impl Arenas {
    pub(super) fn new() -> Option<Self> {
        let hooks = ARENA_EXTENT_HOOKS.at(&[0]).ok()?;
        let name = ARENA_NAME.at(&[0]).ok()?;
        Some(Arenas { hooks, name, automatic: OPT_NARENAS.read().ok()? })
    }

    /// `arena.<i>.extent_hooks` of `arena`.
    pub(super) fn hooks_of(&self, arena: u32) -> Indexed<*mut extent_hooks_t, ReadWrite> {
        self.hooks.at(&[arena as usize])
    }

    /// Whether `arena` exists (reading its name, which never initializes it).
    pub(super) fn initialized(&self, arena: u32) -> bool {
        self.name.at(&[arena as usize]).call().is_ok()
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
        let Ok(count) = ARENAS_NARENAS.read() else {
            return 0;
        };
        hooked.resize(hooked.len().max(count as usize), false);
        let mut installed = 0;
        for arena in 0..count {
            if hooked[arena as usize] {
                continue;
            }
            let control = self.hooks_of(arena);
            // Read, it initializes nothing.
            let Ok(current) = control.read() else {
                continue;
            };
            if Some(current as usize) != default {
                // memprof's, or the program's own hooks: never replaced.
                hooked[arena as usize] = self.initialized(arena);
                continue;
            }
            // SAFETY: the arena exists, so the write only replaces its hooks, which live as long as the
            // process.
            if self.initialized(arena) && unsafe { control.write_pointer(hooks) }.is_ok() {
                hooked[arena as usize] = true;
                installed += 1;
            }
        }
        installed
    }
}
