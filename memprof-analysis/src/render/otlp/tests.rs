use super::*;
use crate::analysis::{Location, Module, Sample};

fn analysis() -> Analysis {
    let frame = |function: &str| Frame { function: function.into(), file: Some("src/app.rs".into()), line: Some(3) };
    Analysis {
        sample_period: 524288,
        known_variance: None,
        calibrated: None,
        samples: vec![
            Sample {
                locations: vec![0, 1],
                objects: 2.4,
                bytes: 1e6,
                allocated_objects: 10.0,
                allocated_bytes: 4e6,
                labels: crate::labels::LabelSet::new([("tenant", "acme")]),
            },
            Sample {
                locations: vec![1],
                objects: 1.0,
                bytes: 512.0,
                allocated_objects: 0.0,
                allocated_bytes: 0.0,
                labels: crate::labels::LabelSet::default(),
            },
        ],
        locations: vec![
            Location {
                address: 0x1010,
                module: Some(0),
                frames: vec![frame("app::alloc::<u8>"), frame("app::inlined")].into(),
            },
            Location { address: 0x1020, module: Some(0), frames: vec![frame("app::main")].into() },
        ],
        modules: vec![Module { build_id: Some(vec![0xab, 0x01]), ..crate::fixtures::module_with_short_names() }],
        has_allocations: true,
        cautions: Vec::new(),
        measure: Measure::InUse,
    }
}

#[test]
fn a_profile_a_sample_type_sharing_one_dictionary_whose_entries_0_are_empty() {
    let resource = OtlpResource {
        attributes: vec![("service.name".into(), "app".into())],
        time_unix_nano: 1_795_000_000_000_000_000,
        duration_nano: 15_000_000_000,
        profile_attributes: vec![("memprof.sampling.interval_bytes".into(), "524288".into())],
    };
    let request = build(&analysis(), &resource);
    let decoded = proto::ExportProfilesServiceRequest::decode(&render(&analysis(), &resource)[..]).unwrap();
    assert_eq!(decoded, request, "what is written reads back");
    let dictionary = request.dictionary.as_ref().unwrap();
    let string = |index: i32| dictionary.string_table[index as usize].as_str();
    assert_eq!(string(0), "");
    assert_eq!(dictionary.mapping_table[0], proto::Mapping::default());
    assert_eq!(dictionary.stack_table[0], proto::Stack::default());
    assert_eq!(dictionary.attribute_table[0], proto::KeyValueAndUnit::default());
    let scope = &request.resource_profiles[0].scope_profiles[0];
    let kinds: Vec<&str> =
        scope.profiles.iter().map(|profile| string(profile.sample_type.unwrap().type_strindex)).collect();
    assert_eq!(kinds, ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"]);
    let values: Vec<Vec<i64>> =
        scope.profiles.iter().map(|profile| profile.samples.iter().map(|sample| sample.values[0]).collect()).collect();
    assert_eq!(values, [vec![10, 0], vec![4_000_000, 0], vec![2, 1], vec![1_000_000, 512]]);
    let profile = &scope.profiles[3];
    assert_eq!(
        (profile.period, profile.time_unix_nano, profile.duration_nano),
        (524288, resource.time_unix_nano, resource.duration_nano)
    );
    // The first sample: its stack (innermost location first), its frames' functions, its label.
    let sample = &profile.samples[0];
    let stack = &dictionary.stack_table[sample.stack_index as usize];
    let location = &dictionary.location_table[stack.location_indices[0] as usize];
    assert_eq!(location.address, 0x1010);
    let function = &dictionary.function_table[location.lines[0].function_index as usize];
    assert_eq!(
        (string(function.name_strindex), string(function.system_name_strindex)),
        ("app::alloc", "app::alloc::<u8>")
    );
    assert_eq!(string(function.filename_strindex), "src/app.rs");
    assert_eq!(location.lines.len(), 2, "the inlined frame too");
    let label = &dictionary.attribute_table[sample.attribute_indices[0] as usize];
    assert_eq!((string(label.key_strindex), label.value.as_ref().unwrap().string_value.as_str()), ("tenant", "acme"));
    assert!(profile.samples[1].attribute_indices.is_empty());
    // The mapping, with its build id.
    let mapping = &dictionary.mapping_table[location.mapping_index as usize];
    let build_id = &dictionary.attribute_table[mapping.attribute_indices[0] as usize];
    assert_eq!(string(build_id.key_strindex), "process.executable.build_id.gnu");
    assert_eq!(build_id.value.as_ref().unwrap().string_value, "ab01");
    // How every profile was sampled, an attribute of each.
    for profile in &scope.profiles {
        let sampling = &dictionary.attribute_table[profile.attribute_indices[0] as usize];
        assert_eq!(string(sampling.key_strindex), "memprof.sampling.interval_bytes");
        assert_eq!(sampling.value.as_ref().unwrap().string_value, "524288");
    }
    let attributes = &request.resource_profiles[0].resource.as_ref().unwrap().attributes;
    assert_eq!(
        (attributes[0].key.as_str(), attributes[0].value.as_ref().unwrap().string_value.as_str()),
        ("service.name", "app")
    );
}

#[test]
fn a_view_of_what_was_allocated_is_alloc_types_alone() {
    let allocated = Analysis { measure: Measure::Allocated, has_allocations: false, ..analysis() };
    let request = build(&allocated, &OtlpResource::default());
    let dictionary = request.dictionary.unwrap();
    let profiles = &request.resource_profiles[0].scope_profiles[0].profiles;
    let kinds: Vec<&str> = profiles
        .iter()
        .map(|profile| dictionary.string_table[profile.sample_type.unwrap().type_strindex as usize].as_str())
        .collect();
    assert_eq!(kinds, ["alloc_objects", "alloc_space"]);
    assert_eq!(profiles[1].samples[0].values, [1_000_000]);
}
