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

/// Thinned, a storm judged at 2,000 samples a second (2 a millisecond): 5.5 ms with none is within what
/// chance gives it, 0.5 ms more say it ended; a load of 20 samples a second says so only after 600 ms.
#[test]
fn a_time_without_samples_says_the_load_ended_once_the_load_would_have_taken_several() {
    let storm = Spent { work_nanos: 5_000_000, wall_nanos: 1_000_000_000, samples: 2_000 }.rate();
    assert!(!ended(storm, 5_500_000), "11 samples missing: chance, once in 60,000 gaps");
    assert!(ended(storm, 6_000_000), "12 missing");
    let slow = Spent { work_nanos: 5_000_000, wall_nanos: 1_000_000_000, samples: 20 }.rate();
    assert!(!ended(slow, 500_000_000) && ended(slow, 600_000_000));
    assert!(!ended(Spent::default().rate(), u64::MAX), "no load judged: nothing ends");
}

/// A burst of 8 threads thinned, each taking an eighth of its 1,000 samples: the load is gone as the last
/// of them exits, not before; with no sample taken thinned, nothing is.
#[test]
fn a_load_is_gone_when_the_threads_that_sampled_it_thinned_have_all_exited() {
    assert!(!gone_with_its_threads(250, 1000), "two of the 8 run");
    assert!(!gone_with_its_threads(1, 1000), "a thread that took one sample runs");
    assert!(gone_with_its_threads(0, 1000), "all joined");
    assert!(!gone_with_its_threads(0, 0), "no sample taken thinned: nothing to say");
}

/// Unthinned as a thinned load's threads exited: a load that went with them is judged anew (a burst shorter
/// than a reading after it is sampled whole, as any); one that goes on in new threads is thinned again by
/// the two readings that follow, as any, and once that happened twice within 2 s its threads' exits no
/// longer unthin sampling until the pacer unthins it itself.
#[test]
fn a_load_said_gone_with_its_threads_that_goes_on_is_left_to_the_pacer() {
    let budget = Budget::DEFAULT;
    let mut gone = Persistence::default();
    assert!(gone.exits_unthin());
    gone.gone_with_its_threads();
    assert_eq!(gone.next(Thinning::NONE, budget, spent(0.03)), Thinning::NONE, "a burst after it, once");
    assert_eq!(gone.next(Thinning::NONE, budget, spent(0.001)), Thinning::NONE, "gone with them");
    assert_eq!(gone.next(Thinning::NONE, budget, spent(0.03)), Thinning::NONE, "a burst of its own, once");
    assert_eq!(gone.next(Thinning::NONE, budget, spent(0.03)), Thinning(3), "that lasts: thinned");
    assert!(gone.exits_unthin(), "its threads may say its end");

    let mut going_on = Persistence::default();
    going_on.gone_with_its_threads();
    let short = Spent { work_nanos: 100_000_000, wall_nanos: 5_000_000, samples: 100 };
    assert_eq!(going_on.next(Thinning::NONE, budget, spent(0.15)), Thinning::NONE, "once");
    assert_eq!(going_on.next(Thinning::NONE, budget, short), Thinning::NONE, "not judged");
    assert_eq!(going_on.next(Thinning::NONE, budget, spent(0.15)), Thinning(5), "twice: it went on");
    assert!(going_on.exits_unthin(), "or another load began at once: the next exits may say its end");
    assert_eq!(going_on.next(Thinning(5), budget, spent(0.15 / 32.0)), Thinning(5));
    going_on.gone_with_its_threads();
    assert_eq!(going_on.next(Thinning::NONE, budget, spent(0.15)), Thinning::NONE, "once");
    assert_eq!(going_on.next(Thinning::NONE, budget, spent(0.15)), Thinning(5), "went on again at once");
    assert!(!going_on.exits_unthin(), "its threads' exits say nothing now");
    assert_eq!(going_on.next(Thinning(5), budget, spent(0.15 / 32.0)), Thinning(5));
    assert!(!going_on.exits_unthin());
    assert_eq!(going_on.next(Thinning(5), budget, spent(0.0)), Thinning::NONE, "the pacer unthins it");
    assert!(going_on.exits_unthin(), "the next load's threads may say its end again");

    going_on.gone_with_its_threads();
    going_on.forget();
    assert!(going_on.exits_unthin(), "a load ended by a time without samples, or a run sampled whole");
}

/// Bursts started back to back, each as the last is joined (storms of a few seconds): the readings after
/// each exit say "went on", but never twice within 2 s, so each burst's threads say its end as they exit.
#[test]
fn bursts_started_as_the_last_is_joined_each_end_with_their_threads() {
    let budget = Budget::DEFAULT;
    let mut persistence = Persistence::default();
    for _ in 0..5 {
        persistence.gone_with_its_threads();
        assert_eq!(persistence.next(Thinning::NONE, budget, spent(0.15)), Thinning::NONE);
        assert_eq!(persistence.next(Thinning::NONE, budget, spent(0.15)), Thinning(5), "the next burst");
        for _ in 0..25 {
            assert_eq!(persistence.next(Thinning(5), budget, spent(0.15 / 32.0)), Thinning(5), "3 s of it");
        }
        assert!(persistence.exits_unthin(), "its threads say its end");
    }
}
