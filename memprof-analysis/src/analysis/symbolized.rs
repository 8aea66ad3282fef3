//! A set of addresses resolved against a dump's memory map: the binaries they are in, and the frames at
//! each address, read binary by binary (`module+0xoffset` where nothing is known).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use super::binaries::Binaries;
use super::model::Frame;
use super::module::Module;
use super::symbolizer;
use crate::heap_profile::Mapping;

/// Addresses with their modules and frames.
pub(super) struct Symbolized {
    /// The binaries the addresses are in, in the order first met.
    pub(super) modules: Vec<Module>,
    /// Each address, with the index of its module in [`Symbolized::modules`].
    pub(super) module_of: BTreeMap<u64, Option<usize>>,
    /// Each address's frames, innermost (inlined) first; never empty.
    pub(super) frames: HashMap<u64, Arc<[Frame]>>,
}

impl Symbolized {
    /// Resolves `addresses` (taken as they are: the caller moves return addresses back into their call)
    /// in the binaries `mappings` names, read as `binaries` says.
    pub(super) fn new(addresses: impl IntoIterator<Item = u64>, mappings: &[Mapping], binaries: &Binaries) -> Self {
        let index = MappingIndex::new(mappings);
        let mut symbolized = Symbolized { modules: Vec::new(), module_of: BTreeMap::new(), frames: HashMap::new() };
        let mut module_of_mapping: HashMap<usize, usize> = HashMap::new();
        for address in addresses {
            let module = index.find(address).map(|mapping| {
                *module_of_mapping.entry(mapping).or_insert_with(|| symbolized.add_module(&mappings[mapping]))
            });
            symbolized.module_of.insert(address, module);
        }
        symbolized.resolve(binaries, &index.main_program);
        symbolized
    }

    fn add_module(&mut self, mapping: &Mapping) -> usize {
        self.modules.push(Module {
            path: mapping.path.clone().unwrap_or_default(),
            start: mapping.start,
            end: mapping.end,
            file_offset: mapping.file_offset,
            build_id: None,
            has_functions: false,
            has_lines: false,
            is_main_program: false,
            unnamed_addresses: 0,
            short_inline_name: None,
            problem: None,
            read_from: None,
            debug_info_from: None,
        });
        self.modules.len() - 1
    }

    /// The frames of every address: resolved binary by binary, `module+0xoffset` where nothing is known.
    fn resolve(&mut self, binaries: &Binaries, main_program: &str) {
        let mut by_path: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
        for (&address, module) in &self.module_of {
            // A dump's offsets are claims: one that overflows is left unnamed.
            if let Some((module, offset)) =
                module.map(|module| &self.modules[module]).and_then(|module| Some((module, module.offset_of(address)?)))
            {
                by_path.entry(module.path.clone()).or_default().push((address, offset));
            }
        }
        for (path, addresses) in by_path {
            let file_offsets: Vec<u64> = addresses.iter().map(|&(_, offset)| offset).collect();
            let file = binaries.file_for(&path, main_program);
            let resolved = symbolizer::resolve(&file, &file_offsets);
            let read_from = (file != Path::new(&path)).then(|| file.display().to_string());
            for module in self.modules.iter_mut().filter(|module| module.path == path) {
                module.is_main_program = path == main_program;
                module.read_from.clone_from(&read_from);
                match &resolved {
                    Ok(resolved) => {
                        module.build_id = resolved.build_id.clone();
                        module.has_functions = resolved.has_functions;
                        module.has_lines = resolved.has_lines;
                        module.short_inline_name.clone_from(&resolved.short_inline_name);
                        module.problem.clone_from(&resolved.refused);
                        module.debug_info_from.clone_from(&resolved.debug_info_from);
                    }
                    Err(problem) => module.problem = Some(problem.clone()),
                }
            }
            // Shared with the symbolizer's answer (and its cache): each address's frames are copied once,
            // into its location.
            let Ok(resolved) = resolved else { continue };
            for ((address, _), resolved) in addresses.iter().zip(resolved.frames) {
                self.frames.insert(*address, resolved);
            }
        }
        for (&address, &module) in &self.module_of {
            if self.frames.get(&address).is_none_or(|frames| frames.is_empty()) {
                if let Some(module) = module {
                    self.modules[module].unnamed_addresses += 1;
                }
                let unknown = Frame { function: self.unknown_function(address, module).into(), file: None, line: None };
                self.frames.insert(address, Arc::from([unknown]));
            }
        }
    }

    fn unknown_function(&self, address: u64, module: Option<usize>) -> String {
        if let Some(cut) = crate::truncated::truncated_frames(address) {
            return crate::truncated::truncated_name(cut);
        }
        match module.map(|module| &self.modules[module]).and_then(|module| Some((module, module.offset_of(address)?))) {
            Some((module, offset)) => {
                let name = Path::new(&module.path)
                    .file_name()
                    .map_or_else(|| module.path.clone(), |name| name.to_string_lossy().into_owned());
                format!("{name}+{offset:#x}")
            }
            None => format!("{address:#x}"),
        }
    }
}

/// The dump's file-backed, executable mappings, sorted for lookup; for a binary none of whose mappings the
/// dump calls executable, all of its mappings (qemu-user lists a guest's code as `r--p`).
struct MappingIndex {
    /// (start, end, index into the dump's mappings), by start.
    ranges: Vec<(u64, u64, usize)>,
    /// The path of the first binary mapped: the main program.
    main_program: String,
}

impl MappingIndex {
    fn new(mappings: &[Mapping]) -> Self {
        let file_backed = |mapping: &Mapping| mapping.path.as_deref().is_some_and(|path| path.starts_with('/'));
        let with_code: std::collections::HashSet<&str> = mappings
            .iter()
            .filter(|mapping| mapping.executable)
            .filter_map(|mapping| mapping.path.as_deref())
            .collect();
        let holds_code = |mapping: &Mapping| {
            mapping.executable || mapping.path.as_deref().is_some_and(|path| !with_code.contains(path))
        };
        let mut ranges: Vec<(u64, u64, usize)> = mappings
            .iter()
            .enumerate()
            .filter(|(_, mapping)| holds_code(mapping) && file_backed(mapping))
            .map(|(index, mapping)| (mapping.start, mapping.end, index))
            .collect();
        ranges.sort_unstable();
        let main_program =
            mappings.iter().find(|mapping| file_backed(mapping)).and_then(|mapping| mapping.path.clone());
        Self { ranges, main_program: main_program.unwrap_or_default() }
    }

    /// The index of the mapping containing `address`.
    fn find(&self, address: u64) -> Option<usize> {
        let after = self.ranges.partition_point(|&(start, _, _)| start <= address);
        let &(_, end, index) = self.ranges[..after].last()?;
        (address < end).then_some(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(start: u64, end: u64, executable: bool, path: &str) -> Mapping {
        Mapping { start, end, file_offset: 0, executable, path: Some(path.to_owned()) }
    }

    #[test]
    fn a_binary_with_no_executable_mapping_is_looked_up_in_all_of_its_mappings() {
        let mappings = [
            // qemu-user lists a guest's code without `x`.
            mapping(0x0055_0000_0000, 0x0055_00d9_6000, false, "/srv/service"),
            mapping(0x0055_00da_6000, 0x0055_00de_0000, false, "/srv/service"),
            // A library whose code is executable: its other mappings stay out.
            mapping(0x007f_0000_0000, 0x007f_0010_0000, false, "/lib/libc.so.6"),
            mapping(0x007f_0010_0000, 0x007f_0020_0000, true, "/lib/libc.so.6"),
            Mapping { start: 0x9000, end: 0xa000, file_offset: 0, executable: true, path: Some("[vdso]".to_owned()) },
        ];
        let index = MappingIndex::new(&mappings);
        assert_eq!(index.find(0x0055_0000_1234), Some(0));
        assert_eq!(index.find(0x0055_00da_6010), Some(1));
        assert_eq!(index.find(0x007f_0000_0010), None, "libc's data is not code");
        assert_eq!(index.find(0x007f_0010_0010), Some(3));
        assert_eq!(index.find(0x9010), None, "not a file");
    }
}
