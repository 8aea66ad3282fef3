//! A program that grows until the kernel kills it (its cgroup's memory limit), as a leaking service does:
//! 1 MiB more every `GROW_EVERY_MS` milliseconds (5 unless told), held in `grow_cache`. With `GROW=0` it only serves the endpoints, as the same
//! service restarted after the kill does (tests/evidence.rs).

use std::time::Duration;

#[memprof::main(env = "LIBPROCESS_MEMORY_PROFILING")]
fn main() {
    println!("grow: started");
    if std::env::var("GROW").as_deref() == Ok("0") {
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    let every = std::env::var("GROW_EVERY_MS").ok().and_then(|text| text.parse().ok()).unwrap_or(5);
    let mut cache = Vec::new();
    loop {
        grow_cache(&mut cache);
        std::thread::sleep(Duration::from_millis(every));
    }
}

/// Keeps one more MiB, every byte written (so it is resident, not just reserved).
#[inline(never)]
fn grow_cache(cache: &mut Vec<Vec<u8>>) {
    cache.push(vec![1; 1 << 20]);
}
