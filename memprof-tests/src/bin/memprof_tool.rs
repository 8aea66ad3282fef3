//! The `memprof` command-line tool, under the name the tests spawn it by (`CARGO_BIN_EXE_memprof-tool`).

fn main() -> std::process::ExitCode {
    memprof_cli::run()
}
