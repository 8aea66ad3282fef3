//! The exports waiting to be sent, bounded, and when the next may be sent: pure, so the policy is
//! unit-tested without a clock or a server.
//!
//! At most [`MOST_EXPORTS`] wait, of [`MOST_QUEUED_BYTES`] in all: a Collector down for longer costs the
//! program that much memory at most, the oldest dropped first (an engine is better served by the newest).
//! The backoff is the queue's, not an export's: after any failure nothing is sent before it ends, whichever
//! export is at the head (a full queue drops its oldest, never sends sooner). It doubles from one second
//! to a minute with up to a quarter more at random, so that a fleet does not come back all at once, and a
//! server's `Retry-After` lengthens it, never shortens it (`0` and a date past are not "now": a thousand
//! processes retrying at once would flood their own Collector). An export is given up [`GIVE_UP_AFTER`]
//! after its first failure; a success ends the backoff.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The most exports waiting.
pub(crate) const MOST_EXPORTS: usize = 8;

/// The most bytes the waiting exports may hold in all (the newest always waits, whatever its size).
pub(crate) const MOST_QUEUED_BYTES: usize = 32 << 20;

/// How long an export is tried again after its first failure before it is dropped.
pub(crate) const GIVE_UP_AFTER: Duration = Duration::from_secs(300);

/// The backoff's first and longest wait (before its jitter).
const FIRST_WAIT: Duration = Duration::from_secs(1);
const LONGEST_WAIT: Duration = Duration::from_secs(60);

/// One export: its body (compressed when configured), how many profiles it holds, and when it first failed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Export {
    pub(crate) body: Vec<u8>,
    pub(crate) profiles: usize,
    pub(crate) failed_since: Option<Instant>,
}

impl Export {
    /// A new export.
    pub(crate) fn new(body: Vec<u8>, profiles: usize) -> Export {
        Export { body, profiles, failed_since: None }
    }
}

/// What became of a failed export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterFailure {
    /// Tried again, not before this time.
    Again(Instant),
    /// Dropped: it failed for [`GIVE_UP_AFTER`]; the next is not sent before this time.
    GivenUp(Instant),
}

/// The waiting exports, oldest first, and the backoff.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    exports: VecDeque<Export>,
    /// Failures in a row, of any export.
    failures: u32,
    /// Nothing is sent before this (a backoff in force).
    not_before: Option<Instant>,
}

impl Queue {
    /// Adds `export`; answers how many of the oldest were dropped to make room.
    pub(crate) fn push(&mut self, export: Export) -> usize {
        let mut bytes: usize = export.body.len() + self.exports.iter().map(|waiting| waiting.body.len()).sum::<usize>();
        let mut dropped = 0;
        while !self.exports.is_empty() && (self.exports.len() >= MOST_EXPORTS || bytes > MOST_QUEUED_BYTES) {
            bytes -= self.exports.pop_front().map_or(0, |oldest| oldest.body.len());
            dropped += 1;
        }
        self.exports.push_back(export);
        dropped
    }

    /// The export to send next.
    pub(crate) fn head(&self) -> Option<&Export> {
        self.exports.front()
    }

    /// When the head may be sent: `None` with nothing waiting; else now, or the backoff's end.
    pub(crate) fn due(&self, now: Instant) -> Option<Instant> {
        self.exports.front()?;
        Some(self.not_before.map_or(now, |not_before| not_before.max(now)))
    }

    /// The backoff in force at `now`: how long until the next send may go.
    pub(crate) fn backoff(&self, now: Instant) -> Duration {
        self.not_before.map_or(Duration::ZERO, |not_before| not_before.saturating_duration_since(now))
    }

    /// Takes the head export out: sent (then the backoff ends) or refused for good.
    pub(crate) fn pop(&mut self, sent: bool) -> Option<Export> {
        if sent {
            (self.failures, self.not_before) = (0, None);
        }
        self.exports.pop_front()
    }

    /// How many exports wait.
    pub(crate) fn len(&self) -> usize {
        self.exports.len()
    }

    /// The head export failed at `now`, the server saying `after` (`Retry-After`) or not: the backoff's
    /// next step (`jitter` in 0..=1 adding up to a quarter), or the server's wait when that is longer;
    /// the head given up (taken out) once it failed for [`GIVE_UP_AFTER`].
    pub(crate) fn failed(&mut self, now: Instant, after: Option<Duration>, jitter: f64) -> Option<AfterFailure> {
        let head = self.exports.front_mut()?;
        let since = *head.failed_since.get_or_insert(now);
        self.failures = self.failures.saturating_add(1);
        let backoff = FIRST_WAIT.saturating_mul(1 << (self.failures - 1).min(6)).min(LONGEST_WAIT);
        let wait = backoff.mul_f64(1.0 + jitter.clamp(0.0, 1.0) / 4.0).max(after.unwrap_or_default());
        let not_before = now + wait;
        self.not_before = Some(not_before);
        if now.duration_since(since) >= GIVE_UP_AFTER {
            self.exports.pop_front();
            return Some(AfterFailure::GivenUp(not_before));
        }
        Some(AfterFailure::Again(not_before))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export(byte: u8) -> Export {
        Export::new(vec![byte], 4)
    }

    #[test]
    fn the_oldest_export_makes_room_for_the_newest() {
        let mut queue = Queue::default();
        for byte in 0..MOST_EXPORTS as u8 {
            assert_eq!(queue.push(export(byte)), 0);
        }
        assert_eq!(queue.push(export(99)), 1);
        assert_eq!((queue.len(), queue.head().map(|head| head.body.clone())), (MOST_EXPORTS, Some(vec![1])));
        // Large exports: the oldest go until the bytes fit; the newest waits whatever its size.
        let large = |byte: u8| Export::new(vec![byte; MOST_QUEUED_BYTES / 2], 4);
        assert_eq!(queue.push(large(1)), 1, "the queue was full");
        assert_eq!(queue.push(large(2)), MOST_EXPORTS - 1, "every small one, for the bytes");
        assert_eq!(queue.len(), 2);
        let huge = Export::new(vec![3; MOST_QUEUED_BYTES + 1], 4);
        assert_eq!(queue.push(huge), 2);
        assert_eq!(queue.len(), 1);
    }

    /// The seconds of each wait after `failures` failures in a row, the server saying `after`.
    fn waits(failures: usize, after: Option<Duration>, jitter: f64) -> Vec<u64> {
        let start = Instant::now();
        let mut queue = Queue::default();
        queue.push(export(1));
        (0..failures)
            .map(|_| match queue.failed(start, after, jitter) {
                Some(AfterFailure::Again(at)) => (at - start).as_secs(),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn failures_back_off_doubling_and_a_retry_after_only_lengthens_the_wait() {
        assert_eq!(waits(8, None, 0.0), [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(waits(3, Some(Duration::ZERO), 0.0), [1, 2, 4], "Retry-After: 0 is not now");
        assert_eq!(waits(3, Some(Duration::from_secs(7)), 0.0), [7, 7, 7]);
        assert_eq!(waits(5, Some(Duration::from_secs(7)), 0.0)[4], 16, "never shorter than the backoff");
        assert_eq!(waits(7, None, 1.0)[6], 75, "a quarter more at the most");
    }

    /// A full queue drops its oldest for a new export: the new head waits for the backoff all the same, and
    /// a success ends it.
    #[test]
    fn the_backoff_is_the_queues_whichever_export_is_at_the_head() {
        let start = Instant::now();
        let mut queue = Queue::default();
        assert_eq!(queue.due(start), None, "nothing waits");
        queue.push(export(0));
        assert_eq!(queue.due(start), Some(start));
        queue.failed(start, Some(Duration::from_secs(120)), 0.0);
        for byte in 1..=MOST_EXPORTS as u8 {
            queue.push(export(byte));
        }
        assert_eq!(queue.head().map(|head| head.body.clone()), Some(vec![1]), "the failed one dropped");
        assert_eq!(queue.due(start), Some(start + Duration::from_secs(120)), "not sent sooner for it");
        assert_eq!(queue.backoff(start + Duration::from_secs(20)), Duration::from_secs(100));
        queue.pop(true);
        assert_eq!((queue.due(start), queue.backoff(start)), (Some(start), Duration::ZERO), "sent: no backoff");
        queue.failed(start, None, 0.0);
        queue.pop(false);
        assert_eq!(queue.due(start), Some(start + Duration::from_secs(1)), "refused: the backoff stays");
    }

    #[test]
    fn an_export_is_given_up_five_minutes_after_its_first_failure() {
        let start = Instant::now();
        let mut queue = Queue::default();
        queue.push(export(1));
        queue.failed(start, None, 0.0);
        let given_up = queue.failed(start + GIVE_UP_AFTER, None, 0.0);
        assert_eq!(given_up, Some(AfterFailure::GivenUp(start + GIVE_UP_AFTER + Duration::from_secs(2))));
        assert_eq!((queue.len(), queue.failed(start, None, 0.0)), (0, None));
    }

    /// A fleet of 300 pushers exporting every second to one collector that answers every request 429 with
    /// `Retry-After: 0`, simulated for ten minutes in steps of 100 ms, each pusher's jitter its own: the
    /// requests a second stay bounded (at the backoff's cap, some 300 / 67 a second, where each pusher
    /// sending at once would be 3,000), and no second past the first minute sees a fifth of the fleet (the
    /// jitter spreads a fleet that started together: 43 at most, measured).
    #[test]
    fn a_fleet_against_a_refusing_collector_sends_a_bounded_rate() {
        let start = Instant::now();
        let step = Duration::from_millis(100);
        let mut random = 0x2545_f491_4f6c_dd1du64;
        let mut jitter = move || {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            (random % 1000) as f64 / 1000.0
        };
        let mut pushers: Vec<(Queue, Instant)> = (0..300).map(|_| (Queue::default(), start)).collect();
        let mut by_second = vec![0u32; 600];
        for tick in 0..6000u32 {
            let now = start + step * tick;
            for (queue, next_export) in &mut pushers {
                if now >= *next_export {
                    queue.push(export(0));
                    *next_export = now + Duration::from_secs(1);
                }
                if queue.due(now).is_some_and(|due| due <= now) {
                    by_second[(tick / 10) as usize] += 1;
                    queue.failed(now, Some(Duration::ZERO), jitter());
                }
            }
        }
        let late: u32 = by_second[60..].iter().sum();
        let busiest = by_second[60..].iter().max().copied().unwrap_or(0);
        assert!(f64::from(late) / 540.0 <= 6.0, "{} requests a second after the first minute", f64::from(late) / 540.0);
        assert!(busiest <= 60, "{busiest} in the busiest second: {by_second:?}");
        assert!(by_second[..10].iter().sum::<u32>() <= 300 * 5, "the first ten seconds: {:?}", &by_second[..10]);
    }
}
