use memprof_analysis::HeapProfile;

use super::*;
use crate::sampler::budget::Thinning;

/// An interval's dump (OTLP's push) holds what each stack allocated since the interval before, and what
/// it holds now, unbiased and written unsampled; a stack that allocated nothing and holds nothing is left
/// out, and one given back and reborn at the same index counts from nothing.
#[test]
fn an_intervals_dump_holds_what_was_allocated_since_the_last_and_what_is_held_now() {
    let record = Table::new(Capacity { objects: 64, stacks: 8, frames: 64 }, 1 << 19);
    let one = table::unbias(4096, (1 << 19) as f64);
    record.sampled(0x1000, 4096, &[0xa], 0, Thinning::NONE);
    record.sampled(0x2000, 4096, &[0xb], 0, Thinning::NONE);
    let IntervalDump { text: first, ends_at, .. } = interval_dump(&record, &[]).unwrap();
    let counts = |dump: &str, frame: u64| {
        let profile = HeapProfile::parse(dump).unwrap();
        assert_eq!(profile.sample_period, 1, "unbiased already");
        profile.stacks.iter().find(|stack| stack.addresses == [frame]).map(|stack| (stack.bytes, stack.allocated.bytes))
    };
    let whole = (4096.0 * one).round() as u64;
    assert_eq!(counts(&first, 0xa), Some((whole, whole)));
    assert_eq!(counts(&first, 0xb), Some((whole, whole)));

    record.freed(0x1000);
    record.sampled(0x3000, 4096, &[0xb], 0, Thinning::NONE);
    let second = interval_dump(&record, &ends_at).unwrap().text;
    assert_eq!(counts(&second, 0xa), None, "nothing allocated, nothing held");
    assert_eq!(counts(&second, 0xb), Some(((2.0 * 4096.0 * one).round() as u64, whole)));
    // Where the interval before knew another stack at this index (another birth), all of it counts.
    let reborn: Vec<(u64, table::Totals)> = ends_at.iter().map(|(born, totals)| (born + 100, *totals)).collect();
    let third = interval_dump(&record, &reborn).unwrap().text;
    assert_eq!(counts(&third, 0xb), Some(((2.0 * 4096.0 * one).round() as u64, (2.0 * 4096.0 * one).round() as u64)));
}

/// A window's profile and its allocations carry beside them the variance of what they estimate, each sample
/// weighed by the interval it was drawn at: thinned samples widen it as their weight says, which the
/// file's one period could not tell.
#[test]
fn a_windows_profile_and_allocations_carry_the_variance_of_their_samples_weights() {
    let record: &'static Table =
        Box::leak(Box::new(Table::new(Capacity { objects: 64, stacks: 8, frames: 64 }, 1 << 19)));
    record.sampled(0x1000, 4096, &[0xa], 0, Thinning::NONE);
    let since = record.next_sequence();
    let window = Window::open(record, since);
    record.sampled(0x2000, 4096, &[0xb], 0, Thinning::of(4));
    record.sampled(0x3000, 4096, &[0xb], 0, Thinning::of(4));
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("profile.1.heap");
    write_profile(record, &profile, since, heap_v2::Content::Live).unwrap();
    window.close_into(&profile).unwrap();
    let weight = table::unbias(4096, (1u64 << 23) as f64);
    let expected = 2.0 * weight * (weight - 1.0) * 4096f64.powi(2);
    for file in [profile.clone(), crate::profile_root::files::Beside::Allocated.of(&profile)] {
        let (variance, calibrated) = crate::profile_root::files::read_variance(&file)
            .unwrap_or_else(|| panic!("{file:?}: no variance beside it"));
        assert_eq!(calibrated, None, "{file:?}: a window is not calibrated");
        assert!((variance - expected).abs() < 1e-6 * expected, "{file:?}: {variance} against {expected}");
    }
    // The file's own counts, read at its one period, would say a sixteenth of it.
    let text = std::fs::read_to_string(&profile).unwrap();
    let estimated = memprof_analysis::Analysis::of_dump(
        &text,
        &memprof_analysis::Binaries::default(),
        &memprof_analysis::LabelSets::default(),
    )
    .unwrap()
    .sampling_error()
    .unwrap();
    assert!(estimated.powi(2) / 4.0 < expected / 8.0, "{estimated} against {expected}");
}

/// A window's net growth carries beside its two halves the variance of what each estimates: the objects
/// held at both ends cancel in the difference and add nothing; one sampled since and held at the end (on
/// the grown side) and one held at the start and freed since (on the shrunk side) each add their own.
#[test]
fn a_windows_net_growth_carries_the_variance_of_what_came_and_went_only() {
    let record: &'static Table =
        Box::leak(Box::new(Table::new(Capacity { objects: 64, stacks: 8, frames: 64 }, 1 << 19)));
    let thinned = Thinning::of(4);
    record.sampled(0x1000, 4096, &[0xa], 0, thinned);
    record.sampled(0x2000, 8192, &[0xa], 0, thinned);
    record.sampled(0x3000, 4096, &[0xc], 0, thinned);
    let window = Window::open(record, record.next_sequence());
    record.sampled(0x4000, 4096, &[0xb], 0, thinned);
    record.freed(0x3000);
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("profile.1.heap");
    std::fs::write(&profile, "").unwrap();
    window.close_into(&profile).unwrap();
    let weight = |bytes: u64| table::unbias(bytes, (1u64 << 23) as f64);
    let own = |bytes: u64| weight(bytes) * (weight(bytes) - 1.0) * (bytes as f64).powi(2);
    let read = |side: crate::profile_root::files::Beside| {
        crate::profile_root::files::read_variance(&side.of(&profile)).expect("a variance beside the view").0
    };
    let (grown, shrunk) =
        (read(crate::profile_root::files::Beside::Grown), read(crate::profile_root::files::Beside::Shrunk));
    assert!((grown - own(4096)).abs() < 1e-6 * own(4096), "{grown} against {}", own(4096));
    assert!((shrunk - own(4096)).abs() < 1e-6 * own(4096), "{shrunk} against {}", own(4096));
    assert_eq!(net_variance(1.0, 4.0 + 2.0, 4.0 + 1.0), 3.0);
    assert_eq!(net_variance(0.0, 1.0, 1.5), 0.0, "a reading's small race is never a negative variance");
}
