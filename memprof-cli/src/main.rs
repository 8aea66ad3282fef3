//! `memprof`: the command-line tool of memprof (see [`memprof_cli::run`]).

fn main() -> std::process::ExitCode {
    memprof_cli::run()
}
