//! How a series of readings rose: still rising now, or risen and flat since. The one notion of "growing
//! now" that `explain`'s leak rule (the process's live bytes) and the record's growing stacks (`/growing`,
//! `memprof_growing_bytes`, the dashboard) share: growth that stopped is a step (a cache that filled, a
//! warm-up, a start-up's preallocation), not a leak, and a gauge of what grows drops to zero once it stops.
//! Pure: tested on made-up series.

/// How recent "now" is: the last minute, or the last quarter of the series if that is longer (and at most
/// its second half: a series a minute long is judged on its last 30 s).
pub(crate) const RECENT_SECONDS: f64 = 60.0;

/// The shape of a series that rose by `bytes` over it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rise {
    /// By how much it rose, first reading to last.
    pub(crate) bytes: f64,
    /// Over how many seconds it rose: from its last reading near the start's level to the reading where it
    /// reached today's level (or the last, when still rising). The rate is over this stretch.
    pub(crate) seconds: f64,
    /// `None` while it still rises; else for how many seconds it has been flat (within a twentieth of the
    /// rise, or 1 MiB, of today's level).
    pub(crate) flat_seconds: Option<f64>,
    /// When the rise began and ended, in the series' seconds.
    pub(crate) from: f64,
    pub(crate) to: f64,
}

/// The shape of `points` (seconds, bytes; oldest first), which the caller found risen by enough to judge:
/// still rising when the recent stretch ([`RECENT_SECONDS`], or the last quarter, at most the second half)
/// rose by at least a quarter of the series' average pace over it (and 1 MiB at least).
pub(crate) fn shape(points: &[(f64, f64)]) -> Option<Rise> {
    let (&(first_time, first), &(last_time, last)) = (points.first()?, points.last()?);
    let bytes = last - first;
    let span = last_time - first_time;
    if bytes <= 0.0 || span <= 0.0 {
        return None;
    }
    let near = (bytes / 20.0).max(MIB);
    let recent_from = last_time - RECENT_SECONDS.max(span / 4.0).min(span / 2.0);
    let recent_start = points.iter().find(|(time, _)| *time >= recent_from).map_or(last, |(_, held)| *held);
    let recent_span = last_time - recent_from.max(first_time);
    let still_rising = last - recent_start >= (bytes * recent_span / span / 4.0).max(MIB);
    // Where it reached today's level, and the last time before that it was near the start's.
    let reached = points.iter().find(|(_, held)| *held >= last - near).map_or(last_time, |(time, _)| *time);
    let began = points
        .iter()
        .take_while(|(time, _)| *time <= reached)
        .filter(|(_, held)| *held <= first + near)
        .last()
        .map_or(first_time, |(time, _)| *time);
    let to = if still_rising { last_time } else { reached };
    Some(Rise {
        bytes,
        seconds: (to - began).max(1.0),
        flat_seconds: (!still_rising).then_some(last_time - reached),
        from: began,
        to,
    })
}

const MIB: f64 = (1 << 20) as f64;

#[cfg(test)]
mod tests {
    use super::*;

    fn series(seconds: impl Iterator<Item = u32>, bytes: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
        seconds.map(|second| (f64::from(second), bytes(f64::from(second)))).collect()
    }

    /// A leak going on: still rising, at its own pace over the whole series.
    #[test]
    fn a_rise_that_goes_on_is_rising_now() {
        let leak = series((0..=300).step_by(5), |second| 100.0 * MIB + second * MIB);
        let rise = shape(&leak).unwrap();
        assert_eq!(rise.flat_seconds, None);
        assert_eq!(rise.bytes, 300.0 * MIB);
        assert!((rise.bytes / rise.seconds / MIB - 1.0).abs() < 0.06, "{rise:?}");
    }

    /// A burst of 128 MiB over 40 s, then 180 s flat: risen and stopped, at the burst's own pace (not the
    /// window's average), flat for 180 s.
    #[test]
    fn a_burst_then_flat_is_a_step_with_its_own_rate() {
        let burst = series((0..=300).step_by(5), |second| 50.0 * MIB + (second - 80.0).clamp(0.0, 40.0) * 3.2 * MIB);
        let rise = shape(&burst).unwrap();
        assert_eq!(rise.flat_seconds, Some(180.0), "{rise:?}");
        assert!((rise.bytes - 128.0 * MIB).abs() < 1.0);
        assert!(rise.from >= 75.0 && rise.from <= 85.0 && rise.to >= 115.0 && rise.to <= 120.0, "{rise:?}");
        assert!((rise.bytes / rise.seconds / MIB - 3.2).abs() < 0.6, "{rise:?}");
    }

    /// A start-up's preallocation: at once, then idle for a minute.
    #[test]
    fn a_preallocation_then_idle_is_not_rising() {
        let start = series((0..=60).step_by(1), |second| if second < 1.0 { MIB } else { 33.0 * MIB });
        assert_eq!(shape(&start).unwrap().flat_seconds, Some(59.0));
    }

    /// A slow leak (4 MiB a minute) with noise is still rising; nothing rose: none.
    #[test]
    fn a_slow_noisy_leak_is_rising_and_a_flat_series_has_no_shape() {
        let slow = series((0..=300).step_by(5), |second| {
            200.0 * MIB + second / 15.0 * MIB + if (second as u32 / 5).is_multiple_of(2) { 0.5 * MIB } else { 0.0 }
        });
        assert_eq!(shape(&slow).unwrap().flat_seconds, None);
        assert_eq!(shape(&series(0..10, |_| MIB)), None);
    }
}
