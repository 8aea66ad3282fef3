//! What heap profiling costs the host program, side by side in one run: allocation throughput, operation
//! latency (p50, p99) and peak RSS, for two workloads on one thread and on all cores, under
//! - baselines without memprof's allocator, built by this benchmark from `benches/baseline` into
//!   `target/bench-baseline`: the system allocator, plain tikv-jemallocator (no profiling compiled in), and
//!   memprof compiled out (`default-features = false`);
//! - memprof compiled in: jemalloc with `prof:false`, profiling armed but inactive (the default), and
//!   sampling on at `lg_prof_sample` 21, 19 (the default) and 17, the stack walked by frame pointers (the
//!   workspace keeps them), and at 19 with libgcc's walk (`MEMPROF_UNWINDER=libgcc`) for comparison;
//! - sampled continuously (`MEMPROF_SAMPLING=continuous`: the record of samples kept through jemalloc's
//!   sample hooks, no run) at 21, 20 and 19, against inactive, beside a run at 20;
//! - labels on every operation (by value, or made once), while sampling and while no run is active.
//!
//! ```text
//! cargo bench -p memprof-tests --bench overhead
//! ```
//!
//! - where memprof's jemalloc spends what it costs over the plain one: jemalloc built with statistics alone,
//!   with profiling alone, and with both and unprefixed as memprof builds it, without memprof.
//!
//! Each configuration runs in a child process (the allocator and the sampling rate are fixed at start-up).
//! Five rounds (`MEMPROF_BENCH_ROUNDS`) each run every configuration once, in turn, so that a change in the
//! machine's load hits all of them alike; medians are shown, and each ratio is the median of the rounds'
//! ratios, with the lowest and highest. Figures only: the machine is noisy, nothing is asserted.
//!
//! `MEMPROF_BENCH_CALLGRIND=1` prints instead the instructions per operation under valgrind's callgrind,
//! on one thread: the deterministic cost figure that wall-clock time on a noisy machine cannot give.
//!
//! To measure fewer, longer: `MEMPROF_BENCH_ONLY=jemalloc,prof:false` keeps those columns (and what their
//! ratios are taken against), `MEMPROF_BENCH_WORKLOADS=json-handler` those workloads, and
//! `MEMPROF_BENCH_SECONDS=6` runs each measurement 6 s instead of 1.5.

#[path = "common/baseline.rs"]
mod baseline;
#[path = "common/workloads.rs"]
mod workloads;

#[path = "overhead/callgrind.rs"]
mod callgrind;
// Per-thread counts are the tokio server benchmark's.
#[allow(dead_code)]
#[path = "common/callgrind.rs"]
mod callgrind_common;
#[path = "overhead/labelling.rs"]
mod labelling;

use labelling::{ByValue, Labelling, MadeOnce};

use std::path::PathBuf;
use std::process::Command;

use workloads::Figures;

/// Rounds, unless `MEMPROF_BENCH_ROUNDS` says otherwise.
const DEFAULT_ROUNDS: usize = 5;

/// A configuration measured: its column name and how its child process is started.
struct Configuration {
    name: &'static str,
    launch: Launch,
    /// The column whose figures the ratio is taken against.
    against: Option<&'static str>,
}

enum Launch {
    /// A baseline program, built with these features.
    Baseline(PathBuf),
    /// This benchmark in child mode, with `MALLOC_CONF`, sampling on or off, the stack walk
    /// (`MEMPROF_UNWINDER`, empty for the default), and whether each operation runs inside
    /// `memprof::labels::with` or made-once `memprof::labels::Labels` (one of four tenants in turn, or
    /// always the same one).
    /// `continuous`: sampled continuously (`MEMPROF_SAMPLING=continuous`), the record kept, no run.
    Memprof { malloc_conf: &'static str, sampling: bool, unwinder: &'static str, labelled: Labelling, continuous: bool },
}

#[memprof::main(env = "MEMPROF_BENCH_NO_ENDPOINTS")]
fn main() {
    if let Ok(configuration) = std::env::var("MEMPROF_BENCH_CHILD") {
        return child(&configuration);
    }
    let memprof = |malloc_conf, sampling| Launch::Memprof {
        malloc_conf,
        sampling,
        unwinder: "",
        labelled: Labelling::None,
        continuous: false,
    };
    let continuous = |malloc_conf| Launch::Memprof {
        malloc_conf,
        sampling: false,
        unwinder: "",
        labelled: Labelling::None,
        continuous: true,
    };
    let configurations = [
        Configuration { name: "system", launch: Launch::Baseline(baseline::build("")), against: None },
        Configuration {
            name: "jemalloc",
            launch: Launch::Baseline(baseline::build("jemalloc")),
            against: Some("system"),
        },
        Configuration {
            name: "compiled out",
            launch: Launch::Baseline(baseline::build("memprof-compiled-out")),
            against: Some("system"),
        },
        Configuration {
            name: "jemalloc stats",
            launch: Launch::Baseline(baseline::build("jemalloc-stats")),
            against: Some("jemalloc"),
        },
        Configuration {
            name: "jemalloc prof",
            launch: Launch::Baseline(baseline::build("jemalloc-profiling")),
            against: Some("jemalloc"),
        },
        Configuration {
            name: "jemalloc as memprof",
            launch: Launch::Baseline(baseline::build("jemalloc-as-memprof")),
            against: Some("jemalloc"),
        },
        Configuration { name: "prof:false", launch: memprof("prof:false", false), against: Some("jemalloc") },
        Configuration { name: "inactive", launch: memprof("", false), against: Some("prof:false") },
        Configuration { name: "lg 21", launch: memprof("lg_prof_sample:21", true), against: Some("inactive") },
        Configuration { name: "lg 19", launch: memprof("lg_prof_sample:19", true), against: Some("inactive") },
        Configuration { name: "lg 17", launch: memprof("lg_prof_sample:17", true), against: Some("inactive") },
        Configuration { name: "lg 20", launch: memprof("lg_prof_sample:20", true), against: Some("inactive") },
        Configuration { name: "cont 21", launch: continuous("lg_prof_sample:21"), against: Some("inactive") },
        Configuration { name: "cont 20", launch: continuous("lg_prof_sample:20"), against: Some("inactive") },
        Configuration { name: "cont 19", launch: continuous("lg_prof_sample:19"), against: Some("inactive") },
        Configuration {
            name: "lg 19 libgcc",
            launch: Launch::Memprof {
                malloc_conf: "lg_prof_sample:19",
                sampling: true,
                unwinder: "libgcc",
                labelled: Labelling::None,
                continuous: false,
            },
            against: Some("inactive"),
        },
        Configuration {
            name: "lg 19 labels",
            launch: Launch::Memprof {
                malloc_conf: "lg_prof_sample:19",
                sampling: true,
                unwinder: "",
                labelled: Labelling::ByValue,
                continuous: false,
            },
            against: Some("lg 19"),
        },
        Configuration {
            name: "lg 19 Labels",
            launch: Launch::Memprof {
                malloc_conf: "lg_prof_sample:19",
                sampling: true,
                unwinder: "",
                labelled: Labelling::MadeOnce,
                continuous: false,
            },
            against: Some("lg 19"),
        },
        Configuration {
            name: "lg 19 one Labels",
            launch: Launch::Memprof {
                malloc_conf: "lg_prof_sample:19",
                sampling: true,
                unwinder: "",
                labelled: Labelling::MadeOnceOneTenant,
                continuous: false,
            },
            against: Some("lg 19"),
        },
        Configuration {
            name: "inactive labels",
            launch: Launch::Memprof {
                malloc_conf: "",
                sampling: false,
                unwinder: "",
                labelled: Labelling::ByValue,
                continuous: false,
            },
            against: Some("inactive"),
        },
        Configuration {
            name: "inactive Labels",
            launch: Launch::Memprof {
                malloc_conf: "",
                sampling: false,
                unwinder: "",
                labelled: Labelling::MadeOnce,
                continuous: false,
            },
            against: Some("inactive"),
        },
    ];
    let configurations = selected(configurations);
    if std::env::var_os("MEMPROF_BENCH_CALLGRIND").is_some() {
        return callgrind::instruction_counts(&configurations);
    }
    let threads = std::thread::available_parallelism().map_or(2, |count| count.get());
    let workloads = std::env::var("MEMPROF_BENCH_WORKLOADS").unwrap_or_else(|_| "mixed-sizes,json-handler".into());
    let mut rows = Vec::new();
    for workload in workloads.split(',') {
        for thread_count in [1, threads] {
            rows.push((
                format!("{workload}, {thread_count} thr"),
                measure_row(&configurations, workload, thread_count),
            ));
        }
    }
    let table = |title: &str, cell: &dyn Fn(&Row, usize) -> String| {
        println!("\n{title}");
        print!("{:<22}", "");
        for configuration in &configurations {
            print!(" {:>18}", configuration.name);
        }
        println!();
        for (label, row) in &rows {
            print!("{label:<22}");
            for index in 0..configurations.len() {
                print!(" {:>18}", cell(row, index));
            }
            println!();
        }
    };
    table("Throughput, million operations/s", &|row, index| format!("{:.2}", row.medians[index].rate / 1e6));
    table(
        "Throughput ratio to the column named in the legend: median of the rounds (lowest-highest)",
        &|row, index| match row.ratios[index] {
            Some((median, low, high)) => format!("{median:.3} ({low:.2}-{high:.2})"),
            None => "-".to_owned(),
        },
    );
    table("Latency of one operation, p50 / p99 in ns", &|row, index| {
        format!("{} / {}", row.medians[index].p50_ns, row.medians[index].p99_ns)
    });
    table("Peak RSS, MiB (ratio to inactive)", &|row, index| {
        let peak = row.medians[index].peak_rss_kib as f64;
        match column(&configurations, "inactive") {
            Some(inactive) => {
                format!("{:.1} ({:.2})", peak / 1024.0, peak / row.medians[inactive].peak_rss_kib as f64)
            }
            None => format!("{:.1}", peak / 1024.0),
        }
    });
    println!("\nRatios: jemalloc and compiled out against system; jemalloc stats, prof and as memprof (built with");
    println!(
        "statistics, profiling, or both and unprefixed, without memprof) and prof:false against jemalloc; inactive against"
    );
    println!(
        "prof:false; lg 21/20/19/17, cont 21/20/19 (continuous sampling) and lg 19 libgcc against inactive; lg 19 labels (every operation inside"
    );
    println!("memprof::labels::with, one of four tenants in turn) and lg 19 Labels (the same four made once, as");
    println!("memprof::labels::Labels) and lg 19 one Labels (one tenant only: as many stacks as unlabelled) against");
    println!("lg 19; inactive labels and inactive Labels (the same, no run: what labels cost a service between runs)");
    println!("against inactive. Each round measures every");
    println!("configuration once, in turn; a ratio is taken within a round, so a slower machine moment weighs on");
    println!("both sides of it. A spread wider than a difference means the difference is not measured.");
}

/// The column of the configuration named `name`, if it is measured.
fn column(configurations: &[Configuration], name: &str) -> Option<usize> {
    configurations.iter().position(|configuration| configuration.name == name)
}

/// The configurations `MEMPROF_BENCH_ONLY` names (all without it), with those their ratios are taken
/// against.
fn selected(configurations: impl IntoIterator<Item = Configuration>) -> Vec<Configuration> {
    let configurations: Vec<Configuration> = configurations.into_iter().collect();
    let Ok(only) = std::env::var("MEMPROF_BENCH_ONLY") else { return configurations };
    let mut wanted: Vec<&str> = only.split(',').collect();
    for configuration in &configurations {
        if wanted.contains(&configuration.name) {
            wanted.extend(configuration.against);
        }
    }
    configurations.into_iter().filter(|configuration| wanted.contains(&configuration.name)).collect()
}

/// How many rounds: `MEMPROF_BENCH_ROUNDS`, else [`DEFAULT_ROUNDS`].
fn rounds() -> usize {
    std::env::var("MEMPROF_BENCH_ROUNDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_ROUNDS)
}

/// One workload on one thread count under every configuration.
struct Row {
    /// The median figures of each configuration (by throughput).
    medians: Vec<Figures>,
    /// For each configuration with a column to compare with, the median, lowest and highest of the rounds'
    /// throughput ratios.
    ratios: Vec<Option<(f64, f64, f64)>>,
}

/// [`rounds`] rounds, each measuring every configuration once, in turn.
fn measure_row(configurations: &[Configuration], workload: &str, threads: usize) -> Row {
    let count = rounds();
    let rounds: Vec<Vec<Figures>> = (0..count)
        .map(|_| configurations.iter().map(|configuration| measure(configuration, workload, threads)).collect())
        .collect();
    let medians = (0..configurations.len())
        .map(|index| {
            let mut runs: Vec<&Figures> = rounds.iter().map(|round| &round[index]).collect();
            runs.sort_by(|a, b| a.rate.total_cmp(&b.rate));
            runs[count / 2].clone()
        })
        .collect();
    let ratios = configurations
        .iter()
        .enumerate()
        .map(|(index, configuration)| {
            let against = column(configurations, configuration.against?)?;
            let mut ratios: Vec<f64> = rounds.iter().map(|round| round[index].rate / round[against].rate).collect();
            ratios.sort_by(f64::total_cmp);
            Some((ratios[count / 2], ratios[0], ratios[count - 1]))
        })
        .collect();
    Row { medians, ratios }
}

/// One measurement in a child process.
fn measure(configuration: &Configuration, workload: &str, threads: usize) -> Figures {
    let mut command = child_command(configuration, workload, threads);
    let output = command.output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .last()
        .and_then(parse_figures)
        .unwrap_or_else(|| panic!("{} failed: {text} {}", configuration.name, String::from_utf8_lossy(&output.stderr)))
}

/// The command that runs `workload` on `threads` threads under `configuration`, printing its figures.
fn child_command(configuration: &Configuration, workload: &str, threads: usize) -> Command {
    match &configuration.launch {
        Launch::Baseline(program) => {
            let mut command = Command::new(program);
            command.args([workload, &threads.to_string()]);
            command
        }
        Launch::Memprof { malloc_conf, sampling, unwinder, labelled, continuous } => {
            let mut command = Command::new(std::env::current_exe().unwrap());
            command.env("MEMPROF_SAMPLING", if *continuous { "continuous" } else { "on-demand" });
            // Sampled continuously within the budget BENCHMARKS.md measures it with.
            command.env("MEMPROF_SAMPLING_BUDGET", if *continuous { "0.5%" } else { "off" });
            command.env("MEMPROF_BENCH_CHILD", format!("{workload},{threads},{sampling},{}", labelled.name()));
            command.env("MALLOC_CONF", malloc_conf);
            command.env("MEMPROF_UNWINDER", unwinder);
            command
        }
    }
}

/// Reads what [`Figures::line`] wrote.
fn parse_figures(line: &str) -> Option<Figures> {
    let mut fields = line.split_whitespace();
    Some(Figures {
        rate: fields.next()?.parse().ok()?,
        p50_ns: fields.next()?.parse().ok()?,
        p99_ns: fields.next()?.parse().ok()?,
        peak_rss_kib: fields.next()?.parse().ok()?,
        operations: fields.next().and_then(|field| field.parse().ok()).unwrap_or(0),
    })
}

/// In the child: the workload on `threads` threads, sampling on or off; prints the figures.
fn child(configuration: &str) {
    let mut fields = configuration.split(',');
    let (workload, threads, sampling, labelled) = (
        fields.next().unwrap(),
        fields.next().unwrap().parse::<usize>().unwrap(),
        fields.next() == Some("true"),
        fields.next().unwrap_or_default(),
    );
    let run = sampling.then(|| memprof::Run::start("overhead").expect("profiling is enabled"));
    let figures = match labelled {
        "by-value" => workloads::measure_for(workload, threads, workloads::workload_time(), &ByValue),
        "made-once" => workloads::measure_for(workload, threads, workloads::workload_time(), &MadeOnce::<4>::new()),
        "made-once-one-tenant" => {
            workloads::measure_for(workload, threads, workloads::workload_time(), &MadeOnce::<1>::new())
        }
        _ => workloads::measure(workload, threads),
    };
    drop(run);
    println!("{}", figures.line());
}
