//! Inlined frames carry their function's whole path, the one the same function has where it was not
//! inlined, in builds with function records; a `debug = "line-tables-only"` build's short names are told.
//! Checked on a real program, compiled here with rustc both ways.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use object::{Object, ObjectSegment, ObjectSymbol};

use super::resolve;

/// `shapes::build` inlined into `main`, and the same instance called through a pointer, out of line;
/// `shapes::fill`, whose symbol is unmangled, inlined too.
const PROGRAM: &str = r#"
mod shapes {
    #[inline(always)]
    pub fn build<T: Clone>(value: T, count: usize) -> Vec<T> {
        vec![value; count]
    }

    #[unsafe(no_mangle)]
    #[inline(always)]
    pub fn fill(count: usize) -> Vec<u8> {
        vec![7; count]
    }
}

fn main() {
    let count = std::env::args().count() * 1000;
    let inlined = shapes::build(String::from("x"), count);
    let out_of_line: fn(String, usize) -> Vec<String> = std::hint::black_box(shapes::build::<String>);
    println!("{} {} {}", inlined.len(), out_of_line(String::from("y"), count).len(), shapes::fill(count).len());
}
"#;

/// The program built in `directory` with `-C debuginfo=<debuginfo>`, optimized as a release build is.
fn compile(directory: &Path, debuginfo: &str) -> PathBuf {
    let source = directory.join("inlined.rs");
    std::fs::write(&source, PROGRAM).unwrap();
    let binary = directory.join(format!("inlined-{debuginfo}"));
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(rustc)
        .args(["--edition", "2024", "-C", "opt-level=2", "-C", "codegen-units=1"])
        .arg(format!("-Cdebuginfo={debuginfo}"))
        .arg(&source)
        .arg("-o")
        .arg(&binary)
        .output()
        .expect("rustc runs");
    assert!(output.status.success(), "rustc failed: {}", String::from_utf8_lossy(&output.stderr));
    binary
}

/// The file offsets of every byte of the function the symbol table names `name`.
fn offsets_of(binary: &Path, name: &str) -> Vec<u64> {
    let data = std::fs::read(binary).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let symbol = file
        .symbols()
        .find(|symbol| symbol.name().is_ok_and(|symbol_name| super::demangle(symbol_name) == name))
        .unwrap_or_else(|| panic!("no symbol {name} in {}", binary.display()));
    let segment = file
        .segments()
        .find(|segment| (segment.address()..segment.address() + segment.size()).contains(&symbol.address()))
        .unwrap();
    let start = symbol.address() - segment.address() + segment.file_range().0;
    (start..start + symbol.size()).collect()
}

/// What the symbolizer tells of `main`: the names of the frames inlined into it (every frame but the
/// outermost), the file offset of a call inlined from `shapes::build`, and the short name it reported.
struct Main {
    inlined: BTreeSet<String>,
    build_call: u64,
    short_name: Option<String>,
}

fn main_of(binary: &Path) -> Main {
    let offsets = offsets_of(binary, "inlined::main");
    let resolved = resolve(binary, &offsets).unwrap();
    let inlined_at = |index: usize| resolved.frames[index].split_last().map(|(_, inner)| inner).unwrap_or_default();
    let build_call = (0..offsets.len())
        .find(|&index| inlined_at(index).iter().any(|frame| frame.function.contains("build")))
        .map(|index| offsets[index])
        .expect("shapes::build inlined into main");
    let inlined = (0..offsets.len()).flat_map(inlined_at).map(|frame| frame.function.to_string()).collect();
    Main { inlined, build_call, short_name: resolved.short_inline_name }
}

/// The outermost frame's name at the out-of-line copy of `shapes::build`.
fn out_of_line_name(binary: &Path) -> String {
    let offsets = offsets_of(binary, "inlined::shapes::build");
    let resolved = resolve(binary, &offsets[..1]).unwrap();
    resolved.frames[0].last().expect("a frame").function.to_string()
}

/// The analysis of a dump with one stack whose return address is just after `file_offset` (so that the
/// address looked up, a byte before it, is `file_offset`) of `binary` mapped whole at 0x10000000.
fn analysis_at(binary: &Path, file_offset: u64) -> crate::analysis::model::Analysis {
    let start = 0x1000_0000_u64;
    let end = start + std::fs::metadata(binary).unwrap().len();
    let dump = format!(
        "heap_v2/1\n  t*: 1: 4096 [0: 0]\n@ {:#x}\n  t*: 1: 4096 [0: 0]\n\nMAPPED_LIBRARIES:\n\
         {start:x}-{end:x} r-xp 00000000 00:00 0 {}\n",
        start + file_offset + 1,
        binary.display()
    );
    let profile = crate::heap_profile::HeapProfile::parse(&dump).unwrap();
    crate::analysis::model::Analysis::new(&profile, &crate::analysis::binaries::Binaries::as_mapped())
}

/// The program built with `-C debuginfo=<debuginfo>` in a directory of its own, and what `main` tells.
fn built(debuginfo: &str) -> (tempfile::TempDir, PathBuf, Main) {
    let directory = tempfile::tempdir().unwrap();
    let binary = compile(directory.path(), debuginfo);
    let main = main_of(&binary);
    (directory, binary, main)
}

#[test]
fn with_function_records_an_inlined_function_has_the_name_it_has_out_of_line() {
    let (_directory, binary, main) = built("limited");
    assert!(main.inlined.contains("inlined::shapes::build"), "inlined into main: {:?}", main.inlined);
    assert_eq!(out_of_line_name(&binary), "inlined::shapes::build");
    // `fill` has no path in its symbol either: its one name, not a short one.
    assert!(main.inlined.contains("fill"), "inlined into main: {:?}", main.inlined);
    let short: Vec<&String> = main.inlined.iter().filter(|name| !name.contains("::") && *name != "fill").collect();
    assert!(short.is_empty(), "names without a path: {short:?}");
    assert_eq!(main.short_name, None);
    let analysis = analysis_at(&binary, main.build_call);
    let frames = &analysis.locations[analysis.samples[0].locations[0]].frames;
    assert!(frames.iter().any(|frame| frame.function.as_ref() == "inlined::shapes::build"), "{frames:?}");
    assert!(analysis.notes().is_empty(), "{:?}", analysis.notes());
}

#[test]
fn line_tables_only_short_names_are_reported() {
    let (_directory, binary, main) = built("line-tables-only");
    // What such DWARF says: the instance's short name, nothing ties it to `inlined::shapes::build`.
    assert!(main.inlined.contains("build<alloc::string::String>"), "inlined into main: {:?}", main.inlined);
    assert_eq!(out_of_line_name(&binary), "inlined::shapes::build");
    let short_name = main.short_name.expect("short names reported");
    assert!(short_name.contains('<') && main.inlined.contains(&short_name), "{short_name}: {:?}", main.inlined);
    // The analysis says so, in a note every format carries (render's tests).
    let notes = analysis_at(&binary, main.build_call).notes();
    let note = format!("short names in {}: inlined functions are named without their path", binary.display());
    assert!(notes.len() == 1 && notes[0].starts_with(&note), "{notes:?}");
    assert!(notes[0].ends_with("build it with debug = \"limited\" for whole paths"), "{notes:?}");
}
