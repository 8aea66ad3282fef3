//! A benchmark's figures over several runs: the median and the range around it.

/// A median and the range around it.
pub struct Spread {
    /// The median.
    pub median: u64,
    /// The least.
    pub low: u64,
    /// The most.
    pub high: u64,
}

impl Spread {
    /// The spread of `values` (at least one).
    pub fn of(mut values: Vec<u64>) -> Spread {
        values.sort_unstable();
        Spread { median: values[values.len() / 2], low: values[0], high: values[values.len() - 1] }
    }

    /// `median (least-most)`.
    pub fn text(&self) -> String {
        format!("{} ({}-{})", self.median, self.low, self.high)
    }
}
