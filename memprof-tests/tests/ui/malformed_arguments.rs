#[memprof::main(http: "127.0.0.1:5050")]
fn main() {}
