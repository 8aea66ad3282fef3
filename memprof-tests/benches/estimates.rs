//! Issue 61's estimates, measured as a new user would meet them: release builds, the switch on and
//! nothing else set (continuous sampling within the default budget, 0.5 % of a core), each estimate over
//! the truth the program knows, over more runs than the acceptance tests take (tests/budget.rs checks a
//! bound the samples allow; this prints the spread):
//!
//! - start-up: the example service started `STARTS` times, its live heap read 4 s after each start
//!   (`/debug/pprof/heap`'s inuse_space, Go's pprof adding it up) against the 20 MiB it keeps alive and
//!   against jemalloc's `stats.allocated`, with the error memprof says and the samples it comes from, and
//!   what `state` says of the budget then (the thinning, a sample's work);
//! - storms: the `windows` program's storms, five of each (8 threads allocating and freeing 64 B blocks for
//!   3 s; 2 threads with 256 KiB blocks; 1,000 threads born for it with 1 KiB blocks for 2 s), what the
//!   storm's function allocated read from two scrapes of `/debug/pprof/allocs` around it, and the 64 MiB
//!   the main thread keeps right after each.
//!
//! ```text
//! cargo bench -p memprof-tests --bench estimates
//! cargo bench -p memprof-tests --bench estimates -- "storm 2 1024 1000"
//! ```
//!
//! Words after `--` choose what runs: the parts (`start-up`, each storm's command) holding any of them.
//!
//! Figures only, nothing is asserted; Go is needed (as the tests need it).

#[path = "common/spread.rs"]
mod spread;

use memprof_tests::estimates::{self, LiveHeap, SERVICE_KEPT};
use memprof_tests::process::Program;
use memprof_wire::State;
use spread::Spread;

/// How many times the example service is started.
const STARTS: usize = 8;
/// How many storms of each kind.
const STORMS: usize = 5;
/// A mebibyte, as a float.
const MIB: f64 = (1 << 20) as f64;

fn main() {
    let chosen: Vec<String> = std::env::args().skip(1).filter(|word| !word.starts_with('-')).collect();
    let runs = |part: &str| chosen.is_empty() || chosen.iter().any(|word| part.contains(word.as_str()));
    if runs("start-up") {
        start_up();
    }
    storms(&runs);
}

/// The example service's live heap 4 s after each start.
fn start_up() {
    let (mut of_kept, mut of_allocated, mut samples, mut work) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for start in 1..=STARTS {
        let (service, heap) = LiveHeap::of_service(Program::service());
        let heap = heap.expect("Go's pprof");
        let state: State = serde_json::from_value(service.get_json("/memory-profiler/state")).expect("state");
        let budget = state.memory_profiler.sampling.budget.expect("a budget, sampling continuously");
        let sample_work = budget.sample_work_ns.unwrap_or_default() as f64 / 1000.0;
        println!(
            "start {start}: in use {:.1} MiB +- {:.1} MiB from {} samples ({}): {:.2} of the 20 MiB kept, {:.2} of jemalloc's {:.1} MiB allocated; thinned by {}, a sample's work {sample_work:.1} us",
            heap.estimate / MIB,
            heap.error / MIB,
            heap.samples,
            heap.calibrated.map_or("sampled alone".to_owned(), |calibrated| format!(
                "calibrated: {:.1} MiB in classes no live sample reached, {:.1} MiB cached",
                calibrated.unreached / MIB,
                calibrated.cached / MIB
            )),
            heap.estimate / SERVICE_KEPT,
            heap.estimate / heap.allocated,
            heap.allocated / MIB,
            budget.thinned_by,
        );
        of_kept.push(heap.estimate / SERVICE_KEPT);
        of_allocated.push(heap.estimate / heap.allocated);
        samples.push(heap.samples);
        work.push(sample_work);
    }
    println!(
        "start-up, {STARTS} starts: {} of what is kept, {} of jemalloc's allocated, samples {}, a sample's work {} us",
        Spread::of(of_kept).text(),
        Spread::of(of_allocated).text(),
        Spread::of(samples).text(),
        Spread::of(work).text(),
    );
}

/// Five storms of each kind `runs` chooses in one process, each followed by 64 MiB kept.
fn storms(runs: &dyn Fn(&str) -> bool) {
    let chosen: Vec<&str> =
        ["storm 3 64 8", "storm 3 262144 2", "storm 2 1024 1000"].into_iter().filter(|storm| runs(storm)).collect();
    if chosen.is_empty() {
        return;
    }
    let program = Program::windows().spawn();
    program.wait_for_line(|line| line == "windows: ready");
    for storm in chosen {
        let (mut during, mut after) = (Vec::new(), Vec::new());
        for _ in 0..STORMS {
            let (storm_read, after_read) = estimates::storm(&program, storm).expect("Go's pprof library");
            println!("{storm}: the storm {storm_read:.3}, the 64 MiB after it {after_read:.3}");
            during.push(storm_read);
            after.push(after_read);
        }
        println!(
            "{storm}, {STORMS} storms: the storm {}, the 64 MiB after it {}",
            Spread::of(during).text(),
            Spread::of(after).text()
        );
    }
}
