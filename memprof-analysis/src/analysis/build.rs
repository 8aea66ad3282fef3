//! From a parsed dump to an [`Analysis`] ([`Analysis::new`], [`Analysis::with_labels`]): each stack's probe addresses (return addresses moved back into
//! their call instruction), symbolized once per distinct address, the allocator's frames trimmed, the
//! counts unbiased, and the label frame made the sample's labels.

use std::collections::HashMap;
use std::sync::Arc;

use super::binaries::Binaries;
use super::model::{Analysis, Frame, Location, Sample};
use super::plumbing;
use super::symbolized::Symbolized;
use crate::heap_profile::HeapProfile;
use crate::labels::{LabelSet, LabelSets, label_id};
use crate::truncated::truncated_frames;

impl Analysis {
    /// Symbolizes `profile`. Never fails: what cannot be symbolized is shown as `module+0xoffset` and the
    /// reason is kept in [`Module::problem`](super::module::Module::problem). Samples with a label frame whose set is unknown get the label
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
    pub fn of_dump(
        dump: &str,
        binaries: &Binaries,
        labels: &LabelSets,
    ) -> Result<Self, crate::heap_profile::ParseError> {
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
        analysis(profile, binaries, labels)
    }
}

/// Symbolizes `profile`, giving each sample the labels of the set its label frame names in `labels`.
fn analysis(profile: &HeapProfile, binaries: &Binaries, labels: &LabelSets) -> Analysis {
    let stacks: Vec<Vec<u64>> = profile.stacks.iter().map(|stack| probes(&stack.addresses)).collect();
    let symbolized = Symbolized::new(stacks.iter().flatten().copied(), &profile.mappings, binaries);
    let mut analysis = Analysis {
        sample_period: profile.sample_period,
        has_allocations: profile.total_allocated.objects > 0,
        modules: symbolized.modules,
        ..Analysis::default()
    };
    let frames = &symbolized.frames;
    let mut interned: HashMap<(u64, usize), usize> = HashMap::new();
    for (stack, stack_probes) in profile.stacks.iter().zip(&stacks) {
        let (first, skip) = trimmed_start(stack_probes, frames);
        let locations = stack_probes[first..]
            .iter()
            .enumerate()
            .map(|(position, &probe)| {
                let skip = if position == 0 { skip } else { 0 };
                *interned.entry((probe, skip)).or_insert_with(|| {
                    analysis.locations.push(Location {
                        address: probe,
                        module: symbolized.module_of.get(&probe).copied().flatten(),
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

/// The addresses to look up for a stack: each moved back into its call instruction, the label frame left
/// out. Every address of a stack is a return address, the first too (jemalloc's walk and memprof's start
/// above the allocator's entry): at the address itself is the instruction after the call, which may belong
/// to another inlined function or line (where a call ends an inlined range, as binutils' `addr2line` shows
/// when given the address minus one).
fn probes(addresses: &[u64]) -> Vec<u64> {
    code_addresses(addresses)
        .iter()
        .map(|&address| {
            let synthetic = label_id(address).is_some() || truncated_frames(address).is_some();
            if synthetic { address } else { address.saturating_sub(1) }
        })
        .collect()
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
        if let Some(skip) = frames[probe].iter().position(|frame| !is_plumbing(frame)) {
            return (position, skip);
        }
    }
    (0, 0)
}

/// Whether `frame` is the allocator's (or Rust's allocation plumbing).
pub(super) fn is_plumbing(frame: &Frame) -> bool {
    plumbing::is_plumbing_frame(&frame.function, frame.file.as_deref())
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
    fn every_return_address_is_looked_up_in_its_call_and_the_label_frame_is_left_out() {
        assert_eq!(probes(&[0x1000, 0x2000, label_address(3)]), [0xfff, 0x1fff]);
        assert_eq!(probes(&[label_address(3)]), [label_address(3)]);
        assert_eq!(probes(&[]), Vec::<u64>::new());
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
        assert_eq!(addresses, [vec![0xfff], vec![label_address(2)], vec![0xfff]]);
        assert_eq!(analysis.locations.len(), 2, "one location per address");
        // The dump lists no mapping: its one address of code is shown bare, and the notes say why (a label
        // frame is no address of code).
        let notes = analysis.notes();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("not symbolized: 1 address of the stacks lie in no executable mapping"),
            "{notes:?}"
        );
    }

    /// A stack cut at the walk's limit ends in its mark, named with the frames left out; the mark is no
    /// address of code (not looked up in a call, not counted as unsymbolized), and the label frame after it
    /// still gives the sample its labels.
    #[test]
    fn a_cut_stack_ends_in_a_frame_that_says_so() {
        let mark = crate::truncated::truncated_address(4_873);
        assert_eq!(probes(&[0x1000, mark, label_address(1)]), [0xfff, mark]);
        let profile = HeapProfile {
            sample_period: 1,
            total: Default::default(),
            total_allocated: Default::default(),
            stacks: vec![stack(vec![0x1000, mark, label_address(1)])],
            mappings: Vec::new(),
        };
        let mut sets = LabelSets::default();
        sets.insert(1, [("tenant", "acme")]);
        let analysis = Analysis::with_labels(&profile, &Binaries::as_mapped(), &sets);
        let sample = &analysis.samples[0];
        let outermost = &analysis.locations[*sample.locations.last().unwrap()];
        assert_eq!(&*outermost.frames[0].function, "[truncated: 4873 more frames]");
        assert_eq!(sample.labels.to_string(), "tenant=acme");
        assert!(analysis.notes()[0].starts_with("not symbolized: 1 address "), "{:?}", analysis.notes());
    }
}
