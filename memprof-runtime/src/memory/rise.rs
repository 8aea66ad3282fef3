//! How a series of readings rose: where its rise began, whether it rose steadily, and whether it still
//! rises now or has been flat since. The one notion of growth that `explain`'s leak rule (the process's
//! live bytes) and the record's growing stacks (`/growing`, `memprof_growing_bytes`, the dashboard) share:
//! growth that stopped is a step (a cache that filled, a warm-up, a start-up's preallocation), not a leak,
//! and a gauge of what grows drops to zero once it stops.
//!
//! A rise is judged over its own stretch, from its last low to now, never over the whole series: the same
//! load reads the same whether the program idled ten seconds or an hour before it, and noise (requests
//! that allocate and free around a filling cache) does not hide a rise that goes on. Pure: tested on
//! made-up series.

/// How recent "now" is: the last minute, or the last quarter of the rise's stretch if that is longer (and
/// at most its second half: a stretch a minute long is judged on its last 30 s).
pub(crate) const RECENT_SECONDS: f64 = 60.0;

/// The least Kendall's tau over the stretch (its readings averaged into at most [`TREND_BLOCKS`] blocks)
/// for a rise to be steady, however long: a series that swings around a level reads near 0, a leak with
/// noise or a cache that inserts in bursts and evicts some 0.6-1. A short stretch must also be two standard
/// deviations of tau for readings without a trend above 0 (0.71 for six readings, 0.5 for ten; four or
/// fewer must rise at every step): six readings that merely swing read up to 0.47.
pub(crate) const STEADY_TAU: f64 = 0.4;

/// How many blocks a stretch's readings are averaged into before its trend is measured: bounds the work
/// (at most 1,128 pairs) and smooths the noise of readings a second apart.
const TREND_BLOCKS: usize = 48;

/// The shape of a series that rose by `bytes`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rise {
    /// By how much it rose: from the highest it held up to its latest low (so a refill to an earlier level is
    /// no rise) to the last reading.
    pub(crate) bytes: f64,
    /// The level the rise is measured from (the highest it held up to its latest low).
    pub(crate) base: f64,
    /// Over how many seconds it rose: from its last reading near its low to the reading where it reached
    /// today's level (or the last, when still rising). The rate is over this stretch.
    pub(crate) seconds: f64,
    /// `None` while it still rises; else for how many seconds it has been flat (within a twentieth of the
    /// rise, or 1 MiB, of today's level).
    pub(crate) flat_seconds: Option<f64>,
    /// When the rise began and ended, in the series' seconds.
    pub(crate) from: f64,
    pub(crate) to: f64,
    /// How many readings the rising stretch (`from` to `to`) holds.
    pub(crate) readings: usize,
    /// Whether it rose steadily over the stretch past its first reading (Kendall's tau at least
    /// [`STEADY_TAU`]).
    pub(crate) steady: bool,
}

/// The shape of `points` (seconds, bytes; oldest first): `None` when it did not rise above what it held
/// before its last low. The rise's stretch begins at the last reading near the series' latest low and ends
/// where today's level was reached; it is still rising when the recent part of it ([`RECENT_SECONDS`], or its
/// last quarter, at most its second half) rose by at least a quarter of the stretch's average pace (and 1 MiB
/// at least). The caller judges whether the rise is large and steady enough to name.
pub(crate) fn shape(points: &[(f64, f64)]) -> Option<Rise> {
    let &(last_time, last) = points.last()?;
    let low_at = (0..points.len()).rev().min_by(|&a, &b| points[a].1.total_cmp(&points[b].1))?;
    let low = points[low_at].1;
    if last <= low {
        return None;
    }
    let near = ((last - low) / 20.0).max(MIB);
    let reached = (low_at..points.len()).find(|&at| points[at].1 >= last - near)?;
    let began = (low_at..=reached).rev().find(|&at| points[at].1 <= low + (last - low) / 20.0)?;
    let began_time = points[began].0;
    let span = last_time - began_time;
    if span <= 0.0 {
        return None;
    }
    // The highest held before the low: a refill to it is no rise.
    let base = points[..=low_at].iter().map(|(_, held)| *held).fold(low, f64::max);
    let bytes = last - base;
    if bytes <= 0.0 {
        return None;
    }
    let recent_from = last_time - RECENT_SECONDS.max(span / 4.0).min(span / 2.0);
    let recent_start = points[began..].iter().find(|(time, _)| *time >= recent_from).map_or(last, |(_, held)| *held);
    let recent_span = last_time - recent_from;
    let still_rising = last - recent_start >= ((last - low) * recent_span / span / 4.0).max(MIB);
    let end = if still_rising { points.len() - 1 } else { reached };
    let stretch = &points[began..=end];
    Some(Rise {
        bytes,
        base,
        seconds: (points[end].0 - began_time).max(1.0),
        flat_seconds: (!still_rising).then_some(last_time - points[reached].0),
        from: began_time,
        to: points[end].0,
        readings: stretch.len(),
        // Past the low: a stack that appears and then swings around its level rose from nothing in one step,
        // and its readings after that have no trend.
        steady: steady(&stretch[1..]),
    })
}

/// Whether `points` rise steadily: Kendall's tau ([`trend`]) at least [`STEADY_TAU`] and two of its
/// standard deviations for as many readings without a trend (sqrt(2(2n+5) / 9n(n-1)), n the blocks), or,
/// for four readings or fewer (where two deviations pass 1), every one above the one before.
fn steady(points: &[(f64, f64)]) -> bool {
    let blocks = points.len().min(TREND_BLOCKS) as f64;
    let deviation = (2.0 * (2.0 * blocks + 5.0) / (9.0 * blocks * (blocks - 1.0))).sqrt();
    blocks >= 2.0 && trend(points) >= STEADY_TAU.max((2.0 * deviation).min(1.0))
}

/// Kendall's tau of `points`' bytes over their order, the readings first averaged into at most
/// [`TREND_BLOCKS`] blocks: 1 when every block holds more than every earlier one, 0 for no trend, ties
/// counted as neither.
fn trend(points: &[(f64, f64)]) -> f64 {
    let blocks = points.len().min(TREND_BLOCKS);
    if blocks < 2 {
        return 0.0;
    }
    let means: Vec<f64> = (0..blocks)
        .map(|block| {
            let part = &points[block * points.len() / blocks..(block + 1) * points.len() / blocks];
            part.iter().map(|(_, held)| held).sum::<f64>() / part.len() as f64
        })
        .collect();
    let mut concordant = 0i64;
    for (at, earlier) in means.iter().enumerate() {
        for later in &means[at + 1..] {
            concordant += match later.total_cmp(earlier) {
                std::cmp::Ordering::Greater => 1,
                std::cmp::Ordering::Less => -1,
                std::cmp::Ordering::Equal => 0,
            };
        }
    }
    concordant as f64 / (blocks * (blocks - 1) / 2) as f64
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
        assert_eq!(rise.flat_seconds, None, "{rise:?}");
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

    /// A made-up noise in [-1, 1), the same for the same second.
    fn noise(second: f64) -> f64 {
        let mut x = (second as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x ^= x >> 31;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x ^= x >> 29;
        (x % 2000) as f64 / 1000.0 - 1.0
    }

    /// A cache filling at 0.5 MiB a second under requests that allocate and free up to 4 MiB around it,
    /// read once a second, 40 s into the burst: a steady rise still going on, though one reading in three
    /// is lower than the one before. Its stretch and rise are the same whether the program idled 10 s or
    /// 250 s before it.
    #[test]
    fn a_noisy_rise_is_steady_and_reads_the_same_after_any_idle() {
        let judged = |idle: u32| {
            let burst = series(0..=idle + 40, |second| {
                let filled = (second - f64::from(idle)).max(0.0) * 0.5 * MIB;
                60.0 * MIB + filled + 4.0 * MIB * noise(second - f64::from(idle))
            });
            let rise = shape(&burst).unwrap();
            assert!(rise.steady && rise.flat_seconds.is_none(), "after {idle} s idle: {rise:?}");
            (rise.bytes, rise.to - rise.from)
        };
        let (short, long) = (judged(10), judged(250));
        assert!((short.0 - long.0).abs() <= 8.0 * MIB && (short.1 - long.1).abs() <= 10.0, "{short:?} {long:?}");
        assert!(short.0 >= 12.0 * MIB, "{short:?}");
    }

    /// Noise alone around a level is no steady rise, however its last reading falls; a refill to a level
    /// held just before (a batch buffer cleared and built again) is no rise at all.
    #[test]
    fn noise_is_not_steady_and_a_refill_is_no_rise() {
        for length in [20, 60, 300] {
            let level = series(0..length, |second| 80.0 * MIB + 8.0 * MIB * noise(second));
            assert!(shape(&level).is_none_or(|rise| !rise.steady), "{length} s: {:?}", shape(&level));
        }
        let refilled = series(0..=100, |second| 40.0 * MIB + (second % 60.0) * MIB);
        assert_eq!(shape(&refilled), None);
    }
}
