//! The record's history: what each stack held, every [`PERIOD`] for the last hour, bounded ([`STACKS_A_READING`]
//! stacks a reading, the most first), and which stacks grew steadily over it. This is what names a leak
//! with no run started and no earlier `explain` to compare with. No jemalloc and no clock in it: readings
//! come with their time.

use std::collections::{HashMap, VecDeque};

/// How often a reading is taken.
pub(crate) const PERIOD_SECONDS: u32 = 5;

/// How many readings are kept: an hour.
pub(crate) const READINGS: usize = 720;

/// How many stacks a reading keeps, those holding the most: a leak's stack is among them long before it
/// matters. 720 readings of 64 stacks take 360 KiB.
pub(crate) const STACKS_A_READING: usize = 64;

/// The least a stack must grow by to be named: 1 MiB, and a tenth of what it holds.
const LEAST_GROWTH: f64 = (1 << 20) as f64;

/// The fewest readings a stack's rise must span (15 s: a leak that fills a container's limit in 20 s is
/// named before the kill). Short rises must rise at every step ([`crate::memory::rise`]): a stack that
/// appears and swings around its level (a request's buffers: 0, then 12, 5, 19 MiB) is told from one that
/// grows once it has swung, and may pass for growth in its first 15 s if its first readings happen to rise.
const LEAST_READINGS: usize = 4;

/// What the stacks held at one moment.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reading {
    /// Seconds on the record's clock.
    pub(crate) time: u32,
    /// Stack index and unbiased live bytes, the most first.
    pub(crate) stacks: Vec<(u32, f32)>,
}

impl Reading {
    /// A reading of `held` (unbiased live bytes by stack index) at `time`, keeping the stacks holding the most.
    pub(crate) fn of(time: u32, held: impl IntoIterator<Item = (u32, f64)>) -> Self {
        let mut stacks: Vec<(u32, f32)> =
            held.into_iter().filter(|(_, bytes)| *bytes > 0.0).map(|(stack, bytes)| (stack, bytes as f32)).collect();
        stacks.sort_by(|a, b| b.1.total_cmp(&a.1));
        stacks.truncate(STACKS_A_READING);
        Reading { time, stacks }
    }
}

/// A stack that grew steadily.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Growth {
    pub(crate) stack: u32,
    /// Unbiased live bytes at the newest reading.
    pub(crate) bytes_now: f64,
    /// By how much it grew over its rise ([`crate::memory::rise::Rise::bytes`]).
    pub(crate) grown: f64,
    /// Over how many seconds.
    pub(crate) seconds: u32,
    /// `None` while it still grows now ([`crate::memory::rise`]); else how long it has been flat, in seconds:
    /// it grew and stopped (a cache that filled), named as such and no longer counted as growing.
    pub(crate) flat_seconds: Option<f64>,
}

/// The readings, oldest first.
#[derive(Debug, Default)]
pub(crate) struct History {
    pub(super) readings: VecDeque<Reading>,
}

impl History {
    /// Keeps `reading`, dropping the oldest beyond [`READINGS`].
    pub(crate) fn push(&mut self, reading: Reading) {
        if self.readings.len() == READINGS {
            self.readings.pop_front();
        }
        self.readings.push_back(reading);
    }

    /// Forgets what the readings kept of `stacks` (given back: their indexes will name other stacks).
    pub(crate) fn forget(&mut self, stacks: &[u32]) {
        if stacks.is_empty() {
            return;
        }
        let mut sorted = stacks.to_vec();
        sorted.sort_unstable();
        for reading in &mut self.readings {
            reading.stacks.retain(|(stack, _)| sorted.binary_search(stack).is_err());
        }
    }

    /// The time of the newest reading.
    pub(crate) fn newest(&self) -> Option<u32> {
        self.readings.back().map(|reading| reading.time)
    }

    /// What the stacks at `indexes` held at each reading, oldest first: its time and their bytes, in order
    /// (0 where a reading did not keep a stack).
    pub(crate) fn of(&self, indexes: &[u32]) -> Vec<(u32, Vec<f32>)> {
        self.readings
            .iter()
            .map(|reading| {
                let held = |index: &u32| {
                    reading.stacks.iter().find(|(stack, _)| stack == index).map_or(0.0, |(_, bytes)| *bytes)
                };
                (reading.time, indexes.iter().map(held).collect())
            })
            .collect()
    }

    /// The stacks that grew steadily over the readings kept ([`crate::memory::rise`]: over their rise's own
    /// stretch, from their last low, however long the history before it), by at least 1 MiB and a tenth of
    /// what they hold now, over at least [`LEAST_READINGS`] readings, whatever they fell by between (a cache that
    /// inserts in bursts and evicts some leaks as surely as one that never evicts; one that churns has no
    /// trend), the most grown first; each says whether it still grows now or grew and stopped
    /// ([`Growth::flat_seconds`]). A stack missing from a reading held less than its 64 largest: counted as
    /// 0 there.
    pub(crate) fn growing(&self) -> Vec<Growth> {
        let Some(newest) = self.readings.back() else { return Vec::new() };
        if self.readings.len() < 3 {
            return Vec::new();
        }
        let series: Vec<HashMap<u32, f32>> =
            self.readings.iter().map(|reading| reading.stacks.iter().copied().collect()).collect();
        let mut growing: Vec<Growth> = newest
            .stacks
            .iter()
            .filter_map(|&(stack, now)| {
                let points: Vec<(f64, f64)> = self
                    .readings
                    .iter()
                    .zip(&series)
                    .map(|(reading, held)| {
                        (f64::from(reading.time), f64::from(held.get(&stack).copied().unwrap_or(0.0)))
                    })
                    .collect();
                let rise = crate::memory::rise::shape(&points)?;
                if !rise.steady
                    || rise.readings < LEAST_READINGS
                    || rise.bytes < LEAST_GROWTH
                    || rise.bytes < f64::from(now) / 10.0
                {
                    return None;
                }
                Some(Growth {
                    stack,
                    bytes_now: f64::from(now),
                    grown: rise.bytes,
                    seconds: newest.time.saturating_sub(self.readings[0].time),
                    flat_seconds: rise.flat_seconds,
                })
            })
            .collect();
        growing.sort_by(|a, b| b.grown.total_cmp(&a.grown));
        growing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = (1 << 20) as f64;

    fn history(series: &[&[(u32, f64)]]) -> History {
        let mut history = History::default();
        for (index, stacks) in series.iter().enumerate() {
            history.push(Reading::of(index as u32 * PERIOD_SECONDS, stacks.iter().copied()));
        }
        history
    }

    #[test]
    fn a_stack_that_grows_steadily_is_named_and_one_that_churns_is_not() {
        // Stack 1 leaks 2 MiB a reading with one dip; stack 2 holds a steady 50 MiB; stack 3 saw-tooths.
        let history = history(&[
            &[(1, 2.0 * MIB), (2, 50.0 * MIB), (3, 10.0 * MIB)],
            &[(1, 4.0 * MIB), (2, 50.0 * MIB), (3, 30.0 * MIB)],
            &[(1, 3.5 * MIB), (2, 50.0 * MIB), (3, 5.0 * MIB)],
            &[(1, 8.0 * MIB), (2, 50.0 * MIB), (3, 25.0 * MIB)],
            &[(1, 10.0 * MIB), (2, 50.0 * MIB), (3, 20.0 * MIB)],
            &[(1, 12.0 * MIB), (2, 50.0 * MIB), (3, 8.0 * MIB)],
            &[(1, 14.0 * MIB), (2, 50.0 * MIB), (3, 28.0 * MIB)],
        ]);
        let growing = history.growing();
        let growth = Growth { stack: 1, bytes_now: 14.0 * MIB, grown: 12.0 * MIB, seconds: 30, flat_seconds: None };
        assert_eq!(growing, [growth]);
        let series = history.of(&[1, 9]);
        assert_eq!(series.len(), 7);
        assert_eq!(series[6], (30, vec![(14.0 * MIB) as f32, 0.0]), "a stack no reading kept holds 0");
    }

    /// A stack that appears and then swings around its level (a request's buffers: 0, then 12, 5, 19 MiB)
    /// rose from nothing in one step and has no trend since: not growing, however its last reading falls.
    #[test]
    fn a_stack_that_appears_and_swings_is_not_growing() {
        for swings in [[12.0, 5.0, 19.0, 7.0, 14.0, 21.0], [3.0, 20.0, 9.0, 15.0, 6.0, 18.0]] {
            let readings: Vec<Vec<(u32, f64)>> = std::iter::once(vec![(2, 30.0 * MIB)])
                .chain(swings.iter().map(|held| vec![(1, held * MIB), (2, 30.0 * MIB)]))
                .collect();
            let series: Vec<&[(u32, f64)]> = readings.iter().map(Vec::as_slice).collect();
            assert_eq!(history(&series).growing(), [], "{swings:?}");
        }
    }

    /// A cache that adds 8 MiB then evicts 4, every 5 s, leaks 4 MiB a period: named beside a steady leak,
    /// though it falls in every other reading; one that swings around a level is not.
    #[test]
    fn a_sawtooth_leak_is_named_beside_a_steady_one() {
        let readings: Vec<Vec<(u32, f64)>> = (0..16u32)
            .map(|step| {
                let period = f64::from(step / 2);
                let sawtooth = 4.0 * period + if step % 2 == 0 { 8.0 } else { 4.0 };
                let swinging = 40.0 + if step % 3 == 0 { 9.0 } else { 0.0 } - f64::from(step % 2) * 3.0;
                vec![(1, sawtooth * MIB), (2, 2.0 * f64::from(step) * MIB), (3, swinging * MIB)]
            })
            .collect();
        let series: Vec<&[(u32, f64)]> = readings.iter().map(Vec::as_slice).collect();
        let growing = history(&series).growing();
        let named: Vec<u32> = growing.iter().map(|growth| growth.stack).collect();
        assert_eq!(named, [2, 1], "{growing:?}");
        assert_eq!(growing[1].grown, 24.0 * MIB, "from 8 MiB to 32, after an eviction");
        assert!(growing.iter().all(|growth| growth.flat_seconds.is_none()), "both grow now: {growing:?}");
    }

    /// A stack that grew for a minute and has been flat for two is named as grown and stopped, not as
    /// growing: the gauge of what grows drops to zero once a stack goes flat.
    #[test]
    fn a_stack_that_stopped_growing_is_named_as_stopped() {
        let readings: Vec<Vec<(u32, f64)>> =
            (0..37u32).map(|step| vec![(1, f64::from(step.min(12)) * 4.0 * MIB), (2, f64::from(step) * MIB)]).collect();
        let series: Vec<&[(u32, f64)]> = readings.iter().map(Vec::as_slice).collect();
        let growing = history(&series).growing();
        let stopped = growing.iter().find(|growth| growth.stack == 1).unwrap();
        assert_eq!(stopped.flat_seconds, Some(120.0), "{growing:?}");
        let going_on = growing.iter().find(|growth| growth.stack == 2).unwrap();
        assert_eq!(going_on.flat_seconds, None, "{growing:?}");
    }

    /// A stack that fills for a minute is named alike whether the record watched 30 s or 50 minutes of
    /// the program idle before (on the main of the day issue 61 was filed, a long idle left it unnamed: a
    /// new high in a quarter of all readings kept was asked).
    #[test]
    fn a_stack_filling_after_any_idle_is_named_alike() {
        let named = |idle_readings: u32| {
            let readings: Vec<Vec<(u32, f64)>> = (0..idle_readings + 12)
                .map(|step| {
                    let filled = f64::from(step.saturating_sub(idle_readings)) * 2.0 * MIB;
                    vec![(1, 4.0 * MIB + filled), (2, 30.0 * MIB)]
                })
                .collect();
            let series: Vec<&[(u32, f64)]> = readings.iter().map(Vec::as_slice).collect();
            let growing = history(&series).growing();
            assert_eq!(growing.len(), 1, "after {idle_readings} idle readings: {growing:?}");
            (growing[0].stack, growing[0].grown, growing[0].flat_seconds)
        };
        assert_eq!(named(6), (1, 22.0 * MIB, None));
        assert_eq!(named(600), named(6));
    }

    #[test]
    fn too_few_readings_or_too_little_growth_name_nothing() {
        assert!(history(&[&[(1, MIB)], &[(1, 9.0 * MIB)]]).growing().is_empty(), "two readings");
        let small = history(&[&[(1, 100.0 * MIB)], &[(1, 100.5 * MIB)], &[(1, 101.0 * MIB)]]);
        assert!(small.growing().is_empty(), "1 MiB on 101 is under a tenth");
        let new =
            history(&[&[], &[(4, MIB)], &[(4, 3.0 * MIB)], &[(4, 4.0 * MIB)], &[(4, 6.0 * MIB)], &[(4, 7.0 * MIB)]]);
        assert_eq!(new.growing()[0].grown, 7.0 * MIB, "a stack absent at first grew from nothing");
        assert!(history(&[&[], &[(4, MIB)], &[(4, 3.0 * MIB)]]).growing().is_empty(), "three readings");
        let fast = history(&[&[], &[(4, 50.0 * MIB)], &[(4, 100.0 * MIB)], &[(4, 150.0 * MIB)]]);
        assert_eq!(fast.growing()[0].grown, 150.0 * MIB, "four readings rising at every step: a fast leak");
        let swung = history(&[&[], &[(4, 50.0 * MIB)], &[(4, 100.0 * MIB)], &[(4, 90.0 * MIB)]]);
        assert!(swung.growing().is_empty(), "four readings, one falling");
    }

    #[test]
    fn readings_are_bounded() {
        let mut history = History::default();
        for time in 0..(READINGS as u32 + 10) {
            history.push(Reading::of(time, (0..200).map(|stack| (stack, f64::from(stack + 1)))));
        }
        assert_eq!(history.readings.len(), READINGS);
        assert_eq!(history.readings[0].time, 10);
        assert_eq!(history.readings[0].stacks.len(), STACKS_A_READING);
        assert_eq!(history.readings[0].stacks[0], (199, 200.0), "the most first");
        assert_eq!(history.newest(), Some(READINGS as u32 + 9));
    }
}
