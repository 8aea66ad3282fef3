//! Which functions of a binary a heap profile's stacks pass through (ELF symbol table, PIE-aware): enough
//! to check a dump in a test without memprof's own symbolizer.

use std::collections::BTreeSet;
use std::path::Path;

use memprof::analysis::HeapProfile;
use object::{Object, ObjectSegment};

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
