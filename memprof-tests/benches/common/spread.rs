//! A benchmark's figures over several runs: the median and the range around it.

/// A median and the range around it: counts (`u64`) or ratios (`f64`).
pub struct Spread<T = u64> {
    /// The median.
    pub median: T,
    /// The least.
    pub low: T,
    /// The most.
    pub high: T,
}

impl<T: Copy + PartialOrd> Spread<T> {
    /// The spread of `values` (at least one; none of them NaN).
    pub fn of(mut values: Vec<T>) -> Spread<T> {
        values.sort_by(|one, other| one.partial_cmp(other).expect("no NaN"));
        Spread { median: values[values.len() / 2], low: values[0], high: values[values.len() - 1] }
    }
}

#[allow(dead_code)]
impl Spread<u64> {
    /// `median (least-most)`.
    pub fn text(&self) -> String {
        format!("{} ({}-{})", self.median, self.low, self.high)
    }
}

#[allow(dead_code)]
impl Spread<f64> {
    /// `median (least-most)`, ratios to two places.
    pub fn text(&self) -> String {
        format!("{:.2} ({:.2}-{:.2})", self.median, self.low, self.high)
    }
}
