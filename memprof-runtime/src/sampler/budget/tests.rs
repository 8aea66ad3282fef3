use super::*;

fn spent(share: f64) -> Spent {
    Spent { work_nanos: (share * 1e9) as u64, sampled_nanos: 1_000_000_000, cpu_nanos: 1_000_000_000 }
}

#[test]
fn the_budget_reads_percentages_shares_and_off() {
    assert_eq!(Budget::parse("0.5%"), Some(Some(Budget::DEFAULT)));
    assert_eq!(Budget::parse(" 2 % "), Some(Some(Budget { share: 0.02 })));
    assert_eq!(Budget::parse("0.01"), Some(Some(Budget { share: 0.01 })));
    assert_eq!(Budget::parse("OFF"), Some(None));
    for wrong in ["0", "0%", "-1%", "101%", "1.5", "half", "", "NaN"] {
        assert!(Budget::parse(wrong).is_none(), "{wrong:?}");
    }
}

/// Readings as a program allocating at 370,000 samples a second shows them (the allocation
/// microbenchmark: some 0.16 of a core while sampled), then idle.
#[test]
fn thinning_grows_at_once_past_the_budget_and_falls_a_step_at_a_time() {
    let budget = Budget::DEFAULT;
    assert_eq!(Thinning::NONE.next(budget, spent(0.004)), Thinning::NONE, "within the budget");
    let hard = Thinning::NONE.next(budget, spent(0.15));
    assert_eq!(hard, Thinning(5), "0.15 / 32 < 0.005 < 0.15 / 16: the least that fits");
    assert_eq!(hard.next(budget, spent(0.15)), hard, "steady");
    assert_eq!(hard.next(budget, spent(0.09)), hard, "a step lower would take 0.56 %, more than half");
    assert_eq!(hard.next(budget, spent(0.03)), Thinning(4), "0.03 / 16 is within half the budget");
    assert_eq!(Thinning(4).next(budget, spent(0.0)), Thinning::NONE, "idle: unthinned at once");
    assert_eq!(Thinning(6).next(budget, spent(0.006)), Thinning(2), "0.006 / 4 fits half the budget");
    assert_eq!(Thinning::NONE.next(budget, spent(1e6)), Thinning::MOST, "never past the most");
    let short = Spent { work_nanos: 100_000_000, sampled_nanos: 5_000_000, cpu_nanos: 5_000_000 };
    assert_eq!(Thinning(2).next(budget, short), Thinning(2), "too short a reading is not judged");
}

/// Readings of the continuous tests' load (a debug build sampling every 16 KiB, some 15 % of its CPU
/// time sampling), then the program idle but for memprof answering a request.
#[test]
fn a_quiet_slot_brings_sampling_back_once_the_load_has_stopped() {
    let budget = Budget::DEFAULT;
    let loaded = Spent { work_nanos: 150_000_000, sampled_nanos: 1_000_000_000, cpu_nanos: 1_000_000_000 };
    let per_cpu = loaded.work_per_cpu();
    assert!((per_cpu - 0.15 / 0.85).abs() < 1e-9, "{per_cpu}");
    let thinned = Thinning::NONE.next(budget, loaded);
    assert_eq!(thinned, Thinning(5));
    let slot = |cpu_nanos| Quiet { cpu_nanos, wall_nanos: 10_000_000 };
    assert_eq!(thinned.after_quiet(budget, per_cpu, slot(8_500_000)), thinned, "still loaded: as it was");
    assert_eq!(thinned.after_quiet(budget, per_cpu, slot(0)), Thinning::NONE, "idle: unthinned at once");
    assert_eq!(thinned.after_quiet(budget, per_cpu, slot(100_000)), Thinning::NONE, "a request: 1 %");
    assert_eq!(thinned.after_quiet(budget, per_cpu, slot(1_000_000)), Thinning(3), "a tenth of the load");
    assert_eq!(Thinning(2).after_quiet(budget, per_cpu, slot(8_500_000)), Thinning(2), "never thicker");
    assert_eq!(thinned.after_quiet(budget, per_cpu, Quiet::default()), thinned, "no reading");
    let preempted = Spent { work_nanos: 20_000_000, sampled_nanos: 10_000_000, cpu_nanos: 10_000_000 };
    assert_eq!(preempted.work_per_cpu(), MOST_WORK_PER_CPU);
    assert_eq!(Thinning::MOST.after_quiet(budget, MOST_WORK_PER_CPU, slot(0)), Thinning::NONE);
    assert_eq!(Thinning::MOST.after_quiet(budget, MOST_WORK_PER_CPU, slot(100_000)), Thinning::MOST);
}

#[test]
fn unthinned_a_load_is_thinned_once_past_the_budget_two_readings_running() {
    let (budget, mut persistence) = (Budget::DEFAULT, Persistence::default());
    assert_eq!(persistence.next(Thinning::NONE, budget, spent(0.15)), Thinning::NONE, "a burst, once");
    assert_eq!(persistence.next(Thinning::NONE, budget, spent(0.0)), Thinning::NONE);
    assert_eq!(persistence.next(Thinning::NONE, budget, spent(0.15)), Thinning::NONE, "another, once");
    assert_eq!(persistence.next(Thinning::NONE, budget, spent(0.15)), Thinning(5), "a load");
    assert_eq!(persistence.next(Thinning(5), budget, spent(0.3)), Thinning(6), "thinned: at once");
    let short = Spent { work_nanos: 100_000_000, sampled_nanos: 5_000_000, cpu_nanos: 5_000_000 };
    assert_eq!(persistence.next(Thinning::NONE, budget, spent(0.15)), Thinning::NONE);
    assert_eq!(persistence.next(Thinning::NONE, budget, short), Thinning::NONE, "not judged");
    assert_eq!(persistence.next(Thinning::NONE, budget, spent(0.15)), Thinning(5), "still running");
    persistence.forget();
    assert_eq!(persistence.next(Thinning::NONE, budget, spent(0.15)), Thinning::NONE, "after a quiet slot");
}

#[test]
fn a_schedule_samples_one_slot_in_each_block_at_a_random_place() {
    let mut schedule = Schedule::new(42);
    assert!((0..100).all(|_| schedule.next_slot()), "unthinned: every slot");
    schedule.thin(Thinning(3));
    let slots: Vec<bool> = (0..8 * 1000).map(|_| schedule.next_slot()).collect();
    let mut places = [0u32; 8];
    for block in slots.chunks(8) {
        assert_eq!(block.iter().filter(|on| **on).count(), 1, "one slot a block");
        places[block.iter().position(|on| *on).unwrap()] += 1;
    }
    assert!(places.iter().all(|&count| (80..=170).contains(&count)), "each place ~1/8: {places:?}");
    schedule.thin(Thinning::NONE);
    assert!(schedule.next_slot() && schedule.next_slot());
}

/// A judgement after a sampled slot waits for its block's end: the block keeps exactly one slot on.
#[test]
fn a_judgement_takes_effect_when_its_block_ends() {
    let mut schedule = Schedule::new(7);
    schedule.thin_from_next_block(Thinning(2));
    assert_eq!(schedule.thinning(), Thinning::NONE, "unthinned until the slot ends");
    schedule.next_slot();
    assert_eq!(schedule.thinning(), Thinning(2), "unthinned, a block is a slot");
    for _ in 0..3 {
        schedule.next_slot();
    }
    for _ in 0..100 {
        let mut on = 0;
        let mut first = true;
        for _ in 0..4 {
            on += u32::from(schedule.next_slot());
            if std::mem::take(&mut first) {
                schedule.thin_from_next_block(Thinning(3)); // judged mid-block, as after its sampled slot
            }
            assert_eq!(schedule.thinning(), Thinning(2));
        }
        assert_eq!(on, 1, "one slot of the block on, whatever was judged in it");
        schedule.thin_from_next_block(Thinning(2));
    }
    schedule.thin_from_next_block(Thinning(3));
    schedule.next_slot();
    assert_eq!(schedule.thinning(), Thinning(3));
    schedule.thin(Thinning::NONE);
    assert!(schedule.next_slot(), "a quiet slot's judgement cuts the block");
}
