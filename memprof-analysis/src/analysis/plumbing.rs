//! The frames above the allocation site that nobody wants to read: jemalloc taking the sample, the C
//! allocation functions, and Rust's allocation plumbing (`__rust_alloc`, `alloc::raw_vec`, `Vec` growth,
//! the global allocator). They are trimmed from the leaf end of every stack, as jeprof trims its own list.
//!
//! A frame is recognised by its name, or by its source file when the name is short: inlined frames of a
//! build with `debug = "line-tables-only"` are named `with_capacity_in<u64, alloc::alloc::Global>`, without
//! their path, but their file still says they are in the `alloc` crate.

/// jemalloc's and libc's allocation entry points, by exact name.
const ALLOCATOR_FUNCTIONS: &[&str] = &[
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "free",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "mallocx",
    "rallocx",
    "xallocx",
    "dallocx",
    "sdallocx",
    "nallocx",
    "_Unwind_Backtrace",
];

/// Name prefixes of jemalloc's internals and of Rust's allocation plumbing.
const PLUMBING_PREFIXES: &[&str] = &[
    "je_",
    "_rjem_",
    "prof_",
    "imalloc",
    "ialloc",
    "iralloc",
    "irealloc",
    "do_rallocx",
    "arena_",
    "tcache_",
    "malloc_default",
    "__rust_alloc",
    "__rust_realloc",
    "__rustc::",
    "__rdl_",
    "__rg_",
    "alloc::",
    "core::alloc::",
    "std::alloc::",
    "tikv_jemallocator::",
    // memprof's backtrace hook, in stacks walked by libgcc on its behalf (and where it was in older builds,
    // in their dumps: under `profiler::`, and before the runtime had folders).
    "memprof_runtime::stack_walk::",
    "memprof_runtime::profiler::unwinder::",
    "memprof_runtime::unwinder::",
    // memprof's global allocator, counting for measures, around tikv-jemallocator's.
    "memprof_runtime::measure::counting::",
    // `collect` only allocates through the `FromIterator` of the collection it builds.
    "core::iter::traits::iterator::Iterator::collect",
    // Formatting only allocates through the `fmt::Write` it writes to (a `String`, for `format!`); `?` on
    // its results is inlined into `core::fmt::write`, and named for `Result`.
    "core::fmt::write",
    "core::fmt::Formatter",
    "core::fmt::rt::",
    "core::result::Result<(), core::fmt::Error>",
];

/// Source files of the allocation plumbing: the `alloc` crate, the allocator traits, the global allocator
/// and jemalloc itself.
const PLUMBING_FILES: &[&str] = &[
    "/library/alloc/src/",
    "/library/core/src/alloc/",
    "/library/core/src/fmt/",
    "/library/std/src/alloc.rs",
    "/tikv-jemallocator-",
    "/tikv-jemalloc-sys-",
    "/jemalloc/src/",
    "/jemalloc/include/",
];

/// Whether a frame, by its function's name or its source file, belongs to the allocator or Rust's
/// allocation plumbing.
///
/// `Iterator::collect` counts as plumbing too: it only allocates through the collection it builds.
pub(crate) fn is_plumbing_frame(function: &str, file: Option<&str>) -> bool {
    let file = file.unwrap_or_default();
    let short_collect = function.starts_with("collect<") && file.ends_with("/library/core/src/iter/traits/iterator.rs");
    // memprof's global allocator, from a path dependency or a registry's `memprof-runtime-<version>`.
    let counting = file.ends_with("/src/measure/counting.rs") && file.contains("/memprof-runtime");
    is_plumbing(function) || short_collect || counting || PLUMBING_FILES.iter().any(|part| file.contains(part))
}

/// Whether a frame's function belongs to the allocator or Rust's allocation plumbing.
///
/// ```
/// assert!(memprof_analysis::is_allocation_plumbing("alloc::raw_vec::RawVecInner<A>::try_allocate_in"));
/// assert!(memprof_analysis::is_allocation_plumbing("_rjem_je_prof_backtrace"));
/// assert!(!memprof_analysis::is_allocation_plumbing("service::open_session"));
/// ```
///
/// Trait methods count by the trait or type they belong to: `<alloc::vec::Vec<T> as Clone>::clone` and
/// `<T as alloc::vec::spec_from_elem::SpecFromElem>::from_elem` are plumbing, `<app::Cache as Clone>::clone`
/// is not.
pub fn is_plumbing(function: &str) -> bool {
    if ALLOCATOR_FUNCTIONS.contains(&function) {
        return true;
    }
    let starts_with_plumbing = |name: &str| PLUMBING_PREFIXES.iter().any(|prefix| name.starts_with(prefix));
    match function.strip_prefix('<') {
        Some(qualified) => {
            let (self_type, trait_path) = qualified.split_once(" as ").unwrap_or((qualified, ""));
            starts_with_plumbing(self_type) || starts_with_plumbing(trait_path)
        }
        None => starts_with_plumbing(function),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocator_and_plumbing_frames_are_recognised() {
        for plumbing in [
            "prof_backtrace_impl",
            "_rjem_je_prof_backtrace",
            "memprof_runtime::stack_walk::labelling_hook",
            "memprof_runtime::profiler::unwinder::labelling_hook",
            "je_malloc_default",
            "malloc",
            "__rust_alloc",
            "__rustc::__rust_alloc",
            "core::iter::traits::iterator::Iterator::collect",
            "alloc::raw_vec::RawVecInner<A>::try_allocate_in",
            "alloc::vec::from_elem",
            "<alloc::vec::Vec<T> as core::clone::Clone>::clone",
            "<T as alloc::vec::spec_from_elem::SpecFromElem>::from_elem",
            "<tikv_jemallocator::Jemalloc as core::alloc::global::GlobalAlloc>::alloc",
            "<memprof_runtime::measure::counting::Allocator as core::alloc::global::GlobalAlloc>::alloc",
            "memprof_runtime::measure::counting::allocated",
            "core::fmt::write",
            "<core::result::Result<(), core::fmt::Error> as core::ops::try_trait::Try>::branch",
            "alloc::fmt::format::format_inner",
        ] {
            assert!(is_plumbing(plumbing), "{plumbing}");
        }
        for user in [
            "service::open_session",
            "<service::Cache as core::clone::Clone>::clone",
            "<service::Report as core::fmt::Display>::fmt",
            "hashbrown::raw::RawTable<T,A>::reserve_rehash",
            "mallocate_buffers",
            "std::thread::spawn",
        ] {
            assert!(!is_plumbing(user), "{user}");
        }
    }

    #[test]
    fn short_names_are_recognised_by_their_file() {
        let library = "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library";
        let alloc_file = format!("{library}/alloc/src/raw_vec/mod.rs");
        assert!(is_plumbing_frame("with_capacity_in<u64, alloc::alloc::Global>", Some(&alloc_file)));
        let registry = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f";
        assert!(is_plumbing_frame("alloc", Some(&format!("{registry}/tikv-jemallocator-0.7.0/src/lib.rs"))));
        assert!(is_plumbing_frame("alloc", Some(&format!("{registry}/memprof-runtime-0.1.0/src/measure/counting.rs"))));
        assert!(!is_plumbing_frame("alloc", Some("/srv/app/src/measure/counting.rs")));
        let iterator = format!("{library}/core/src/iter/traits/iterator.rs");
        assert!(is_plumbing_frame("collect<alloc::vec::Vec<u64>>", Some(&iterator)));
        assert!(!is_plumbing_frame("fold<u64, (), F>", Some(&iterator)));
        assert!(!is_plumbing_frame("open_session", Some("/work/service/src/main.rs")));
    }
}
