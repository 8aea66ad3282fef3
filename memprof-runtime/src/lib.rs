//! The runtime of [memprof](https://docs.rs/memprof): jemalloc heap profiling control, profiling runs and
//! the Mesos-compatible HTTP endpoints under `/memory-profiler`.
//!
//! Use it through the `memprof` crate: `#[memprof::main]` expands to a call of [`start`], and
//! `memprof::scope!` to a [`Run`].
//!
//! ```no_run
//! let run = memprof_runtime::Run::start("warm-up")?;
//! let cache: Vec<Vec<u8>> = (0..64).map(|_| vec![0; 4096]).collect();
//! let profile = run.stop()?;
//! println!("{} buffers profiled in {}", cache.len(), profile.path().display());
//! # Ok::<(), memprof_runtime::Error>(())
//! ```
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]
// `unsafe` is denied but in these files, each for its reason (a test keeps this list true):
// - jemalloc/mod.rs: jemalloc's controls (all in jemalloc/controls.rs, each declared once with its type), its
//   extent hooks and arena-made hook;
// - jemalloc/malloc_conf.rs: the exported configuration symbol; lib.rs: the same, for the runtime's own tests;
// - stack_walk/mod.rs, with its modules: the stack walk jemalloc calls for each sample, the DWARF walk
//   that completes it, the stack's mapping read without allocating;
// - sampler/record/mod.rs, sampler/record/table.rs, sampler/record/spin.rs: jemalloc's sample hooks, the
//   record's preallocated slots and its spin lock, `pthread_atfork` and the coarse clock;
// - allocator_code.rs, process/executable.rs: the executable mapped to be read (and its load bias, from the
//   dynamic loader); allocator_code/tests.rs: the same, in a test;
// - process/threads.rs: a thread's stack bounds and `madvise`; process/signals.rs: a signal's action that
//   lets a forked child die of it; process/lineage.rs: its test's `fork`; process/environment.rs: the
//   environment scanned in place, as `getenv` reads it; process/thread_times.rs: a thread's accounts read
//   from `/proc` without allocating, and the boot clock;
// - memory/residency.rs: `mincore`;
// - measure/counting.rs, measure/segment.rs: the counting global allocator (jemalloc's calls) and jemalloc's
//   per-thread byte counters, read through the pointers it gives;
// - http/server/door.rs, http/connection.rs: `poll` and a socket's send buffer.
#![deny(unsafe_code)]
// On other targets the crate is empty: the `memprof` facade says why (`compile_error!`).
#![cfg(unix)]

mod allocator_code;
mod endpoints;
mod http;
mod jemalloc;
pub mod labels;
mod leak_naming;
mod measure;
mod memory;
#[cfg(feature = "http")]
pub mod mounted;
mod otlp_push;
mod process;
mod profile_root;
mod profiler;
mod run_model;
mod sampler;
mod settings;
mod stack_walk;
mod startup;
#[cfg(test)]
mod testing;

pub use jemalloc::malloc_conf::{MallocConf, PROFILING_CONF};
/// Parsing, symbolizing, splitting and rendering heap profiles: memprof-analysis, as the endpoints use it.
pub use measure::{Allocator, MeasuredFuture, measure, measure_future};
pub use memprof_analysis as analysis;
pub use process::environment;
pub use profiler::code_runs::{Profile, Run, Scope};
pub use profiler::{Cause, DumpOf, Error};
pub use sampler::sampling::Sampling;
pub use startup::{DEFAULT_ADDRESS, Guard, MAX_KEEP_RUNS, Options, shutdown, start};

// The runtime's own tests run with profiling armed, as a program using memprof does.
#[cfg(test)]
#[allow(unsafe_code)]
mod profiling_armed {
    crate::malloc_conf!(crate::MallocConf::PROFILING);
    crate::allocator!();
}

#[cfg(test)]
mod tests {
    /// The files the list at the top of this file names are those where `unsafe` is allowed, all of them.
    #[test]
    fn the_list_of_unsafe_files_is_true() {
        let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut allowed = Vec::new();
        let mut folders = vec![source.clone()];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(folder).unwrap().map(Result::unwrap) {
                let path = entry.path();
                if path.is_dir() {
                    folders.push(path);
                } else if std::fs::read_to_string(&path).unwrap().contains(&format!("allow({})", "unsafe_code")) {
                    allowed.push(path.strip_prefix(&source).unwrap().to_string_lossy().into_owned());
                }
            }
        }
        let list = include_str!("lib.rs").split("#![deny(unsafe_code)]").next().unwrap();
        let mut listed: Vec<String> = list
            .split(|c: char| !(c.is_ascii_alphanumeric() || "_/.".contains(c)))
            .filter(|word| word.ends_with(".rs") && !word.contains("controls"))
            .map(str::to_owned)
            .collect();
        listed.dedup();
        allowed.sort();
        listed.sort();
        assert_eq!(allowed, listed, "lib.rs's list of the files where unsafe stands");
    }
}

/// The parsers of untrusted input, for the fuzz targets in `fuzz/`; not a public API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod __fuzzing {
    /// The `duration` parameter of `start`.
    pub fn duration(text: &str) {
        let _ = crate::profiler::duration::parse_run_length(text);
    }

    /// A request head, as the HTTP server reads it off a connection.
    pub fn request_head(bytes: &[u8]) {
        let _ = crate::http::parse_request_head(bytes);
    }

    /// A query string, as the rendered downloads read it.
    pub fn query(text: &str) {
        if let Ok(query) = crate::http::query::Query::parse(text, &["id", "base", "lines", "duration"]) {
            let _ = (query.parse_id("id"), query.parse_id("base"), query.flag("lines"));
        }
    }

    /// A binary, as a dump copied from elsewhere names it: mapped into a profile and symbolized (its
    /// sections, offsets and compressed sizes are claims).
    pub fn symbolized_binary(bytes: &[u8]) {
        use std::io::Write;
        let Ok(mut file) = tempfile::NamedTempFile::new() else { return };
        if file.write_all(bytes).is_err() {
            return;
        }
        let text = format!(
            "heap_v2/1\n  t*: 1: 16 [0: 0]\n@ 0x1010 0x1ff0 0x5000\n  t*: 1: 16 [0: 0]\n\nMAPPED_LIBRARIES:\n\
             00001000-00009000 r-xp 00000000 08:01 1 {}\n",
            file.path().display()
        );
        if let Ok(profile) = crate::analysis::HeapProfile::parse(&text) {
            let _ = crate::analysis::Analysis::new(&profile, &crate::analysis::Binaries::as_mapped());
        }
    }

    /// A label table, as a profile of an earlier process or a download brings it (`<profile>.labels`):
    /// what parses is written back as it was read.
    pub fn label_table(text: &str) {
        if let Ok(sets) = crate::analysis::LabelSets::parse(text) {
            assert_eq!(crate::analysis::LabelSets::parse(&sets.to_text()), Ok(sets));
        }
    }

    /// A label value, as a program passes it from its own requests: a profile split by it has one stack per
    /// line in folded form and no control character in any readable format (it cannot forge a stack, nor
    /// break an SVG, nor reach a terminal).
    pub fn label_split(value: &str) {
        use crate::analysis::{Analysis, Binaries, Format, HeapProfile, LabelSets, RenderOptions, label_address};
        let text = format!(
            "heap_v2/1\n  t*: 1: 4096 [0: 0]\n@ 0x1000 {:#x}\n  t*: 1: 4096 [0: 0]\n\nMAPPED_LIBRARIES:\n",
            label_address(1)
        );
        let profile = HeapProfile::parse(&text).expect("a fixed profile");
        let mut sets = LabelSets::default();
        sets.insert(1, [("tenant", value)]);
        let analysis = Analysis::with_labels(&profile, &Binaries::as_mapped(), &sets);
        let options = RenderOptions { by: Some("tenant".to_owned()), ..RenderOptions::default() };
        for format in [Format::Text, Format::Collapsed, Format::FlameGraph, Format::Graph] {
            let rendered = format.render(&analysis, None, &options).expect("renders");
            let rendered = String::from_utf8(rendered).expect("text");
            assert!(!rendered.chars().any(|c| c.is_control() && c != '\n' && c != '\t'), "{format:?}: {rendered:?}");
            if format == Format::Collapsed {
                assert!(rendered.lines().count() <= 1, "{rendered:?}");
            }
        }
    }

    /// What a start-up reads in a dead process's directory (an owner line, a profile's provenance, a last-seen
    /// note), from the same bytes: never a panic. Then the bytes, cut at each `0xff`, become the files of
    /// an ended process of this program (its `ended` mark, its last-seen note, two profiles' provenance notes, their
    /// profiles' names), and the start-up sweep and the earlier processes as `state` describes them, captions
    /// included, are made from that directory: never a panic either.
    pub fn profile_root_files(bytes: &[u8]) {
        if let Ok(text) = std::str::from_utf8(bytes) {
            let _ = crate::profile_root::stale::parse_owner(text);
        }
        let _ = serde_json::from_slice::<memprof_wire::Provenance>(bytes);
        let _ = serde_json::from_slice::<memprof_wire::LastSeen>(bytes);
        let Ok(parent) = tempfile::tempdir() else { return };
        let directory = parent.path().join("memprof.fuzzed");
        if std::fs::create_dir(&directory).is_err() || crate::profile_root::stale::claim(&directory).is_err() {
            return;
        }
        let mut parts = bytes.split(|&byte| byte == 0xff);
        let mut part = || parts.next().unwrap_or_default();
        let (ended, last_seen, first, second) = (part(), part(), part(), part());
        let names = String::from_utf8_lossy(part()).into_owned();
        let mut names = names.split_whitespace().filter(|name| !name.contains('/') && !name.starts_with('.'));
        let (first_name, second_name) =
            (names.next().unwrap_or("automatic.1.heap"), names.next().unwrap_or("profile.2.heap"));
        // A third profile whose provenance is memprof's, so that the process is this program's and is listed.
        let ours = memprof_wire::Provenance {
            id: 3,
            started_by: "http".to_owned(),
            started: 1_795_000_000.0,
            stopped: 1_795_000_001.0,
            pid: 1,
            binary: crate::process::executable::path(),
            build_id: None,
            allocated: Some(1 << 20),
        };
        let files = [
            ("ended", ended.to_vec()),
            (crate::profile_root::last_seen::FILE, last_seen.to_vec()),
            (first_name, b"heap_v2/1\n".to_vec()),
            (second_name, b"heap_v2/1\n".to_vec()),
            ("automatic.3.heap", b"heap_v2/1\n".to_vec()),
            ("automatic.3.json", serde_json::to_vec(&ours).unwrap_or_default()),
        ];
        for (name, contents) in files {
            let _ = std::fs::write(directory.join(name), contents);
        }
        for (name, provenance) in [(first_name, first), (second_name, second)] {
            let _ =
                std::fs::write(crate::profile_root::files::Beside::Provenance.of(&directory.join(name)), provenance);
        }
        let sweep = crate::profile_root::evidence::sweep(parent.path(), 4, 1 << 20);
        for process in &sweep.kept {
            let _ = crate::endpoints::describe_earlier(process);
        }
    }

    /// A heap profile, parsed and, when it parses, symbolized against this process's binaries.
    pub fn heap_profile(text: &str) {
        if let Ok(profile) = crate::analysis::HeapProfile::parse(text) {
            let _ = crate::analysis::Analysis::new(&profile, &crate::analysis::Binaries::as_mapped());
        }
    }
}

/// What the expansion of `#[memprof::main]` names; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::Allocator;
    pub use crate::MallocConf;
    pub use crate::measure::{budgeted, budgeted_future};
    pub use crate::{allocator, malloc_conf};
    pub use memprof_wire::usage::{Budget, Comparison, Quantity};
}
