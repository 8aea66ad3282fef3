//! Profiles the unit tests build by hand.

use crate::analysis::{Analysis, Binaries, Module};
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

/// The program `/srv/service`, symbolized, its inlined functions named without their path (as in a
/// `debug = "line-tables-only"` build): a binary with a note to carry.
pub(crate) fn module_with_short_names() -> Module {
    Module {
        path: "/srv/service".into(),
        start: 0x1000,
        end: 0x2000,
        file_offset: 0,
        build_id: None,
        has_functions: true,
        has_lines: true,
        is_main_program: true,
        unnamed_addresses: 0,
        short_inline_name: Some("to_vec<u8>".into()),
        problem: None,
        read_from: None,
        debug_info_from: None,
    }
}
