//! A deliberately large tokio program for the analysis benchmark: a thousand generated modules, each with its
//! own closures and so its own monomorphized iterator and collection code, for over 100 MB of DWARF with
//! full debug info. It serves the endpoints like the example service and takes requests as a tokio server
//! does, a task each on a multi-thread runtime, each allocating through one of the generated functions, so
//! its profiles touch many compilation units' worth of addresses under tokio's task polls. Requests are
//! labelled by tenant (four, in turn), so the benchmark measures a label split on a profile of many stacks.
//!
//! Built only for the benchmark: `cargo bench -p memprof-tests --features large-binary --bench analysis`.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One generated function: an iterator chain, a string and a map, all with this module's own closures.
macro_rules! leaf {
    () => {
        #[inline(never)]
        pub fn work(seed: u64) -> Vec<String> {
            let words: Vec<String> = (0..seed % 7 + 8).map(|word| format!("{word:04}-{seed}")).collect();
            let index: std::collections::BTreeMap<usize, &String> =
                words.iter().enumerate().filter(|(position, _)| position % 2 == 0).collect();
            let mut kept: Vec<String> = index.values().map(|word| word.repeat(64)).collect();
            kept.sort_by_key(|word| std::cmp::Reverse(word.len()));
            kept
        }
    };
}

/// Ten modules named `m0`..`m9`, each filled by `$inner`.
macro_rules! ten {
    ($inner:ident) => {
        pub mod m0 {
            $inner!();
        }
        pub mod m1 {
            $inner!();
        }
        pub mod m2 {
            $inner!();
        }
        pub mod m3 {
            $inner!();
        }
        pub mod m4 {
            $inner!();
        }
        pub mod m5 {
            $inner!();
        }
        pub mod m6 {
            $inner!();
        }
        pub mod m7 {
            $inner!();
        }
        pub mod m8 {
            $inner!();
        }
        pub mod m9 {
            $inner!();
        }
        /// Calls the `work` of module `which % 10`, deeper modules choosing with the rest of `which`.
        pub fn dispatch(which: u64, seed: u64) -> Vec<String> {
            match which % 10 {
                0 => m0::dispatch(which / 10, seed),
                1 => m1::dispatch(which / 10, seed),
                2 => m2::dispatch(which / 10, seed),
                3 => m3::dispatch(which / 10, seed),
                4 => m4::dispatch(which / 10, seed),
                5 => m5::dispatch(which / 10, seed),
                6 => m6::dispatch(which / 10, seed),
                7 => m7::dispatch(which / 10, seed),
                8 => m8::dispatch(which / 10, seed),
                _ => m9::dispatch(which / 10, seed),
            }
        }
    };
}

macro_rules! level0 {
    () => {
        leaf!();
        pub fn dispatch(_: u64, seed: u64) -> Vec<String> {
            work(seed)
        }
    };
}
macro_rules! level1 {
    () => {
        ten!(level0);
    };
}
macro_rules! level2 {
    () => {
        ten!(level1);
    };
}

mod generated {
    ten!(level2);
}

#[memprof::main(http = "127.0.0.1:5051", env = "LIBPROCESS_MEMORY_PROFILING")]
fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    runtime.block_on(serve());
}

/// Requests as a tokio server takes them: a task each, under its tenant's label, in batches of 64 (so the
/// tasks never pile up), its result kept until 4,096 newer ones are.
async fn serve() {
    let live = Arc::new(Mutex::new(VecDeque::new()));
    let tenants = Arc::new(
        ["acme", "initech", "globex", "umbrella"].map(|tenant| memprof::labels::Labels::new(&[("tenant", tenant)])),
    );
    println!("large: serving requests");
    for batch in 0u64.. {
        let tasks: Vec<_> = (batch * 64..(batch + 1) * 64)
            .map(|request| {
                let (live, tenants) = (Arc::clone(&live), Arc::clone(&tenants));
                tokio::spawn(async move {
                    let which = request.wrapping_mul(2_654_435_761) % 1_000;
                    let kept = tenants[request as usize % 4].with(|| generated::dispatch(which, request));
                    let mut live = live.lock().unwrap();
                    live.push_back(black_box(kept));
                    if live.len() > 4096 {
                        live.pop_front();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
