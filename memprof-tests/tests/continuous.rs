//! Continuous sampling on a real program (src/bin/windows.rs, `sampling = "continuous"`): runs are windows that
//! reset nothing, and Go's scrapers get `alloc_*` that only grow, read by `go tool pprof` itself.

use std::collections::{BTreeMap, HashMap};

use memprof_tests::heap::bytes_under;
use memprof_tests::process::{PATIENCE, Program};
use memprof_tests::tools;

const MIB: f64 = (1 << 20) as f64;

/// The windows program sampled every 16 KiB on average: 64 KiB blocks are sampled 98 % of the time, so
/// the totals below are within a few per cent. Without the budget of sampling work: these tests count a
/// window's bytes right after loads that a debug build sampling 32 times as often as by default takes far
/// past the budget (tests/budget.rs tests it; a thinned window is unbiased, not that close).
fn windows() -> Program {
    let program =
        Program::windows().env("MALLOC_CONF", "lg_prof_sample:14").env("MEMPROF_SAMPLING_BUDGET", "off").spawn();
    program.wait_for_line(|line| line == "windows: ready");
    program
}

fn assert_near(bytes: f64, expected_mib: f64, what: &str) {
    let mib = bytes / MIB;
    assert!((mib - expected_mib).abs() <= expected_mib * 0.06, "{what}: {mib:.2} MiB, expected {expected_mib}");
}

/// A run in continuous mode starts without 409 and without a reset: its profile holds what was allocated
/// during it and is still live (16 MiB grown), not what was kept before it (32 MiB) nor what it allocated
/// and freed (64 MiB churned); the heap afterwards still has the 32 MiB from before, as sampling never
/// stopped. A `scope!` inside it is a window of its own, overlapping it. `state` says why sampling is
/// continuous and how full the record is.
#[test]
fn a_run_is_a_window_over_continuous_samples_and_erases_nothing() {
    let program = windows();
    let state = program.state();
    let sampling = &state.sampling;
    assert_eq!(sampling.mode, "continuous", "{sampling:?}");
    assert_eq!(sampling.because, "the program's `sampling = \"continuous\"`", "{sampling:?}");
    assert_eq!(sampling.record.as_ref().map(|record| record.dropped_objects), Some(0), "{sampling:?}");
    assert!(!state.started_externally);
    let started = program.get("/memory-profiler/start");
    assert_eq!(started.status, 200, "{}", started.text());
    program.tell("grow", "windows: done grow");
    // A scope! inside the run is a window of its own: it overlaps the run, which it neither ends nor empties.
    program.tell("scope", "windows: done scope");
    program.tell("churn", "windows: done churn");
    let stopped = program.stop();
    let id = stopped.id.unwrap_or_else(|| panic!("{stopped:?}"));
    let window = program.get(&format!("/memory-profiler/download/raw?id={id}")).text();
    assert_near(bytes_under(&program, &window, "grown_in_the_window"), 16.0, "grown in the window");
    assert_near(bytes_under(&program, &window, "grown_in_the_scope"), 8.0, "grown in the scope, in the run");
    // Its text, its allocations', its net growth's and its peak's say their error from the variance the
    // record wrote beside each (every sample weighed by the interval it was drawn at), not from the file's one interval.
    for view in ["", "&view=allocated", "&net=true", "&view=peak"] {
        let text = program.get(&format!("/memory-profiler/download/text?id={id}{view}")).text();
        let said = |line: &&str| line.starts_with("# sampled: the total is within ") && line.contains("drawn at");
        assert!(text.lines().any(|line| said(&line)), "{view}: {text}");
    }
    let state = program.state();
    let scoped = state.runs.iter().find(|run| run.started_by == "code: scoped").unwrap_or_else(|| panic!("{state:?}"));
    let scope = program.get(&format!("/memory-profiler/download/raw?id={}", scoped.id)).text();
    assert_near(bytes_under(&program, &scope, "grown_in_the_scope"), 8.0, "grown in the scope");
    assert_eq!(bytes_under(&program, &scope, "grown_in_the_window"), 0.0, "grown before the scope");
    assert_eq!(bytes_under(&program, &window, "kept_before_the_window"), 0.0, "kept before the window");
    assert_eq!(bytes_under(&program, &window, "churned_in_the_window"), 0.0, "freed in the window");
    let now = program.get("/memory-profiler/heap_profile?trigger_dump=true").text();
    assert_near(bytes_under(&program, &now, "kept_before_the_window"), 32.0, "kept before, after the window");
    assert_near(bytes_under(&program, &now, "grown_in_the_window"), 16.0, "grown in the window, after it");
    // Freed, it leaves the heap: the record follows frees too.
    program.tell("free-before", "windows: done free-before");
    let freed = program.get("/memory-profiler/heap_profile?trigger_dump=true").text();
    assert_eq!(bytes_under(&program, &freed, "kept_before_the_window"), 0.0);
}

/// Samples by their locations (address and function) and labels, with their values.
type Samples = BTreeMap<(Vec<String>, String), Vec<i64>>;

/// The samples of `go tool pprof -raw`, by their locations (address and function) and labels (the
/// scrapers' identity of a sample), with their values; `None` where Go is not installed.
fn raw_samples(profile: &[u8]) -> Option<Samples> {
    let raw = tools::pprof(profile, &["-raw"])?;
    // A location's address is its identity; its function (`0x55.. M=1 service::main file:line`), for reading.
    let locations: HashMap<&str, String> = raw
        .lines()
        .skip_while(|line| *line != "Locations")
        .filter_map(|line| {
            let (id, rest) = line.trim_start().split_once(": ")?;
            let words: Vec<&str> = rest.split(' ').collect();
            id.parse::<u64>().ok().map(|_| (id, format!("{} {}", words[0], words.get(2).unwrap_or(&""))))
        })
        .collect();
    let mut samples = Samples::new();
    let mut last: Option<(Vec<String>, Vec<i64>)> = None;
    let mut push = |sample: Option<(Vec<String>, Vec<i64>)>, labels: String| {
        if let Some((addresses, values)) = sample {
            let entry = samples.entry((addresses, labels)).or_insert_with(|| vec![0; values.len()]);
            entry.iter_mut().zip(values).for_each(|(total, value)| *total += value);
        }
    };
    for line in raw.lines().skip_while(|line| *line != "Samples:").skip(2).take_while(|line| *line != "Locations") {
        if let Some((values, ids)) = line.split_once(": ")
            && let Ok(values) = values.split_whitespace().map(str::parse).collect::<Result<Vec<i64>, _>>()
        {
            push(last.take(), String::new());
            let addresses = ids.split_whitespace().map(|id| locations[id].to_owned()).collect();
            last = Some((addresses, values));
        } else {
            push(last.take(), line.trim().to_owned());
        }
    }
    push(last, String::new());
    Some(samples)
}

/// Grafana Alloy's and Pyroscope's rule, applied to two scrapes of `/debug/pprof/allocs` with 64 MiB
/// allocated and freed between them: a sample is its locations' addresses plus its labels, its delta is
/// current minus previous `alloc_*`. Every delta is >= 0 (`alloc_*` only grow, with no `prof_accum`), the
/// churned stack's deltas add up to the 64 MiB, and nothing else grew by more than a MiB. The estimates
/// said in its comment, and a delta's.
#[test]
fn scrapes_of_allocs_only_grow_and_their_deltas_add_up_to_the_load() {
    let program = windows();
    let first = program.get("/debug/pprof/allocs");
    assert_eq!(first.status, 200, "{}", first.text());
    program.tell("churn", "windows: done churn");
    let second = program.get("/debug/pprof/allocs");
    let Some(before) = raw_samples(&first.body) else { return };
    let after = raw_samples(&second.body).unwrap();
    let header = tools::pprof(&second.body, &["-raw"]).unwrap();
    assert!(
        header.contains("alloc_objects/count alloc_space/bytes[dflt] inuse_objects/count inuse_space/bytes"),
        "Go's four sample types, alloc_space the default:\n{header}"
    );
    let mut churned = 0;
    let mut others = 0;
    for (key, values) in &after {
        let previous = before.get(key).map_or(&[0, 0, 0, 0][..], Vec::as_slice);
        let (objects, bytes) = (values[0] - previous[0], values[1] - previous[1]);
        assert!(objects >= 0 && bytes >= 0, "alloc_* went down for {key:?}: {previous:?} -> {values:?}");
        if key.0.iter().any(|address| address.contains("churned_in_the_window")) {
            churned += bytes;
        } else {
            others += bytes;
        }
    }
    assert!(before.keys().all(|key| after.contains_key(key)), "a stack vanished between scrapes");
    assert_near(churned as f64, 64.0, "allocated and freed between the scrapes");
    assert!(others as f64 <= MIB, "{others} bytes allocated elsewhere between the scrapes");
    // The profile says how far its totals may be from the truth (`pprof -comments`).
    let comments = tools::pprof(&second.body, &["-comments"]).unwrap();
    let estimates = comments.lines().find(|line| line.starts_with("memprof: sampled estimates")).unwrap_or_else(|| {
        panic!("{comments}");
    });
    let allocated = estimates.split("allocated since sampling began ").nth(1).unwrap_or_else(|| panic!("{estimates}"));
    let figures: Vec<f64> = allocated.split(' ').filter_map(|word| word.parse().ok()).take(3).collect();
    let [total, error, samples] = figures[..] else { panic!("{estimates}") };
    assert!(total >= 64.0 && error > 0.0 && error < total / 4.0 && samples >= 64.0, "{estimates}");
    // A delta (`?seconds=N`) is what changed over its seconds; the estimates said with it are of the whole
    // heap as they ended, and say so.
    let delta = program.get("/debug/pprof/heap?seconds=1");
    let comments = tools::pprof(&delta.body, &["-comments"]).unwrap();
    assert!(
        comments.lines().any(|line| line.starts_with("memprof: sampled estimates")
            && line.ends_with("; of the whole heap as the 1 s ended: the profile is what changed over them")),
        "{comments}"
    );
}

/// Faults in continuous mode: 2,000 `scope!` windows in a row (some 7 ms each in a debug build) leave no
/// window open and keep only the last four profiles; a stop with no run is a plain answer, twice; children forked while another thread
/// allocates all end well and the parent goes on sampling; 1000 threads born and ended leave nothing in the
/// record (their objects freed, its live objects back where they were).
#[test]
fn windows_in_a_loop_a_double_stop_forks_and_threads_leave_the_record_sound() {
    let program = windows();
    program.tell("scopes 2000", "windows: done scopes 2000");
    let profiler = program.state();
    assert!(profiler.open_windows.is_empty(), "{profiler:?}");
    assert_eq!(profiler.runs.len(), 4, "{profiler:?}");
    for _ in 0..2 {
        let stopped = program.stop();
        assert!(stopped.message.starts_with("No heap profiling run is active"), "{stopped:?}");
    }
    let live = |program: &Program| program.state().sampling.record.expect("the record").live_objects;
    let before = live(&program);
    program.tell("fork", "windows: done fork");
    program.tell("threads", "windows: done threads");
    let after = live(&program);
    assert!(after <= before + 16, "the record holds {before} live objects, then {after}");
    program.tell("grow", "windows: done grow");
    let now = program.get("/memory-profiler/heap_profile?trigger_dump=true").text();
    assert_near(bytes_under(&program, &now, "grown_in_the_window"), 16.0, "sampled after the forks");
}

/// What a window allocated, freed or not, is one parameter away: `view=allocated` shows the 64 MiB it
/// churned and the 16 MiB it kept, where its profile (what is still live) shows the 16 MiB alone; in every
/// format. An unknown view is refused.
#[test]
fn what_a_window_allocated_is_one_parameter_away() {
    let program = windows();
    let id = program.start("").id;
    program.tell("churn", "windows: done churn");
    program.tell("grow", "windows: done grow");
    assert_eq!(program.get("/memory-profiler/stop").status, 200);
    let total = |view: &str| -> f64 {
        let text = program.get(&format!("/memory-profiler/download/text?id={id}{view}")).text();
        text.strip_prefix("Total: ")
            .and_then(|rest| rest.split(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("{text}"))
    };
    assert!((total("&view=allocated") - 80.0).abs() <= 80.0 * 0.06, "{}", total("&view=allocated"));
    assert!((total("") - 16.0).abs() <= 16.0 * 0.06, "{}", total(""));
    let folded = program.get(&format!("/memory-profiler/download/collapsed?id={id}&view=allocated")).text();
    let under = |function: &str| -> f64 {
        folded
            .lines()
            .filter(|line| line.contains(function))
            .map(|line| line.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
            .sum()
    };
    assert_near(under("churned_in_the_window"), 64.0, "churned, all freed");
    assert_near(under("grown_in_the_window"), 16.0, "grown, kept");
    let pprof = program.get(&format!("/memory-profiler/download/pprof?id={id}&view=allocated"));
    assert_eq!(pprof.status, 200, "{}", pprof.text());
    // Typed as what it holds: allocations, which Go's pprof reads as alloc_space (it refuses the index
    // where a profile has none), and the readable formats say so.
    if let Some(top) = tools::pprof_top(&pprof.body, "alloc_space") {
        assert!(top.contains("churned_in_the_window"), "{top}");
    }
    let text = program.get(&format!("/memory-profiler/download/text?id={id}&view=allocated")).text();
    assert!(text.contains("# allocated: what was allocated, freed or not"), "{text}");
    let bogus = program.get(&format!("/memory-profiler/download/text?id={id}&view=peaks"));
    let said = "Invalid parameter 'view': 'peaks' is not live, allocated or peak.\n";
    assert_eq!((bogus.status, bogus.text()), (400, said.to_owned()));
}

/// What a window held at its highest is one parameter away: `view=peak` shows the 48 MiB it held for a while
/// and freed, where its profile shows the 8 MiB it kept after, and `view=allocated` both; so does a run on
/// demand (the record of samples starts with the first run).
#[test]
fn what_a_run_held_at_its_highest_is_one_parameter_away_in_either_mode() {
    for mode in ["continuous", "on-demand"] {
        let program = Program::windows().env("MALLOC_CONF", "lg_prof_sample:14").env("MEMPROF_SAMPLING", mode).spawn();
        program.wait_for_line(|line| line == "windows: ready");
        let id = program.start("").id;
        program.tell("peak", "windows: done peak");
        assert_eq!(program.get("/memory-profiler/stop").status, 200);
        let folded = |view: &str| program.get(&format!("/memory-profiler/download/collapsed?id={id}{view}")).text();
        let under = |folded: &str, function: &str| -> f64 {
            let lines = folded.lines().filter(|line| line.contains(function));
            lines.map(|line| line.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap()).sum()
        };
        let peak = folded("&view=peak");
        // The known high-water mark: 48 MiB held, then the 8 MiB kept after (neither above nor below it).
        assert_near(under(&peak, "held_at_the_peak"), 48.0, &format!("{mode}: held at the peak"));
        let live = folded("");
        assert_eq!(under(&live, "held_at_the_peak"), 0.0, "{mode}: {live}");
        assert_near(under(&live, "kept_after_the_peak"), 8.0, &format!("{mode}: kept after the peak"));
        let allocated = folded("&view=allocated");
        assert_near(under(&allocated, "held_at_the_peak"), 48.0, &format!("{mode}: allocated at the peak"));
        assert_near(under(&allocated, "kept_after_the_peak"), 8.0, &format!("{mode}: allocated after it"));
    }
}

/// A window's net growth is one parameter away: `net=true` shows what every stack held at the window's end
/// minus at its start, so memory freed during it counts against it (the window's own profile shows only
/// what it allocated and kept). A profile without one, or `net` with `base`, is refused with the reason.
#[test]
fn a_windows_net_growth_is_one_parameter_away() {
    let program = windows();
    let started = program.get("/memory-profiler/start");
    assert_eq!(started.status, 200, "{}", started.text());
    program.tell("free-before", "windows: done free-before");
    program.tell("grow", "windows: done grow");
    let stopped = program.stop();
    let id = stopped.id.unwrap_or_else(|| panic!("{stopped:?}"));
    let net = program.get(&format!("/memory-profiler/download/text?id={id}&net=true"));
    assert_eq!(net.status, 200, "{}", net.text());
    let text = net.text();
    let total: f64 = text.strip_prefix("Total: ").and_then(|rest| rest.split(' ').next()?.parse().ok()).unwrap();
    assert!((total + 16.0).abs() < 48.0 * 0.06, "+16 MiB grown, -32 MiB freed:\n{text}");
    let cumulative = |function: &str| -> f64 {
        let line = text.lines().find(|line| line.ends_with(function)).unwrap_or_else(|| panic!("{function}:\n{text}"));
        line.split_whitespace().nth(3).unwrap().parse().unwrap()
    };
    assert!((cumulative("windows::grown_in_the_window") - 16.0).abs() < 16.0 * 0.06, "{text}");
    assert!((cumulative("windows::kept_before_the_window") + 32.0).abs() < 32.0 * 0.06, "{text}");
    let both = program.get(&format!("/memory-profiler/download/text?id={id}&net=true&base={id}"));
    let refused = (400, "Pass one of 'net', 'view' and 'base', not two.\n".to_owned());
    assert_eq!((both.status, both.text()), refused);
    let state = program.state();
    let kept = state.runs.iter().find(|run| run.id == id);
    let path = std::path::PathBuf::from(&kept.unwrap_or_else(|| panic!("{state:?}")).path);
    std::fs::remove_file(path.with_extension("net-grown")).unwrap();
    let gone = program.get(&format!("/memory-profiler/download/flamegraph?id={id}&net=true"));
    assert_eq!(gone.status, 404, "{}", gone.text());
    assert!(
        gone.text()
            .starts_with(&format!("Profile {id} has no net growth: runs and windows keep one beside their profile"))
    );
}

/// A record full of stacks stays useful: 20,000 distinct call paths, every allocation sampled, outnumber the
/// record's 16,384 stacks (those past it are dropped, and every answer built from the record says so); the
/// stacks that hold nothing and are idle are given back, so a leak from a stack new after that is seen whole
/// in a window. (Every allocation sampled is far past the budget of sampling work: it is off here, so that
/// every path is sampled.)
#[test]
fn a_full_record_gives_back_idle_stacks_and_says_what_it_missed() {
    let program =
        Program::windows().env("MALLOC_CONF", "lg_prof_sample:0").env("MEMPROF_SAMPLING_BUDGET", "off").spawn();
    program.wait_for_line(|line| line == "windows: ready");
    program.tell("paths 20000", "windows: done paths 20000");
    let record = |program: &Program| program.state().sampling.record.expect("the record");
    let full = record(&program);
    assert!(full.dropped_stacks > 0, "{full:?}");
    let warnings = program.state().warnings.join("\n");
    assert!(
        warnings.contains("record of samples was full") && warnings.contains("MEMPROF_RECORD_OBJECTS"),
        "{warnings}"
    );
    let growing: memprof_wire::Growing = program.get_as("/memory-profiler/growing");
    assert!(growing.missed.as_deref().is_some_and(|missed| missed.contains("was full")), "{growing:?}");
    memprof_tests::waiting::wait_until("idle stacks given back", std::time::Duration::from_secs(60), || {
        let record = record(&program);
        if record.stacks_given_back > 0 { Ok(()) } else { Err(format!("{record:?}")) }
    });

    let id = program.start("").id;
    program.tell("grow", "windows: done grow");
    program.get_json("/memory-profiler/stop");
    let window = program.get(&format!("/memory-profiler/download/raw?id={id}")).text();
    assert_near(bytes_under(&program, &window, "grown_in_the_window"), 16.0, "a new stack, after the record was full");
    let text = program.get(&format!("/memory-profiler/download/text?id={id}")).text();
    assert!(text.contains("memprof's record of samples was full"), "{text}");
    let after = record(&program);
    assert_eq!(after.dropped_stacks, full.dropped_stacks, "nothing dropped after the give-back: {after:?}");
}

/// Sampled continuously with an automatic dump every MiB allocated, a run is stopped while dumps go on: a
/// download with no id is that run's (every view of it too, as the README's sequence has it), and the
/// dumps taken since are reached by their ids. On the main of the day this was filed, it was the newest
/// automatic dump, which has no record of allocations (404).
#[test]
fn a_download_with_no_id_is_the_run_just_stopped_while_dumps_go_on() {
    let program =
        Program::explained(&["leak"]).env("MEMPROF_SAMPLING", "continuous").env("MEMPROF_DUMP_EVERY", "1MiB").spawn();
    program.wait_for_line(|line| line == "explained: ready");
    let dump_after = |id: u64| {
        memprof_tests::waiting::wait_until(&format!("an automatic dump after {id}"), PATIENCE, || {
            let state: memprof_wire::State =
                serde_json::from_value(program.get_json("/memory-profiler/state")).unwrap();
            let newest = state.memory_profiler.automatic_dumps.dumps.first().map_or(0, |dump| dump.id);
            if newest > id { Ok(newest) } else { Err(format!("the newest dump is {newest}")) }
        })
    };
    let started: memprof_wire::Started =
        serde_json::from_value(program.get_json("/memory-profiler/start?duration=5mins")).unwrap();
    dump_after(started.id);
    assert_eq!(program.get("/memory-profiler/stop").status, 200);
    let dump = dump_after(started.id);
    let run = format!("memprof.{}", started.id);
    for (download, named) in [
        ("text", format!("{run}.txt")),
        ("text?view=allocated", format!("{run}-allocated.txt")),
        ("collapsed?view=peak", format!("{run}-peak.folded")),
        ("pprof", format!("{run}.pb.gz")),
    ] {
        let answer = program.get(&format!("/memory-profiler/download/{download}"));
        assert_eq!(answer.status, 200, "{download}: {}", answer.text());
        let disposition = answer.header("content-disposition").unwrap_or_default();
        assert!(disposition.contains(&named), "{download}: {disposition}, not {named}");
    }
    let answer = program.get(&format!("/memory-profiler/download/text?id={dump}"));
    assert_eq!(answer.status, 200, "{}", answer.text());
}
