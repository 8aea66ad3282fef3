//! memprof's frames against binutils' `addr2line -f -i -C`, for every sampled address of real programs: the
//! example service and a tokio program whose tasks run under `tracing` spans (async closures inlined into
//! tokio's and tracing's polls). Each address memprof looked up must give the same chain of functions, and
//! the same files and lines, as binutils gives for it (binutils' `??` excepted).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use memprof_analysis::{Analysis, Binaries, HeapProfile};
use memprof_tests::process::{Launch, Program, built_binary};
use object::{Object, ObjectSegment};

/// One frame as both sides give it: function, file name (without its directory) and line.
type Frame = (String, Option<String>, Option<u32>);

/// A profile of `program`: the raw dump of a 2-second run, finely sampled.
fn dump_of(program: &Program) -> String {
    let id = memprof_tests::acceptance::start(program, "2secs");
    memprof_tests::acceptance::wait_until_idle(program);
    let response = program.get(&format!("/memory-profiler/download/raw?id={id}"));
    assert_eq!(response.status, 200, "{}", response.text());
    response.text()
}

/// The ELF virtual address of a file offset of `binary`.
fn virtual_address(binary: &object::File<'_>, offset: u64) -> u64 {
    binary
        .segments()
        .find_map(|segment| {
            let (start, size) = segment.file_range();
            (start..start + size).contains(&offset).then(|| segment.address() + (offset - start))
        })
        .expect("the offset is in a loadable segment")
}

fn file_name(path: &str) -> String {
    Path::new(path).file_name().map_or_else(|| path.to_owned(), |name| name.to_string_lossy().into_owned())
}

/// binutils' frames for each of `addresses` (virtual addresses of `binary`), innermost first.
fn binutils_frames(addr2line: &Path, binary: &Path, addresses: &[u64]) -> BTreeMap<u64, Vec<Frame>> {
    let output = Command::new(addr2line)
        .args(["-f", "-i", "-C", "-a", "-e"])
        .arg(binary)
        .args(addresses.iter().map(|address| format!("{address:#x}")))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    let mut frames: BTreeMap<u64, Vec<Frame>> = BTreeMap::new();
    let mut current = 0;
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some(address) = line.strip_prefix("0x") {
            current = u64::from_str_radix(address, 16).unwrap();
            frames.entry(current).or_default();
            continue;
        }
        let location = lines.next().expect("a location after each function");
        let (file, line_number) = location.rsplit_once(':').unwrap();
        let line_number = line_number.split_whitespace().next().unwrap().parse::<u32>().ok().filter(|&line| line > 0);
        let file = (file != "??").then(|| file_name(file));
        frames.get_mut(&current).unwrap().push((line.to_owned(), file, line_number));
    }
    frames
}

/// Compares memprof's frames of every address of `binary` in `dump` with binutils'; returns how many
/// addresses were compared.
fn compare(dump: &str, binary: &Path) -> usize {
    let addr2line = memprof_tests::tools::find("addr2line", "binutils").expect("binutils' addr2line");
    let profile = HeapProfile::parse(dump).unwrap();
    let analysis = Analysis::new(&profile, &Binaries::as_mapped());
    let data = std::fs::read(binary).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let binary_path = binary.to_string_lossy();
    let mut ours = BTreeMap::new();
    for location in &analysis.locations {
        let Some(module) = location.module.map(|index| &analysis.modules[index]) else { continue };
        if module.path != binary_path {
            continue;
        }
        let address = virtual_address(&elf, module.offset_of(location.address).unwrap());
        let frames: Vec<Frame> = location
            .frames
            .iter()
            .map(|frame| (frame.function.to_string(), frame.file.as_deref().map(file_name), frame.line))
            .collect();
        ours.insert(address, frames);
    }
    assert!(ours.len() >= 5, "too few addresses in {}: {}", binary.display(), ours.len());
    let addresses: Vec<u64> = ours.keys().copied().collect();
    let theirs = binutils_frames(&addr2line, binary, &addresses);
    let mut differences = Vec::new();
    for (address, frames) in &ours {
        // memprof drops the allocator's own frames from the first location of a stack: compare the end of
        // binutils' chain (the outer frames) with all of memprof's.
        let expected = &theirs[address];
        let expected = &expected[expected.len().saturating_sub(frames.len())..];
        let same = frames.len() == expected.len()
            && frames.iter().zip(expected).all(|(ours, theirs)| {
                (theirs.0 == "??" || ours.0 == theirs.0)
                    && (theirs.2.is_none() || (&ours.1, ours.2) == (&theirs.1, theirs.2))
            });
        if !same {
            differences.push(format!("{address:#x}:\n  memprof:  {frames:?}\n  binutils: {:?}", theirs[address]));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} addresses differ:\n{}",
        differences.len(),
        ours.len(),
        differences.join("\n")
    );
    ours.len()
}

#[test]
fn the_example_services_frames_are_binutils_frames() {
    let service = Program::service().env("MALLOC_CONF", "lg_prof_sample:13").spawn();
    let compared = compare(&dump_of(&service), &built_binary("service"));
    println!("{compared} addresses compared");
}

#[test]
fn a_tokio_programs_frames_under_tracing_spans_are_binutils_frames() {
    let program = Launch::new(built_binary("labelled"))
        .env("LIBPROCESS_MEMORY_PROFILING", "true")
        .env("MEMPROF_ADDR", "127.0.0.1:0")
        .env("MALLOC_CONF", "lg_prof_sample:13")
        .args(["tracing"])
        .spawn();
    let compared = compare(&dump_of(&program), &built_binary("labelled"));
    println!("{compared} addresses compared");
}

/// Debian's jemalloc, built with heap profiling (package libjemalloc2, which libjemalloc-dev pulls in).
fn system_jemalloc() -> Option<PathBuf> {
    let path = PathBuf::from(format!("/usr/lib/{}-linux-gnu/libjemalloc.so.2", std::env::consts::ARCH));
    if !path.is_file() {
        memprof_tests::tools::skipped(&format!("{} is not installed (Debian package libjemalloc2)", path.display()));
        return None;
    }
    Some(path)
}

/// `programs/tokio-server` built with `profile`, run to its end under Debian's jemalloc with heap profiling
/// on: its binary and the heap profile jemalloc wrote at exit.
fn profiled_tokio_server(profile: &str, jemalloc: &Path, scratch: &memprof_tests::tools::Scratch) -> (PathBuf, String) {
    let crate_directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("programs").join("tokio-server");
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/binutils");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let built = Command::new(cargo)
        .args(["build", "--locked", "--profile", profile, "--target-dir"])
        .arg(&target)
        .current_dir(&crate_directory)
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let binary = target.join(profile).join("tokio-server").canonicalize().unwrap();
    let prefix = scratch.join(profile);
    let conf = format!("prof:true,lg_prof_sample:12,prof_final:true,prof_prefix:{}", prefix.display());
    let ran = Command::new(&binary).env("LD_PRELOAD", jemalloc).env("MALLOC_CONF", conf).output().unwrap();
    let said = String::from_utf8_lossy(&ran.stdout);
    assert!(
        ran.status.success() && said.contains("tokio-server: 8000 keys"),
        "{said}{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let dump = std::fs::read_dir(scratch.join(""))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| {
            path.to_string_lossy().starts_with(&prefix.to_string_lossy().into_owned())
                && path.extension().is_some_and(|extension| extension == "heap")
        })
        .expect("jemalloc's final dump");
    (binary, std::fs::read_to_string(dump).unwrap())
}

/// The frames of every sampled address are binutils', and the default text starts at the program's own
/// connection handler, not at tracing's `Instrumented::poll` or tokio's task poll.
fn a_shipped_tokio_server_is_symbolized_as_binutils_does(profile: &str) {
    let Some(jemalloc) = system_jemalloc() else { return };
    let scratch = memprof_tests::tools::Scratch::new(&format!("tokio-server-{profile}"));
    let (binary, dump) = profiled_tokio_server(profile, &jemalloc, &scratch);
    let compared = compare(&dump, &binary);
    println!("{profile}: {compared} addresses compared");
    let analysis = Analysis::new(&HeapProfile::parse(&dump).unwrap(), &Binaries::as_mapped());
    let folded = String::from_utf8(
        memprof_analysis::Format::Collapsed
            .render(&analysis, None, &memprof_analysis::RenderOptions::default())
            .unwrap(),
    )
    .unwrap();
    let store = folded.lines().find(|line| line.contains("Command::parse")).unwrap_or_else(|| panic!("{folded}"));
    assert!(store.starts_with("tokio_server::handle::{{closure}};"), "{store}");
}

#[test]
fn a_release_tokio_server_is_symbolized_as_binutils_does() {
    a_shipped_tokio_server_is_symbolized_as_binutils_does("release");
}

#[test]
fn a_fat_lto_tokio_server_is_symbolized_as_binutils_does() {
    a_shipped_tokio_server_is_symbolized_as_binutils_does("lto");
}
