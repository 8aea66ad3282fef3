//! The leak rule, over the memory history (`stats.allocated` once a second): over the last
//! [`LEAK_WINDOW_MS`] (at least [`LEAK_MIN_SPAN_MS`] and [`LEAK_MIN_READINGS`] readings), live bytes rose by
//! at least [`LEAK_MIN_BYTES`] and [`LEAK_MIN_SHARE`] of where they began, steadily (at least 70 % of steps
//! rising or flat, and the lowest reading of the window's second half above a quarter of the rise), while
//! jemalloc's other resident bytes grew by less than half as much; whether they still rise now
//! ([`super::rise`]: the last minute, or the last quarter of the window), at the pace of the rising
//! stretch. Pure: tested on made-up readings (`verdict/tests.rs`).

/// How far back the leak rule looks.
pub(crate) const LEAK_WINDOW_MS: u64 = 300_000;
/// The shortest history the leak rule judges.
pub(crate) const LEAK_MIN_SPAN_MS: u64 = 10_000;
/// The fewest readings the leak rule judges.
pub(crate) const LEAK_MIN_READINGS: usize = 5;
/// The smallest rise of live bytes called a leak.
pub(crate) const LEAK_MIN_BYTES: u64 = 16 << 20;
/// The smallest rise, as a share of the live bytes at the window's start.
pub(crate) const LEAK_MIN_SHARE: f64 = 0.10;

/// One reading of the history, as the leak rule needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LiveReading {
    /// Unix milliseconds.
    pub(crate) time: u64,
    /// Live bytes (`stats.allocated`).
    pub(crate) allocated: u64,
    /// jemalloc's other resident bytes (`stats.resident - stats.allocated`).
    pub(crate) rest: u64,
}

/// How live bytes grew, when the leak rule holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Growth {
    /// Bytes.
    pub(crate) bytes: u64,
    /// Over how many seconds they rose (the rising stretch, not the whole window).
    pub(crate) seconds: f64,
    /// `None` while they still rise; else how long they have been flat, in seconds.
    pub(crate) flat_seconds: Option<f64>,
}

/// The leak rule over `history` (oldest first).
pub(crate) fn growth(history: &[LiveReading]) -> Option<Growth> {
    let last = history.last()?;
    let window: Vec<&LiveReading> =
        history.iter().filter(|reading| reading.time + LEAK_WINDOW_MS >= last.time).collect();
    let first = window.first()?;
    let span = last.time.saturating_sub(first.time);
    if span < LEAK_MIN_SPAN_MS || window.len() < LEAK_MIN_READINGS {
        return None;
    }
    let rise = last.allocated.checked_sub(first.allocated)?;
    if rise < LEAK_MIN_BYTES || (rise as f64) < LEAK_MIN_SHARE * first.allocated as f64 {
        return None;
    }
    let steps = window.windows(2).filter(|pair| pair[1].allocated >= pair[0].allocated).count();
    let second_half_low = window[window.len() / 2..].iter().map(|reading| reading.allocated).min()?;
    let steady = steps * 10 >= (window.len() - 1) * 7 && second_half_low >= first.allocated + rise / 4;
    let rest_rise = last.rest.saturating_sub(first.rest);
    if !steady || rest_rise >= rise / 2 {
        return None;
    }
    let points: Vec<(f64, f64)> =
        window.iter().map(|reading| (reading.time as f64 / 1000.0, reading.allocated as f64)).collect();
    let shape = super::rise::shape(&points)?;
    Some(Growth { bytes: rise, seconds: shape.seconds, flat_seconds: shape.flat_seconds })
}
