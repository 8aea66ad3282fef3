//! What jemalloc says of the memory it holds (`stats.*`, the bins' use) and its purging settings (decay
//! times, background threads): the readings `explain` splits the heap's resident pages with, and the
//! settings `decay` changes.

use super::{ALL_ARENAS, CtlError, read, write};
use memprof_wire::DecaySettings;

/// `arenas.page`: the page size jemalloc counts `pdirty`, `pactive` and `pmuzzy` in.
fn page_size() -> u64 {
    // SAFETY: `arenas.page` is a read-only `size_t`.
    unsafe { read::<usize>("arenas.page") }.map_or(4096, |page| page as u64)
}

/// What one arena (or all of them) holds, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ArenaBytes {
    /// In live allocations (`small.allocated + large.allocated`).
    pub(crate) allocated: u64,
    /// In pages in use (`pactive`).
    pub(crate) active: u64,
    /// In freed pages kept, dirty or muzzy (`pdirty + pmuzzy`).
    pub(crate) free: u64,
}

/// jemalloc's counters, as `explain` splits the heap with them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct HeapReading {
    /// Every arena's, memprof's own among them.
    pub(crate) all: ArenaBytes,
    /// jemalloc's metadata (`stats.metadata`).
    pub(crate) metadata: u64,
    /// Of it, jemalloc's internal allocations (`stats.arenas.<all>.internal`): the heap profiler's records.
    pub(crate) internal: u64,
    /// jemalloc's own estimate of what it has resident (`stats.resident`), an upper bound.
    pub(crate) resident: u64,
    /// memprof's own arena's, when it has one.
    pub(crate) profiler: ArenaBytes,
}

/// An arena's bytes (`stats.arenas.<arena>.*`, after an `epoch` advance).
fn arena_bytes(arena: u32, page: u64) -> Result<ArenaBytes, CtlError> {
    let stat = |name: &str| {
        // SAFETY: every `stats.arenas.<i>.*` read here is a `size_t` (jemalloc(3)).
        unsafe { read::<usize>(&format!("stats.arenas.{arena}.{name}")) }.map(|value| value as u64)
    };
    Ok(ArenaBytes {
        allocated: stat("small.allocated")? + stat("large.allocated")?,
        active: stat("pactive")? * page,
        free: (stat("pdirty")? + stat("pmuzzy")?) * page,
    })
}

/// One arena's counters, as [`super::heap_stats`] gives them for all (after an `epoch` advance); its
/// metadata is left at zero.
pub(super) fn arena_counters(arena: u32) -> Result<memprof_wire::HeapCounters, CtlError> {
    let stat = |name: &str| {
        // SAFETY: every `stats.arenas.<i>.*` read here is a `size_t` (jemalloc(3)).
        unsafe { read::<usize>(&format!("stats.arenas.{arena}.{name}")) }
    };
    let bytes = arena_bytes(arena, page_size())?;
    Ok(memprof_wire::HeapCounters {
        allocated: bytes.allocated as usize,
        active: bytes.active as usize,
        metadata: 0,
        resident: stat("resident")?,
        mapped: stat("mapped")?,
        retained: stat("retained")?,
    })
}

/// jemalloc's counters now (advances `epoch` first); `own_arena` is memprof's arena, read apart.
pub(crate) fn heap_reading(own_arena: Option<u32>) -> Result<HeapReading, CtlError> {
    tikv_jemalloc_ctl::epoch::advance()?;
    let page = page_size();
    // SAFETY: `stats.metadata`, `stats.resident` and `stats.arenas.<i>.internal` are `size_t`s.
    let (metadata, resident, internal) = unsafe {
        (
            read::<usize>("stats.metadata")? as u64,
            read::<usize>("stats.resident")? as u64,
            read::<usize>(&format!("stats.arenas.{ALL_ARENAS}.internal"))? as u64,
        )
    };
    Ok(HeapReading {
        all: arena_bytes(ALL_ARENAS, page)?,
        metadata,
        internal,
        resident,
        profiler: own_arena.map(|arena| arena_bytes(arena, page)).transpose()?.unwrap_or_default(),
    })
}

/// How full one small size class's slabs are, over all arenas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BinUse {
    /// The size class, in bytes.
    pub(crate) size: u64,
    /// Regions allocated (`curregs`).
    pub(crate) regions_used: u64,
    /// Regions in the slabs held (`curslabs x nregs`).
    pub(crate) regions: u64,
    /// Bytes of those slabs (`curslabs x slab_size`).
    pub(crate) slab_bytes: u64,
}

/// Every small size class's use (`stats.arenas.<all>.bins.<j>`, `arenas.bin.<j>`); call after
/// [`heap_reading`], which advanced the epoch.
pub(crate) fn bins() -> Result<Vec<BinUse>, CtlError> {
    // SAFETY: `arenas.nbins` and `arenas.bin.<j>.nregs` are `unsigned`; `arenas.bin.<j>.size`,
    // `arenas.bin.<j>.slab_size`, `stats.arenas.<i>.bins.<j>.curregs` and `.curslabs` are `size_t`s.
    unsafe {
        let count = read::<u32>("arenas.nbins")?;
        (0..count)
            .map(|bin| {
                let slabs = read::<usize>(&format!("stats.arenas.{ALL_ARENAS}.bins.{bin}.curslabs"))? as u64;
                Ok(BinUse {
                    size: read::<usize>(&format!("arenas.bin.{bin}.size"))? as u64,
                    regions_used: read::<usize>(&format!("stats.arenas.{ALL_ARENAS}.bins.{bin}.curregs"))? as u64,
                    regions: slabs * u64::from(read::<u32>(&format!("arenas.bin.{bin}.nregs"))?),
                    slab_bytes: slabs * read::<usize>(&format!("arenas.bin.{bin}.slab_size"))? as u64,
                })
            })
            .collect()
    }
}

/// The decay times of arena 0 (every automatic arena has the same unless changed one by one) and whether
/// background threads run.
pub(crate) fn decay_settings() -> Result<DecaySettings, CtlError> {
    // SAFETY: `arena.<i>.{dirty,muzzy}_decay_ms` are `ssize_t`s; `background_thread` is a `bool`.
    unsafe {
        Ok(DecaySettings {
            dirty_decay_ms: read::<isize>("arena.0.dirty_decay_ms")? as i64,
            muzzy_decay_ms: read::<isize>("arena.0.muzzy_decay_ms")? as i64,
            background_thread: read::<bool>("background_thread")?,
            cost: None,
        })
    }
}

/// Sets what is given: each decay time for every arena that exists (but memprof's own, which returns its
/// freed pages at once) and for those created later (`arenas.*_decay_ms`), and the background threads;
/// answers the settings after.
pub(crate) fn set_decay_settings(
    dirty_ms: Option<i64>,
    muzzy_ms: Option<i64>,
    background_thread: Option<bool>,
) -> Result<DecaySettings, CtlError> {
    // SAFETY: `arenas.narenas` is an `unsigned`; `arenas.{dirty,muzzy}_decay_ms` and
    // `arena.<i>.{dirty,muzzy}_decay_ms` are `ssize_t`s; `background_thread` is a `bool`.
    unsafe {
        for (kind, value) in [("dirty", dirty_ms), ("muzzy", muzzy_ms)] {
            let Some(value) = value else { continue };
            write(&format!("arenas.{kind}_decay_ms"), value as isize)?;
            for arena in (0..read::<u32>("arenas.narenas")?).filter(|arena| Some(*arena) != super::own_arena()) {
                // Arenas not initialized yet answer EFAULT; they take the default just set.
                let _ = write(&format!("arena.{arena}.{kind}_decay_ms"), value as isize);
            }
        }
        if let Some(on) = background_thread {
            write("background_thread", on)?;
        }
    }
    decay_settings()
}
