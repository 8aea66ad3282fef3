//! Splitting the resident set into classes, from readings already taken: pure, so it is tested on
//! recorded readings.
//!
//! Every resident byte of every mapping goes to exactly one leaf, so the leaves add up to the resident set:
//! - in jemalloc's ranges (what `mincore` found resident there), split with jemalloc's counters, each part
//!   at most what is left: profiling's records (`internal`), the program's live objects (`allocated`
//!   without them and without memprof's arena), memprof's arena (`heap/profiler`, its active pages, with
//!   the pages jemalloc's profiling gives each sampled small object beyond its size: a profiler's cost,
//!   most of the heap when every allocation is sampled), the unused space inside active pages
//!   (`active - allocated`, less those promoted pages), and the rest, freed pages jemalloc keeps
//!   (`heap/free`), but for the metadata below;
//! - thread stacks: `[stack]`, and private writable anonymous mappings directly above a guard (`---p`), as
//!   glibc lays out a thread's stack;
//! - code: every mapping of a file that has an executable mapping (its text, read-only data and relocated
//!   data), and the kernel's `[vdso]`;
//! - files: other file mappings and shared memory;
//! - jemalloc's base metadata (`metadata - internal`): in anonymous memory outside jemalloc's ranges (it is
//!   mapped outside the arenas' hooks), and what is not found there in the ranges, past the freed pages
//!   jemalloc keeps (`pdirty + pmuzzy`; an arena that had memprof's hooks when its metadata grew mapped it
//!   through them);
//! - the rest of the anonymous memory outside jemalloc's ranges is `other` (direct `mmap`s, another
//!   allocator);
//! - `unattributed`: mappings the kernel names in a way not known here.

use memprof_wire::{ClassBytes, MemoryClass, class};

use super::smaps::{Kind, Mapping};
use crate::jemalloc::HeapReading;

/// The resident set by class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Classified {
    /// The leaves (`metadata` is the sum of the two below).
    pub(crate) bytes: ClassBytes,
    /// `heap/metadata/profiling`.
    pub(crate) profiling: u64,
    /// `heap/metadata/allocator`.
    pub(crate) allocator_metadata: u64,
    /// Threads (the count of `stacks`).
    pub(crate) threads: u64,
    /// Of `heap/profiler`, the pages given to sampled small objects beyond their size.
    pub(crate) promoted: u64,
}

/// Takes up to `wanted` from `left`.
fn take(left: &mut u64, wanted: u64) -> u64 {
    let taken = wanted.min(*left);
    *left -= taken;
    taken
}

/// Splits `mappings` (each with the bytes `in_jemalloc` found resident in jemalloc's ranges inside it);
/// `promoted`: what sampled small objects take beyond their size.
pub(crate) fn classify(
    mappings: &[Mapping],
    in_jemalloc: &[u64],
    heap: &HeapReading,
    promoted: u64,
    threads: u64,
) -> Classified {
    let code_files: Vec<(u32, u32, u64)> = mappings
        .iter()
        .filter(|mapping| mapping.executable())
        .filter_map(|mapping| match mapping.kind {
            Kind::File { device, inode } => Some((device.0, device.1, inode)),
            _ => None,
        })
        .collect();
    let mut bytes = ClassBytes::default();
    let mut jemalloc = 0;
    let mut anonymous = 0;
    let mut previous: Option<&Mapping> = None;
    for (mapping, &in_jemalloc) in mappings.iter().zip(in_jemalloc.iter().chain(std::iter::repeat(&0))) {
        bytes.rss += mapping.rss;
        let ours = in_jemalloc.min(mapping.rss);
        jemalloc += ours;
        let rest = mapping.rss - ours;
        let above_guard =
            previous.is_some_and(|below| below.end == mapping.start && below.guard() && below.kind == Kind::Anonymous);
        match mapping.kind {
            Kind::MainStack => bytes.stacks += rest,
            Kind::Anonymous if above_guard && mapping.private_writable() => bytes.stacks += rest,
            Kind::Anonymous if mapping.perms[3] == b's' => bytes.files += rest,
            Kind::Anonymous | Kind::Brk => anonymous += rest,
            Kind::KernelCode => bytes.code += rest,
            Kind::File { device, inode } if code_files.contains(&(device.0, device.1, inode)) => bytes.code += rest,
            Kind::File { .. } => bytes.files += rest,
            Kind::Unknown => bytes.unattributed += rest,
        }
        previous = Some(mapping);
    }
    let profiling = take(&mut jemalloc, heap.internal);
    let program = heap.all.allocated.saturating_sub(heap.profiler.allocated);
    bytes.objects = take(&mut jemalloc, program.saturating_sub(heap.internal));
    bytes.profiler = take(&mut jemalloc, heap.profiler.active);
    let active = heap.all.active.saturating_sub(heap.profiler.active);
    let inside_pages = active.saturating_sub(program);
    let promoted = take(&mut jemalloc, promoted.min(inside_pages));
    bytes.profiler += promoted;
    bytes.unused = take(&mut jemalloc, inside_pages - promoted);
    // jemalloc's base metadata is mapped outside the hooks, except the blocks of arenas that had memprof's
    // hooks when they grew their metadata: those are in the ranges, past the freed pages jemalloc keeps.
    let metadata = heap.metadata.saturating_sub(heap.internal);
    let outside = take(&mut anonymous, metadata);
    let kept_free = take(&mut jemalloc, heap.all.free);
    let allocator_metadata = outside + take(&mut jemalloc, metadata - outside);
    bytes.free = kept_free + jemalloc;
    bytes.other = anonymous;
    bytes.metadata = profiling + allocator_metadata;
    Classified { bytes, profiling, allocator_metadata, threads, promoted }
}

impl Classified {
    /// The class tree `explain` answers.
    pub(crate) fn tree(&self) -> Vec<MemoryClass> {
        let leaf = |id: &str, bytes: u64| MemoryClass { id: id.to_owned(), bytes, count: None, children: Vec::new() };
        let parent = |id: &str, children: Vec<MemoryClass>| MemoryClass {
            id: id.to_owned(),
            bytes: children.iter().map(|child| child.bytes).sum(),
            count: None,
            children,
        };
        let b = &self.bytes;
        let metadata = parent(
            class::HEAP_METADATA,
            vec![
                leaf(class::HEAP_METADATA_PROFILING, self.profiling),
                leaf(class::HEAP_METADATA_ALLOCATOR, self.allocator_metadata),
            ],
        );
        let heap = parent(
            class::HEAP,
            vec![
                leaf(class::HEAP_OBJECTS, b.objects),
                leaf(class::HEAP_UNUSED, b.unused),
                leaf(class::HEAP_FREE, b.free),
                metadata,
                leaf(class::HEAP_PROFILER, b.profiler),
            ],
        );
        vec![
            heap,
            MemoryClass { count: Some(self.threads), ..leaf(class::STACKS, b.stacks) },
            leaf(class::CODE, b.code),
            leaf(class::FILES, b.files),
            leaf(class::OTHER, b.other),
            leaf(class::UNATTRIBUTED, b.unattributed),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::smaps;
    use super::*;
    use crate::jemalloc::ArenaBytes;

    const MIB: u64 = 1 << 20;

    fn recorded() -> Vec<Mapping> {
        smaps::parse(smaps::tests::RECORDED.as_bytes()).unwrap()
    }

    /// The recorded program: 256 MiB live in 64 KiB blocks, in the big anonymous mapping.
    fn heap() -> HeapReading {
        HeapReading {
            all: ArenaBytes { allocated: 250 * MIB, active: 254 * MIB, free: 40 * MIB },
            metadata: 5 * MIB,
            internal: MIB,
            resident: 300 * MIB,
            profiler: ArenaBytes { allocated: MIB, active: 2 * MIB, free: 0 },
        }
    }

    #[test]
    fn the_leaves_add_up_to_the_resident_set_and_each_lands_where_it_belongs() {
        let mappings = recorded();
        let mut in_jemalloc = vec![0; mappings.len()];
        in_jemalloc[4] = 256 * MIB;
        let classified = classify(&mappings, &in_jemalloc, &heap(), 0, 3);
        let b = classified.bytes;
        assert_eq!(b.rss, 266_432 << 10);
        let leaves =
            [b.objects, b.unused, b.free, b.metadata, b.profiler, b.stacks, b.code, b.files, b.other, b.unattributed];
        assert_eq!(leaves.iter().sum::<u64>(), b.rss);
        assert_eq!(
            (classified.profiling, b.objects, b.profiler, b.unused, b.free),
            (MIB, 248 * MIB, 2 * MIB, 3 * MIB, 2 * MIB)
        );
        assert_eq!(b.stacks, (1028 + 132) << 10);
        assert_eq!(b.code, (184 + 1600 + 64 + 1200 + 8) << 10);
        assert_eq!(b.files, 64 << 10);
        assert_eq!((classified.allocator_metadata, b.other), (8 << 10, 0));
        let tree = classified.tree();
        assert_eq!(tree.iter().map(|class| class.bytes).sum::<u64>(), b.rss);
        assert_eq!(tree[1].count, Some(3));
    }

    /// Every allocation sampled (`lg_prof_sample:0`): jemalloc gives each small object a 16 KiB page of its
    /// own while it lives, which reads as space unused inside pages. Those pages are the profiler's cost:
    /// memprof's class, not the program's fragmentation.
    #[test]
    fn pages_given_to_sampled_small_objects_are_the_profilers_not_fragmentation() {
        let mappings = recorded();
        let mut in_jemalloc = vec![0; mappings.len()];
        in_jemalloc[4] = 256 * MIB;
        // 64 MiB live in small objects, 200 MiB of pages active: 134 MiB promoted, 2 MiB truly unused.
        let heap = HeapReading {
            all: ArenaBytes { allocated: 64 * MIB, active: 200 * MIB, free: 0 },
            metadata: 0,
            internal: 0,
            resident: 256 * MIB,
            profiler: ArenaBytes::default(),
        };
        let classified = classify(&mappings, &in_jemalloc, &heap, 134 * MIB, 1);
        let b = classified.bytes;
        assert_eq!((b.objects, b.profiler, b.unused, classified.promoted), (64 * MIB, 134 * MIB, 2 * MIB, 134 * MIB));
        let overstated = classify(&mappings, &in_jemalloc, &heap, 500 * MIB, 1);
        assert_eq!((overstated.bytes.profiler, overstated.bytes.unused), (136 * MIB, 0), "never more than unused");
    }

    #[test]
    fn metadata_mapped_through_the_hooks_is_metadata_not_freed_pages() {
        let mappings = recorded();
        let mut in_jemalloc = vec![0; mappings.len()];
        // 256 MiB resident in the ranges, of which 250 live, 4 unused, 1 freed and kept, 1 metadata.
        in_jemalloc[4] = 256 * MIB;
        let heap = HeapReading {
            all: ArenaBytes { allocated: 250 * MIB, active: 254 * MIB, free: MIB },
            metadata: 9 * MIB,
            internal: 0,
            resident: 300 * MIB,
            profiler: ArenaBytes::default(),
        };
        let classified = classify(&mappings, &in_jemalloc, &heap, 0, 1);
        let b = classified.bytes;
        assert_eq!((b.objects, b.unused, b.free), (250 * MIB, 4 * MIB, MIB));
        // 8 KiB of metadata outside the ranges (the recorded program's small anonymous mapping), the rest of
        // what is in the ranges after the freed pages.
        assert_eq!(classified.allocator_metadata, (8 << 10) + MIB);
    }

    #[test]
    fn anonymous_memory_outside_jemalloc_is_other_and_no_class_goes_negative() {
        let mappings = recorded();
        let nothing = HeapReading::default();
        let classified = classify(&mappings, &[], &nothing, 0, 1);
        assert_eq!(classified.bytes.other, (256 * MIB) + (8 << 10));
        assert_eq!(classified.bytes.objects + classified.bytes.free, 0);
        let overstated = vec![u64::MAX; mappings.len()];
        let classified = classify(&mappings, &overstated, &heap(), 0, 1);
        assert_eq!(classified.bytes.free, classified.bytes.rss - 254 * MIB);
    }
}
