//! Sampled estimates read from a real program's profiles against the truth it knows: the acceptance tests
//! check a bound the samples allow, the benchmarks print the spread over many runs.

use std::time::{Duration, Instant};

use crate::process::{Launch, Program};
use crate::tools;

/// A mebibyte, as a float.
const MIB: f64 = (1 << 20) as f64;

/// What the example service keeps alive: 256 sessions of 64 KiB and 128 index blocks of 32 KiB, all of
/// them replaced continuously (examples/service.rs).
pub const SERVICE_KEPT: f64 = 20.0 * MIB;

/// When issue 61 read the example service's heap, from its start.
const SERVICE_MOMENT: Duration = Duration::from_secs(4);

/// What a storm's function allocated, estimated from two scrapes of `/debug/pprof/allocs` around it (Go's
/// pprof library taking the delta), against what it says it allocated; and the same for the 64 MiB the main
/// thread keeps right after it. Each a ratio, estimate over truth; `None` (the reason printed) where Go is
/// not installed.
///
/// `program` is the `windows` test program (src/bin/windows.rs) and `storm` its command, `storm T S N`.
///
/// ```no_run
/// let program = memprof_tests::process::Program::windows().spawn();
/// program.wait_for_line(|line| line == "windows: ready");
/// if let Some((during, after)) = memprof_tests::estimates::storm(&program, "storm 3 64 8") {
///     println!("the storm read {during:.2} of its truth, the 64 MiB after it {after:.2}");
/// }
/// ```
pub fn storm(program: &Program, storm: &str) -> Option<(f64, f64)> {
    let first = program.get("/debug/pprof/allocs");
    program.tell(storm, &format!("windows: done {storm}"));
    let second = program.get("/debug/pprof/allocs");
    // This storm's line: printed before its `done`, so the last one printed.
    let output = program.output();
    let said = output.iter().rev().find(|line| line.starts_with("windows: storm ") && line.ends_with(" bytes"));
    let allocated: f64 = said.unwrap()["windows: storm ".len()..].trim_end_matches(" bytes").parse().unwrap();
    let estimated = |function: &str| {
        tools::pprofcheck(&first.body, &second.body, function)
            .map(|delta| delta.function_delta.get("alloc_space").copied().unwrap_or(0) as f64)
    };
    Some((estimated("stormed")? / allocated, estimated("kept_after_the_storm")? / (64.0 * MIB)))
}

/// The median of `ratios` (at least one).
///
/// ```
/// assert_eq!(memprof_tests::estimates::median(vec![1.2, 0.9, 1.0]), 1.0);
/// ```
pub fn median(mut ratios: Vec<f64>) -> f64 {
    ratios.sort_by(f64::total_cmp);
    ratios[ratios.len() / 2]
}

/// A program's live heap at one moment: what its profile estimates, the error memprof says with it, and
/// what jemalloc counts.
#[derive(Debug, Clone, Copy)]
pub struct LiveHeap {
    /// The bytes in use `/debug/pprof/heap` estimates, as Go's pprof adds them up (`inuse_space`).
    pub estimate: f64,
    /// The bytes in use its comment says (to a tenth of a MiB): of the same reading as the profile.
    pub said: f64,
    /// The error memprof says with it (two standard errors, from the profile's comment), in bytes.
    pub error: f64,
    /// The samples the estimate comes from.
    pub samples: u64,
    /// Where the estimate is calibrated by size class (jemalloc's exact count of each class sampled, the
    /// record started with the program), the bytes of the classes no live sample reached, in no stack, and
    /// the freed bytes the threads' caches keep, counted among the classes' (from the comment); `None`
    /// where the estimate is sampled alone.
    pub calibrated: Option<Calibrated>,
    /// jemalloc's `stats.allocated` read right after it (`/metrics`): every live byte, memprof's own
    /// included.
    pub allocated: f64,
}

/// What a calibrated estimate of the live heap leaves out and counts beyond the program's objects.
#[derive(Debug, Clone, Copy)]
pub struct Calibrated {
    /// Bytes of the size classes no live sample reached: in no stack.
    pub unreached: f64,
    /// Freed bytes the threads' caches keep, counted in their classes.
    pub cached: f64,
}

impl LiveHeap {
    /// The live heap of `program` now; `None` (the reason printed) where Go is not installed.
    ///
    /// ```no_run
    /// let program = memprof_tests::process::Program::service().spawn();
    /// if let Some(heap) = memprof_tests::estimates::LiveHeap::of(&program) {
    ///     println!("{:.1} MiB +- {:.1} MiB", heap.estimate / (1 << 20) as f64, heap.error / (1 << 20) as f64);
    /// }
    /// ```
    pub fn of(program: &Program) -> Option<LiveHeap> {
        Self::read(program)
    }

    /// The example service `launch` spawned, and its live heap read 4 s after (when issue 61 read it);
    /// `None` for the heap (the reason printed) where Go is not installed.
    ///
    /// ```no_run
    /// use memprof_tests::estimates::{LiveHeap, SERVICE_KEPT};
    /// let (_service, heap) = LiveHeap::of_service(memprof_tests::process::Program::service());
    /// if let Some(heap) = heap {
    ///     println!("{:.2} of what it keeps", heap.estimate / SERVICE_KEPT);
    /// }
    /// ```
    pub fn of_service(launch: Launch) -> (Program, Option<LiveHeap>) {
        let spawned = Instant::now();
        let program = launch.spawn();
        crate::waiting::wait_until("the moment issue 61 read the heap", crate::http::PATIENCE, || {
            let since = spawned.elapsed();
            if since >= SERVICE_MOMENT { Ok(()) } else { Err(format!("{since:?} since spawned")) }
        });
        let heap = Self::read(&program);
        (program, heap)
    }

    fn read(program: &Program) -> Option<LiveHeap> {
        let profile = program.get("/debug/pprof/heap").body;
        let metrics = program.get("/metrics").text();
        let top = tools::pprof(&profile, &["-sample_index=inuse_space", "-unit=B", "-top", "-nodecount=1"])?;
        let comments = tools::pprof(&profile, &["-comments"])?;
        // "Showing nodes accounting for 25513650B, 100% of 25513650B total"
        let total = top.lines().find_map(|line| line.split("% of ").nth(1)?.strip_suffix("B total"));
        let estimate = total.and_then(|bytes| bytes.parse().ok()).unwrap_or_else(|| panic!("no total in {top}"));
        // "... in use 20.6 MiB +- 6.2 MiB from 39 samples, allocated since ..."
        let said = comments.split(" in use ").nth(1).and_then(|rest| rest.split(" samples").next());
        let said = said.unwrap_or_else(|| panic!("no estimate said in {comments}"));
        let words: Vec<&str> = said.split(' ').collect();
        let [in_use, "MiB", "+-", error, "MiB", "from", samples] = words[..] else { panic!("{said}") };
        // "... from 12 samples (each size class sampled counted whole ...; 4.0 MiB more in classes no live
        // sample reached, in no stack; 0.6 MiB of what is counted is freed objects the threads' caches keep)"
        let mib_before = |text: &str, marker: &str| -> Option<f64> {
            let before = text.split(marker).next()?;
            Some(before.rsplit(' ').nth(1)?.parse::<f64>().ok()? * MIB)
        };
        let calibrated = comments.split_once(" counted whole by jemalloc").and_then(|(_, rest)| {
            Some(Calibrated {
                unreached: mib_before(rest, " more in classes no live sample reached")?,
                cached: mib_before(rest, " of what is counted is freed objects")?,
            })
        });
        let allocated = metrics.lines().find_map(|line| line.strip_prefix("memprof_jemalloc_allocated_bytes "));
        Some(LiveHeap {
            estimate,
            said: in_use.parse::<f64>().unwrap() * MIB,
            error: error.parse::<f64>().unwrap() * MIB,
            samples: samples.parse().unwrap(),
            calibrated,
            allocated: allocated.and_then(|value| value.parse().ok()).unwrap_or_else(|| panic!("{metrics}")),
        })
    }
}
