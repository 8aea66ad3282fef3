use super::*;

/// A reading of one second in which sampling took `share` of a core at the thinning in force.
fn spent(share: f64) -> Spent {
    Spent { work_nanos: (share * 1e9) as u64, wall_nanos: 1_000_000_000, samples: (share * 1e6) as u64 }
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
/// microbenchmark: some 0.15 of a core while sampled unthinned), each at the thinning then in force, then
/// idle.
#[test]
fn thinning_grows_at_once_past_the_budget_and_falls_as_the_load_does() {
    let budget = Budget::DEFAULT;
    assert_eq!(Thinning::NONE.next(budget, spent(0.004)), Thinning::NONE, "within the budget");
    let hard = Thinning::NONE.next(budget, spent(0.15));
    assert_eq!(hard, Thinning(5), "0.15 / 32 < 0.005 < 0.15 / 16: the least that fits");
    assert_eq!(hard.next(budget, spent(0.15 / 32.0)), hard, "steady: the same load, thinned, fits");
    assert_eq!(hard.next(budget, spent(0.09 / 32.0)), hard, "a step lower would take 0.56 %, more than half");
    assert_eq!(hard.next(budget, spent(0.03 / 32.0)), Thinning(4), "0.03 / 16 is within half the budget");
    assert_eq!(hard.next(budget, spent(0.3 / 32.0)), Thinning(6), "the load doubled: thinned again at once");
    assert_eq!(Thinning(4).next(budget, spent(0.0)), Thinning::NONE, "idle: unthinned at once");
    assert_eq!(Thinning(6).next(budget, spent(0.006 / 64.0)), Thinning(2), "0.006 / 4 fits half the budget");
    assert_eq!(Thinning::NONE.next(budget, spent(1e6)), Thinning::MOST, "never past the most");
    let short = Spent { work_nanos: 100_000_000, wall_nanos: 5_000_000, samples: 100 };
    assert_eq!(Thinning(2).next(budget, short), Thinning(2), "too short a reading is not judged");
}

#[test]
fn unthinned_a_load_is_thinned_once_past_the_budget_two_readings_running() {
    let (budget, mut persistence) = (Budget::DEFAULT, Persistence::default());
    assert_eq!(persistence.next(Thinning::NONE, budget, spent(0.15)), Thinning::NONE, "a burst, once");
    assert_eq!(persistence.next(Thinning::NONE, budget, spent(0.0)), Thinning::NONE);
    assert_eq!(persistence.next(Thinning::NONE, budget, spent(0.15)), Thinning::NONE, "another, once");
    assert_eq!(persistence.next(Thinning::NONE, budget, spent(0.15)), Thinning(5), "a load");
    assert_eq!(persistence.next(Thinning(5), budget, spent(0.3 / 32.0)), Thinning(6), "thinned: at once");
    let short = Spent { work_nanos: 100_000_000, wall_nanos: 5_000_000, samples: 100 };
    assert_eq!(persistence.next(Thinning::NONE, budget, spent(0.15)), Thinning::NONE);
    assert_eq!(persistence.next(Thinning::NONE, budget, short), Thinning::NONE, "not judged");
    assert_eq!(persistence.next(Thinning::NONE, budget, spent(0.15)), Thinning(5), "still running");
    persistence.forget();
    assert_eq!(persistence.next(Thinning::NONE, budget, spent(0.15)), Thinning::NONE, "after a run sampled whole");
}

/// Thinned, a storm judged at 2,000 samples a second (2 a millisecond): 2.5 ms with none is within what
/// chance gives it, 2.5 ms more say it ended; a load of 20 samples a second says so only after 250 ms.
#[test]
fn a_time_without_samples_says_the_load_ended_once_the_load_would_have_taken_several() {
    let storm = Spent { work_nanos: 5_000_000, wall_nanos: 1_000_000_000, samples: 2_000 }.rate();
    assert!(!ended(storm, 2_000_000), "4 samples missing: chance");
    assert!(ended(storm, 2_500_000), "5 missing");
    let slow = Spent { work_nanos: 5_000_000, wall_nanos: 1_000_000_000, samples: 20 }.rate();
    assert!(!ended(slow, 100_000_000) && ended(slow, 250_000_000));
    assert!(!ended(Spent::default().rate(), u64::MAX), "no load judged: nothing ends");
}

/// Light and heavy threads as the storms show them (samples costing 5 us each, the default budget): the
/// main thread sampling right after a 3 s storm, its last sample before it, is light; a storm's thread is
/// not, thinned 2^10 and sampling every 8 ms, nor unthinned every half millisecond; a thread's first
/// sample says nothing of its load.
#[test]
fn a_thread_is_light_when_its_own_load_sampled_unthinned_would_take_an_eighth_of_the_budget() {
    let (budget, cost) = (Budget::DEFAULT, 5_000.0);
    assert!(light(Thinning::NONE, Some(3_000_000_000), cost, budget), "0.3 samples a second: light");
    assert!(!light(Thinning(10), Some(8_000_000), cost, budget), "128,000 a second unthinned");
    assert!(!light(Thinning::NONE, Some(500_000), cost, budget), "2,000 a second");
    assert!(!light(Thinning::NONE, None, cost, budget), "a first sample");
    // 0.005 / 8 of a core at 5 us a sample is 125 samples a second: 8 ms apart.
    assert!(light(Thinning::NONE, Some(8_100_000), cost, budget));
    assert!(!light(Thinning::NONE, Some(7_900_000), cost, budget));
    assert!(!light(Thinning(1), Some(8_100_000), cost, budget), "the same time, drawn twice as far");
}

/// A probe begun by thread 1 at a thinning of 2^10, the load judged at 2,000 samples a second: a sample of
/// another thread says the load goes on, one of thread 1 does not; 2.5 ms without one says it ended, and
/// without a judged rate a probe ends by PROBE_AT_MOST, the load taken to go on.
#[test]
fn a_probe_ends_when_a_sample_of_the_load_comes_or_when_none_would_have_failed_to() {
    let probe = Probe { from: Thinning(10), began_nanos: 1_000_000_000, thread: 1 };
    assert!(probe.goes_on(2) && !probe.goes_on(1));
    let storm = Spent { work_nanos: 5_000_000, wall_nanos: 1_000_000_000, samples: 2_000 }.rate();
    assert_eq!(probe.found(storm, 1_002_000_000), Found::Nothing, "4 samples' worth");
    assert_eq!(probe.found(storm, 1_002_500_000), Found::Ended);
    assert_eq!(probe.found(storm, 999_000_000), Found::Nothing, "a clock read before it began");
    let unknown = Spent::default().rate();
    assert_eq!(probe.found(unknown, 1_099_000_000), Found::Nothing);
    assert_eq!(probe.found(unknown, 1_100_000_000), Found::GoesOn);
}
