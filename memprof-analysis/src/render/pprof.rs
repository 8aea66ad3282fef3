//! pprof's `profile.proto` (github.com/google/pprof/blob/main/proto/profile.proto), gzip-compressed, with
//! Go's heap conventions: sample types `inuse_objects/count` and `inuse_space/bytes` (preceded by
//! `alloc_objects` and `alloc_space` when jemalloc keeps allocation totals), `period_type` `space/bytes`,
//! `period` = the sampling rate, values already unbiased. Every location carries its
//! functions and lines, and every mapping says so, so pprof never tries to symbolize again.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use flate2::Compression;
use flate2::write::GzEncoder;
use prost::Message;

use super::interned::StringTable;
use crate::analysis::{Analysis, Frame};

/// The messages of `profile.proto` that memprof writes (field numbers as in the proto).
mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub(super) sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub(super) sample: Vec<Sample>,
        #[prost(message, repeated, tag = "3")]
        pub(super) mapping: Vec<Mapping>,
        #[prost(message, repeated, tag = "4")]
        pub(super) location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub(super) function: Vec<Function>,
        #[prost(string, repeated, tag = "6")]
        pub(super) string_table: Vec<String>,
        #[prost(message, optional, tag = "11")]
        pub(super) period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub(super) period: i64,
        #[prost(int64, repeated, tag = "13")]
        pub(super) comment: Vec<i64>,
        #[prost(int64, tag = "14")]
        pub(super) default_sample_type: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct ValueType {
        #[prost(int64, tag = "1")]
        pub(super) r#type: i64,
        #[prost(int64, tag = "2")]
        pub(super) unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Sample {
        #[prost(uint64, repeated, tag = "1")]
        pub(super) location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub(super) value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub(super) label: Vec<Label>,
    }

    /// A string label of a sample (pprof's tags: `-tags`, `-tagfocus`, `-tagignore`).
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Label {
        #[prost(int64, tag = "1")]
        pub(super) key: i64,
        #[prost(int64, tag = "2")]
        pub(super) str: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Mapping {
        #[prost(uint64, tag = "1")]
        pub(super) id: u64,
        #[prost(uint64, tag = "2")]
        pub(super) memory_start: u64,
        #[prost(uint64, tag = "3")]
        pub(super) memory_limit: u64,
        #[prost(uint64, tag = "4")]
        pub(super) file_offset: u64,
        #[prost(int64, tag = "5")]
        pub(super) filename: i64,
        #[prost(int64, tag = "6")]
        pub(super) build_id: i64,
        #[prost(bool, tag = "7")]
        pub(super) has_functions: bool,
        #[prost(bool, tag = "8")]
        pub(super) has_filenames: bool,
        #[prost(bool, tag = "9")]
        pub(super) has_line_numbers: bool,
        #[prost(bool, tag = "10")]
        pub(super) has_inline_frames: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Location {
        #[prost(uint64, tag = "1")]
        pub(super) id: u64,
        #[prost(uint64, tag = "2")]
        pub(super) mapping_id: u64,
        #[prost(uint64, tag = "3")]
        pub(super) address: u64,
        #[prost(message, repeated, tag = "4")]
        pub(super) line: Vec<Line>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Line {
        #[prost(uint64, tag = "1")]
        pub(super) function_id: u64,
        #[prost(int64, tag = "2")]
        pub(super) line: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Function {
        #[prost(uint64, tag = "1")]
        pub(super) id: u64,
        #[prost(int64, tag = "2")]
        pub(super) name: i64,
        #[prost(int64, tag = "3")]
        pub(super) system_name: i64,
        #[prost(int64, tag = "4")]
        pub(super) filename: i64,
    }
}

/// The profile, gzip-compressed as pprof files are.
pub(super) fn render(analysis: &Analysis, allocations_first: bool, comments: &[String]) -> Result<Vec<u8>, String> {
    let profile = build(analysis, allocations_first, comments);
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(&profile.encode_to_vec()).and_then(|()| encoder.finish()).map_err(|error| error.to_string())
}

/// The comment of an allocations profile without allocation totals.
pub(crate) const NO_ALLOCATION_TOTALS: &str = "This is the in-use heap (inuse_objects, inuse_space): allocation totals (alloc_objects, alloc_space) are kept with continuous sampling (MEMPROF_SAMPLING=continuous), or by jemalloc when the program starts with MALLOC_CONF=prof_accum:true";

fn build(analysis: &Analysis, allocations_first: bool, comments: &[String]) -> proto::Profile {
    let mut strings = StringTable::new();
    let mut value_type =
        |kind: &str, unit: &str| proto::ValueType { r#type: strings.intern(kind), unit: strings.intern(unit) };
    let mut sample_type = Vec::new();
    let allocated = analysis.measure == crate::analysis::Measure::Allocated;
    if analysis.has_allocations || allocated {
        sample_type.extend([value_type("alloc_objects", "count"), value_type("alloc_space", "bytes")]);
    }
    if !allocated {
        sample_type.extend([value_type("inuse_objects", "count"), value_type("inuse_space", "bytes")]);
    }
    let period_type = Some(value_type("space", "bytes"));
    let mut mapping: Vec<proto::Mapping> = analysis
        .modules
        .iter()
        .enumerate()
        .map(|(index, module)| {
            let build_id = module.build_id_hex();
            proto::Mapping {
                id: index as u64 + 1,
                memory_start: module.start,
                memory_limit: module.end,
                file_offset: module.file_offset,
                filename: strings.intern(&module.path),
                build_id: strings.intern(&build_id),
                has_functions: module.has_functions,
                has_filenames: module.has_lines,
                has_line_numbers: module.has_lines,
                has_inline_frames: module.has_lines,
            }
        })
        .collect();
    // pprof takes the first mapping for the main program.
    mapping.sort_by_key(|mapping| mapping.memory_start);
    let mut functions: HashMap<(Arc<str>, Option<Arc<str>>), u64> = HashMap::new();
    let mut function = Vec::new();
    let mut function_id = |frame: &Frame, strings: &mut StringTable| {
        let key = (frame.function.clone(), frame.file.clone());
        *functions.entry(key).or_insert_with(|| {
            let id = function.len() as u64 + 1;
            // The whole name (binutils') as the system's, a shortening pprof leaves alone as the displayed
            // one (see `rust_names`).
            let shortened = super::rust_names::without_generic_arguments(&frame.function);
            let system_name =
                if shortened == *frame.function { strings.intern("") } else { strings.intern(&frame.function) };
            let name = strings.intern(&shortened);
            let filename = strings.intern(frame.file.as_deref().unwrap_or_default());
            function.push(proto::Function { id, name, system_name, filename });
            id
        })
    };
    let location = analysis
        .locations
        .iter()
        .enumerate()
        .map(|(index, location)| proto::Location {
            id: index as u64 + 1,
            mapping_id: location.module.map_or(0, |module| module as u64 + 1),
            address: location.address,
            line: location
                .frames
                .iter()
                .map(|frame| proto::Line {
                    function_id: function_id(frame, &mut strings),
                    line: i64::from(frame.line.unwrap_or(0)),
                })
                .collect(),
        })
        .collect();
    let sample = analysis
        .samples
        .iter()
        .map(|sample| proto::Sample {
            location_id: sample.locations.iter().map(|&location| location as u64 + 1).collect(),
            label: sample
                .labels
                .iter()
                .map(|(key, value)| proto::Label { key: strings.intern(key), str: strings.intern(value) })
                .collect(),
            value: if analysis.has_allocations && !allocated {
                [sample.allocated_objects, sample.allocated_bytes, sample.objects, sample.bytes]
                    .map(|value| value.round() as i64)
                    .to_vec()
            } else {
                vec![sample.objects.round() as i64, sample.bytes.round() as i64]
            },
        })
        .collect();
    let default_sample_type = strings.intern(if allocated || (analysis.has_allocations && allocations_first) {
        "alloc_space"
    } else {
        "inuse_space"
    });
    // Asked for allocation totals that jemalloc does not keep: the in-use heap, saying why (`pprof -comments`).
    let missing_totals =
        (allocations_first && !analysis.has_allocations && !allocated).then(|| NO_ALLOCATION_TOTALS.to_owned());
    let comment = missing_totals
        .into_iter()
        .chain(comments.iter().cloned())
        .chain(analysis.notes())
        .map(|comment| strings.intern(&comment))
        .collect();
    proto::Profile {
        sample_type,
        sample,
        mapping,
        location,
        function,
        string_table: strings.table,
        period_type,
        period: analysis.sample_period as i64,
        comment,
        default_sample_type,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{Location, Sample};

    #[test]
    fn samples_point_at_locations_with_their_functions() {
        let frame =
            |function: &str| Frame { function: function.into(), file: Some("src/app.rs".into()), line: Some(3) };
        let analysis = Analysis {
            sample_period: 524288,
            known_variance: None,
            calibrated: None,
            samples: vec![Sample {
                locations: vec![0, 1],
                objects: 2.4,
                bytes: 1e6,
                allocated_objects: 10.0,
                allocated_bytes: 4e6,
                labels: crate::labels::LabelSet::new([("tenant", "acme"), ("route", "/")]),
            }],
            locations: vec![
                Location {
                    address: 0x10,
                    module: None,
                    frames: vec![frame("app::alloc"), frame("app::inlined_into")].into(),
                },
                Location { address: 0x20, module: None, frames: vec![frame("app::main")].into() },
            ],
            modules: Vec::new(),
            has_allocations: false,
            cautions: Vec::new(),
            measure: Default::default(),
        };
        let profile = build(&analysis, true, &[]);
        let name = |index: i64| profile.string_table[index as usize].as_str();
        assert_eq!(profile.sample[0].value, [2, 1_000_000]);
        assert_eq!(profile.sample[0].location_id, [1, 2]);
        let tags: Vec<(&str, &str)> =
            profile.sample[0].label.iter().map(|label| (name(label.key), name(label.str))).collect();
        assert_eq!(tags, [("route", "/"), ("tenant", "acme")]);
        let innermost = &profile.location[0].line[0];
        assert_eq!(name(profile.function[innermost.function_id as usize - 1].name), "app::alloc");
        assert_eq!(profile.location[0].line.len(), 2);
        assert_eq!(name(profile.default_sample_type), "inuse_space");
        assert_eq!((profile.period, name(profile.sample_type[1].unit)), (524288, "bytes"));
        let comments: Vec<&str> = profile.comment.iter().map(|&index| name(index)).collect();
        assert_eq!(comments, [NO_ALLOCATION_TOTALS], "allocations asked for, none kept");
        assert!(build(&analysis, false, &[]).comment.is_empty());
        let with_totals = build(&Analysis { has_allocations: true, ..analysis.clone() }, true, &[]);
        let name = |index: i64| with_totals.string_table[index as usize].as_str();
        assert_eq!(with_totals.sample[0].value, [10, 4_000_000, 2, 1_000_000]);
        assert_eq!(name(with_totals.sample_type[1].r#type), "alloc_space");
        assert_eq!(name(with_totals.default_sample_type), "alloc_space");
        assert!(with_totals.comment.is_empty());
        // A view of what was allocated (a window's view=allocated): typed alloc_* alone, its counts the
        // samples', said so in a comment.
        let allocated = build(&Analysis { measure: crate::analysis::Measure::Allocated, ..analysis }, false, &[]);
        let name = |index: i64| allocated.string_table[index as usize].as_str();
        let types: Vec<&str> = allocated.sample_type.iter().map(|kind| name(kind.r#type)).collect();
        assert_eq!(types, ["alloc_objects", "alloc_space"]);
        assert_eq!(allocated.sample[0].value, [2, 1_000_000]);
        assert_eq!(name(allocated.default_sample_type), "alloc_space");
        assert!(name(allocated.comment[0]).starts_with("allocated: "), "{:?}", allocated.comment);
    }

    #[test]
    fn notes_on_the_binaries_are_comments() {
        let module = crate::fixtures::module_with_short_names();
        let analysis = Analysis { modules: vec![module.clone(), module.clone()], ..Analysis::default() };
        let profile = build(&analysis, true, &[]);
        let comments: Vec<&str> =
            profile.comment.iter().map(|&index| profile.string_table[index as usize].as_str()).collect();
        assert_eq!(comments, [NO_ALLOCATION_TOTALS, module.note().unwrap().as_str()], "one note per binary");
    }
}
