// A test takes no arguments, and an async one needs its runtime's attribute below memprof's.
#[memprof::test(live == 0)]
fn with_an_argument(_size: usize) {}

#[memprof::test(live == 0)]
async fn without_a_runtime() {}

fn main() {}
