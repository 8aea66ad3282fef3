//! A small service that keeps allocating in a few named functions and serves the profiling endpoints.
//!
//! ```text
//! LIBPROCESS_MEMORY_PROFILING=true cargo run --release --example service
//! curl '127.0.0.1:5050/memory-profiler/start?duration=10secs'
//! ```
//!
//! What it keeps alive at any moment, all of it replaced continuously (so any run sees it):
//! - `open_session`: 256 sessions of 64 KiB, 16 MiB;
//! - `index_document`: 128 index blocks of 32 KiB, 4 MiB;
//! - `render_response`: nothing; its buffers are freed at once.
//!
//! Each request is for a tenant, `acme` three times in four, `initech` once: its session and index block
//! are labelled with it, so `?by=tenant` splits the heap 3:1 (`memprof::labels`).
//!
//! `SERVICE_SECONDS=N` makes it return from `main` after N seconds (it runs until killed otherwise). It has
//! no SIGTERM handler of its own, so `dump_on_sigterm` lets memprof end first when systemd or Kubernetes
//! stops it: a run in progress leaves its profile at `MEMPROF_FINAL_DUMP`, and no directory is left behind.

use std::collections::VecDeque;
use std::hint::black_box;
use std::thread;
use std::time::{Duration, Instant};

/// Sessions kept alive, and the size of each.
const SESSIONS: usize = 256;
const SESSION_BYTES: usize = 64 * 1024;
/// Index blocks kept alive, and the number of `u64` in each.
const INDEX_BLOCKS: usize = 128;
const INDEX_WORDS: usize = 32 * 1024 / 8;

#[memprof::main(http = "127.0.0.1:5050", env = "LIBPROCESS_MEMORY_PROFILING", dump_on_sigterm = true)]
fn main() {
    let stop_after = std::env::var("SERVICE_SECONDS").ok().and_then(|text| text.parse().ok()).map(Duration::from_secs);
    let started = Instant::now();
    let mut sessions = VecDeque::with_capacity(SESSIONS);
    let mut index = VecDeque::with_capacity(INDEX_BLOCKS);
    println!("service: serving requests");
    for request in 0u64.. {
        let tenant = if request % 4 == 3 { "initech" } else { "acme" };
        memprof::labels::with(&[("tenant", tenant)], || {
            keep(&mut sessions, SESSIONS, open_session(request));
            keep(&mut index, INDEX_BLOCKS, index_document(request));
        });
        black_box(render_response(request));
        if request % 8 == 0 {
            thread::sleep(Duration::from_millis(1));
        }
        if request % 50_000 == 0 {
            println!("service: {request} requests handled");
        }
        if stop_after.is_some_and(|limit| started.elapsed() >= limit) {
            break;
        }
    }
    println!("service: done");
}

/// Keeps the newest `limit` items.
fn keep<T>(items: &mut VecDeque<T>, limit: usize, item: T) {
    if items.len() == limit {
        items.pop_front();
    }
    items.push_back(item);
}

/// A session's state: 64 KiB that stays alive until 256 newer sessions exist.
#[inline(never)]
fn open_session(request: u64) -> Vec<u8> {
    vec![request as u8; SESSION_BYTES]
}

/// An index block: 32 KiB of words that stays alive until 128 newer blocks exist.
#[inline(never)]
fn index_document(request: u64) -> Vec<u64> {
    (0..INDEX_WORDS as u64).map(|word| word ^ request).collect()
}

/// A response body, freed as soon as it is sent.
#[inline(never)]
fn render_response(request: u64) -> usize {
    let body = format!("{{\"request\":{request},\"padding\":\"{}\"}}", "x".repeat(4096));
    body.len()
}
