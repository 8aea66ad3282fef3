//! A user's program, built on every platform its team works on: on Linux memprof profiles it; elsewhere
//! memprof compiles itself out and the program builds unchanged.

#[memprof::main(http = "127.0.0.1:5050", env = "LIBPROCESS_MEMORY_PROFILING")]
fn main() {
    let kept: Vec<u8> = memprof::scope!("warm-up", vec![0; 4096]);
    let labelled = memprof::labels::with(&[("tenant", "acme")], || kept.len());
    println!("elsewhere: {labelled} bytes");
}
