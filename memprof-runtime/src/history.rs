//! The last minutes of jemalloc's memory counters, for the dashboard's chart: an unsampled thread reads
//! `allocated`, `active`, `resident` and `retained` once a second into a ring of fixed size, served as JSON by
//! `/memory-profiler/memory`.

use std::collections::VecDeque;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use memprof_wire::Reading;

use crate::jemalloc;

/// How often the counters are read.
pub(crate) const PERIOD: Duration = Duration::from_secs(1);
/// How many readings are kept: ten minutes.
pub(crate) const CAPACITY: usize = 600;

/// The newest readings, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Ring {
    readings: VecDeque<Reading>,
}

impl Ring {
    /// Adds a reading, dropping the oldest beyond [`CAPACITY`].
    fn push(&mut self, reading: Reading) {
        if self.readings.len() == CAPACITY {
            self.readings.pop_front();
        }
        self.readings.push_back(reading);
    }

    /// The readings taken after `time` (all of them with 0), oldest first.
    pub(crate) fn since(&self, time: u64) -> Vec<Reading> {
        let first_newer = self.readings.partition_point(|reading| reading.time <= time);
        self.readings.range(first_newer..).copied().collect()
    }
}

static RING: Mutex<Ring> = Mutex::new(Ring { readings: VecDeque::new() });

/// Whether the reading thread runs.
static STARTED: Mutex<bool> = Mutex::new(false);

/// The readings kept.
pub(crate) fn ring() -> parking_lot::MutexGuard<'static, Ring> {
    RING.lock()
}

/// Starts the thread that takes a reading every [`PERIOD`], unless it runs already.
pub(crate) fn start() -> std::io::Result<()> {
    let mut started = STARTED.lock();
    if *started {
        return Ok(());
    }
    crate::threads::spawn("memprof-history", || {
        RING.lock().readings.reserve_exact(CAPACITY);
        loop {
            if let Ok(counters) = jemalloc::heap_stats() {
                let time = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64);
                RING.lock().push(Reading { time, counters });
            }
            thread::sleep(PERIOD);
        }
    })?;
    *started = true;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(time: u64) -> Reading {
        Reading { time, counters: memprof_wire::HeapCounters { allocated: 1, ..Default::default() } }
    }

    #[test]
    fn the_ring_keeps_the_newest_readings_and_answers_what_came_after_a_time() {
        let mut ring = Ring::default();
        for time in 1..=(CAPACITY as u64 + 5) {
            ring.push(reading(time * 1000));
        }
        let all = ring.since(0);
        assert_eq!(all.len(), CAPACITY);
        assert_eq!((all[0].time, all[CAPACITY - 1].time), (6000, (CAPACITY as u64 + 5) * 1000));
        let newest: Vec<u64> = ring.since((CAPACITY as u64 + 3) * 1000).iter().map(|reading| reading.time).collect();
        assert_eq!(newest, [(CAPACITY as u64 + 4) * 1000, (CAPACITY as u64 + 5) * 1000]);
        assert!(ring.since(u64::MAX).is_empty());
    }
}
