//! The overhead benchmark's instruction counts under valgrind's callgrind (`MEMPROF_BENCH_CALLGRIND=1`).

use super::{Configuration, Launch, child_command, parse_figures};

/// Instructions per operation under callgrind, one thread, for each configuration run in this benchmark's
/// child (baselines are left out): deterministic where wall-clock time on this machine is not. Each is
/// measured twice, for 4 and 8 seconds of the child's time, and the difference of the two counts over the
/// difference of their operations is taken, so that start-up cancels out, with what memprof does once in
/// its first seconds under valgrind (the counters' thread reading the executable's symbols; continuous
/// sampling unthinned until its budget is first judged).
pub(super) fn instruction_counts(configurations: &[Configuration]) {
    let measured: Vec<&Configuration> =
        configurations.iter().filter(|configuration| matches!(configuration.launch, Launch::Memprof { .. })).collect();
    let workloads = std::env::var("MEMPROF_BENCH_WORKLOADS").unwrap_or_else(|_| "mixed-sizes,json-handler".into());
    println!("\nInstructions per operation under callgrind, 1 thread (ratio to the column named in the legend)");
    print!("{:<22}", "");
    for configuration in &measured {
        print!(" {:>18}", configuration.name);
    }
    println!();
    for workload in workloads.split(',') {
        let counts: Vec<f64> = measured
            .iter()
            .map(|configuration| {
                let run = |seconds: &str| counted(configuration, workload, seconds);
                let ((short, short_operations), (long, long_operations)) = (run("4"), run("8"));
                (long - short) as f64 / long_operations.saturating_sub(short_operations).max(1) as f64
            })
            .collect();
        print!("{workload:<22}");
        for (index, configuration) in measured.iter().enumerate() {
            let against = configuration
                .against
                .and_then(|name| measured.iter().position(|other| other.name == name))
                .map_or(String::new(), |against| format!(" ({:.3})", counts[index] / counts[against]));
            print!(" {:>18}", format!("{:.0}{against}", counts[index]));
        }
        println!();
    }
}

/// The instructions callgrind counted in a child running `workload` on one thread for `seconds` of its
/// own time, and the operations it ran.
fn counted(configuration: &Configuration, workload: &str, seconds: &str) -> (u64, u64) {
    let mut command = child_command(configuration, workload, 1);
    command.env("MEMPROF_BENCH_SECONDS", seconds);
    let (total, output) = super::callgrind_common::instructions(&command, &[], "");
    let text = String::from_utf8_lossy(&output.stdout);
    let figures = text.lines().last().and_then(parse_figures).unwrap_or_else(|| {
        panic!("{} under callgrind failed: {text} {}", configuration.name, String::from_utf8_lossy(&output.stderr))
    });
    (total, figures.operations)
}
