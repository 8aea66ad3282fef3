//! What jemalloc says of the memory it holds (`stats.*`, the bins' use) and its purging settings (decay
//! times, background threads): the readings `explain` splits the heap's resident pages with, and the
//! settings `decay` changes.

use super::arena::own_arena;
use super::controls::*;
use memprof_wire::DecaySettings;

/// `arenas.page`: the page size jemalloc counts `pdirty`, `pactive` and `pmuzzy` in.
fn page_size() -> u64 {
    ARENAS_PAGE.read().map_or(4096, |page| page as u64)
}

/// The smallest large size class (`arenas.lextent.0.size`, 16 KiB with 4 KiB pages): what a sampled small
/// object takes while it lives, as jemalloc's profiling promotes it to a large extent of its own.
pub(crate) fn smallest_large_class() -> u64 {
    ARENAS_LEXTENT_SIZE.read().map_or(16 << 10, |size| size as u64)
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
    let stat = |control: Control<usize, ReadOnly>| control.at(&[arena as usize])?.read().map(|value| value as u64);
    Ok(ArenaBytes {
        allocated: stat(STATS_ARENAS_SMALL_ALLOCATED)? + stat(STATS_ARENAS_LARGE_ALLOCATED)?,
        active: stat(STATS_ARENAS_PACTIVE)? * page,
        free: (stat(STATS_ARENAS_PDIRTY)? + stat(STATS_ARENAS_PMUZZY)?) * page,
    })
}

/// jemalloc's internal allocations in `arena` ([`ALL_ARENAS`] for all; after an `epoch` advance): its
/// threads' caches and the profiler's records, counted in the arena's allocated bytes and in its metadata.
pub(super) fn internal(arena: u32) -> Result<usize, CtlError> {
    STATS_ARENAS_INTERNAL.at(&[arena as usize])?.read()
}

/// One arena's counters, as `heap_stats` gives them for all (after an `epoch` advance); its
/// metadata is left at zero.
pub(super) fn arena_counters(arena: u32) -> Result<memprof_wire::HeapCounters, CtlError> {
    let stat = |control: Control<usize, ReadOnly>| control.at(&[arena as usize])?.read();
    let bytes = arena_bytes(arena, page_size())?;
    Ok(memprof_wire::HeapCounters {
        allocated: bytes.allocated as usize,
        active: bytes.active as usize,
        metadata: 0,
        resident: stat(STATS_ARENAS_RESIDENT)?,
        mapped: stat(STATS_ARENAS_MAPPED)?,
        retained: stat(STATS_ARENAS_RETAINED)?,
    })
}

/// jemalloc's counters now (advances `epoch` first); `own_arena` is memprof's arena, read apart.
pub(crate) fn heap_reading(own_arena: Option<u32>) -> Result<HeapReading, CtlError> {
    tikv_jemalloc_ctl::epoch::advance()?;
    let page = page_size();
    let (metadata, resident, internal) = (
        STATS_METADATA.read()? as u64,
        STATS_RESIDENT.read()? as u64,
        STATS_ARENAS_INTERNAL.at(&[ALL_ARENAS as usize])?.read()? as u64,
    );
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
    let all = ALL_ARENAS as usize;
    let (slabs, regions_used) = (STATS_ARENAS_BINS_CURSLABS.at(&[all, 0])?, STATS_ARENAS_BINS_CURREGS.at(&[all, 0])?);
    let (size, regions, slab_size) =
        (ARENAS_BIN_SIZE.at(&[0])?, ARENAS_BIN_NREGS.at(&[0])?, ARENAS_BIN_SLAB_SIZE.at(&[0])?);
    (0..ARENAS_NBINS.read()? as usize)
        .map(|bin| {
            let slabs = slabs.at(&[all, bin]).read()? as u64;
            Ok(BinUse {
                size: size.at(&[bin]).read()? as u64,
                regions_used: regions_used.at(&[all, bin]).read()? as u64,
                regions: slabs * u64::from(regions.at(&[bin]).read()?),
                slab_bytes: slabs * slab_size.at(&[bin]).read()? as u64,
            })
        })
        .collect()
}

/// What the program's arenas hold in one size class: jemalloc's exact count, not a sample's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SizeClass {
    /// The class's size, in bytes.
    pub(crate) size: u64,
    /// Objects of it allocated now (`curregs` of a small class, `curlextents` of a large one), those the
    /// threads' caches keep among them.
    pub(crate) live: u64,
    /// A small class (a slab's region), which profiling promotes a sampled object of to the smallest large
    /// class while it lives.
    pub(crate) small: bool,
}

/// What every arena but memprof's own holds in each size class, exactly, after an `epoch` advance: the
/// small classes then the large, by size; with the bytes the threads' caches keep among them
/// (`tcache_bytes`). Some 240 reads of jemalloc's counters.
pub(crate) fn size_classes() -> Result<(Vec<SizeClass>, u64), CtlError> {
    tikv_jemalloc_ctl::epoch::advance()?;
    let own = own_arena();
    let mut classes = Vec::with_capacity(256);
    let kinds = [
        (ARENAS_NBINS, ARENAS_BIN_SIZE, STATS_ARENAS_BINS_CURREGS, true),
        (ARENAS_NLEXTENTS, ARENAS_LEXTENT_SIZE, STATS_ARENAS_LEXTENTS_CURLEXTENTS, false),
    ];
    for (count, size, live, small) in kinds {
        let (size, live) = (size.at(&[0])?, live.at(&[0, 0])?);
        let live_in = |arena: u32, class: usize| live.at(&[arena as usize, class]).read().map(|live| live as u64);
        for class in 0..count.read()? as usize {
            let mut program = live_in(ALL_ARENAS, class)?;
            if let Some(own) = own {
                program = program.saturating_sub(live_in(own, class)?);
            }
            classes.push(SizeClass { size: size.at(&[class]).read()? as u64, live: program, small });
        }
    }
    let cached = |arena: u32| STATS_ARENAS_TCACHE_BYTES.at(&[arena as usize])?.read().map(|bytes| bytes as u64);
    let cached = cached(ALL_ARENAS)?.saturating_sub(own.map(cached).transpose()?.unwrap_or(0));
    Ok((classes, cached))
}

/// The decay times of arena 0 (every automatic arena has the same unless changed one by one) and whether
/// background threads run.
pub(crate) fn decay_settings() -> Result<DecaySettings, CtlError> {
    Ok(DecaySettings {
        dirty_decay_ms: ARENA_DIRTY_DECAY_MS.read()? as i64,
        muzzy_decay_ms: ARENA_MUZZY_DECAY_MS.read()? as i64,
        background_thread: BACKGROUND_THREAD.read()?,
        cost: None,
    })
}

/// Sets what is given: each decay time for every arena that exists (but memprof's own, which returns its
/// freed pages at once) and for those created later (`arenas.*_decay_ms`), and the background threads;
/// answers the settings after.
pub(crate) fn set_decay_settings(
    dirty_ms: Option<i64>,
    muzzy_ms: Option<i64>,
    background_thread: Option<bool>,
) -> Result<DecaySettings, CtlError> {
    let kinds = [
        (ARENAS_DIRTY_DECAY_MS, ARENA_DIRTY_DECAY_MS, dirty_ms),
        (ARENAS_MUZZY_DECAY_MS, ARENA_MUZZY_DECAY_MS, muzzy_ms),
    ];
    for (for_new_arenas, per_arena, value) in kinds {
        let Some(value) = value else { continue };
        for_new_arenas.write(value as isize)?;
        let per_arena = per_arena.at(&[0])?;
        for arena in (0..ARENAS_NARENAS.read()?).filter(|arena| Some(*arena) != own_arena()) {
            // Arenas not initialized yet answer EFAULT; they take the default just set.
            let _ = per_arena.at(&[arena as usize]).write(value as isize);
        }
    }
    if let Some(on) = background_thread {
        BACKGROUND_THREAD.write(on)?;
    }
    decay_settings()
}
