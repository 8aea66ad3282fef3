//! The subcommands that drive a running service's endpoints.

use std::path::PathBuf;
use std::sync::LazyLock;
use std::thread;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use memprof_analysis::Format;
use serde_json::Value;

use crate::Failure;
use crate::client::Client;

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
            Remote::State => {
                let state = client.get("/memory-profiler/state")?.json()?;
                print_json_or(json, &state, describe_state)
            }
            Remote::Stats { text } => {
                let query = if text { "?format=text" } else { "" };
                write_output(&client.get(&format!("/memory-profiler/statistics{query}"))?.body, None)
            }
            Remote::Start { duration, wait, output } => start(client, json, &duration, wait.then_some(output)),
            Remote::Stop => message_of(client, json, "/memory-profiler/stop"),
            Remote::Download { id, base, output } => download(client, id, base, &output),
            Remote::Activate => message_of(client, json, "/memory-profiler/heap_profile?active=true"),
            Remote::Deactivate => message_of(client, json, "/memory-profiler/heap_profile?active=false"),
            Remote::Dump { output } => {
                write_output(&client.get("/memory-profiler/heap_profile?trigger_dump=true")?.body, output.as_ref())
            }
            Remote::Diff { base, id, output } => {
                if output.format == Download::Raw {
                    return Err(Failure::Refused(
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
    let answer = client.get(path)?.json()?;
    print_json_or(json, &answer, |answer| answer["message"].as_str().unwrap_or_default().to_owned())
}

fn start(client: &Client, json: bool, duration: &str, wait: Option<Output>) -> Result<(), Failure> {
    let duration = mesos_duration(duration);
    let started = client.get(&format!("/memory-profiler/start?duration={duration}"))?.json()?;
    let id = started["id"].as_u64().ok_or_else(|| Failure::Refused(format!("no run id in {started}")))?;
    let Some(output) = wait else {
        return print_json_or(json, &started, |answer| answer["message"].as_str().unwrap_or_default().to_owned());
    };
    let total = started["remaining_seconds"].as_f64().unwrap_or(0.0);
    let bar = ProgressBar::new((total * 10.0) as u64).with_style(
        ProgressStyle::with_template("run {msg} [{bar:40}] {elapsed} of the run, {eta} left")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.set_message(id.to_string());
    loop {
        let state = client.get("/memory-profiler/state")?.json()?;
        let current = &state["memory_profiler"]["current_run"];
        if current["id"].as_u64() != Some(id) {
            break;
        }
        let remaining = current["remaining_seconds"].as_f64().unwrap_or(0.0);
        bar.set_position(((total - remaining).max(0.0) * 10.0) as u64);
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
    let path = format!("/memory-profiler/download/{}?{}", output.format.name(), query.join("&"));
    write_output(&client.get(&path)?.body, output.output.as_ref())
}

fn write_output(bytes: &[u8], path: Option<&PathBuf>) -> Result<(), Failure> {
    crate::write_output(bytes, path.map(PathBuf::as_path)).map_err(Failure::Refused)
}

fn print_json_or(json: bool, value: &Value, describe: impl Fn(&Value) -> String) -> Result<(), Failure> {
    let text = if json { value.to_string() } else { describe(value) };
    println!("{text}");
    Ok(())
}

/// `30s`, `5m`, `2h`, `1d` in Mesos's units (`30secs`, ...); anything else as it is, for the service to judge.
fn mesos_duration(text: &str) -> String {
    let split = text.find(|character: char| !(character.is_ascii_digit() || character == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit = match unit {
        "s" | "sec" => "secs",
        "m" | "min" => "mins",
        "h" | "hr" => "hrs",
        "d" | "day" => "days",
        other => other,
    };
    format!("{number}{unit}")
}

/// `state` for a person.
fn describe_state(state: &Value) -> String {
    let profiler = &state["memory_profiler"];
    let jemalloc = &state["jemalloc"];
    let mut lines = Vec::new();
    let period = profiler["sample_period_bytes"]
        .as_u64()
        .map_or_else(String::new, |bytes| format!(" (a sample every {} KiB)", bytes / 1024));
    lines.push(match (jemalloc["profiling_enabled"].as_bool(), jemalloc["profiling_active"].as_bool()) {
        (Some(true), Some(true)) => format!("profiling: enabled, sampling on{period}"),
        (Some(true), _) => format!("profiling: enabled, sampling off{period}"),
        _ => "profiling: disabled in this process".to_owned(),
    });
    let current = &profiler["current_run"];
    lines.push(match (current["id"].as_u64(), current["remaining_seconds"].as_f64()) {
        (Some(id), Some(left)) => {
            format!("run: {id} ({}), {left:.1} s left", current["started_by"].as_str().unwrap_or("?"))
        }
        (Some(id), None) => format!("run: {id} ({}), until stopped", current["started_by"].as_str().unwrap_or("?")),
        (None, _) => "run: none".to_owned(),
    });
    let kept: Vec<String> = profiler["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|run| format!("{} ({})", run["id"], run["started_by"].as_str().unwrap_or("?")))
        .collect();
    lines.push(format!(
        "kept profiles, newest first: {}",
        if kept.is_empty() { "none".to_owned() } else { kept.join(", ") }
    ));
    let heap = &profiler["heap"];
    let megabytes = |key: &str| heap[key].as_f64().unwrap_or(0.0) / 1_048_576.0;
    lines.push(format!("heap: {:.1} MB allocated, {:.1} MB resident", megabytes("allocated"), megabytes("resident")));
    for warning in profiler["warnings"].as_array().into_iter().flatten() {
        lines.push(format!("warning: {}", warning.as_str().unwrap_or_default()));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_durations_become_mesos_durations() {
        for (short, mesos) in [
            ("30s", "30secs"),
            ("5m", "5mins"),
            ("1.5h", "1.5hrs"),
            ("1d", "1days"),
            ("10secs", "10secs"),
            ("600", "600"),
        ] {
            assert_eq!(mesos_duration(short), mesos);
        }
    }
}
