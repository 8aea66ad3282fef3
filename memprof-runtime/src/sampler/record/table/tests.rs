use std::collections::HashMap;

use super::*;

const PERIOD: u64 = 1 << 19;

fn table(objects: usize, stacks: usize, frames: usize) -> Table {
    Table::new(Capacity { objects, stacks, frames }, PERIOD)
}

fn live_objects(table: &Table, since: u64) -> u64 {
    table.read(since, 0, 0).iter().map(|stack| stack.live.objects).sum()
}

/// A model (a map) against the table, through a pseudo-random mix of samples and frees whose addresses
/// collide in the table's slots: every read agrees with the model.
#[test]
fn samples_and_frees_agree_with_a_map_through_collisions() {
    let table = table(1 << 10, 16, 256);
    let mut model: HashMap<usize, (usize, u64)> = HashMap::new();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..20_000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // 600 addresses at a 4 KiB stride: many share a home slot, and the table runs near full.
        let address = 0x7f00_0000_0000 + (seed % 600) as usize * 4096;
        let stack = (seed >> 32) as usize % 3;
        if seed & 1 == 0 || model.contains_key(&address) {
            table.freed(address);
            model.remove(&address);
        } else {
            let bytes = 64 << stack;
            table.sampled(address, bytes, &[0x100 + stack, 0x200], 0, Thinning::NONE);
            model.insert(address, (stack, bytes));
        }
    }
    let readings = table.read(0, 0, 0);
    for stack in 0..3 {
        let expected: Vec<u64> = model.values().filter(|(owner, _)| *owner == stack).map(|(_, bytes)| *bytes).collect();
        let reading = readings.iter().find(|reading| reading.frames == [0x100 + stack, 0x200]).unwrap();
        assert_eq!(reading.live.objects, expected.len() as u64, "stack {stack}");
        assert_eq!(reading.live.bytes, expected.iter().sum::<u64>(), "stack {stack}");
        assert!(reading.allocated.objects >= reading.live.objects);
    }
    assert_eq!(table.fill(), (Dropped::default(), model.len(), 3));
}

/// A reading from a sequence number holds only what was sampled from it on and is still live; what each
/// stack allocated counts every sample since the table was made, freed or not, unbiased.
#[test]
fn a_window_holds_what_it_sampled_still_live_and_allocations_only_grow() {
    let table = table(64, 8, 64);
    table.sampled(0x1000, 4096, &[0xa], 10, Thinning::NONE);
    let window = table.next_sequence();
    table.sampled(0x2000, 4096, &[0xa], 20, Thinning::NONE);
    table.sampled(0x3000, 4096, &[0xa], 30, Thinning::NONE);
    table.freed(0x3000);
    table.freed(0x9000);
    assert_eq!(live_objects(&table, 0), 2);
    assert_eq!(live_objects(&table, window), 1);
    let reading = &table.read(0, 100, 85)[0];
    assert_eq!(reading.allocated.objects, 3);
    assert_eq!(reading.allocated.bytes, 3 * 4096);
    let scale = unbias(4096, PERIOD as f64);
    assert!((reading.allocated.unbiased_bytes - 3.0 * 4096.0 * scale).abs() < 1e-6);
    assert!(scale > 128.0 && scale < 129.0, "a 4 KiB object stands for ~128.5 at 512 KiB: {scale}");
    assert!((reading.live_older_bytes - 4096.0 * scale).abs() < 1e-6, "one of ages 90 and 80 is older than 85");
    let held = table.held(0, 100, 85);
    assert_eq!((held.len(), held[0].live.objects, held[0].older_bytes), (1, 2, reading.live_older_bytes));
    assert_eq!(table.frames(&[0, 7]), [vec![0xa], vec![]]);
}

/// Full parts drop and count, never wait (and objects 16 KiB apart, as jemalloc spaces sampled ones, fill
/// every shard): past the objects' room the stack's allocations still count;
/// past the stacks' or frames' room the sample is in no count; a stack deeper than the frames left is
/// refused while a shallower one still fits.
#[test]
fn what_does_not_fit_is_counted_and_dropped() {
    // The smallest table: 16 shards of 16 slots, 14 objects each at most: 300 objects fill it.
    let table = table(8, 2, 5);
    assert_eq!(table.max_objects(), 16 * 14);
    for object in 0..300 {
        table.sampled(0x4000 * (object + 1), 64, &[0xa, 0xb], 0, Thinning::NONE);
    }
    let (dropped, live, stacks) = table.fill();
    assert_eq!((dropped.objects, live, stacks), (300 - 16 * 14, 16 * 14, 1), "7/8 of each shard's 16 slots");
    assert_eq!(table.read(0, 0, 0)[0].allocated.objects, 300);
    table.sampled(0xf000, 64, &[1, 2, 3, 4], 0, Thinning::NONE);
    assert_eq!(table.fill().0.stacks, 1, "four frames with three left");
    table.sampled(0xf000, 64, &[1], 0, Thinning::NONE);
    table.sampled(0xf100, 64, &[2], 0, Thinning::NONE);
    assert_eq!(table.fill().0, Dropped { objects: 300 - 16 * 14 + 1, stacks: 2 });
    assert_eq!(table.read(0, 0, 0).len(), 2);
}

#[test]
fn the_capacity_says_its_bytes() {
    let capacity = Capacity { objects: 1 << 16, stacks: 1 << 13, frames: 1 << 18 };
    let bytes = capacity.bytes();
    assert_eq!(size_of::<Object>(), 32, "an object's entry");
    assert_eq!(bytes, (1 << 16) * 32 + (1 << 13) * size_of::<Stack>() as u64 + (1 << 14) * 4 + (1 << 18) * 8);
}

/// A nearly full table gives back the stacks that hold nothing, were idle since the mark and hold nothing of
/// a tracked window's peak, the least recently sampled first, down to 3/4 of its room; a new stack takes a
/// given-back index (told apart by its first sample) and the frames of the stacks kept are still theirs.
#[test]
fn idle_stacks_holding_nothing_are_given_back_when_nearly_full() {
    let table = table(1024, 8, 64);
    // Stacks 0..8, each of i + 1 frames: 0..4 sampled and freed, 4 and 5 still held, 6 in a peak, 7 late.
    let frames = |stack: usize| (0..=stack).map(|frame| 0x100 * (stack + 1) + frame).collect::<Vec<_>>();
    for stack in 0..7 {
        table.sampled(0x10_0000 * (stack + 1), 64, &frames(stack), 0, Thinning::NONE);
    }
    for stack in 0..4 {
        table.freed(0x10_0000 * (stack + 1));
    }
    let place = table.track_peak(table.next_sequence()).unwrap();
    table.sampled(0x70_0000, 64, &frames(6), 0, Thinning::NONE);
    table.freed(0x70_0000);
    table.freed(0x10_0000 * 7);
    let mark = table.next_sequence();
    table.sampled(0x80_0000, 64, &frames(7), 0, Thinning::NONE);
    table.freed(0x80_0000);
    let held = table.held(0, 0, u32::MAX);
    assert_eq!(table.give_back_idle(mark, &[]), Vec::<u32>::new(), "a stack no reading covers is kept");
    let given = table.give_back_idle(mark, &held);
    assert_eq!(given, [0, 1], "the oldest two of 0..4 bring 8 stacks to 6 (3/4)");
    assert_eq!(table.fill().2, 6);
    assert_eq!(table.given_back().0, 2);
    assert!(table.give_back_idle(mark, &table.held(0, 0, u32::MAX)).is_empty(), "at 3/4 nothing more");
    // Every stack kept reads its own frames; the next new stack takes a given-back index.
    let kept = table.frames(&[2, 3, 4, 5, 6, 7]);
    assert_eq!(kept, (2..8).map(frames).collect::<Vec<_>>());
    table.sampled(0x90_0000, 64, &[0xfeed], 0, Thinning::NONE);
    let allocated = table.allocated();
    let (index, (born, _)) = allocated.iter().enumerate().find(|(_, (born, _))| *born > mark).unwrap();
    assert!(index < 2 && *born > mark, "{allocated:?}");
    assert_eq!(table.frames(&[index as u32]), [vec![0xfeed]]);
    assert!(table.read(0, 0, 0).iter().any(|stack| stack.frames == [0xfeed] && stack.live.objects == 1));
    table.end_peak(place);
}

/// A sample drawn while sampling was thinned to 2^n times the interval stands for what that interval makes
/// it stand for (a small object about 2^n times what one drawn unthinned does; an object far above the
/// interval about one, either way), in what its stack holds and allocated, until it is freed; its time
/// stays its own.
#[test]
fn a_thinned_sample_weighs_as_its_interval_says() {
    let table = table(1024, 16, 256);
    table.sampled(0x1000, 4096, &[0xa], 7, Thinning::NONE);
    table.sampled(0x2000, 4096, &[0xb], 7, Thinning::of(3));
    table.sampled(0x3000, 64 << 20, &[0xc], 7, Thinning::of(3));
    let (one, thinned) = (unbias(4096, PERIOD as f64), unbias(4096, 8.0 * PERIOD as f64));
    assert!((thinned / one / 8.0 - 1.0).abs() < 0.01, "{thinned} against {one}");
    let held = table.held(0, 10, 2);
    assert!((held[0].live.unbiased_objects - one).abs() < 1e-9);
    assert!((held[1].live.unbiased_objects - thinned).abs() < 1e-9, "{held:?}");
    assert!((held[1].older_bytes - thinned * 4096.0).abs() < 1e-6, "3 s old, older than 2: {held:?}");
    assert!((held[2].live.unbiased_objects - 1.0).abs() < 0.02, "64 MiB at a 4 MiB interval: {held:?}");
    assert!((table.allocated()[1].1.unbiased_bytes - thinned * 4096.0).abs() < 1e-6);
    table.freed(0x2000);
    assert_eq!(table.held(0, 10, 2)[1].live, Totals::default(), "freed: its weight goes with it");
}

#[test]
fn a_stamp_keeps_time_and_thinning_apart() {
    let stamp = slots::Stamp::new(u32::MAX, Thinning::MOST);
    assert_eq!((stamp.time(), stamp.thinning()), ((1 << 28) - 1, Thinning::MOST), "the time saturates");
    let stamp = slots::Stamp::new(12345, Thinning::NONE);
    assert_eq!((stamp.time(), stamp.thinning()), (12345, Thinning::NONE));
    assert_eq!(size_of::<slots::Object>(), 32, "a slot stays 32 bytes");
}

/// The error answers give ([`Totals::error_bytes`], two standard errors from the samples' variance) holds
/// the truth about 95 times in 100: 64 MiB of objects from 64 B to 256 KiB, each sampled by chance as
/// jemalloc samples (`1 - exp(-size / interval)`), at the configured interval and at 16 times it (thinned),
/// over 400 draws each.
#[test]
fn the_error_said_holds_the_truth_95_times_in_100() {
    let mut uniform = uniform_draws(0x2545_f491_4f6c_dd1d);
    let sizes: Vec<u64> = (0..4000u64).map(|at| 64 << (at % 13)).collect();
    let truth: f64 = sizes.iter().map(|&size| size as f64).sum();
    for interval in [PERIOD as f64, 16.0 * PERIOD as f64] {
        let mut held = 0;
        let mut samples = 0;
        for _ in 0..400 {
            let mut totals = Totals::default();
            for &size in &sizes {
                if uniform() < 1.0 - (-(size as f64) / interval).exp() {
                    totals.add(size, interval);
                }
            }
            samples += totals.objects;
            held += usize::from((totals.unbiased_bytes - truth).abs() <= totals.error_bytes());
        }
        let share = held as f64 / 400.0;
        println!("at an interval of {interval} bytes: {share} of 400 draws held the truth ({samples} samples in all)");
        assert!((0.9..=0.99).contains(&share), "at {interval}: {share} of draws held the truth ({samples} samples)");
    }
}

/// Draws uniform in [0, 1) from a xorshift generator seeded with `seed` (the same draws every run).
pub(super) fn uniform_draws(mut seed: u64) -> impl FnMut() -> f64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The chance an object holds a sample, computed without libm, against libm's `expm1` (the most exact
/// `1 - e^-x` it has), over objects from a byte at 512 MiB intervals to 40 intervals and past.
#[test]
fn the_chance_of_a_sample_is_libm_s_to_within_ten_to_the_minus_thirteen() {
    let mut x = 1e-12;
    while x < 60.0 {
        let (ours, libm) = (chance_sampled(x), -(-x).exp_m1());
        assert!((ours - libm).abs() <= 1e-13 * libm, "x = {x}: {ours} against {libm}");
        x *= 1.0137;
    }
    for x in [0.5, 0.5 - f64::EPSILON, std::f64::consts::LN_2 / 2.0, 40.0, 1e300, f64::INFINITY] {
        assert!((chance_sampled(x) + (-x).exp_m1()).abs() <= 1e-13, "x = {x}");
    }
    assert_eq!((chance_sampled(0.0), chance_sampled(-1.0), chance_sampled(f64::NAN)), (0.0, 0.0, 0.0));
}

/// A calibrated reading: the stacks of each class add up to jemalloc's count of it, their shares as their
/// samples say, a class with no live sample in none, and a large object at its own size (in pages).
#[test]
fn a_calibrated_readings_stacks_add_up_to_each_classs_count() {
    use crate::jemalloc::SizeClass;
    let table = table(1 << 10, 16, 256);
    // Two stacks sharing the 64 B class (three samples and one), one alone in the 24 KiB class with an
    // object of 22 KiB (in pages).
    for (address, bytes, stack) in
        [(0x1000, 64, 1), (0x2000, 64, 1), (0x3000, 64, 1), (0x4000, 64, 2), (0x5000, 22 << 10, 3)]
    {
        table.sampled(address, bytes, &[0x100 * stack, 0x900], 0, Thinning::NONE);
    }
    let classes = [
        SizeClass { size: 64, live: 9996, small: true },
        SizeClass { size: 128, live: 50, small: true },
        SizeClass { size: 16 << 10, live: 5, small: false },
        SizeClass { size: 24 << 10, live: 1, small: false },
    ];
    let (readings, variance, calibration) = table.read_calibrated(0, Some((&classes, 0)));
    let held = |stack: usize| {
        let reading = readings.iter().find(|reading| reading.frames[0] == 0x100 * stack).unwrap();
        (reading.live.unbiased_objects, reading.live.unbiased_bytes)
    };
    // 9996 regions counted, and the four promoted samples of the 64 B class put back: 10,000.
    assert!((held(1).0 - 7500.0).abs() < 1e-6 && (held(2).0 - 2500.0).abs() < 1e-6, "{readings:?}");
    assert!((held(1).1 + held(2).1 - 640_000.0).abs() < 1e-3);
    assert!((held(3).0 - 1.0).abs() < 1e-9 && (held(3).1 - f64::from(22 << 10)).abs() < 1e-6, "{readings:?}");
    assert_eq!(variance, 0.0, "every object calibrated");
    let calibration = calibration.unwrap();
    assert_eq!(
        calibration.unreached_bytes,
        50 * 128 + (1 << 14),
        "the 128 B class, and the promoted samples' class less them"
    );
}
