// Every argument problem is reported at once, each at the argument it concerns.
#[memprof::main(htp = "127.0.0.1:5050", http = 5050, env = "NOT-A-NAME", lg_prof_sample = 64, env = "X", allocator = "no", crate)]
fn main() {}
