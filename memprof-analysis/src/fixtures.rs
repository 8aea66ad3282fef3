//! Profiles the unit tests build by hand.

use crate::analysis::{Analysis, Binaries};
use crate::heap_profile::{HeapProfile, Stack};
use crate::labels::LabelSets;

/// The analysis of a profile whose stacks (addresses, the allocation site first) hold 1024 bytes each,
/// unsymbolized, with `sets` as its label table.
pub(crate) fn labelled_analysis(stacks: &[&[u64]], sets: &LabelSets) -> Analysis {
    let profile = HeapProfile {
        sample_period: 1,
        total: Default::default(),
        total_allocated: Default::default(),
        stacks: stacks
            .iter()
            .map(|addresses| Stack {
                addresses: addresses.to_vec(),
                objects: 1,
                bytes: 1024,
                allocated: Default::default(),
            })
            .collect(),
        mappings: Vec::new(),
    };
    Analysis::with_labels(&profile, &Binaries::as_mapped(), sets)
}
