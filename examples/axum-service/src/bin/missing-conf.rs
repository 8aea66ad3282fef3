//! A service with its own jemalloc allocator that forgot `memprof::malloc_conf!()`: memprof says what to
//! add, at start-up and in `state`, and the service runs on unprofiled (or profiled, when started with
//! `MALLOC_CONF=prof:true,prof_active:false`).

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[memprof::main(allocator = false)]
fn main() {
    let seconds = std::env::var("SERVICE_SECONDS").ok().and_then(|text| text.parse().ok()).unwrap_or(600);
    let mut kept = Vec::new();
    for _ in 0..seconds * 10 {
        kept.push(std::hint::black_box(vec![1u8; 64 * 1024]));
        kept.truncate(256);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
