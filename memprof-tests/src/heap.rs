//! Just enough of jemalloc's `heap_v2` dump to check it in a test: the header, the stacks' addresses,
//! and which functions of a binary those addresses fall in (ELF symbol table, PIE-aware).

use std::collections::BTreeSet;
use std::path::Path;

use object::{Object, ObjectSegment};

/// A dump, as far as the tests read it.
pub struct Dump {
    /// The first line, such as `heap_v2/524288`.
    pub header: String,
    /// Each stack's addresses, leaf first.
    pub stacks: Vec<Vec<u64>>,
    /// The `MAPPED_LIBRARIES:` lines.
    pub maps: Vec<String>,
}

impl Dump {
    /// Reads a dump.
    ///
    /// # Panics
    /// When it is not a whole `heap_v2` dump.
    pub fn parse(text: &str) -> Dump {
        let (profile, maps) = text.split_once("\nMAPPED_LIBRARIES:\n").expect("a MAPPED_LIBRARIES section");
        let header = profile.lines().next().unwrap().to_owned();
        assert!(header.starts_with("heap_v2/"), "not a heap_v2 dump: {header}");
        let stacks = profile
            .lines()
            .filter_map(|line| line.strip_prefix("@ "))
            .map(|line| {
                line.split_whitespace().map(|address| u64::from_str_radix(&address[2..], 16).unwrap()).collect()
            })
            .collect();
        Dump { header, stacks, maps: maps.lines().map(str::to_owned).collect() }
    }

    /// The names of `binary`'s functions that the stacks pass through (mangled, as the symbol table has
    /// them). Return addresses are moved back one byte, into the call instruction.
    pub fn functions_in(&self, binary: &Path) -> BTreeSet<String> {
        let binary = binary.canonicalize().unwrap();
        let data = std::fs::read(&binary).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let symbols = file.symbol_map();
        let mappings: Vec<(u64, u64, u64)> = self
            .maps
            .iter()
            .filter(|line| line.ends_with(binary.to_str().unwrap()))
            .filter_map(|line| {
                let mut fields = line.split_whitespace();
                let (start, end) = fields.next()?.split_once('-')?;
                let offset = fields.nth(1)?;
                let hex = |text: &str| u64::from_str_radix(text, 16).ok();
                Some((hex(start)?, hex(end)?, hex(offset)?))
            })
            .collect();
        let to_virtual = |address: u64| {
            let (start, _, offset) = mappings.iter().find(|(start, end, _)| (*start..*end).contains(&address))?;
            let file_offset = address - start + offset;
            file.segments().find_map(|segment| {
                let (segment_offset, size) = segment.file_range();
                (segment_offset..segment_offset + size)
                    .contains(&file_offset)
                    .then(|| file_offset - segment_offset + segment.address())
            })
        };
        self.stacks
            .iter()
            .flat_map(|stack| stack.iter().enumerate().map(|(depth, address)| address - u64::from(depth > 0)))
            .filter_map(to_virtual)
            .filter_map(|address| symbols.get(address).map(|symbol| symbol.name().to_owned()))
            .collect()
    }
}
