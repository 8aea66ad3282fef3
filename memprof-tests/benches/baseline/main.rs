//! A baseline of the overhead benchmark: `baseline <workload> <threads>` prints the figures of one
//! measurement, with the allocator its features choose (the system's, plain jemalloc, or memprof compiled
//! out); `baseline start [seconds]` does nothing (but wait), for the start-up benchmark (memprof compiled in
//! or out).

#[path = "../common/workloads.rs"]
mod workloads;

#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[cfg_attr(
    any(feature = "memprof-compiled-out", feature = "memprof-compiled-in"),
    memprof::main(env = "MEMPROF_BENCH_NO_ENDPOINTS")
)]
fn main() {
    let mut arguments = std::env::args().skip(1);
    let workload = arguments.next().expect("a workload");
    // The start-up benchmark's program does nothing: what is timed is starting and ending. Given seconds
    // (`start 2`), it waits that long first, so what memprof's threads do at start-up is done and counted.
    if workload == "start" {
        if let Some(seconds) = arguments.next().and_then(|text| text.parse().ok()) {
            std::thread::sleep(std::time::Duration::from_secs(seconds));
        }
        return;
    }
    let threads = arguments.next().and_then(|text| text.parse().ok()).expect("a thread count");
    println!("{}", workloads::measure(&workload, threads).line());
}
