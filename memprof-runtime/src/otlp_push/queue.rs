//! The exports waiting to be sent, bounded, and when each may be tried again: pure, so the policy is
//! unit-tested without a clock or a server.
//!
//! At most [`MOST_EXPORTS`] wait, of [`MOST_QUEUED_BYTES`] in all: a Collector down for longer costs the
//! program that much memory at most, the oldest dropped first (an engine is better served by the newest). A failed export is
//! tried again after the server's `Retry-After`, else after a backoff doubling from one second to a
//! minute, and given up [`GIVE_UP_AFTER`] after its first failure.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The most exports waiting.
pub(crate) const MOST_EXPORTS: usize = 8;

/// The most bytes the waiting exports may hold in all (the newest always waits, whatever its size).
pub(crate) const MOST_QUEUED_BYTES: usize = 32 << 20;

/// How long an export is tried again after its first failure before it is dropped.
pub(crate) const GIVE_UP_AFTER: Duration = Duration::from_secs(300);

/// The backoff's first and longest wait.
const FIRST_WAIT: Duration = Duration::from_secs(1);
const LONGEST_WAIT: Duration = Duration::from_secs(60);

/// One export: its body (compressed when configured), how many profiles it holds, and its tries.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Export {
    pub(crate) body: Vec<u8>,
    pub(crate) profiles: usize,
    /// When it may be sent (now, for a new one).
    pub(crate) next_try: Instant,
    /// When it first failed.
    pub(crate) failed_since: Option<Instant>,
    /// How many times it failed.
    pub(crate) failures: u32,
}

impl Export {
    /// A new export, to send at once.
    pub(crate) fn new(body: Vec<u8>, profiles: usize, now: Instant) -> Export {
        Export { body, profiles, next_try: now, failed_since: None, failures: 0 }
    }
}

/// What became of a failed export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterFailure {
    /// Tried again at this time.
    Again(Instant),
    /// Dropped: it failed for [`GIVE_UP_AFTER`].
    GivenUp,
}

/// The waiting exports, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    exports: VecDeque<Export>,
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

    /// Takes the head export out (sent, refused or given up).
    pub(crate) fn pop(&mut self) -> Option<Export> {
        self.exports.pop_front()
    }

    /// How many exports wait.
    pub(crate) fn len(&self) -> usize {
        self.exports.len()
    }

    /// The head export failed at `now`: when it is tried again (after `after`, the server's word, else
    /// the backoff's next step, with up to a quarter more at random so that a fleet does not come back
    /// all at once), or whether it is given up (then taken out).
    pub(crate) fn failed(&mut self, now: Instant, after: Option<Duration>, jitter: f64) -> Option<AfterFailure> {
        let head = self.exports.front_mut()?;
        let since = *head.failed_since.get_or_insert(now);
        head.failures += 1;
        if now.duration_since(since) >= GIVE_UP_AFTER {
            self.exports.pop_front();
            return Some(AfterFailure::GivenUp);
        }
        let backoff = FIRST_WAIT.saturating_mul(1 << (head.failures - 1).min(6)).min(LONGEST_WAIT);
        let wait = after.unwrap_or_else(|| backoff.mul_f64(1.0 + jitter.clamp(0.0, 1.0) / 4.0));
        head.next_try = now + wait;
        Some(AfterFailure::Again(head.next_try))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export(byte: u8, now: Instant) -> Export {
        Export::new(vec![byte], 4, now)
    }

    #[test]
    fn the_oldest_export_makes_room_for_the_newest() {
        let now = Instant::now();
        let mut queue = Queue::default();
        for byte in 0..MOST_EXPORTS as u8 {
            assert_eq!(queue.push(export(byte, now)), 0);
        }
        assert_eq!(queue.push(export(99, now)), 1);
        assert_eq!((queue.len(), queue.head().map(|head| head.body.clone())), (MOST_EXPORTS, Some(vec![1])));
        // Large exports: the oldest go until the bytes fit; the newest waits whatever its size.
        let large = |byte: u8| Export::new(vec![byte; MOST_QUEUED_BYTES / 2], 4, now);
        assert_eq!(queue.push(large(1)), 1, "the queue was full");
        assert_eq!(queue.push(large(2)), MOST_EXPORTS - 1, "every small one, for the bytes");
        assert_eq!(queue.len(), 2);
        let huge = Export::new(vec![3; MOST_QUEUED_BYTES + 1], 4, now);
        assert_eq!(queue.push(huge), 2);
        assert_eq!(queue.len(), 1);
    }

    #[test]
    fn failures_back_off_doubling_or_as_the_server_says_and_are_given_up_after_five_minutes() {
        let start = Instant::now();
        let mut queue = Queue::default();
        queue.push(export(1, start));
        let waits: Vec<Duration> = (0..8)
            .map(|_| match queue.failed(start, None, 0.0) {
                Some(AfterFailure::Again(at)) => at - start,
                other => panic!("{other:?}"),
            })
            .collect();
        let seconds: Vec<u64> = waits.iter().map(Duration::as_secs).collect();
        assert_eq!(seconds, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(
            queue.failed(start, Some(Duration::from_secs(7)), 0.0),
            Some(AfterFailure::Again(start + Duration::from_secs(7)))
        );
        let Some(AfterFailure::Again(at)) = queue.failed(start, None, 1.0) else { panic!() };
        assert_eq!(at - start, Duration::from_secs(75), "a quarter more at the most");
        assert_eq!(queue.failed(start + GIVE_UP_AFTER, None, 0.0), Some(AfterFailure::GivenUp));
        assert_eq!((queue.len(), queue.failed(start, None, 0.0)), (0, None));
    }
}
