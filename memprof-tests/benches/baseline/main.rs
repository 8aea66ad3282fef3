//! A baseline of the overhead benchmark: `baseline <workload> <threads>` prints the figures of one
//! measurement, with the allocator its features choose (the system's, plain jemalloc, or memprof compiled
//! out).

#[path = "../common/workloads.rs"]
mod workloads;

#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[cfg_attr(feature = "memprof-compiled-out", memprof::main(env = "MEMPROF_BENCH_NO_ENDPOINTS"))]
fn main() {
    let mut arguments = std::env::args().skip(1);
    let workload = arguments.next().expect("a workload");
    let threads = arguments.next().and_then(|text| text.parse().ok()).expect("a thread count");
    println!("{}", workloads::measure(&workload, threads).line());
}
