//! A program put into one known memory state, named by its argument, then idle (tests/explain.rs and
//! tests/growth.rs): each state is one cause `explain` must tell apart. It prints `explained: ready` once
//! the state is reached.
//!
//! - `idle`: nothing beyond start-up;
//! - `retention`: 256 MiB allocated in 64 KiB blocks, every byte written, then all freed;
//! - `fragmentation`: 2 M objects of 128 B, then 15 of every 16 freed;
//! - `threads`: 64 threads, each with 1 MiB of its stack written, parked;
//! - `threads-heap`: 64 threads, each holding 4 MiB it allocated and wrote, parked (with many arenas, each
//!   thread takes an arena made for it after memprof started);
//! - `mmap`: a 128 MiB anonymous mapping, every page written;
//! - `heap-and-mmap`: 256 MiB live in 64 KiB blocks and the 128 MiB mapping;
//! - `leak [N]`: N MiB (2 unless said) more every second, kept by `leak_slowly`, for ever;
//! - `tenants-leak`: 2 MiB more every second, kept by `leak_for_tenant`, three quarters of it under the label
//!   `tenant=acme`, the rest under `tenant=initech`;
//! - `preallocate`: at start-up, 32 MiB of tables allocated over 2 s by `preallocate_tables` (a router's
//!   or a pool's start-up), then nothing more;
//! - `burst`: after 3 s, 128 MiB in 64 KiB blocks kept by `burst_into_cache` (a cache that filled), then
//!   nothing more;
//! - `maps`: two std `HashMap`s with their values inline grown for ever, by `index_sessions` (3 MiB a
//!   second) and `cache_topics` (1 MiB a second): std's vendored hashbrown allocates their tables;
//! - `fill`: after 5 s idle, a cache filling for ever at 1.6 MiB a second in entries of 512 B
//!   (`fill_cache`), under requests that each allocate and free up to 7 MiB around it (`serve_request`):
//!   live bytes rise through a noise larger than a second's growth, as a resolver's cache does;
//! - `small N`: N objects of 128 B kept (with every allocation sampled, each takes a page of its own);
//! - `mappings N`: N more mappings of one page each (the explain benchmark, benches/explain.rs).

use std::hint::black_box;
use std::time::Duration;

const MIB: usize = 1 << 20;

#[memprof::main(env = "LIBPROCESS_MEMORY_PROFILING")]
fn main() {
    let state = std::env::args().nth(1).unwrap_or_default();
    let mut kept: Vec<Box<dyn std::any::Any>> = Vec::new();
    match state.as_str() {
        "idle" => {}
        "retention" => drop(black_box(blocks(256 * MIB))),
        "fragmentation" => kept.push(Box::new(fragmented())),
        "threads" => kept.push(Box::new(threads(64))),
        "threads-heap" => kept.push(Box::new(threads_holding(64, 4 * MIB))),
        "mmap" => kept.push(Box::new(mapped(128 * MIB))),
        "heap-and-mmap" => {
            kept.push(Box::new(blocks(256 * MIB)));
            kept.push(Box::new(mapped(128 * MIB)));
        }
        "maps" => {
            println!("explained: ready");
            let (mut sessions, mut topics) = (std::collections::HashMap::new(), std::collections::HashMap::new());
            for tick in 0u64.. {
                index_sessions(&mut sessions, tick);
                cache_topics(&mut topics, tick);
                std::thread::sleep(Duration::from_millis(125));
            }
        }
        "preallocate" => kept.push(Box::new(preallocate_tables(32, Duration::from_secs(2)))),
        "burst" => {
            std::thread::sleep(Duration::from_secs(3));
            kept.push(Box::new(burst_into_cache(128 * MIB)));
        }
        "small" => {
            let count: usize = std::env::args().nth(2).and_then(|count| count.parse().ok()).expect("small N");
            kept.push(Box::new((0..count).map(|_| Box::new([1u8; 128])).collect::<Vec<_>>()));
        }
        "mappings" => {
            let count = std::env::args().nth(2).and_then(|count| count.parse().ok()).expect("mappings N");
            kept.push(Box::new(many_mappings(count)));
        }
        "tenants-leak" => {
            println!("explained: ready");
            let mut leaked = Vec::new();
            loop {
                for tenant in ["acme", "acme", "acme", "initech"] {
                    memprof::labels::with(&[("tenant", tenant)], || leak_for_tenant(&mut leaked));
                }
                std::thread::sleep(Duration::from_millis(125));
            }
        }
        "fill" => {
            println!("explained: ready");
            std::thread::sleep(Duration::from_secs(5));
            let mut cache = Vec::new();
            let mut requests = std::collections::VecDeque::new();
            for tick in 0u64.. {
                fill_cache(&mut cache);
                requests.push_back(serve_request(tick));
                if requests.len() > 3 {
                    requests.pop_front();
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        "leak" => {
            let mebibytes: usize = std::env::args().nth(2).map_or(2, |rate| rate.parse().expect("leak N"));
            println!("explained: ready");
            let mut leaked = Vec::new();
            loop {
                // 256 KiB a call, 8 ticks a second.
                for _ in 0..mebibytes / 2 {
                    leak_slowly(&mut leaked);
                }
                std::thread::sleep(Duration::from_millis(125));
            }
        }
        other => panic!("explained: unknown state {other:?}"),
    }
    println!("explained: ready");
    loop {
        std::thread::sleep(Duration::from_secs(1));
        black_box(&kept);
    }
}

/// `total` bytes in 64 KiB blocks, every byte written.
fn blocks(total: usize) -> Vec<Vec<u8>> {
    (0..total / (64 * 1024)).map(|_| vec![1u8; 64 * 1024]).collect()
}

/// 2 M objects of 128 B allocated in turn, of which every 16th is kept: each its own allocation, as a map's
/// entries are.
#[allow(clippy::vec_box)]
fn fragmented() -> Vec<Box<[u8; 128]>> {
    let all: Vec<Box<[u8; 128]>> = (0..2_000_000).map(|_| Box::new([1u8; 128])).collect();
    all.into_iter().step_by(16).collect()
}

/// `count` threads, each having written 1 MiB of its stack (4 MiB of room: a debug build copies the array), parked for good.
fn threads(count: usize) -> Vec<std::thread::JoinHandle<()>> {
    let (ready, told) = std::sync::mpsc::channel();
    let threads = (0..count)
        .map(|_| {
            let ready = ready.clone();
            std::thread::Builder::new()
                .stack_size(4 * MIB)
                .spawn(move || {
                    let stack = black_box([1u8; MIB]);
                    black_box(&stack);
                    ready.send(()).unwrap();
                    loop {
                        std::thread::park();
                    }
                })
                .unwrap()
        })
        .collect();
    for _ in 0..count {
        told.recv().unwrap();
    }
    threads
}

/// `count` threads, each holding `bytes` it allocated (in 64 KiB blocks) and wrote, parked for good.
fn threads_holding(count: usize, bytes: usize) -> Vec<std::thread::JoinHandle<()>> {
    let (ready, told) = std::sync::mpsc::channel();
    let threads = (0..count)
        .map(|_| {
            let ready = ready.clone();
            std::thread::spawn(move || {
                let held = blocks(bytes);
                ready.send(()).unwrap();
                loop {
                    std::thread::park();
                    black_box(&held);
                }
            })
        })
        .collect();
    for _ in 0..count {
        told.recv().unwrap();
    }
    threads
}

/// An anonymous private mapping outside any allocator.
struct Mapped(&'static mut [u8]);

/// A mapping of `len` bytes, every page written.
fn mapped(len: usize) -> Mapped {
    let mapped = map(len, libc::PROT_READ | libc::PROT_WRITE);
    mapped.0.fill(1);
    mapped
}

/// `count` one-page mappings, read-only and writable in turn so the kernel cannot merge neighbours.
fn many_mappings(count: usize) -> Vec<Mapped> {
    let page = 4096;
    let mut maps: Vec<Mapped> = (0..count)
        .map(|index| map(page, if index % 2 == 0 { libc::PROT_READ } else { libc::PROT_READ | libc::PROT_WRITE }))
        .collect();
    for writable in maps.iter_mut().skip(1).step_by(2) {
        writable.0.fill(1);
    }
    maps
}

/// An anonymous private mapping of `len` bytes with `protection`, not touched.
fn map(len: usize, protection: libc::c_int) -> Mapped {
    // SAFETY: a fresh anonymous private mapping, owned by the slice made from it and never unmapped
    // (the program exits with it).
    let bytes = unsafe {
        let address = libc::mmap(std::ptr::null_mut(), len, protection, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
        assert_ne!(address, libc::MAP_FAILED, "mmap of {len} bytes");
        std::slice::from_raw_parts_mut(address.cast::<u8>(), len)
    };
    Mapped(bytes)
}

/// 384 KiB more a call: 3 MiB a second at 8 calls a second.
#[inline(never)]
fn index_sessions(sessions: &mut std::collections::HashMap<u64, [u8; 4096]>, tick: u64) {
    for entry in 0..96 {
        sessions.insert(tick * 96 + entry, [1u8; 4096]);
    }
}

/// 128 KiB more a call: 1 MiB a second.
#[inline(never)]
fn cache_topics(topics: &mut std::collections::HashMap<u64, [u8; 1024]>, tick: u64) {
    for entry in 0..128 {
        topics.insert(tick * 128 + entry, [1u8; 1024]);
    }
}

/// `mebibytes` tables of 1 MiB, every byte written, over `over`.
#[inline(never)]
fn preallocate_tables(mebibytes: u32, over: Duration) -> Vec<Vec<u8>> {
    (0..mebibytes)
        .map(|_| {
            std::thread::sleep(over / mebibytes);
            vec![1u8; MIB]
        })
        .collect()
}

#[inline(never)]
fn burst_into_cache(total: usize) -> Vec<Vec<u8>> {
    black_box(blocks(total))
}

/// Keeps 64 KiB more, every byte written.
#[inline(never)]
fn leak_for_tenant(leaked: &mut Vec<Vec<u8>>) {
    leaked.push(vec![1u8; 64 * 1024]);
}

/// Keeps 160 KiB more in entries of 512 B, every byte written.
#[inline(never)]
#[allow(clippy::vec_box)]
fn fill_cache(cache: &mut Vec<Box<[u8; 512]>>) {
    cache.extend((0..320).map(|_| Box::new([1u8; 512])));
}

/// A request's buffer: 0 to 7 MiB as `tick` says (a scrambled sequence), every byte written.
#[inline(never)]
fn serve_request(tick: u64) -> Vec<u8> {
    let size = (tick.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 61) as usize * MIB;
    black_box(vec![1u8; size])
}

/// Keeps 256 KiB more, every byte written.
#[inline(never)]
fn leak_slowly(leaked: &mut Vec<Vec<u8>>) {
    leaked.push(vec![1u8; 256 * 1024]);
}
