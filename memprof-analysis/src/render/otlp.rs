//! OpenTelemetry's profiles signal (`opentelemetry.proto.profiles.v1development`, as the Collector's pdata
//! v1.71.0, of Collector v0.165.0, reads it): an `ExportProfilesServiceRequest`, the body of an OTLP/HTTP
//! `POST /v1development/profiles` (`Content-Type: application/x-protobuf`). One `Profile` a sample type, as
//! OTLP's profiles carry one each, with Go's names: `alloc_objects` and `alloc_space` when the analysis has
//! allocation totals, `inuse_objects` and `inuse_space` unless it measures allocations alone; all four share
//! the request's dictionary (strings, mappings with their build ids, locations with their functions and
//! lines, stacks, attributes), whose entry 0 is the empty one in every table. Values are unbiased, stacks
//! symbolized, labels sample attributes.

use std::sync::Arc;

use prost::Message;

use super::interned::{Interned, StringTable};
use crate::analysis::{Analysis, Frame, Measure};

/// The messages memprof writes (field numbers and wire types as pdata's generated code reads them).
mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct ExportProfilesServiceRequest {
        #[prost(message, repeated, tag = "1")]
        pub(super) resource_profiles: Vec<ResourceProfiles>,
        #[prost(message, optional, tag = "2")]
        pub(super) dictionary: Option<ProfilesDictionary>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct ResourceProfiles {
        #[prost(message, optional, tag = "1")]
        pub(super) resource: Option<Resource>,
        #[prost(message, repeated, tag = "2")]
        pub(super) scope_profiles: Vec<ScopeProfiles>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Resource {
        #[prost(message, repeated, tag = "1")]
        pub(super) attributes: Vec<KeyValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct KeyValue {
        #[prost(string, tag = "1")]
        pub(super) key: String,
        #[prost(message, optional, tag = "2")]
        pub(super) value: Option<AnyValue>,
    }

    /// OTLP's `AnyValue`, as memprof fills it: a string.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct AnyValue {
        #[prost(string, tag = "1")]
        pub(super) string_value: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct ScopeProfiles {
        #[prost(message, optional, tag = "1")]
        pub(super) scope: Option<InstrumentationScope>,
        #[prost(message, repeated, tag = "2")]
        pub(super) profiles: Vec<Profile>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct InstrumentationScope {
        #[prost(string, tag = "1")]
        pub(super) name: String,
        #[prost(string, tag = "2")]
        pub(super) version: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Profile {
        #[prost(message, optional, tag = "1")]
        pub(super) sample_type: Option<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub(super) samples: Vec<Sample>,
        #[prost(fixed64, tag = "3")]
        pub(super) time_unix_nano: u64,
        #[prost(uint64, tag = "4")]
        pub(super) duration_nano: u64,
        #[prost(message, optional, tag = "5")]
        pub(super) period_type: Option<ValueType>,
        #[prost(int64, tag = "6")]
        pub(super) period: i64,
        #[prost(bytes = "vec", tag = "7")]
        pub(super) profile_id: Vec<u8>,
        #[prost(int32, repeated, tag = "11")]
        pub(super) attribute_indices: Vec<i32>,
    }

    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub(super) struct ValueType {
        #[prost(int32, tag = "1")]
        pub(super) type_strindex: i32,
        #[prost(int32, tag = "2")]
        pub(super) unit_strindex: i32,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Sample {
        #[prost(int32, tag = "1")]
        pub(super) stack_index: i32,
        #[prost(int32, repeated, tag = "2")]
        pub(super) attribute_indices: Vec<i32>,
        #[prost(int64, repeated, tag = "4")]
        pub(super) values: Vec<i64>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct ProfilesDictionary {
        #[prost(message, repeated, tag = "1")]
        pub(super) mapping_table: Vec<Mapping>,
        #[prost(message, repeated, tag = "2")]
        pub(super) location_table: Vec<Location>,
        #[prost(message, repeated, tag = "3")]
        pub(super) function_table: Vec<Function>,
        #[prost(message, repeated, tag = "4")]
        pub(super) link_table: Vec<Link>,
        #[prost(string, repeated, tag = "5")]
        pub(super) string_table: Vec<String>,
        #[prost(message, repeated, tag = "6")]
        pub(super) attribute_table: Vec<KeyValueAndUnit>,
        #[prost(message, repeated, tag = "7")]
        pub(super) stack_table: Vec<Stack>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Mapping {
        #[prost(uint64, tag = "1")]
        pub(super) memory_start: u64,
        #[prost(uint64, tag = "2")]
        pub(super) memory_limit: u64,
        #[prost(uint64, tag = "3")]
        pub(super) file_offset: u64,
        #[prost(int32, tag = "4")]
        pub(super) filename_strindex: i32,
        #[prost(int32, repeated, tag = "5")]
        pub(super) attribute_indices: Vec<i32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Location {
        #[prost(int32, tag = "1")]
        pub(super) mapping_index: i32,
        #[prost(uint64, tag = "2")]
        pub(super) address: u64,
        #[prost(message, repeated, tag = "3")]
        pub(super) lines: Vec<Line>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Line {
        #[prost(int32, tag = "1")]
        pub(super) function_index: i32,
        #[prost(int64, tag = "2")]
        pub(super) line: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Function {
        #[prost(int32, tag = "1")]
        pub(super) name_strindex: i32,
        #[prost(int32, tag = "2")]
        pub(super) system_name_strindex: i32,
        #[prost(int32, tag = "3")]
        pub(super) filename_strindex: i32,
    }

    /// A trace link: memprof has none, but entry 0 (the empty one) is written.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Link {}

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct KeyValueAndUnit {
        #[prost(int32, tag = "1")]
        pub(super) key_strindex: i32,
        #[prost(message, optional, tag = "2")]
        pub(super) value: Option<AnyValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Stack {
        #[prost(int32, repeated, tag = "1")]
        pub(super) location_indices: Vec<i32>,
    }
}

/// The dictionary under construction.
struct Dictionary {
    table: proto::ProfilesDictionary,
    strings: StringTable,
    attributes: Interned<(i32, String)>,
    functions: Interned<(Arc<str>, Option<Arc<str>>)>,
}

impl Dictionary {
    fn new() -> Self {
        let table = proto::ProfilesDictionary {
            mapping_table: vec![proto::Mapping::default()],
            location_table: vec![proto::Location::default()],
            function_table: vec![proto::Function::default()],
            link_table: vec![proto::Link::default()],
            string_table: Vec::new(),
            attribute_table: vec![proto::KeyValueAndUnit::default()],
            stack_table: vec![proto::Stack::default()],
        };
        let functions = Interned::new((Arc::from(""), None));
        Dictionary { table, strings: StringTable::new(), attributes: Interned::new((0, String::new())), functions }
    }

    fn string(&mut self, text: &str) -> i32 {
        self.strings.intern(text)
    }

    /// The tables, the strings among them.
    fn finish(mut self) -> proto::ProfilesDictionary {
        self.table.string_table = self.strings.table;
        self.table
    }

    /// The attribute `key` = `value` (a string).
    fn attribute(&mut self, key: &str, value: &str) -> i32 {
        let key_strindex = self.string(key);
        let (index, new) = self.attributes.index((key_strindex, value.to_owned()));
        if new {
            let value = Some(proto::AnyValue { string_value: value.to_owned() });
            self.table.attribute_table.push(proto::KeyValueAndUnit { key_strindex, value });
        }
        index
    }

    /// The function of `frame` (its name and file).
    fn function(&mut self, frame: &Frame) -> i32 {
        let (index, new) = self.functions.index((frame.function.clone(), frame.file.clone()));
        if new {
            // The whole name as the system's, a shortening as the shown one (as in pprof).
            let shortened = super::rust_names::without_generic_arguments(&frame.function);
            let system_name_strindex = if shortened == *frame.function { 0 } else { self.string(&frame.function) };
            let name_strindex = self.string(&shortened);
            let filename_strindex = self.string(frame.file.as_deref().unwrap_or_default());
            self.table.function_table.push(proto::Function { name_strindex, system_name_strindex, filename_strindex });
        }
        index
    }

    fn value_type(&mut self, kind: &str, unit: &str) -> proto::ValueType {
        proto::ValueType { type_strindex: self.string(kind), unit_strindex: self.string(unit) }
    }
}

/// What the request says of where the profiles come from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct OtlpResource {
    /// The resource's attributes (`service.name`, `process.pid`, ...), in order.
    pub attributes: Vec<(String, String)>,
    /// When the profiles' time began, nanoseconds since the Unix epoch (0: unknown).
    pub time_unix_nano: u64,
    /// How long the profiles' time lasted, nanoseconds.
    pub duration_nano: u64,
    /// Every profile's own attributes (how it was sampled: `memprof.sampling.*`), in order.
    pub profile_attributes: Vec<(String, String)>,
}

/// `analysis` as an `ExportProfilesServiceRequest`, protobuf-encoded (uncompressed: OTLP/HTTP compresses
/// the body, if at all, with `Content-Encoding`).
pub(super) fn render(analysis: &Analysis, resource: &OtlpResource) -> Vec<u8> {
    build(analysis, resource).encode_to_vec()
}

fn build(analysis: &Analysis, resource: &OtlpResource) -> proto::ExportProfilesServiceRequest {
    let mut dictionary = Dictionary::new();
    // Mappings, then locations and stacks: entry n + 1 of each table is the analysis's n.
    for module in &analysis.modules {
        let build_id = module.build_id_hex();
        let attribute_indices = if build_id.is_empty() {
            Vec::new()
        } else {
            vec![dictionary.attribute("process.executable.build_id.gnu", &build_id)]
        };
        let filename_strindex = dictionary.string(&module.path);
        dictionary.table.mapping_table.push(proto::Mapping {
            memory_start: module.start,
            memory_limit: module.end,
            file_offset: module.file_offset,
            filename_strindex,
            attribute_indices,
        });
    }
    for location in &analysis.locations {
        let lines = location
            .frames
            .iter()
            .map(|frame| proto::Line {
                function_index: dictionary.function(frame),
                line: i64::from(frame.line.unwrap_or(0)),
            })
            .collect();
        let mapping_index = location.module.map_or(0, |module| module as i32 + 1);
        dictionary.table.location_table.push(proto::Location { mapping_index, address: location.address, lines });
    }
    let samples: Vec<(i32, Vec<i32>)> = analysis
        .samples
        .iter()
        .map(|sample| {
            let location_indices = sample.locations.iter().map(|&location| location as i32 + 1).collect();
            dictionary.table.stack_table.push(proto::Stack { location_indices });
            let stack_index = dictionary.table.stack_table.len() as i32 - 1;
            let attributes = sample.labels.iter().map(|(key, value)| dictionary.attribute(key, value)).collect();
            (stack_index, attributes)
        })
        .collect();
    // One profile a sample type: its name, unit, and each sample's value.
    type Value = fn(&crate::analysis::Sample) -> f64;
    let allocated = analysis.measure == Measure::Allocated;
    let mut kinds: Vec<(&str, &str, Value)> = Vec::new();
    if allocated {
        kinds.extend([
            ("alloc_objects", "count", (|sample| sample.objects) as Value),
            ("alloc_space", "bytes", |sample| sample.bytes),
        ]);
    } else {
        if analysis.has_allocations {
            kinds.extend([
                ("alloc_objects", "count", (|sample| sample.allocated_objects) as Value),
                ("alloc_space", "bytes", |sample| sample.allocated_bytes),
            ]);
        }
        kinds.extend([
            ("inuse_objects", "count", (|sample| sample.objects) as Value),
            ("inuse_space", "bytes", |sample| sample.bytes),
        ]);
    }
    let period_type = Some(dictionary.value_type("space", "bytes"));
    let profile_attributes: Vec<i32> =
        resource.profile_attributes.iter().map(|(key, value)| dictionary.attribute(key, value)).collect();
    let profiles = kinds
        .into_iter()
        .map(|(kind, unit, value)| proto::Profile {
            sample_type: Some(dictionary.value_type(kind, unit)),
            samples: analysis
                .samples
                .iter()
                .zip(&samples)
                .map(|(sample, (stack_index, attributes))| proto::Sample {
                    stack_index: *stack_index,
                    attribute_indices: attributes.clone(),
                    values: vec![value(sample).round() as i64],
                })
                .collect(),
            time_unix_nano: resource.time_unix_nano,
            duration_nano: resource.duration_nano,
            period_type,
            period: analysis.sample_period as i64,
            profile_id: Vec::new(),
            attribute_indices: profile_attributes.clone(),
        })
        .collect();
    let attributes = resource
        .attributes
        .iter()
        .map(|(key, value)| proto::KeyValue {
            key: key.clone(),
            value: Some(proto::AnyValue { string_value: value.clone() }),
        })
        .collect();
    let scope =
        proto::InstrumentationScope { name: "memprof".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() };
    proto::ExportProfilesServiceRequest {
        resource_profiles: vec![proto::ResourceProfiles {
            resource: Some(proto::Resource { attributes }),
            scope_profiles: vec![proto::ScopeProfiles { scope: Some(scope), profiles }],
        }],
        dictionary: Some(dictionary.finish()),
    }
}

#[cfg(test)]
mod tests;
