//! `memprof`: the command-line tool of memprof. It drives a service's endpoints and analyzes dumps offline.
//!
//! ```text
//! memprof --url http://127.0.0.1:5050 start --duration 30s --wait --format text
//! memprof analyze memprof.1795354618996.heap --binary target/release/service --format flamegraph -o heap.svg
//! ```
//!
//! The tool is this library's [`run`]: the `memprof` binary is a `main` that calls it, and so is any
//! program that ships the tool under another name (memprof's own tests build it that way).

mod analyze;
mod client;
mod duration;
mod failure;
mod memory;
mod output;
mod remote;
mod terminal;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use failure::Failure;

/// Heap profiling for Rust services built with memprof.
#[derive(Debug, Parser)]
#[command(name = "memprof", version, about)]
struct Cli {
    /// The service's profiling endpoints.
    #[arg(long, global = true, env = "MEMPROF_URL", default_value = "http://127.0.0.1:5050")]
    url: String,
    /// The service's access token, when it requires one.
    #[arg(long, global = true, env = "MEMPROF_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Print the service's JSON answers as they are, for scripts.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    #[command(flatten)]
    Remote(remote::Remote),
    Analyze(analyze::Analyze),
}

/// Runs the `memprof` command its process was started with (`std::env::args`): parses the command line,
/// does what it says, prints errors to standard error, and returns the exit code (0 done, 1 refused or a
/// file could not be read or written, 2 bad usage, 3 the service could not be reached).
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     memprof_cli::run()
/// }
/// ```
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Remote(command) => command.run(&client::Client::new(&cli.url, cli.token.as_deref()), cli.json),
        Command::Analyze(command) => command.run(),
    };
    match result {
        Ok(()) | Err(Failure::Closed) => ExitCode::SUCCESS,
        Err(failure) => {
            // The message may quote the service or a dump: shown, never obeyed, by the terminal.
            eprintln!("memprof: {}", terminal::for_terminal(&failure.to_string()));
            ExitCode::from(failure.exit_code())
        }
    }
}

/// Whether `arguments` (the program's name first) are a command line `memprof` takes, without running it:
/// the error clap would print, else `Ok`. For documentation that shows command lines, checked by tests.
///
/// ```
/// assert!(memprof_cli::check_command_line(["memprof", "start", "--duration", "30s", "--wait"]).is_ok());
/// assert!(memprof_cli::check_command_line(["memprof", "start", "--for", "30s"]).is_err());
/// ```
pub fn check_command_line<I, T>(arguments: I) -> Result<(), String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    Cli::try_parse_from(arguments).map(drop).map_err(|error| error.to_string())
}
