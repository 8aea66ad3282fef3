#[memprof::main(http = "localhost")]
fn main() {}
