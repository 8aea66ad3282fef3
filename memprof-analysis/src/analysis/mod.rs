//! A heap profile made readable: every address symbolized (function, file, line, inlined frames), the
//! allocator's own frames trimmed, the counts unbiased. The renderers in [`crate::render`] read this.
//!
//! ```no_run
//! use memprof_analysis::{Analysis, Binaries, HeapProfile};
//!
//! let dump = std::fs::read_to_string("memprof.1795354618996.heap")?;
//! let profile = HeapProfile::parse(&dump)?;
//! // Offline, for a stripped production binary: symbolize with the unstripped build of it.
//! let analysis = Analysis::new(&profile, &Binaries::replacing(["target/release/service"]));
//! let (_, bytes) = analysis.total();
//! println!("{:.1} MB live, {} stacks", bytes / 1048576.0, analysis.samples.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod debug_file;
mod module;
mod plumbing;

pub use module::Module;

pub use plumbing::is_plumbing as is_allocation_plumbing;
mod symbolizer;
mod user_code;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::heap_profile::{HeapProfile, Mapping};
use crate::labels::{LabelSet, LabelSets, label_id};

/// The address of the root frames [`Analysis::split_by_label`] adds: no code can have it.
const SPLIT_ROOT: u64 = u64::MAX;

/// The value a split shows for samples without the key.
pub const NO_LABEL: &str = "(none)";

/// One function in a stack: a real call, or a call inlined into the frame after it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The demangled function name (without Rust's hash), or `module+0xoffset` when the binary tells nothing.
    /// Shared: a profile names each function once, however many of its addresses it holds.
    pub function: Arc<str>,
    /// The source file, when debug info has it (shared likewise).
    pub file: Option<Arc<str>>,
    /// The line in `file`.
    pub line: Option<u32>,
}

impl Frame {
    /// The function, or the function with its `file:line` when `with_line` is set and known.
    ///
    /// ```
    /// let frame = memprof_analysis::Frame { function: "app::load".into(), file: Some("src/app.rs".into()), line: Some(7) };
    /// assert_eq!(frame.label(false), "app::load");
    /// assert_eq!(frame.label(true), "app::load src/app.rs:7");
    /// ```
    pub fn label(&self, with_line: bool) -> String {
        let label = match (&self.file, self.line) {
            (Some(file), Some(line)) if with_line => format!("{} {file}:{line}", self.function),
            _ => self.function.to_string(),
        };
        without_control_characters(label)
    }
}

/// `text` with each control character replaced by U+FFFD: names and paths come from binaries and dumps,
/// which are claims, and a control character would make an SVG invalid XML, or a table rewrite the
/// terminal it is shown on.
fn without_control_characters(text: String) -> String {
    if text.chars().any(char::is_control) {
        text.chars().map(|character| if character.is_control() { '\u{fffd}' } else { character }).collect()
    } else {
        text
    }
}

/// A symbolized, trimmed and unbiased heap profile.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    /// Mean bytes between samples (`2^lg_prof_sample`).
    pub sample_period: u64,
    /// The allocation stacks with their estimated live objects and bytes.
    pub samples: Vec<Sample>,
    /// Each distinct program counter of the stacks, with its frames.
    pub locations: Vec<Location>,
    /// The binaries the locations are in.
    pub modules: Vec<Module>,
    /// Whether the samples carry what was allocated since start-up (jemalloc's `prof_accum:true`).
    pub has_allocations: bool,
}

/// One allocation stack.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Indices into [`Analysis::locations`], the allocation site first.
    pub locations: Vec<usize>,
    /// Estimated live objects (negative in a difference).
    pub objects: f64,
    /// Estimated live bytes (negative in a difference).
    pub bytes: f64,
    /// Estimated objects allocated since start-up, freed or not (with `prof_accum:true`, else 0).
    pub allocated_objects: f64,
    /// Their bytes.
    pub allocated_bytes: f64,
    /// The labels in force on the thread that allocated it (empty when none were).
    pub labels: LabelSet,
}

/// One program counter.
#[derive(Debug, Clone, PartialEq)]
pub struct Location {
    /// The address in the profiled process (moved back into the call instruction for return addresses).
    pub address: u64,
    /// Index into [`Analysis::modules`], if the address is in a mapped binary.
    pub module: Option<usize>,
    /// The functions at this address, innermost (inlined) first; never empty. Shared with the symbolizer's
    /// answer, so a profile of many addresses holds each address's names once.
    pub frames: Arc<[Frame]>,
}

/// Which files to read symbols from.
///
/// ```
/// use memprof_analysis::Binaries;
/// // The files the dump's memory map names.
/// let mapped = Binaries::as_mapped();
/// // In the profiled process: the same, but the running program's own image if its file was replaced.
/// let live = Binaries::this_process();
/// // Offline: an unstripped build stands in for the binary of the same file name (or the main program).
/// let offline = Binaries::replacing(["/builds/service.debug"]);
/// # let _ = (mapped, live, offline);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Binaries {
    replacements: Vec<PathBuf>,
    /// The dump was taken by this process: its main program can be read through `/proc/self/exe`.
    this_process: bool,
}

impl Binaries {
    /// Read each binary from the path in the dump's memory map.
    pub fn as_mapped() -> Self {
        Self::default()
    }

    /// In the process that took the dump: each binary from its mapped path, except the main program when
    /// the file at its path is no longer the one running (replaced by a deploy, or deleted): then the
    /// running image itself, through `/proc/self/exe`.
    pub fn this_process() -> Self {
        Self { this_process: true, ..Self::default() }
    }

    /// Read these files instead of the mapped binaries of the same file name; a file whose name matches no
    /// mapped binary replaces the main program (the first binary mapped).
    pub fn replacing<P: Into<PathBuf>>(files: impl IntoIterator<Item = P>) -> Self {
        Self { replacements: files.into_iter().map(Into::into).collect(), this_process: false }
    }

    fn file_for(&self, mapped: &str, main_program: &str) -> PathBuf {
        let file_name = |path: &Path| path.file_name().map(|name| name.to_owned());
        let mapped_name = file_name(Path::new(mapped));
        let named = self.replacements.iter().find(|file| file_name(file) == mapped_name);
        let unmatched = || {
            (mapped == main_program)
                .then(|| self.replacements.iter().find(|file| file_name(file) != mapped_name))
                .flatten()
        };
        let running = || (self.this_process && mapped == main_program).then(|| running_image(mapped)).flatten();
        named.or_else(unmatched).cloned().or_else(running).unwrap_or_else(|| PathBuf::from(mapped))
    }
}

/// `/proc/self/exe` when the file at `mapped` is not this process's executable (a different file now, or
/// none: `/proc/self/maps` then says `(deleted)`).
fn running_image(mapped: &str) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    const EXE: &str = "/proc/self/exe";
    let running = std::fs::metadata(EXE).ok()?;
    let same = std::fs::metadata(mapped).is_ok_and(|file| (file.dev(), file.ino()) == (running.dev(), running.ino()));
    (!same).then(|| PathBuf::from(EXE))
}

impl Analysis {
    /// Symbolizes `profile`. Never fails: what cannot be symbolized is shown as `module+0xoffset` and the
    /// reason is kept in [`Module::problem`]. Samples with a label frame whose set is unknown get the label
    /// `memprof_label_set=<id>` (see [`Analysis::with_labels`]).
    pub fn new(profile: &HeapProfile, binaries: &Binaries) -> Self {
        Self::with_labels(profile, binaries, &LabelSets::default())
    }

    /// A dump's text, parsed and symbolized with its label table: what every reader of a dump does.
    ///
    /// ```no_run
    /// use memprof_analysis::{Analysis, Binaries, LabelSets};
    /// let dump = std::fs::read_to_string("memprof.1795354618996.heap")?;
    /// let analysis = Analysis::of_dump(&dump, &Binaries::as_mapped(), &LabelSets::default())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn of_dump(dump: &str, binaries: &Binaries, labels: &LabelSets) -> Result<Self, crate::ParseError> {
        Ok(Self::with_labels(&HeapProfile::parse(dump)?, binaries, labels))
    }

    /// Symbolizes `profile`, giving each sample the labels of the set its label frame names in `labels`
    /// (the process's table, or the one kept beside the dump): the label frame itself is not a frame.
    ///
    /// ```no_run
    /// use memprof_analysis::{Analysis, Binaries, HeapProfile, LabelSets, labels_path};
    /// let path = std::path::Path::new("memprof.1795354618996.heap");
    /// let profile = HeapProfile::parse(&std::fs::read_to_string(path)?)?;
    /// let labels = LabelSets::parse(&std::fs::read_to_string(labels_path(path))?)?;
    /// let analysis = Analysis::with_labels(&profile, &Binaries::as_mapped(), &labels);
    /// let acme: f64 = analysis.samples.iter().filter(|sample| sample.labels.get("tenant") == Some("acme")).map(|sample| sample.bytes).sum();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_labels(profile: &HeapProfile, binaries: &Binaries, labels: &LabelSets) -> Self {
        let mappings = MappingIndex::new(&profile.mappings);
        let mut analysis = Analysis {
            sample_period: profile.sample_period,
            has_allocations: profile.total_allocated.objects > 0,
            ..Analysis::default()
        };
        let mut module_of_mapping: HashMap<usize, usize> = HashMap::new();
        // Every distinct probe address, with the module it is in.
        let mut probes: BTreeMap<u64, Option<usize>> = BTreeMap::new();
        for stack in &profile.stacks {
            for (position, &address) in code_addresses(&stack.addresses).iter().enumerate() {
                let probe = if position == 0 { address } else { address.saturating_sub(1) };
                let module = mappings.find(probe).map(|mapping| {
                    *module_of_mapping.entry(mapping).or_insert_with(|| analysis.add_module(&profile.mappings[mapping]))
                });
                probes.insert(probe, module);
            }
        }
        let frames = analysis.symbolize(&probes, binaries, &mappings.main_program);
        let mut interned: HashMap<(u64, usize), usize> = HashMap::new();
        for stack in &profile.stacks {
            let stack_probes: Vec<u64> = code_addresses(&stack.addresses)
                .iter()
                .enumerate()
                .map(|(position, &address)| if position == 0 { address } else { address.saturating_sub(1) })
                .collect();
            let (first, skip) = trimmed_start(&stack_probes, &frames);
            let locations = stack_probes[first..]
                .iter()
                .enumerate()
                .map(|(position, &probe)| {
                    let skip = if position == 0 { skip } else { 0 };
                    *interned.entry((probe, skip)).or_insert_with(|| {
                        analysis.locations.push(Location {
                            address: probe,
                            module: probes.get(&probe).copied().flatten(),
                            frames: if skip == 0 { Arc::clone(&frames[&probe]) } else { frames[&probe][skip..].into() },
                        });
                        analysis.locations.len() - 1
                    })
                })
                .collect();
            let (objects, bytes) = stack.unbiased(profile.sample_period);
            let (allocated_objects, allocated_bytes) = stack.allocated.unbiased(profile.sample_period);
            let labels = stack.addresses.last().and_then(|&address| label_id(address)).map(|id| {
                labels.get(id).cloned().unwrap_or_else(|| LabelSet::new([("memprof_label_set", id.to_string())]))
            });
            let labels = labels.unwrap_or_default();
            analysis.samples.push(Sample { locations, objects, bytes, allocated_objects, allocated_bytes, labels });
        }
        analysis
    }

    /// What a reader should know about the binaries' names, once per binary (see [`Module::note`]): every
    /// format carries these (the text table's last lines, the flame graph's subtitle, pprof's comments).
    ///
    /// ```
    /// // A profile whose binaries were all read with whole names has nothing to say.
    /// assert!(memprof_analysis::Analysis::default().notes().is_empty());
    /// ```
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = Vec::new();
        for note in self.modules.iter().filter_map(Module::note).map(without_control_characters) {
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
        notes
    }

    /// The estimated live objects and bytes of all samples.
    pub fn total(&self) -> (f64, f64) {
        self.samples
            .iter()
            .fold((0.0, 0.0), |(objects, bytes), sample| (objects + sample.objects, bytes + sample.bytes))
    }

    /// The frames of a sample, the allocating function first (inlined frames expanded).
    pub fn frames<'a>(&'a self, sample: &'a Sample) -> impl Iterator<Item = &'a Frame> + 'a {
        sample.locations.iter().flat_map(|&location| self.locations[location].frames.iter())
    }

    /// The frames of a sample as the readable formats show them: [`Analysis::frames`] without the
    /// start-up and scheduling frames below the user's code (`std::rt::lang_start`, a thread's start,
    /// tokio's workers down to the task's poll), unless `full`.
    ///
    /// ```no_run
    /// # let analysis: memprof_analysis::Analysis = unimplemented!();
    /// for sample in &analysis.samples {
    ///     let stack: Vec<&str> = analysis.shown_frames(sample, false).iter().map(|frame| &*frame.function).collect();
    ///     println!("{}", stack.join(" <- "));
    /// }
    /// ```
    pub fn shown_frames<'a>(&'a self, sample: &'a Sample, full: bool) -> Vec<&'a Frame> {
        let mut frames: Vec<&Frame> = self.frames(sample).collect();
        let is_split = sample.locations.last().is_some_and(|&location| self.locations[location].address == SPLIT_ROOT);
        let root = if is_split { frames.pop() } else { None };
        if !full {
            user_code::cut(&mut frames, |frame| (&*frame.function, frame.file.as_deref()));
        }
        frames.extend(root);
        frames
    }

    /// Only the samples whose label `key` is `value`; with `value` [`NO_LABEL`], those without `key`.
    ///
    /// ```
    /// let analysis = memprof_analysis::Analysis::default();
    /// assert!(analysis.only_labelled("tenant", "acme").samples.is_empty());
    /// ```
    pub fn only_labelled(&self, key: &str, value: &str) -> Analysis {
        let mut only = self.clone();
        only.samples.retain(|sample| sample.labels.get(key).unwrap_or(NO_LABEL) == value);
        only
    }

    /// The estimated live bytes under each value of each label key ([`NO_LABEL`] for the samples without
    /// the key): what `?by=KEY` splits, for every key at once.
    ///
    /// ```
    /// assert!(memprof_analysis::Analysis::default().bytes_by_label().is_empty());
    /// ```
    pub fn bytes_by_label(&self) -> BTreeMap<String, BTreeMap<String, f64>> {
        let mut keys: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
        for key in self.samples.iter().flat_map(|sample| sample.labels.iter().map(|(key, _)| key)) {
            if !keys.contains_key(key) {
                keys.insert(key.to_owned(), BTreeMap::new());
            }
        }
        for (key, values) in &mut keys {
            for sample in &self.samples {
                let value = sample.labels.get(key).unwrap_or(NO_LABEL);
                *values.entry(value.to_owned()).or_default() += sample.bytes;
            }
        }
        keys
    }

    /// Each sample under one more, outermost frame named `key=value` (`key=(none)` without `key`): the
    /// readable formats then split the profile by that label, and their totals stay those of the whole.
    ///
    /// ```
    /// let analysis = memprof_analysis::Analysis::default();
    /// assert!(analysis.split_by_label("tenant").samples.is_empty());
    /// ```
    pub fn split_by_label(&self, key: &str) -> Analysis {
        let mut split = self.clone();
        let mut roots: HashMap<String, usize> = HashMap::new();
        for sample in &mut split.samples {
            let name = format!("{key}={}", sample.labels.get(key).unwrap_or(NO_LABEL));
            let root = *roots.entry(name).or_insert_with_key(|name| {
                let frame = Frame { function: name.as_str().into(), file: None, line: None };
                split.locations.push(Location { address: SPLIT_ROOT, module: None, frames: Arc::from([frame]) });
                split.locations.len() - 1
            });
            sample.locations.push(root);
        }
        split
    }

    /// What grew from `base` to `self`: both profiles' samples, `base`'s with negated counts (as
    /// `jeprof --base` and `pprof -diff_base` compute it).
    pub fn minus(&self, base: &Analysis) -> Analysis {
        let mut difference = self.clone();
        let (location_offset, module_offset) = (self.locations.len(), self.modules.len());
        difference.modules.extend(base.modules.iter().cloned());
        difference.locations.extend(base.locations.iter().map(|location| Location {
            module: location.module.map(|module| module + module_offset),
            ..location.clone()
        }));
        difference.samples.extend(base.samples.iter().map(|sample| Sample {
            locations: sample.locations.iter().map(|location| location + location_offset).collect(),
            objects: -sample.objects,
            bytes: -sample.bytes,
            allocated_objects: -sample.allocated_objects,
            allocated_bytes: -sample.allocated_bytes,
            labels: sample.labels.clone(),
        }));
        difference
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
        });
        self.modules.len() - 1
    }

    /// The frames of every probe: resolved binary by binary, `module+0xoffset` where nothing is known.
    fn symbolize(
        &mut self,
        probes: &BTreeMap<u64, Option<usize>>,
        binaries: &Binaries,
        main_program: &str,
    ) -> HashMap<u64, Arc<[Frame]>> {
        let mut by_path: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
        for (&probe, module) in probes {
            // A dump's offsets are claims: one that overflows is left unnamed.
            if let Some((module, offset)) =
                module.map(|module| &self.modules[module]).and_then(|module| Some((module, module.offset_of(probe)?)))
            {
                by_path.entry(module.path.clone()).or_default().push((probe, offset));
            }
        }
        // Shared with the symbolizer's answer (and its cache): each address's frames are copied once, into
        // its location.
        let mut frames: HashMap<u64, Arc<[Frame]>> = HashMap::new();
        for (path, probes) in by_path {
            let file_offsets: Vec<u64> = probes.iter().map(|&(_, offset)| offset).collect();
            let resolved = symbolizer::resolve(&binaries.file_for(&path, main_program), &file_offsets);
            for module in self.modules.iter_mut().filter(|module| module.path == path) {
                module.is_main_program = path == main_program;
                match &resolved {
                    Ok(resolved) => {
                        module.build_id = resolved.build_id.clone();
                        module.has_functions = resolved.has_functions;
                        module.has_lines = resolved.has_lines;
                        module.short_inline_name.clone_from(&resolved.short_inline_name);
                        module.problem.clone_from(&resolved.refused);
                    }
                    Err(problem) => module.problem = Some(problem.clone()),
                }
            }
            let Ok(resolved) = resolved else { continue };
            for ((probe, _), resolved) in probes.iter().zip(resolved.frames) {
                frames.insert(*probe, resolved);
            }
        }
        for (&probe, &module) in probes {
            if frames.get(&probe).is_none_or(|frames| frames.is_empty()) {
                if let Some(module) = module {
                    self.modules[module].unnamed_addresses += 1;
                }
                let unknown = Frame { function: self.unknown_function(probe, module).into(), file: None, line: None };
                frames.insert(probe, Arc::from([unknown]));
            }
        }
        frames
    }

    fn unknown_function(&self, probe: u64, module: Option<usize>) -> String {
        match module.map(|module| &self.modules[module]).and_then(|module| Some((module, module.offset_of(probe)?))) {
            Some((module, offset)) => {
                let name = Path::new(&module.path)
                    .file_name()
                    .map_or_else(|| module.path.clone(), |name| name.to_string_lossy().into_owned());
                format!("{name}+{offset:#x}")
            }
            None => format!("{probe:#x}"),
        }
    }
}

/// A stack's addresses without its label frame (the outermost, when the process labels its samples); a
/// stack of nothing else (the walk found no frame) keeps it, so that every sample has a location.
fn code_addresses(addresses: &[u64]) -> &[u64] {
    match addresses.split_last() {
        Some((&last, code)) if label_id(last).is_some() && !code.is_empty() => code,
        _ => addresses,
    }
}

/// Where a stack starts once the allocator's frames are trimmed: the first location kept, and how many of
/// its (inlined) frames to skip. A stack made only of allocator frames is kept whole.
fn trimmed_start(probes: &[u64], frames: &HashMap<u64, Arc<[Frame]>>) -> (usize, usize) {
    for (position, probe) in probes.iter().enumerate() {
        let frames = &frames[probe];
        let is_plumbing = |frame: &Frame| plumbing::is_plumbing_frame(&frame.function, frame.file.as_deref());
        if let Some(skip) = frames.iter().position(|frame| !is_plumbing(frame)) {
            return (position, skip);
        }
    }
    (0, 0)
}

/// The dump's file-backed, executable mappings, sorted for lookup.
struct MappingIndex {
    /// (start, end, index into the dump's mappings), by start.
    ranges: Vec<(u64, u64, usize)>,
    /// The path of the first binary mapped: the main program.
    main_program: String,
}

impl MappingIndex {
    fn new(mappings: &[Mapping]) -> Self {
        let file_backed = |mapping: &Mapping| mapping.path.as_deref().is_some_and(|path| path.starts_with('/'));
        let mut ranges: Vec<(u64, u64, usize)> = mappings
            .iter()
            .enumerate()
            .filter(|(_, mapping)| mapping.executable && file_backed(mapping))
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

/// The function at each of `addresses` of this process (the innermost inlined one, allocator frames
/// skipped), as pprof's symbol service answers; `None` where nothing is known.
///
/// ```
/// let here = memprof_analysis::function_names_in_this_process as usize as u64;
/// let names = memprof_analysis::function_names_in_this_process(&[here, 0]).unwrap();
/// assert_eq!(names.len(), 2);
/// assert_eq!(names[1], None);
/// ```
pub fn function_names_in_this_process(addresses: &[u64]) -> Result<Vec<Option<String>>, String> {
    let maps =
        std::fs::read_to_string("/proc/self/maps").map_err(|error| format!("Cannot read /proc/self/maps ({error})"))?;
    let mappings = crate::heap_profile::parse_maps(&maps).map_err(|error| format!("/proc/self/maps {error}"))?;
    // Each address as a one-frame stack: taken as it is, not moved back as a return address.
    let stacks = addresses
        .iter()
        .map(|&address| crate::heap_profile::Stack {
            addresses: vec![address],
            objects: 0,
            bytes: 0,
            allocated: Default::default(),
        })
        .collect();
    let profile = HeapProfile {
        sample_period: 1,
        total: Default::default(),
        total_allocated: Default::default(),
        stacks,
        mappings,
    };
    let analysis = Analysis::new(&profile, &Binaries::as_mapped());
    Ok(analysis
        .samples
        .iter()
        .map(|sample| {
            let location = &analysis.locations[sample.locations[0]];
            location.module.filter(|&module| analysis.modules[module].has_functions)?;
            location.frames.first().map(|frame| frame.function.to_string())
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heap_profile::Stack;
    use crate::labels::label_address;

    fn stack(addresses: Vec<u64>) -> Stack {
        Stack { addresses, objects: 1, bytes: 1024, allocated: Default::default() }
    }

    #[test]
    fn label_frames_become_the_samples_labels_and_a_stack_of_only_a_label_keeps_a_location() {
        let profile = HeapProfile {
            sample_period: 1,
            total: Default::default(),
            total_allocated: Default::default(),
            stacks: vec![stack(vec![0x1000, label_address(1)]), stack(vec![label_address(2)]), stack(vec![0x1000])],
            mappings: Vec::new(),
        };
        let mut sets = LabelSets::default();
        sets.insert(1, [("tenant", "acme")]);
        let analysis = Analysis::with_labels(&profile, &Binaries::as_mapped(), &sets);
        let labels: Vec<String> = analysis.samples.iter().map(|sample| sample.labels.to_string()).collect();
        assert_eq!(labels, ["tenant=acme", "memprof_label_set=2", ""]);
        let addresses: Vec<Vec<u64>> = analysis
            .samples
            .iter()
            .map(|sample| sample.locations.iter().map(|&location| analysis.locations[location].address).collect())
            .collect();
        assert_eq!(addresses, [vec![0x1000], vec![label_address(2)], vec![0x1000]]);
        assert_eq!(function_names_in_this_process(&[label_address(1)]).unwrap(), [None]);
    }

    #[test]
    fn a_replacement_stands_in_for_the_binary_of_its_name_else_for_the_main_program() {
        let binaries = Binaries::replacing(["/builds/service", "/builds/debug/libfoo.so"]);
        let file = |mapped: &str| binaries.file_for(mapped, "/srv/app/service");
        assert_eq!(file("/srv/app/service"), Path::new("/builds/service"), "same file name");
        assert_eq!(file("/usr/lib/libfoo.so"), Path::new("/builds/debug/libfoo.so"), "same file name");
        assert_eq!(file("/usr/lib/libc.so.6"), Path::new("/usr/lib/libc.so.6"), "no replacement: as mapped");
        let unnamed = Binaries::replacing(["/builds/service.debug"]);
        assert_eq!(unnamed.file_for("/srv/app/service", "/srv/app/service"), Path::new("/builds/service.debug"));
        assert_eq!(unnamed.file_for("/usr/lib/libc.so.6", "/srv/app/service"), Path::new("/usr/lib/libc.so.6"));
        assert_eq!(
            Binaries::as_mapped().file_for("/srv/app/service", "/srv/app/service"),
            Path::new("/srv/app/service")
        );
    }

    #[test]
    fn a_difference_holds_both_profiles_samples_the_bases_negated() {
        let profile = |bytes: u64| HeapProfile {
            sample_period: 1,
            total: Default::default(),
            total_allocated: Default::default(),
            stacks: vec![Stack { addresses: vec![0x1000], objects: 1, bytes, allocated: Default::default() }],
            mappings: Vec::new(),
        };
        let (now, base) = (
            Analysis::new(&profile(3072), &Binaries::as_mapped()),
            Analysis::new(&profile(1024), &Binaries::as_mapped()),
        );
        let difference = now.minus(&base);
        assert_eq!(difference.samples.len(), 2);
        assert_eq!(difference.locations.len(), 2, "the base's locations follow the profile's");
        assert_eq!(difference.samples[1].locations, [1]);
        assert_eq!(difference.total().1, now.total().1 - base.total().1);
        assert!(difference.samples[1].bytes < 0.0);
    }

    #[test]
    fn a_split_adds_one_root_per_value_and_keeps_the_totals() {
        let profile = HeapProfile {
            sample_period: 1,
            total: Default::default(),
            total_allocated: Default::default(),
            stacks: vec![
                stack(vec![0x1000, label_address(1)]),
                stack(vec![0x2000]),
                stack(vec![0x3000, label_address(1)]),
            ],
            mappings: Vec::new(),
        };
        let mut sets = LabelSets::default();
        sets.insert(1, [("tenant", "acme")]);
        let analysis = Analysis::with_labels(&profile, &Binaries::as_mapped(), &sets);
        let split = analysis.split_by_label("tenant");
        let roots: Vec<&str> =
            split.samples.iter().map(|sample| &*split.shown_frames(sample, false).last().unwrap().function).collect();
        assert_eq!(roots, ["tenant=acme", "tenant=(none)", "tenant=acme"]);
        assert_eq!(split.locations.len(), analysis.locations.len() + 2);
        assert_eq!(split.total(), analysis.total());
        assert_eq!(analysis.only_labelled("tenant", "acme").samples.len(), 2);
        assert_eq!(analysis.only_labelled("tenant", NO_LABEL).samples.len(), 1);
        let by_label = analysis.bytes_by_label();
        assert_eq!(by_label["tenant"], BTreeMap::from([("acme".to_owned(), 2048.0), (NO_LABEL.to_owned(), 1024.0)]));
    }
}
