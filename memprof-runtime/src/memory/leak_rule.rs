//! The leak rule, over the memory history (`stats.allocated` once a second): within the last
//! [`LEAK_WINDOW_MS`], live bytes rose over a stretch of their own ([`super::rise`]: from their last low,
//! whatever came before it; at least [`LEAK_MIN_SPAN_MS`] and [`LEAK_MIN_READINGS`] readings, the flat
//! since counted for a rise that stopped) by at least
//! [`LEAK_MIN_BYTES`] and [`LEAK_MIN_SHARE`] of where they began, steadily (a trend through the requests'
//! noise), while jemalloc's other resident bytes grew by less than half as much; whether they still rise
//! now, at the pace of the rising stretch. Pure: tested on made-up readings (`verdict/tests.rs`).

/// How far back the leak rule looks.
pub(crate) const LEAK_WINDOW_MS: u64 = 300_000;
/// The shortest rise the leak rule judges (its stretch, not the history before it).
pub(crate) const LEAK_MIN_SPAN_MS: u64 = 10_000;
/// The fewest readings of a rise the leak rule judges.
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
    let points: Vec<(f64, f64)> =
        window.iter().map(|reading| (reading.time as f64 / 1000.0, reading.allocated as f64)).collect();
    let rise = super::rise::shape(&points)?;
    // A rise going on is judged over its stretch; one that stopped over the stretch and the flat since, and
    // a jump (at most two steps up, a start-up's or a cache's burst) is a step whatever its shape.
    let (judged_from, judged_to) = match rise.flat_seconds {
        None => (rise.from, rise.to),
        Some(_) => (rise.from, last.time as f64 / 1000.0),
    };
    let judged_readings = points.iter().filter(|(time, _)| (judged_from..=judged_to).contains(time)).count();
    let steady = rise.steady || (rise.flat_seconds.is_some() && rise.readings <= 3);
    if (judged_to - judged_from) * 1000.0 < LEAK_MIN_SPAN_MS as f64 || judged_readings < LEAK_MIN_READINGS || !steady {
        return None;
    }
    if rise.bytes < LEAK_MIN_BYTES as f64 || rise.bytes < LEAK_MIN_SHARE * rise.base {
        return None;
    }
    let began = window.iter().find(|reading| reading.time as f64 / 1000.0 >= rise.from)?;
    if last.rest.saturating_sub(began.rest) as f64 >= rise.bytes / 2.0 {
        return None;
    }
    Some(Growth { bytes: rise.bytes as u64, seconds: rise.seconds, flat_seconds: rise.flat_seconds })
}
