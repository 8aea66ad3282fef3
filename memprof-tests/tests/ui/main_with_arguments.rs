#[memprof::main]
fn main<T>(argument: T) {}
