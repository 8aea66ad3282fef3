//! What an analysis holds: samples (stacks with their unbiased counts and labels), the locations their
//! stacks point to, each with its frames, and the binaries those are in; and how the readable formats
//! walk them.

use std::sync::Arc;

use super::module::Module;
use super::user_code;
use crate::known_variance::Calibrated;
use crate::labels::LabelSet;

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
pub(crate) fn without_control_characters(text: String) -> String {
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
    /// What whoever made the profile knows it misses (samples its recorder had no room for), said first
    /// among the [`Analysis::notes`].
    pub cautions: Vec<String>,
    /// What the samples' objects and bytes count: memory in use (a heap profile), or what was allocated,
    /// freed or not (a window's `view=allocated`): pprof types them so, and the notes say it.
    pub measure: Measure,
    /// The variance of the total bytes as an estimate, where the profile's maker knew it from each
    /// sample's own weight (memprof's record, which weighs a sample by the interval it was drawn at, so
    /// sampling thinned under load widens it); `None`: estimated from the samples at [`Self::sample_period`].
    pub known_variance: Option<f64>,
    /// Where the profile's maker counted each size class sampled whole (the whole heap, by jemalloc's
    /// counts): what that left out, said with the error ([`Self::sampling_note`]).
    pub calibrated: Option<Calibrated>,
}

/// What an [`Analysis`]'s samples measure.
///
/// ```
/// let mut analysis = memprof_analysis::Analysis::default();
/// assert_eq!(analysis.measure, memprof_analysis::Measure::InUse);
/// analysis.measure = memprof_analysis::Measure::Allocated;
/// assert!(analysis.notes()[0].starts_with("allocated: "));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Measure {
    /// Memory in use (`inuse_objects`, `inuse_space`).
    #[default]
    InUse,
    /// What was allocated, freed or not (`alloc_objects`, `alloc_space`).
    Allocated,
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

impl Analysis {
    /// What a reader should know about the binaries' names, once per binary (see [`Module::note`]): every
    /// format carries these (the text table's last lines, the flame graph's subtitle, pprof's comments).
    ///
    /// ```
    /// // A profile whose binaries were all read with whole names has nothing to say.
    /// assert!(memprof_analysis::Analysis::default().notes().is_empty());
    /// ```
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = Vec::new();
        if self.measure == Measure::Allocated {
            notes.push(
                "allocated: what was allocated, freed or not (alloc_objects, alloc_space), not memory in use"
                    .to_owned(),
            );
        }
        let cautions = self.cautions.iter().cloned();
        for note in cautions.chain(self.modules.iter().filter_map(Module::note)).map(without_control_characters) {
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
        // Addresses no mapping covers are shown bare: say why, rather than leave the reader guessing.
        let unmapped = self
            .locations
            .iter()
            .filter(|location| location.module.is_none() && crate::labels::label_id(location.address).is_none())
            .filter(|location| location.frames.first().is_some_and(|frame| frame.function.starts_with("0x")))
            .count();
        if unmapped > 0 {
            notes.push(format!(
                "not symbolized: {unmapped} address{} of the stacks lie in no executable mapping the dump lists \
                 (its MAPPED_LIBRARIES section), so no binary names them; a dump cut short, or code made at \
                 run time, has such addresses",
                if unmapped == 1 { "" } else { "es" }
            ));
        }
        notes
    }

    /// How far the total shown may be from the truth by sampling alone: two standard errors of the total.
    /// From the [`Self::known_variance`] where the profile's maker said it; else said where the profile was
    /// sampled (its period above 1) and holds no difference, from each stack's estimate as jemalloc's
    /// samples make it (its `o` objects of mean size `s` stand for `o / w` samples each weighing
    /// `w = 1 / (1 - exp(-s / period))`, so the variance is `o (w - 1) s^2`).
    ///
    /// ```
    /// let mut analysis = memprof_analysis::Analysis { sample_period: 1 << 19, ..Default::default() };
    /// assert_eq!(analysis.sampling_error(), None, "nothing sampled");
    /// let sample = memprof_analysis::Sample {
    ///     locations: Vec::new(),
    ///     objects: 64.0,
    ///     bytes: 64.0 * 65536.0,
    ///     allocated_objects: 0.0,
    ///     allocated_bytes: 0.0,
    ///     labels: Default::default(),
    /// };
    /// analysis.samples.push(sample);
    /// let error = analysis.sampling_error().unwrap();
    /// assert!(error > 2.0e6 && error < 4.0e6, "{error}");
    /// ```
    pub fn sampling_error(&self) -> Option<f64> {
        if let Some(variance) = self.known_variance {
            return (variance > 0.0).then(|| 2.0 * variance.sqrt());
        }
        if self.sample_period <= 1 || self.samples.iter().any(|sample| sample.bytes < 0.0) {
            return None;
        }
        let period = self.sample_period as f64;
        let variance: f64 = self
            .samples
            .iter()
            .filter(|sample| sample.objects > 0.0 && sample.bytes > 0.0)
            .map(|sample| {
                let size = sample.bytes / sample.objects;
                let weight = 1.0 / (1.0 - (-size / period).exp());
                sample.objects * (weight - 1.0) * size * size
            })
            .sum();
        (variance > 0.0).then(|| 2.0 * variance.sqrt())
    }

    /// The error the readable formats say: [`Self::sampling_error`], or nil where the maker counted each size
    /// class sampled whole and knew the variance nil (what that left out is said beside it).
    pub(crate) fn said_error(&self) -> Option<f64> {
        self.sampling_error().or(self.calibrated.and(self.known_variance).map(|_| 0.0))
    }

    /// What a reader is told of [`Self::sampling_error`], after the [`Self::notes`] in the readable formats
    /// (text, flame graph, call graph; pprof's scrapers are told by the profile's maker, which knows the
    /// intervals in force): `None` where it is not said.
    pub fn sampling_note(&self) -> Option<String> {
        let error = self.said_error()?;
        let from = match self.known_variance {
            Some(_) => "each sample weighed by the interval it was drawn at, thinned or not".to_owned(),
            None => format!(
                "the samples at a mean interval of {} KiB; larger where sampling was thinned",
                self.sample_period / 1024
            ),
        };
        let calibrated = self.calibrated.map_or_else(String::new, |calibrated| calibrated.said());
        Some(format!(
            "sampled: the total is within +- {:.1} MB of the truth about 95 times in 100 (two standard errors, from \
             {from}){calibrated}",
            error / 1_048_576.0,
        ))
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

    /// The function that allocated a sample, as a reader names it: the first frame (the allocation site's
    /// side first) compiled from the program's own sources, so that growth through a dependency's
    /// `Bytes::copy_from_slice` or std's `Vec::push` names the program's caller; where no frame is the
    /// program's (no debug info), the first frame past the allocator's plumbing.
    ///
    /// ```no_run
    /// # let analysis: memprof_analysis::Analysis = unimplemented!();
    /// for sample in &analysis.samples {
    ///     if let Some(frame) = analysis.allocating_frame(sample) {
    ///         println!("{}: {:.0} bytes", frame.function, sample.bytes);
    ///     }
    /// }
    /// ```
    pub fn allocating_frame<'a>(&'a self, sample: &'a Sample) -> Option<&'a Frame> {
        let mut frames = self.frames(sample).filter(|frame| !user_code::is_labelling(&frame.function));
        let first_past_plumbing = self.frames(sample).find(|frame| !super::plumbing::is_plumbing(&frame.function));
        frames.find(|frame| user_code::is_the_programs(frame.file.as_deref())).or(first_past_plumbing)
    }

    /// Whether the program's own code can be told from its dependencies': its binary has debug info with
    /// source paths (or none of the stacks lie in it). Without it, [`Analysis::allocating_frame`] is the first
    /// frame past the allocator's, which may be a dependency's.
    ///
    /// ```
    /// assert!(memprof_analysis::Analysis::default().knows_the_programs_code());
    /// ```
    pub fn knows_the_programs_code(&self) -> bool {
        self.modules.iter().filter(|module| module.is_main_program).all(|module| module.has_lines)
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
        if !full {
            user_code::cut(&mut frames, |frame| (&*frame.function, frame.file.as_deref()));
        }
        frames
    }
}
