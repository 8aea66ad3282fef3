//! `memprof`: the command-line tool of memprof.
//!
//! ```text
//! memprof analyze memprof.1795354618996.heap --binary target/release/service --format text
//! ```

mod analyze;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Heap profiling for Rust services built with memprof.
#[derive(Debug, Parser)]
#[command(name = "memprof", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Analyze(analyze::Analyze),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Analyze(command) => command.run(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("memprof: {message}");
            ExitCode::FAILURE
        }
    }
}
