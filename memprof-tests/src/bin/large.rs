//! A deliberately large program for the analysis benchmark: a thousand generated modules, each with its
//! own closures and so its own monomorphized iterator and collection code, for over 100 MB of DWARF with
//! full debug info. It serves the endpoints like the example service and keeps allocating through a spread of
//! the generated functions, so its profiles touch many compilation units' worth of addresses. Requests are
//! labelled by tenant (four, in turn), so the benchmark measures a label split on a profile of many stacks.
//!
//! Built only for the benchmark: `cargo bench -p memprof-tests --features large-binary --bench analysis`.

use std::collections::VecDeque;
use std::hint::black_box;
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
    let mut live = VecDeque::new();
    let tenants =
        ["acme", "initech", "globex", "umbrella"].map(|tenant| memprof::labels::Labels::new(&[("tenant", tenant)]));
    println!("large: serving requests");
    for request in 0u64.. {
        let which = request.wrapping_mul(2_654_435_761) % 1_000;
        live.push_back(tenants[request as usize % 4].with(|| generated::dispatch(which, request)));
        if live.len() > 4096 {
            live.pop_front();
        }
        black_box(&live);
        if request % 64 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
