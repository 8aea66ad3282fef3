#[memprof::main]
async fn main() {}
