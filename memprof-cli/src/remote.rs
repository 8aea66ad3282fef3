//! The subcommands that drive a running service's endpoints.

use std::path::PathBuf;
use std::sync::LazyLock;
use std::thread;
use std::time::{Duration, Instant};

use clap::builder::PossibleValue;
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use memprof_analysis::Format;
use memprof_wire::{CurrentRun, DecaySettings, EarlierProcess, Explanation, Purged, RunAnswer, Started, State, paths};

use crate::client::{Answer, Client};
use crate::failure::Failure;
use crate::memory::{describe_decay, describe_explanation, describe_purged};
use crate::output::{self, Content};
use crate::terminal::{for_terminal, one_line};

#[derive(Debug, Subcommand)]
pub(crate) enum Remote {
    /// The profiler's state: switches, current run, kept runs, heap counters.
    State,
    /// jemalloc's statistics (malloc_stats_print): JSON, or its text report with --text.
    Stats {
        /// The human-readable report instead of JSON.
        #[arg(long)]
        text: bool,
    },
    /// Start a timed profiling run.
    Start {
        /// How long: 30s, 5m, 2h, 1d, or Mesos's 30secs, 5mins, 1.5hrs (1 second to 1 day).
        #[arg(long, default_value = "5m")]
        duration: String,
        /// Show the time left, then download the run's profile.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        output: Output,
    },
    /// End the current run; its profile is kept.
    Stop,
    /// Download a kept run's profile (default: the latest).
    Download {
        /// The run.
        #[arg(long)]
        id: Option<u64>,
        /// Show what changed since this earlier run.
        #[arg(long)]
        base: Option<u64>,
        #[command(flatten)]
        output: Output,
    },
    /// Switch sampling on by hand, as a run without a timer.
    Activate,
    /// Switch off what `activate` switched on; its profile is kept.
    Deactivate,
    /// Dump the heap as it is now (jemalloc's raw format), without a run.
    Dump {
        /// Where to write it (default: standard output).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// The profiles kept from earlier processes that ended without cleaning up (killed at an OOM, say);
    /// download them by id.
    Earlier,
    /// Delete the profiles kept from earlier processes.
    ClearEarlier,
    /// The process's resident memory class by class (adding up to what the kernel counts), with a verdict
    /// (leak, fragmentation, retention, outside the heap, healthy) and the fix.
    Explain,
    /// Return the freed pages jemalloc keeps to the system now; prints the RSS before and after.
    Purge,
    /// Set how jemalloc returns freed pages: decay times and background threads (prints the settings).
    #[command(group(clap::ArgGroup::new("setting").required(true).multiple(true)))]
    Decay {
        /// Milliseconds a freed page stays dirty before it is returned (-1: never).
        #[arg(long, allow_hyphen_values = true, group = "setting")]
        dirty_ms: Option<i64>,
        /// Milliseconds a page stays muzzy (lazily freed) before it is returned (-1: never).
        #[arg(long, allow_hyphen_values = true, group = "setting")]
        muzzy_ms: Option<i64>,
        /// Whether background threads return freed pages on a timer.
        #[arg(long, group = "setting")]
        background_thread: Option<bool>,
    },
    /// What grew from run BASE to run ID.
    Diff {
        /// The earlier run.
        base: u64,
        /// The later run.
        id: u64,
        #[command(flatten)]
        output: Output,
    },
}

/// Where and how a profile is written.
#[derive(Debug, Args)]
pub(crate) struct Output {
    /// The format.
    #[arg(long, value_enum, default_value_t = Download::Rendered(Format::Text))]
    format: Download,
    /// By source line instead of by function (text, graph, flamegraph, collapsed).
    #[arg(long)]
    lines: bool,
    /// Every frame, down to the program's start (text, graph, flamegraph, collapsed; pprof always has them).
    #[arg(long)]
    full: bool,
    /// Split by this label key: each stack under a root frame KEY=value (text, graph, flamegraph,
    /// collapsed; pprof carries every label as a tag).
    #[arg(long, value_name = "KEY", value_parser = crate::analyze::label_key)]
    by: Option<String>,
    /// Only the samples with this label: KEY:VALUE (KEY:(none) for the samples without KEY).
    #[arg(long, value_name = "KEY:VALUE", value_parser = memprof_wire::label_filter)]
    label: Option<(String, String)>,
    /// Where to write it (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// What a download is: jemalloc's raw dump, or a rendered [`Format`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Download {
    Raw,
    Rendered(Format),
}

impl Download {
    /// The endpoint's last path segment, and the command-line value.
    fn name(self) -> &'static str {
        match self {
            Download::Raw => "raw",
            Download::Rendered(format) => format.name(),
        }
    }
}

impl ValueEnum for Download {
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: LazyLock<Vec<Download>> =
            LazyLock::new(|| std::iter::once(Download::Raw).chain(Format::ALL.map(Download::Rendered)).collect());
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

impl Remote {
    pub(crate) fn run(self, client: &Client, json: bool) -> Result<(), Failure> {
        match self {
            Remote::State => print_or(json, &client.get(paths::STATE)?, |state: State| describe_state(&state)),
            Remote::Stats { text } => {
                let query = if text { "?format=text" } else { "" };
                let path = format!("{}{query}", paths::STATISTICS);
                output::write_to(None, Content::Text, |out| client.download(&path, out))
            }
            Remote::Start { duration, wait, output } => start(client, json, &duration, wait.then_some(output)),
            Remote::Stop => message_of(client, json, paths::STOP),
            Remote::Download { id, base, output } => download(client, id, base, &output),
            Remote::Activate => message_of(client, json, &format!("{}?active=true", paths::HEAP_PROFILE)),
            Remote::Deactivate => message_of(client, json, &format!("{}?active=false", paths::HEAP_PROFILE)),
            Remote::Earlier => print_or(json, &client.get(paths::STATE)?, |state: State| {
                describe_earlier(&state.memory_profiler.earlier_processes)
            }),
            Remote::Explain => print_or(json, &client.get(paths::EXPLAIN)?, |explanation: Explanation| {
                describe_explanation(&explanation)
            }),
            Remote::Purge => print_or(json, &client.post(paths::PURGE)?, |purged: Purged| describe_purged(&purged)),
            Remote::Decay { dirty_ms, muzzy_ms, background_thread } => {
                let settings = [
                    dirty_ms.map(|ms| format!("dirty_ms={ms}")),
                    muzzy_ms.map(|ms| format!("muzzy_ms={ms}")),
                    background_thread.map(|on| format!("background_thread={on}")),
                ];
                let query: Vec<String> = settings.into_iter().flatten().collect();
                let path = format!("{}?{}", paths::DECAY, query.join("&"));
                print_or(json, &client.post(&path)?, |settings: DecaySettings| describe_decay(&settings))
            }
            Remote::ClearEarlier => {
                print_or(json, &client.post(paths::CLEAR_EARLIER)?, |answer: RunAnswer| one_line(&answer.message))
            }
            Remote::Dump { output } => {
                let path = format!("{}?trigger_dump=true", paths::HEAP_PROFILE);
                // jemalloc's raw dump, as `download --format raw`: not for a terminal unless asked (`-o -`).
                output::write_to(output.as_deref(), Content::Binary, |out| client.download(&path, out))
            }
            Remote::Diff { base, id, output } => {
                if output.format == Download::Raw {
                    return Err(Failure::Usage(
                        "a difference has no raw format; pick text, collapsed, flamegraph, graph or pprof".to_owned(),
                    ));
                }
                download(client, Some(id), Some(base), &output)
            }
        }
    }
}

/// Prints the answer's `message` (or the whole answer with `--json`).
fn message_of(client: &Client, json: bool, path: &str) -> Result<(), Failure> {
    print_or(json, &client.get(path)?, |answer: RunAnswer| one_line(&answer.message))
}

/// How long `start --wait` waits beyond the length asked for before giving up on the run ending: 5 s and a
/// tenth of the length.
fn wait_margin(length: Duration) -> Duration {
    Duration::from_secs(5) + length / 10
}

fn start(client: &Client, json: bool, duration: &str, wait: Option<Output>) -> Result<(), Failure> {
    let length = crate::duration::parse(duration).map_err(|error| Failure::Usage(format!("--duration: {error}")))?;
    let answer = client.get(&format!("{}?duration={}", paths::START, crate::duration::for_service(length)))?;
    let started: Started = answer.parse()?;
    if started.already_active {
        return Err(Failure::Refused(format!(
            "{} Run {} was started by someone else and goes on: nothing was started; stop it first (memprof stop) or wait for it to end",
            started.message, started.id
        )));
    }
    let Some(output) = wait else {
        return print_or(json, &answer, |started: Started| one_line(&started.message));
    };
    let id = started.id;
    let bar = ProgressBar::new(length.as_millis() as u64 / 100).with_style(
        ProgressStyle::with_template("run {msg} [{bar:40}] {elapsed} of the run, {eta} left")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.set_message(id.to_string());
    // The service says how long is left; whatever it says, no longer than asked, and a margin, is waited.
    let deadline = Instant::now() + length + wait_margin(length);
    let started_at = Instant::now();
    loop {
        let state: State = client.get(paths::STATE)?.parse()?;
        match state.memory_profiler.current_run {
            CurrentRun::Active { id: current, .. } if current == id => {}
            _ => break,
        }
        if Instant::now() >= deadline {
            bar.finish_and_clear();
            return Err(Failure::Refused(format!(
                "run {id} is still going {} s after it started, though it was asked to last {} s: the service did not end it; download its profile later with memprof download --id {id}",
                started_at.elapsed().as_secs(),
                length.as_secs()
            )));
        }
        bar.set_position(started_at.elapsed().as_millis() as u64 / 100);
        thread::sleep(Duration::from_millis(250));
    }
    bar.finish_and_clear();
    download(client, Some(id), None, &output)
}

fn download(client: &Client, id: Option<u64>, base: Option<u64>, output: &Output) -> Result<(), Failure> {
    let mut query: Vec<String> = Vec::new();
    query.extend(id.map(|id| format!("id={id}")));
    query.extend(base.map(|base| format!("base={base}")));
    if output.lines {
        query.push("lines=true".to_owned());
    }
    let readable = matches!(output.format, Download::Rendered(format) if !format.is_binary());
    if output.full && readable {
        query.push("full=true".to_owned());
    }
    if let Some(key) = output.by.as_deref().filter(|_| readable) {
        query.push(format!("by={key}"));
    }
    if let Some((key, value)) = &output.label {
        let filter: String = form_urlencoded::byte_serialize(format!("{key}:{value}").as_bytes()).collect();
        query.push(format!("label={filter}"));
    }
    let path = format!("{}?{}", paths::download(output.format.name()), query.join("&"));
    let content = match output.format {
        Download::Raw => Content::Binary,
        Download::Rendered(format) if format.is_binary() => Content::Binary,
        Download::Rendered(_) => Content::Text,
    };
    output::write_to(output.output.as_deref(), content, |out| client.download(&path, out))?;
    // A raw dump is read with its label table beside it (`memprof analyze`).
    if let (Download::Raw, Some(file)) = (output.format, output.output.as_deref()) {
        let table = client.get(&format!("{}?{}", paths::DOWNLOAD_LABELS, query.join("&")))?;
        let table = memprof_analysis::LabelSets::parse(&String::from_utf8_lossy(&table.body))
            .map_err(|error| Failure::Refused(format!("the service's label table is malformed ({error})")))?;
        if !table.is_empty() {
            let path = memprof_analysis::labels_path(file);
            std::fs::write(&path, table.to_text())
                .map_err(|error| Failure::Refused(format!("{}: {error}", path.display())))?;
        }
    }
    Ok(())
}

/// Prints the service's answer as it is with `--json` (for scripts; it must be JSON; through
/// [`for_terminal`] on a terminal), else as `describe` tells it, through [`for_terminal`].
fn print_or<T: serde::de::DeserializeOwned>(
    json: bool,
    answer: &Answer,
    describe: impl FnOnce(T) -> String,
) -> Result<(), Failure> {
    let text = if json {
        answer.parse::<serde_json::Value>()?;
        let text = String::from_utf8_lossy(&answer.body).trim_end().to_owned();
        if crate::terminal::stdout_is_terminal() { for_terminal(&text) } else { text }
    } else {
        for_terminal(&describe(answer.parse()?))
    };
    output::print_text(&format!("{text}\n"))
}

/// `state` for a person.
fn describe_state(state: &State) -> String {
    let (profiler, jemalloc) = (&state.memory_profiler, &state.jemalloc);
    let mut lines = Vec::new();
    let period = profiler
        .sample_period_bytes
        .map_or_else(String::new, |bytes| format!(" (a sample every {} KiB)", bytes / 1024));
    lines.push(match (jemalloc.profiling_enabled, jemalloc.profiling_active) {
        (true, true) => format!("profiling: enabled, sampling on{period}"),
        (true, false) => format!("profiling: enabled, sampling off{period}"),
        (false, _) => "profiling: disabled in this process".to_owned(),
    });
    if let Some(budget) = profiler.sampling.budget.as_ref().filter(|budget| budget.most_thinned_by > 1) {
        let work = budget
            .sample_work_ns
            .map_or_else(String::new, |nanos| format!("; a sample's work {:.1} us", nanos as f64 / 1000.0));
        lines.push(format!(
            "sampling thinned to keep within {} % of a core: its interval {} times jemalloc's now (a sample every \
             {} KiB on average), up to {} times for {:.1} s since start-up{work}",
            f64::from(budget.share_ppm) / 10_000.0,
            budget.thinned_by,
            budget.interval_bytes / 1024,
            budget.most_thinned_by,
            budget.thinned_ms as f64 / 1000.0
        ));
    }
    lines.push(match &profiler.current_run {
        CurrentRun::Active { id, remaining_seconds, started_by, samples } => {
            let left = remaining_seconds.map_or_else(|| "until stopped".to_owned(), |left| format!("{left:.1} s left"));
            let samples = samples.map_or_else(String::new, |samples| format!(", {samples} samples so far"));
            format!("run: {id} ({}), {left}{samples}", one_line(started_by))
        }
        CurrentRun::Idle { .. } => "run: none".to_owned(),
    });
    let kept: Vec<String> =
        profiler.runs.iter().map(|run| format!("{} ({})", run.id, one_line(&run.started_by))).collect();
    lines.push(format!(
        "kept profiles, newest first: {}",
        if kept.is_empty() { "none".to_owned() } else { kept.join(", ") }
    ));
    let heap = profiler.heap.unwrap_or_default();
    let megabytes = |bytes: usize| bytes as f64 / 1_048_576.0;
    lines.push(format!(
        "heap: {:.1} MB allocated, {:.1} MB resident",
        megabytes(heap.allocated),
        megabytes(heap.resident)
    ));
    if !profiler.earlier_processes.is_empty() {
        let kept: usize = profiler.earlier_processes.iter().map(|process| process.profiles.len()).sum();
        lines.push(format!(
            "earlier processes: {} ended without cleaning up, {kept} profiles kept (memprof earlier)",
            profiler.earlier_processes.len()
        ));
    }
    lines.extend(profiler.warnings.iter().map(|warning| format!("warning: {}", one_line(warning))));
    lines.join("\n")
}

/// The profiles of earlier processes, for a person: one line a profile, newest process first.
fn describe_earlier(processes: &[EarlierProcess]) -> String {
    if processes.is_empty() {
        return "No profiles of earlier processes are kept".to_owned();
    }
    let mut lines = Vec::new();
    for process in processes {
        let why = process.why.as_deref().map_or_else(String::new, |why| format!(": {}", one_line(why)));
        lines.push(format!("process {} ({}){why}", process.pid, one_line(&process.directory)));
        for earlier in &process.profiles {
            let build = if earlier.same_build {
                String::new()
            } else {
                let binary = one_line(earlier.binary.as_deref().unwrap_or("its program"));
                format!(" [another build: download it raw and analyze it with --binary <that build of {binary}>]")
            };
            lines.push(format!("  {} ({}){build}", earlier.profile.id, one_line(&earlier.profile.started_by)));
        }
    }
    lines.join("\n")
}
