//! Continuous sampling within its budget (memprof-runtime/src/sampler/budget.rs) on a real program
//! (src/bin/windows.rs): allocating without pause, it is thinned, says so in `state` and in its profiles,
//! and is sampled as before once the load stops.

use memprof_tests::estimates::{self, LiveHeap, SERVICE_KEPT};
use memprof_tests::heap::bytes_under;
use memprof_tests::http::PATIENCE;
use memprof_tests::process::{Program, memprof_tool};
use memprof_tests::tools;
use memprof_tests::waiting::wait_until;
use memprof_wire::{SamplingBudget, State};

const MIB: f64 = (1 << 20) as f64;

/// `state`'s budget, read through memprof-wire's types.
fn budget(program: &Program) -> Option<SamplingBudget> {
    let state: State = serde_json::from_value(program.get_json("/memory-profiler/state")).unwrap();
    state.memory_profiler.sampling.budget
}

/// `busy 3` (4 KiB blocks allocated and freed without pause, a fifth of them sampled at 2^14) costs far
/// more than 0.1 % of a core to sample: sampling is thinned, `state` says how much (its interval 2^14 times
/// the thinning), so does `memprof state`, and every profile from the record says so. A run an operator asks
/// for is sampled whole, as on demand: the same load during it is not thinned. Once the load stops,
/// sampling is unthinned (a time without samples shows it), and 16 MiB kept then reads 16 MiB.
#[test]
fn past_its_budget_sampling_is_thinned_and_unthinned_when_the_load_stops() {
    let program =
        Program::windows().env("MALLOC_CONF", "lg_prof_sample:14").env("MEMPROF_SAMPLING_BUDGET", "0.1%").spawn();
    program.wait_for_line(|line| line == "windows: ready");
    let idle = budget(&program).expect("a budget, sampling continuously");
    assert_eq!((idle.share_ppm, idle.thinned_by, idle.interval_bytes), (1000, 1, 1 << 14), "{idle:?}");
    program.tell("busy 3", "windows: done busy 3");
    let thinned = budget(&program).unwrap();
    assert!((4..=1024).contains(&thinned.most_thinned_by), "{thinned:?}");
    assert!(thinned.thinned_ms > 0, "{thinned:?}");
    assert!(thinned.sample_work_ns.is_some_and(|nanos| nanos > 0), "what a sample's work took: {thinned:?}");
    let (status, said, _) = memprof_tool(&program, &["state"]);
    assert_eq!(status, 0, "{said}");
    assert!(said.contains("sampling thinned to keep within 0.1 % of a core: its interval "), "{said}");
    assert!(said.contains("; a sample's work "), "{said}");
    let started = program.get("/memory-profiler/start");
    assert_eq!(started.status, 200, "{}", started.text());
    program.tell("busy 3", "windows: done busy 3");
    let during = budget(&program).unwrap();
    // The run is sampled whole at once; the pacer's thinned time stops within its look (10 ms, 100 ms).
    assert!(during.thinned_ms <= thinned.thinned_ms + 150, "thinned during the run: {thinned:?} then {during:?}");
    let stopped = program.stop();
    let id = stopped.id.unwrap_or_else(|| panic!("{stopped:?}"));
    let text = program.get(&format!("/memory-profiler/download/text?id={id}")).text();
    assert!(text.contains("sampling was thinned to keep within its budget (0.1 % of a core"), "{text}");
    assert!(text.contains(" MiB on average at the longest interval), so a stack that allocated less "), "{text}");
    let unthinned = wait_until("sampling to be unthinned after the load", PATIENCE, || {
        let now = budget(&program).unwrap();
        if now.thinned_by == 1 { Ok(now) } else { Err(format!("{now:?}")) }
    });
    assert_eq!(unthinned.interval_bytes, 1 << 14, "{unthinned:?}");
    program.tell("grow", "windows: done grow");
    let now = program.get("/memory-profiler/heap_profile?trigger_dump=true").text();
    let grown = bytes_under(&program, &now, "grown_in_the_window") / MIB;
    assert!((grown - 16.0).abs() <= 16.0 * 0.06, "{grown:.2} MiB kept after the load, expected 16");
}

/// Thinned, what was allocated still adds up: `paced 6` (a steady load that costs a debug build 10 to 60 %
/// of a core to sample at 2^14, the more the busier the machine) with a budget of 2 % is thinned to an
/// interval a few times longer, and the delta of two scrapes of `/debug/pprof/allocs` under
/// `allocated_at_a_pace` is the bytes it says it allocated, within 15 %: each sample weighs what the
/// interval it was drawn at says.
#[test]
fn thinned_the_bytes_allocated_still_add_up() {
    let program =
        Program::windows().env("MALLOC_CONF", "lg_prof_sample:14").env("MEMPROF_SAMPLING_BUDGET", "2%").spawn();
    program.wait_for_line(|line| line == "windows: ready");
    let first = program.get("/debug/pprof/allocs");
    program.tell("paced 6", "windows: done paced 6");
    let second = program.get("/debug/pprof/allocs");
    let said = program.wait_for_line(|line| line.starts_with("windows: paced ") && line.ends_with(" bytes"));
    let allocated: f64 = said["windows: paced ".len()..].trim_end_matches(" bytes").parse().unwrap();
    let thinned = budget(&program).unwrap();
    assert!(thinned.most_thinned_by >= 2, "thinned: {thinned:?}");
    let Some(delta) = tools::pprofcheck(&first.body, &second.body, "allocated_at_a_pace") else { return };
    let counted = delta.function_delta["alloc_space"] as f64;
    assert!(
        (counted / allocated - 1.0).abs() <= 0.15,
        "{:.1} MiB counted, {:.1} MiB allocated, thinned {thinned:?}",
        counted / MIB,
        allocated / MIB
    );
}

/// Unset, the budget is 0.5 % of a core; off, there is none and `state` says none; a budget that is not one
/// is said, and 0.5 % of a core stands.
#[test]
fn the_budget_is_on_by_default_and_one_setting_away() {
    let off = Program::windows().env("MEMPROF_SAMPLING_BUDGET", "off").spawn();
    off.wait_for_line(|line| line == "windows: ready");
    assert_eq!(budget(&off), None);
    let unset = Program::windows().env_remove("MEMPROF_SAMPLING_BUDGET").spawn();
    unset.wait_for_line(|line| line == "windows: ready");
    assert_eq!(budget(&unset).map(|budget| budget.share_ppm), Some(5000), "0.5 % of a core by default");
    let wrong = Program::windows().env("MEMPROF_SAMPLING_BUDGET", "lots").spawn();
    wrong.wait_for_line(|line| line.contains("MEMPROF_SAMPLING_BUDGET=\"lots\" is not a share of one core"));
    assert_eq!(budget(&wrong).map(|budget| budget.share_ppm), Some(5000));
}

/// Storms thinned through: 8 threads allocating and freeing 64-byte objects, then 2 threads with 256 KiB
/// objects, 3 s each, five of each in one process, each followed by 64 MiB kept in 1 MiB blocks. Sampling
/// is thinned in bytes, each sample weighed by the interval it was drawn at, so a burst is sampled evenly
/// through however it falls in time: every storm's estimate of what its function allocated is within
/// 0.6-1.67 of the truth and the five's median within 0.8-1.25 (thinned in time slots, single storms read
/// 0.02-2x). A debug build's walk costs some ten times a release build's, so the budget is 5 % here: the
/// samples a release build takes at the default 0.5 %. The 64 MiB the main thread keeps right after each
/// storm likewise, its median within issue 61's 0.75-1.33: the storm's threads unthin sampling as they
/// exit, before the main thread has joined them (the pacer alone saw a storm's end some 10 ms later, after
/// the main thread's first sample had drawn its next distance at the storm's interval: 0 or 4x as often as
/// 1 on a loaded machine). Then three storms of 1,000 threads born for them (1 KiB blocks, 2 s), checked
/// alike (issue 61 read 0.33 to 3.61; a thread's first sample weighed at the interval in force then read
/// 0.26 to 2.14; with the interval each sample was drawn at taken from the pacer, which waits to run
/// behind the thousand, this debug build read 8 storms of 33 at 0.34-0.73; read from jemalloc as the hook
/// began, or with a change taken as made when it was asked, single storms read up to 16.7).
#[test]
fn thinned_through_storms_every_estimate_stays_true() {
    let program = Program::windows().env("MEMPROF_SAMPLING_BUDGET", "5%").spawn();
    program.wait_for_line(|line| line == "windows: ready");
    // After the 1,000 threads the main thread keeps the distance it drew at the storm's interval while it
    // spawned them (jemalloc cannot redraw one thread's): unbiased, but a handful of samples at most, so
    // what it keeps after is not checked there.
    for (storm, storms, thousand_threads) in
        [("storm 3 64 8", 5, false), ("storm 3 262144 2", 5, false), ("storm 2 1024 1000", 3, true)]
    {
        let (mut during, mut after) = (Vec::new(), Vec::new());
        for _ in 0..storms {
            let Some((storm_ratio, after_ratio)) = estimates::storm(&program, storm) else { return };
            println!("{storm}: storm {storm_ratio:.3}, the 64 MiB after it {after_ratio:.3}, {:?}", budget(&program));
            during.push(storm_ratio);
            after.push(after_ratio);
        }
        let checked = [("storm", &during, 0.8..=1.25), ("the 64 MiB after", &after, 0.75..=1.33)];
        for (what, ratios, median) in checked.into_iter().take(if thousand_threads { 1 } else { 2 }) {
            assert!(ratios.iter().all(|ratio| (0.6..=1.67).contains(ratio)), "{storm}, {what}: {ratios:.3?}");
            assert!(median.contains(&estimates::median(ratios.clone())), "{storm}, {what}: {ratios:.3?}");
        }
    }
}

/// The example service's live heap from its start (issue 61: thinned in time slots, read 4 s after start
/// it was 0, 8.5 and 16.8 MB over three starts where some 21 MB lived: the record held 0 to 8 live
/// objects where some 40 were due). Three starts, each read at that moment (`/debug/pprof/heap`'s
/// inuse_space, Go's pprof adding it up), against the 20 MiB the service keeps alive (256 sessions of 64
/// KiB and 128 index blocks of 32 KiB, examples/service.rs, all of them replaced continuously). The record
/// started with the service, so the estimate is calibrated by size class: each class a live sample reached
/// counted whole by jemalloc, so it is what is kept, less the classes no live sample reached (said), plus
/// what the threads' caches keep (said), within twice the error said for what is not calibrated and 1 MiB
/// (a session being built, jemalloc's own records in the classes); the comment says the profile's own
/// total (to its tenth of a MiB: the same reading, not one a moment later). Sampled alone, from a handful of
/// samples, it read 0.4 to 1.6 of what is kept. A debug build at a 5 % budget takes about the samples a
/// release build takes at the default 0.5 % (above); `cargo bench -p memprof-tests --bench estimates`
/// prints the spread of the release build at the default over more starts.
#[test]
fn the_example_service_s_live_heap_reads_true_from_its_start() {
    for start in 1..=3 {
        let (program, heap) = LiveHeap::of_service(Program::service().env("MEMPROF_SAMPLING_BUDGET", "5%"));
        let Some(heap) = heap else { return };
        let ratio = heap.estimate / SERVICE_KEPT;
        println!(
            "start {start}: {:.1} MiB +- {:.1} MiB from {} samples, {ratio:.2} of the 20 MiB kept ({:.2} of jemalloc's {:.1} MiB allocated), {:?}, {:?}",
            heap.estimate / MIB,
            heap.error / MIB,
            heap.samples,
            heap.estimate / heap.allocated,
            heap.allocated / MIB,
            heap.calibrated,
            budget(&program),
        );
        // The comment is of the profile's own reading (the service replaces its 20 MiB every ~30 ms: a second
        // reading a moment later would differ).
        assert!((heap.said - heap.estimate).abs() <= 0.06 * MIB, "start {start}: {heap:?}");
        let calibrated = heap.calibrated.unwrap_or_else(|| panic!("start {start}: not calibrated: {heap:?}"));
        let slack = 2.0 * heap.error + MIB;
        let (least, most) = (SERVICE_KEPT - calibrated.unreached - slack, SERVICE_KEPT + calibrated.cached + slack);
        assert!((least..=most).contains(&heap.estimate), "start {start}: {heap:?}");
    }
}
