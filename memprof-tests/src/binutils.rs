//! memprof's frames against binutils' `addr2line -f -i -C` for every sampled address of a profile, and a
//! tokio server of the tutorial's shape (`programs/tokio-server`) built and profiled by Debian's jemalloc:
//! shared by tests/binutils.rs and the analysis benchmark.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use memprof_analysis::{Analysis, Binaries, HeapProfile};
use object::{Object, ObjectSegment};

/// One frame as both sides give it: function, file name (without its directory) and line.
type Frame = (String, Option<String>, Option<u32>);

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
/// addresses were compared, and panics, listing them, when some differ.
///
/// ```no_run
/// let dump = std::fs::read_to_string("profile.heap").unwrap();
/// let compared = memprof_tests::binutils::compare(&dump, std::path::Path::new("target/release/service"));
/// println!("{compared} addresses are named as binutils names them");
/// ```
pub fn compare(dump: &str, binary: &Path) -> usize {
    let addr2line = crate::tools::find("addr2line", "binutils").expect("binutils' addr2line");
    compare_with(&addr2line, dump, binary)
}

/// [`compare`] with the `addr2line` given (binutils' for another architecture: `aarch64-linux-gnu-addr2line`).
///
/// ```no_run
/// let dump = std::fs::read_to_string("service.heap").unwrap();
/// let addr2line = std::path::Path::new("/usr/bin/aarch64-linux-gnu-addr2line");
/// memprof_tests::binutils::compare_with(addr2line, &dump, "target/aarch64/service".as_ref());
/// ```
pub fn compare_with(addr2line: &Path, dump: &str, binary: &Path) -> usize {
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
    let theirs = binutils_frames(addr2line, binary, &addresses);
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

/// Debian's jemalloc, built with heap profiling (package libjemalloc2, which libjemalloc-dev pulls in).
///
/// ```no_run
/// if let Some(jemalloc) = memprof_tests::binutils::system_jemalloc() {
///     println!("LD_PRELOAD={}", jemalloc.display());
/// }
/// ```
pub fn system_jemalloc() -> Option<PathBuf> {
    let path = PathBuf::from(format!("/usr/lib/{}-linux-gnu/libjemalloc.so.2", std::env::consts::ARCH));
    if !path.is_file() {
        crate::tools::skipped(&format!("{} is not installed (Debian package libjemalloc2)", path.display()));
        return None;
    }
    Some(path)
}

/// `programs/tokio-server` built with `profile`, run to its end under Debian's jemalloc with heap profiling
/// on: its binary and the heap profile jemalloc wrote at exit.
///
/// ```no_run
/// let scratch = memprof_tests::tools::Scratch::new("tokio-server");
/// let jemalloc = memprof_tests::binutils::system_jemalloc().unwrap();
/// let (binary, dump) = memprof_tests::binutils::profiled_tokio_server("lto", &jemalloc, &scratch);
/// memprof_tests::binutils::compare(&dump, &binary);
/// ```
pub fn profiled_tokio_server(profile: &str, jemalloc: &Path, scratch: &crate::tools::Scratch) -> (PathBuf, String) {
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
