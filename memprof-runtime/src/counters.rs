//! memprof's one thread reading jemalloc's memory counters, once a second: each reading goes into the
//! memory history (the dashboard's chart, [`crate::history`]) and, when they are armed, to the automatic
//! dumps' watcher ([`crate::autodump`]).
//!
//! Started at start-up when the endpoints are on or automatic dumps are armed (before any run, so its
//! birth is never sampled), and at most once.

use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use memprof_wire::Reading;

use crate::{autodump, history, jemalloc};

/// How often the counters are read.
pub(crate) const PERIOD: Duration = Duration::from_secs(1);

/// Whether the reading thread runs.
static STARTED: Mutex<bool> = Mutex::new(false);

/// Starts the thread that reads the counters every [`PERIOD`], unless it runs already.
pub(crate) fn start() -> std::io::Result<()> {
    let mut started = STARTED.lock();
    if *started {
        return Ok(());
    }
    crate::threads::spawn("memprof-stats", || {
        history::reserve();
        loop {
            if let Ok(counters) = jemalloc::heap_stats() {
                let time = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64);
                history::record(Reading { time, counters });
                autodump::check(&counters);
            }
            thread::sleep(PERIOD);
        }
    })?;
    *started = true;
    Ok(())
}
