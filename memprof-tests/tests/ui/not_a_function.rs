#[memprof::main]
struct Service;

fn main() {}
