//! The process's memory over time: the last minutes of jemalloc's memory counters, for the dashboard's
//! chart and the leak rule (the readings of [`crate::profiler::counters`], once a second, in a ring of fixed size,
//! served as JSON by `/memory-profiler/memory`). What each stack held over time is the record's history
//! ([`crate::sampler::record::growth`]), the one that names what grew.

use std::collections::VecDeque;

use parking_lot::Mutex;

use memprof_wire::Reading;

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

    /// The newest resident set by class, when one was read within `age` of now.
    pub(crate) fn latest_classes_since(&self, age: std::time::Duration) -> Option<memprof_wire::ClassBytes> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |now| now.as_millis());
        let oldest = now.saturating_sub(age.as_millis()) as u64;
        self.readings.iter().rev().take_while(|reading| reading.time >= oldest).find_map(|reading| reading.classes)
    }

    /// The readings taken after `time` (all of them with 0), oldest first.
    pub(crate) fn since(&self, time: u64) -> Vec<Reading> {
        let first_newer = self.readings.partition_point(|reading| reading.time <= time);
        self.readings.range(first_newer..).copied().collect()
    }
}

static RING: Mutex<Ring> = Mutex::new(Ring { readings: VecDeque::new() });

/// The readings kept.
pub(crate) fn ring() -> parking_lot::MutexGuard<'static, Ring> {
    RING.lock()
}

/// Makes room for every reading up front, so recording never allocates.
pub(crate) fn reserve() {
    RING.lock().readings.reserve_exact(CAPACITY);
}

/// Keeps a reading.
pub(crate) fn record(reading: Reading) {
    RING.lock().push(reading);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(time: u64) -> Reading {
        Reading { time, counters: memprof_wire::HeapCounters { allocated: 1, ..Default::default() }, classes: None }
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
