//! `memprof`: the command-line tool of memprof. It drives a service's endpoints and analyzes dumps offline.
//!
//! ```text
//! memprof --url http://127.0.0.1:5050 start --duration 30s --wait --format text
//! memprof analyze memprof.1795354618996.heap --binary target/release/service --format flamegraph -o heap.svg
//! ```

mod analyze;
mod client;
mod remote;

use std::fmt;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

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

/// Why a command failed; each kind has its exit code.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The service could not be reached (exit 3).
    Unreachable(String),
    /// The service refused the request, or a file could not be read or written (exit 1).
    Refused(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Unreachable(message) | Failure::Refused(message) => formatter.write_str(message),
        }
    }
}

/// Writes a result to `path`, or to standard output; a reader that closed the pipe (`| head`) is no error.
pub(crate) fn write_output(bytes: &[u8], path: Option<&Path>) -> Result<(), String> {
    match path {
        Some(path) => std::fs::write(path, bytes).map_err(|error| format!("{}: {error}", path.display())),
        None => match std::io::stdout().write_all(bytes) {
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            result => result.map_err(|error| format!("standard output: {error}")),
        },
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Remote(command) => command.run(&client::Client::new(&cli.url, cli.token.as_deref()), cli.json),
        Command::Analyze(command) => command.run().map_err(Failure::Refused),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("memprof: {failure}");
            ExitCode::from(match failure {
                Failure::Refused(_) => 1,
                Failure::Unreachable(_) => 3,
            })
        }
    }
}
