//! Which functions of a binary a heap profile's stacks pass through (ELF symbol table, PIE-aware): enough
//! to check a dump in a test without memprof's own symbolizer; and the bytes under a function, named by
//! the program's own symbol endpoint.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use memprof::analysis::HeapProfile;
use object::{Object, ObjectSegment};

use crate::http::request_with_body;
use crate::process::Program;

/// The names of `binary`'s functions that the stacks of `profile` pass through (mangled, as the symbol
/// table has them). Return addresses are moved back one byte, into the call instruction.
///
/// ```no_run
/// let profile = memprof::analysis::HeapProfile::parse(&std::fs::read_to_string("service.heap").unwrap()).unwrap();
/// let functions = memprof_tests::heap::functions_in(&profile, "target/debug/service".as_ref());
/// assert!(functions.iter().any(|name| name.contains("open_session")));
/// ```
pub fn functions_in(profile: &HeapProfile, binary: &Path) -> BTreeSet<String> {
    let binary = binary.canonicalize().unwrap();
    let data = std::fs::read(&binary).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let symbols = file.symbol_map();
    let binary = binary.to_str().unwrap();
    let to_virtual = |address: u64| {
        let mapping = profile.mappings.iter().find(|mapping| {
            mapping.path.as_deref() == Some(binary) && (mapping.start..mapping.end).contains(&address)
        })?;
        let file_offset = address - mapping.start + mapping.file_offset;
        file.segments().find_map(|segment| {
            let (segment_offset, size) = segment.file_range();
            (segment_offset..segment_offset + size)
                .contains(&file_offset)
                .then(|| file_offset - segment_offset + segment.address())
        })
    };
    profile
        .stacks
        .iter()
        .flat_map(|stack| stack.addresses.iter().enumerate().map(|(depth, address)| address - u64::from(depth > 0)))
        .filter_map(to_virtual)
        .filter_map(|address| symbols.before(address).map(|symbol| symbol.name().to_owned()))
        .collect()
}

/// The bytes (unbiased) of a `heap_v2` dump's stacks that pass through a function whose name contains
/// `function`, the program's own `/debug/pprof/symbol` naming the frames.
///
/// ```no_run
/// # let program: memprof_tests::process::Program = unimplemented!();
/// let dump = program.get("/memory-profiler/heap_profile?trigger_dump=true").text();
/// assert!(memprof_tests::heap::bytes_under(&program, &dump, "grown_in_the_window") > 0.0);
/// ```
pub fn bytes_under(program: &Program, dump: &str, function: &str) -> f64 {
    let profile = HeapProfile::parse(dump).unwrap_or_else(|error| panic!("{error}:\n{dump}"));
    let addresses: Vec<String> =
        profile.stacks.iter().flat_map(|stack| &stack.addresses).map(|address| format!("{address:#x}")).collect();
    let names = request_with_body(program.address(), "POST", "/debug/pprof/symbol", addresses.join("+").as_bytes());
    let named: HashMap<u64, String> = names
        .text()
        .lines()
        .filter_map(|line| {
            let (address, name) = line.split_once(' ')?;
            Some((u64::from_str_radix(address.trim_start_matches("0x"), 16).ok()?, name.to_owned()))
        })
        .collect();
    profile
        .stacks
        .iter()
        .filter(|stack| {
            stack.addresses.iter().any(|address| named.get(address).is_some_and(|name| name.contains(function)))
        })
        .map(|stack| stack.unbiased(profile.sample_period).1)
        .sum()
}
