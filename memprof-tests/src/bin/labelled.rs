//! A program that labels its allocations, for `tests/labels.rs`. Its endpoints are served on a free port.
//!
//! - `labelled tokio`: on a two-worker tokio runtime, a task labelled `task=labelled` keeps the newest 64
//!   buffers of 64 KiB from `labelled_allocation`, sleeping between allocations so that it moves between
//!   the workers (it prints `labelled task polled on 2 threads` once it has); an unlabelled task does the same
//!   in `unlabelled_allocation` on the same workers.
//! - `labelled tracing`: with memprof's `tracing` layer labelling by span name and `tenant`, a task
//!   instrumented with the span `job` (`tenant = "acme"`) keeps the newest 64 buffers of 64 KiB from
//!   `traced_allocation`; prints `tracing ready`.
//! - `labelled tracing-filtered`: the same under a filter on the whole subscriber at `warn` (as
//!   `RUST_LOG=warn` does), which disables the span: nothing is labelled.
//! - `labelled tracing-per-layer`: the same with the filter given to the log's layer alone, as
//!   docs/labels.md says: the span labels again.
//! - `labelled overflow`: enters 1,100 distinct label sets (`request=0`..`request=1099`, past the bound of
//!   1,024), each around a 1 KiB buffer it keeps, prints `entered 1100 label sets`, then waits to be killed.

use std::collections::{HashSet, VecDeque};
use std::hint::black_box;
use std::time::Duration;

use memprof::labels::{self, WithLabels};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[memprof::main(http = "127.0.0.1:0")]
fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("tokio") => tokio_tasks(),
        Some("overflow") => overflow(),
        Some("tracing") => {
            tracing_subscriber::registry().with(memprof::labels::LabelLayer::with_fields(["tenant"])).init();
            traced();
        }
        Some("tracing-filtered") => {
            let filter = tracing_subscriber::filter::LevelFilter::WARN;
            tracing_subscriber::registry()
                .with(filter)
                .with(tracing_subscriber::fmt::layer())
                .with(memprof::labels::LabelLayer::with_fields(["tenant"]))
                .init();
            traced();
        }
        Some("tracing-per-layer") => {
            let filter = tracing_subscriber::filter::LevelFilter::WARN;
            // As docs/labels.md gives it:
            tracing_subscriber::registry()
                .with(tracing_subscriber::fmt::layer().with_filter(filter))
                .with(memprof::labels::LabelLayer::with_fields(["tenant"]))
                .init();
            traced();
        }
        other => panic!(
            "expected the mode 'tokio', 'tracing', 'tracing-filtered', 'tracing-per-layer' or 'overflow', not {other:?}"
        ),
    }
}

fn tokio_tasks() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    runtime.block_on(async {
        let labelled = tokio::spawn(
            async {
                let mut threads = HashSet::new();
                let mut kept = VecDeque::new();
                loop {
                    keep(&mut kept, labelled_allocation());
                    if threads.insert(std::thread::current().id()) && threads.len() == 2 {
                        println!("labelled task polled on 2 threads");
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            .with_labels(&[("task", "labelled")]),
        );
        let unlabelled = tokio::spawn(async {
            let mut kept = VecDeque::new();
            loop {
                keep(&mut kept, unlabelled_allocation());
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        let _ = (labelled.await, unlabelled.await);
    });
}

/// A task instrumented with the span `job` (`tenant = "acme"`), under the subscriber set up.
fn traced() {
    use tracing::Instrument;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    runtime.block_on(async {
        let job = tokio::spawn(
            async {
                let mut kept = VecDeque::new();
                loop {
                    keep(&mut kept, traced_allocation());
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            .instrument(tracing::info_span!("job", tenant = "acme")),
        );
        println!("tracing ready");
        let _ = job.await;
    });
}

#[inline(never)]
fn traced_allocation() -> Vec<u8> {
    black_box(vec![4; 64 * 1024])
}

fn keep(kept: &mut VecDeque<Vec<u8>>, buffer: Vec<u8>) {
    if kept.len() == 64 {
        kept.pop_front();
    }
    kept.push_back(buffer);
}

#[inline(never)]
fn labelled_allocation() -> Vec<u8> {
    black_box(vec![1; 64 * 1024])
}

#[inline(never)]
fn unlabelled_allocation() -> Vec<u8> {
    black_box(vec![2; 64 * 1024])
}

fn overflow() {
    let kept: Vec<Vec<u8>> = (0..1100)
        .map(|request| labels::with(&[("request", &request.to_string())], || black_box(vec![3; 1024])))
        .collect();
    println!("entered {} label sets", kept.len());
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}
