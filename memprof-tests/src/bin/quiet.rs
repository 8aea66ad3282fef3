//! A command-line tool shaped program: the attribute and a line of output, nothing else. Run with the switch
//! off it must print that line alone (tests/configuration.rs); issue 66's start-up cost is measured on it.

#[memprof::main(http = "127.0.0.1:5050", env = "LIBPROCESS_MEMORY_PROFILING")]
fn main() {
    println!("quiet: hello");
}
