//! Sampled estimates read from a real program's profiles against the truth it knows: the acceptance tests
//! check a bound the samples allow, the benchmarks print the spread over many runs.

use crate::process::Program;
use crate::tools;

/// A mebibyte, as a float.
const MIB: f64 = (1 << 20) as f64;

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
