//! `explain`, `purge` and `decay`: the process's resident memory accounted for class by class, what it
//! means, and the two actions that change it.

use serde::{Deserialize, Serialize};

/// The ids of the memory classes: stable, path-like; a class's children have its id as their prefix.
///
/// ```
/// assert!(memprof_wire::class::LEAVES.contains(&memprof_wire::class::HEAP_FREE));
/// assert_eq!(memprof_wire::class::LEAVES.len(), 11);
/// ```
pub mod class {
    /// jemalloc's heap: the pages the kernel has resident in jemalloc's own mappings.
    pub const HEAP: &str = "heap";
    /// Live allocations (jemalloc's `stats.allocated`, memprof's own arena excepted).
    pub const HEAP_OBJECTS: &str = "heap/objects";
    /// Free space inside pages jemalloc has in use: slab regions not allocated, large allocations' padding.
    pub const HEAP_UNUSED: &str = "heap/unused";
    /// Freed pages jemalloc still holds resident (dirty, muzzy), waiting for decay or a purge.
    pub const HEAP_FREE: &str = "heap/free";
    /// jemalloc's own metadata.
    pub const HEAP_METADATA: &str = "heap/metadata";
    /// Of it, jemalloc's internal allocations: the heap profiler's sample records and stacks, thread caches.
    pub const HEAP_METADATA_PROFILING: &str = "heap/metadata/profiling";
    /// Of it, the rest: extent and page maps, arenas, bins.
    pub const HEAP_METADATA_ALLOCATOR: &str = "heap/metadata/allocator";
    /// What memprof itself holds, in an arena of its own.
    pub const HEAP_PROFILER: &str = "heap/profiler";
    /// Thread stacks (the main thread's and every other thread's).
    pub const STACKS: &str = "stacks";
    /// The executable and shared libraries, and the kernel's vDSO.
    pub const CODE: &str = "code";
    /// Other file-backed and shared mappings.
    pub const FILES: &str = "files";
    /// Anonymous memory outside jemalloc: direct `mmap`s, another allocator, the `brk` heap.
    pub const OTHER: &str = "other";
    /// What could not be attributed (mappings of kinds not known, ranges that could not be read).
    pub const UNATTRIBUTED: &str = "unattributed";

    /// Every leaf, in the order the tree lists them; their bytes add up to `rss_bytes`.
    pub const LEAVES: [&str; 11] = [
        HEAP_OBJECTS,
        HEAP_UNUSED,
        HEAP_FREE,
        HEAP_METADATA_PROFILING,
        HEAP_METADATA_ALLOCATOR,
        HEAP_PROFILER,
        STACKS,
        CODE,
        FILES,
        OTHER,
        UNATTRIBUTED,
    ];
}

/// `explain`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// The kernel's resident set of the process, in bytes, when it was read (the sum of
    /// `/proc/self/smaps`'s `Rss`, which `smaps_rollup` totals).
    pub rss_bytes: u64,
    /// The class tree; its leaves add up to `rss_bytes` exactly.
    pub classes: Vec<MemoryClass>,
    /// What the figures mean.
    pub verdict: Verdict,
    /// The readings the answer was made from.
    pub evidence: Vec<Evidence>,
    /// The process's cgroup, where it has the memory controller.
    pub container: Option<Container>,
}

impl Explanation {
    /// The leaves of the class tree, depth first.
    ///
    /// ```
    /// use memprof_wire::{Explanation, MemoryClass, Verdict, VerdictKind};
    /// let leaf = |id: &str, bytes| MemoryClass { id: id.into(), bytes, count: None, children: vec![] };
    /// let heap = MemoryClass { children: vec![leaf("heap/objects", 3), leaf("heap/free", 4)], ..leaf("heap", 7) };
    /// let verdict = Verdict { kind: VerdictKind::Healthy, summary: String::new(), fix: String::new(), stacks: vec![] };
    /// let answer = Explanation { rss_bytes: 9, classes: vec![heap, leaf("code", 2)], verdict, evidence: vec![], container: None };
    /// let ids: Vec<&str> = answer.leaves().iter().map(|class| class.id.as_str()).collect();
    /// assert_eq!(ids, ["heap/objects", "heap/free", "code"]);
    /// ```
    pub fn leaves(&self) -> Vec<&MemoryClass> {
        fn walk<'a>(classes: &'a [MemoryClass], into: &mut Vec<&'a MemoryClass>) {
            for class in classes {
                if class.children.is_empty() {
                    into.push(class);
                } else {
                    walk(&class.children, into);
                }
            }
        }
        let mut leaves = Vec::new();
        walk(&self.classes, &mut leaves);
        leaves
    }

    /// The class with `id`, wherever it is in the tree.
    pub fn class(&self, id: &str) -> Option<&MemoryClass> {
        fn find<'a>(classes: &'a [MemoryClass], id: &str) -> Option<&'a MemoryClass> {
            classes.iter().find_map(|class| if class.id == id { Some(class) } else { find(&class.children, id) })
        }
        find(&self.classes, id)
    }
}

/// One class of resident memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryClass {
    /// Its id (see [`class`]).
    pub id: String,
    /// Resident bytes: the sum of its children's, when it has children.
    pub bytes: u64,
    /// How many things it holds, where that is counted (threads, for `stacks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Its parts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<MemoryClass>,
}

/// What the classes say, in one word, one line and a fix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The cause.
    pub kind: VerdictKind,
    /// One line, with the numbers.
    pub summary: String,
    /// What to do, in words (the switch to change, the endpoint to call).
    pub fix: String,
    /// For a leak seen while sampling was on: the stacks whose live bytes grew, largest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stacks: Vec<GrowingStack>,
}

/// The cause [`Verdict`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum VerdictKind {
    /// Live objects grow steadily while the rest does not, and still grow now.
    Leak,
    /// Live objects grew steadily, then stopped (flat for a minute or more): a cache that filled, a
    /// warm-up, a start-up's allocation; not a leak while they stay flat.
    Grew,
    /// Pages in use are mostly free space (slabs held by a few live objects).
    Fragmentation,
    /// jemalloc keeps freed pages resident.
    Retention,
    /// Most of the resident set is not the heap (thread stacks, mappings, another allocator).
    OutsideHeap,
    /// None of the above.
    Healthy,
}

/// A stack whose live bytes grew during a leak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrowingStack {
    /// The allocating function of the program's own code (the first frame past the allocator's).
    pub function: String,
    /// Its frames, allocation site first, as the text download shows them: through `function` and a few
    /// past it, 12 at least.
    pub frames: Vec<String>,
    /// Estimated live bytes allocated there since the run started.
    pub bytes: f64,
    /// The error of `bytes` from sampling: two standard errors (within it of the truth about 95 times in
    /// 100), estimated from the samples and the intervals they were drawn at; `None` where not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_bytes: Option<f64>,
    /// How old what it holds is, when sampling is continuous (the record keeps when each sampled object
    /// was allocated).
    #[serde(default)]
    pub age: Option<HeldAge>,
    /// Its bytes split by the labels in force where they were allocated, the most first, when the program
    /// labels its allocations (`(none)` for those allocated with no label); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_label: Vec<LabelledBytes>,
}

/// Of a growing stack's bytes, those allocated under one label set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelledBytes {
    /// The label set, `key=value` pairs joined by `,` (`tenant=acme`), or `(none)`.
    pub labels: String,
    /// Estimated bytes.
    pub bytes: f64,
}

/// How old what a growing stack holds is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldAge {
    /// Estimated live bytes it holds now.
    pub held_bytes: f64,
    /// The share of them (0 to 1) allocated more than [`HeldAge::older_than_seconds`] ago.
    pub older_share: f64,
    /// The age the share is of: ten minutes, or half the time the growth was watched when shorter.
    pub older_than_seconds: f64,
}

/// One reading the answer was made from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Where it was read (`/proc/self/smaps_rollup`, `mallctl stats.resident`, ...).
    pub source: String,
    /// What it is.
    pub name: String,
    /// Its value (bytes, unless the name says otherwise).
    pub value: f64,
}

/// The memory of the process's cgroup (v1 or v2), from the cgroup that limits it (else its own).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Container {
    /// The cgroup's version, 1 or 2.
    pub version: u8,
    /// Its path below the cgroup mount.
    pub path: String,
    /// Its limit (`memory.max`, `memory.limit_in_bytes`), `null` when there is none.
    pub limit_bytes: Option<u64>,
    /// What it is charged now (`memory.current`, `memory.usage_in_bytes`): every process in it, and
    /// the page cache of the files they read.
    pub usage_bytes: u64,
    /// Anonymous memory of its processes (`anon`; v1 `rss`).
    pub anon_bytes: Option<u64>,
    /// Page cache (`file`; v1 `cache`).
    pub file_bytes: Option<u64>,
    /// Kernel memory: stacks, slabs, page tables (`kernel`, else their sum; v1 `memory.kmem.usage_in_bytes`).
    pub kernel_bytes: Option<u64>,
    /// Socket buffers (`sock`; v1 `memory.kmem.tcp.usage_in_bytes`).
    pub sock_bytes: Option<u64>,
    /// Shared memory and tmpfs (`shmem`; v1 `shmem`).
    pub shmem_bytes: Option<u64>,
    /// One line: what is near the limit, and whether it is this process.
    pub summary: String,
}

/// `purge`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Purged {
    /// The process's resident set before.
    pub rss_before_bytes: u64,
    /// After.
    pub rss_after_bytes: u64,
    /// How long the purge took, in milliseconds.
    pub milliseconds: f64,
    /// What happened.
    pub message: String,
}

/// `decay`'s answer, and what it takes (`?dirty_ms=&muzzy_ms=&background_thread=`): jemalloc's settings
/// after the change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecaySettings {
    /// Milliseconds a freed page stays dirty before it is purged (-1: never).
    pub dirty_decay_ms: i64,
    /// Milliseconds a page stays muzzy (lazily freed) before it is purged (-1: never).
    pub muzzy_decay_ms: i64,
    /// Whether jemalloc's background threads purge on a timer (else only an arena's own activity does).
    pub background_thread: bool,
    /// What these settings cost the program, when that is worth saying (a decay time of zero returns every
    /// freed page at once, and the program faults it in again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<String>,
}

/// The bytes of each leaf class at one time: what the memory history keeps once a second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClassBytes {
    /// The resident set (the leaves' sum).
    pub rss: u64,
    /// `heap/objects`.
    pub objects: u64,
    /// `heap/unused`.
    pub unused: u64,
    /// `heap/free`.
    pub free: u64,
    /// `heap/metadata` (both children).
    pub metadata: u64,
    /// `heap/profiler`.
    pub profiler: u64,
    /// `stacks`.
    pub stacks: u64,
    /// `code`.
    pub code: u64,
    /// `files`.
    pub files: u64,
    /// `other`.
    pub other: u64,
    /// `unattributed`.
    pub unattributed: u64,
}

impl ClassBytes {
    /// Each class with its bytes, in the order of [`class::LEAVES`] (the two metadata leaves as one,
    /// `heap/metadata`); they add up to [`ClassBytes::rss`].
    ///
    /// ```
    /// let bytes = memprof_wire::ClassBytes { rss: 3, objects: 2, other: 1, ..Default::default() };
    /// let sum: u64 = bytes.by_class().iter().map(|(_, bytes)| bytes).sum();
    /// assert_eq!((bytes.by_class()[0], sum), (("heap/objects", 2), 3));
    /// ```
    pub fn by_class(&self) -> [(&'static str, u64); 10] {
        [
            (class::HEAP_OBJECTS, self.objects),
            (class::HEAP_UNUSED, self.unused),
            (class::HEAP_FREE, self.free),
            (class::HEAP_METADATA, self.metadata),
            (class::HEAP_PROFILER, self.profiler),
            (class::STACKS, self.stacks),
            (class::CODE, self.code),
            (class::FILES, self.files),
            (class::OTHER, self.other),
            (class::UNATTRIBUTED, self.unattributed),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_kinds_are_snake_case() {
        assert_eq!(serde_json::to_string(&VerdictKind::OutsideHeap).unwrap(), r#""outside_heap""#);
        assert_eq!(serde_json::from_str::<VerdictKind>(r#""retention""#).unwrap(), VerdictKind::Retention);
    }
}
