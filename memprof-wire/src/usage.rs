//! What a block or a future allocated, measured exactly ([`Usage`]), and the heap budgets a test holds it
//! to ([`Budget`]). Pure: the measuring is the runtime's (`memprof::measure`); the same types serve the
//! profiler compiled out, where nothing is measured.
//!
//! ```
//! use memprof_wire::usage::{Budget, Comparison, Quantity, Usage};
//!
//! let usage = Usage { allocated_bytes: 4096, allocated_objects: 1, ..Usage::exact() };
//! let budget = Budget { quantity: Quantity::Allocated, comparison: Comparison::AtMost, limit: 1024, written: "allocated <= \"1 KiB\"" };
//! assert_eq!(
//!     budget.check(&usage).unwrap_err(),
//!     "allocated <= \"1 KiB\": 4096 B (4.0 KiB) allocated, over the budget of 1024 B (1.0 KiB)"
//! );
//! ```

use std::fmt;

/// What a block (on its thread) or a future (over its polls, on whichever threads ran them) allocated and
/// freed, exactly: bytes in jemalloc's size classes (a `Vec` of 100 bytes takes 112), objects as the global
/// allocator was asked for them (a reallocation is one freed and one allocated, as jemalloc counts its
/// bytes). Other threads, other tests of the same binary, and memprof's own work are not in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Usage {
    /// Bytes allocated (and reallocated to), in size classes.
    pub allocated_bytes: u64,
    /// Allocations and reallocations.
    pub allocated_objects: u64,
    /// Bytes freed (and reallocated from), also of objects allocated before the block.
    pub freed_bytes: u64,
    /// Frees and reallocations.
    pub freed_objects: u64,
    /// Allocated minus freed: what the block left allocated (negative when it freed more than it made).
    pub live_bytes: i64,
    /// The high-water mark of allocated minus freed above the block's start (at least 0), seen after each
    /// allocation: the most the block held at once (a reallocation's old and new copies are not summed).
    pub peak_bytes: u64,
    /// What was measured: everything, bytes only, or nothing (and why).
    pub measured: Measured,
    /// The functions that allocated the most in the block, by sampled estimate, the most first: empty when
    /// the block was not sampled.
    pub stacks: Vec<AllocatingStack>,
}

/// How much of a [`Usage`] was measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Measured {
    /// Every figure, exactly.
    Exactly,
    /// Bytes allocated, freed and live, but neither objects nor the peak: the global allocator is jemalloc
    /// without memprof's counting (a program's own `tikv_jemallocator::Jemalloc`); why, and the fix.
    BytesOnly(String),
    /// Nothing: memprof is compiled out, or jemalloc is not the global allocator; why.
    Nothing(String),
}

/// A function that allocated in a measured block, from its samples.
#[derive(Debug, Clone, PartialEq)]
pub struct AllocatingStack {
    /// The program's function that allocated (the first frame of its own code).
    pub function: String,
    /// The bytes its samples stand for (an estimate: sampled, unbiased).
    pub bytes: f64,
    /// The stack from the allocation site out, as the profiles' text shows it.
    pub frames: Vec<String>,
}

impl Usage {
    /// Everything measured, all zero: what a block that allocated nothing measures.
    pub fn exact() -> Usage {
        Usage {
            allocated_bytes: 0,
            allocated_objects: 0,
            freed_bytes: 0,
            freed_objects: 0,
            live_bytes: 0,
            peak_bytes: 0,
            measured: Measured::Exactly,
            stacks: Vec::new(),
        }
    }

    /// Nothing measured, for `reason` (memprof compiled out, say).
    ///
    /// ```
    /// let usage = memprof_wire::usage::Usage::nothing("memprof is compiled out");
    /// assert_eq!(usage.to_string(), "not measured: memprof is compiled out");
    /// ```
    pub fn nothing(reason: impl Into<String>) -> Usage {
        Usage { measured: Measured::Nothing(reason.into()), ..Usage::exact() }
    }

    /// This usage followed by `next` (a future's next poll): sums, and the peak of either, `next`'s above
    /// what this one left live.
    ///
    /// ```
    /// use memprof_wire::usage::Usage;
    ///
    /// let first = Usage { allocated_bytes: 64, allocated_objects: 1, live_bytes: 64, peak_bytes: 64, ..Usage::exact() };
    /// let second = Usage { allocated_bytes: 32, allocated_objects: 1, live_bytes: 32, peak_bytes: 32, ..Usage::exact() };
    /// let both = first.then(&second);
    /// assert_eq!((both.allocated_bytes, both.live_bytes, both.peak_bytes), (96, 96, 96));
    /// ```
    pub fn then(&self, next: &Usage) -> Usage {
        let peak_of_next = self.live_bytes.saturating_add(next.peak_bytes as i64).max(0) as u64;
        Usage {
            allocated_bytes: self.allocated_bytes + next.allocated_bytes,
            allocated_objects: self.allocated_objects + next.allocated_objects,
            freed_bytes: self.freed_bytes + next.freed_bytes,
            freed_objects: self.freed_objects + next.freed_objects,
            live_bytes: self.live_bytes + next.live_bytes,
            peak_bytes: self.peak_bytes.max(peak_of_next),
            measured: match (&self.measured, &next.measured) {
                (Measured::Exactly, other) => other.clone(),
                (mine, _) => mine.clone(),
            },
            stacks: self.stacks.clone(),
        }
    }

    /// The figure `quantity` names, if it was measured (`Err` says why not).
    pub fn quantity(&self, quantity: Quantity) -> Result<i128, String> {
        match &self.measured {
            Measured::Nothing(why) => return Err(format!("nothing was measured: {why}")),
            Measured::BytesOnly(why) if !quantity.measured_with_bytes_only() => {
                return Err(format!("{} was not measured: {why}", quantity.name()));
            }
            _ => {}
        }
        Ok(match quantity {
            Quantity::Allocated => i128::from(self.allocated_bytes),
            Quantity::AllocatedObjects => i128::from(self.allocated_objects),
            Quantity::Freed => i128::from(self.freed_bytes),
            Quantity::FreedObjects => i128::from(self.freed_objects),
            Quantity::Live => i128::from(self.live_bytes),
            Quantity::Peak => i128::from(self.peak_bytes),
        })
    }
}

impl fmt::Display for Usage {
    /// `allocated 4096 B (4.0 KiB) in 1 object, freed ... live ..., peak ...`, then the functions that
    /// allocated the most, when the block was sampled.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let objects = |count: u64| if count == 1 { "1 object".to_owned() } else { format!("{count} objects") };
        match &self.measured {
            Measured::Nothing(why) => return write!(formatter, "not measured: {why}"),
            Measured::Exactly => write!(
                formatter,
                "allocated {} in {}, freed {} in {}, live {}, peak {}",
                Bytes(self.allocated_bytes.into()),
                objects(self.allocated_objects),
                Bytes(self.freed_bytes.into()),
                objects(self.freed_objects),
                Bytes(self.live_bytes.into()),
                Bytes(self.peak_bytes.into())
            )?,
            Measured::BytesOnly(why) => write!(
                formatter,
                "allocated {}, freed {}, live {} (objects and peak not measured: {why})",
                Bytes(self.allocated_bytes.into()),
                Bytes(self.freed_bytes.into()),
                Bytes(self.live_bytes.into())
            )?,
        }
        if !self.stacks.is_empty() {
            write!(formatter, "\nthe functions that allocated the most (sampled estimates):")?;
            for stack in &self.stacks {
                write!(formatter, "\n  {:>10}  {}", human(stack.bytes), stack.function)?;
                for frame in stack.frames.iter().skip_while(|frame| **frame != stack.function).skip(1).take(6) {
                    write!(formatter, "\n              <- {frame}")?;
                }
            }
        }
        Ok(())
    }
}

/// A figure of a [`Usage`] a budget bounds, by its name in `#[memprof::test(...)]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// `allocated`: [`Usage::allocated_bytes`].
    Allocated,
    /// `allocated_objects`: [`Usage::allocated_objects`].
    AllocatedObjects,
    /// `freed`: [`Usage::freed_bytes`].
    Freed,
    /// `freed_objects`: [`Usage::freed_objects`].
    FreedObjects,
    /// `live`: [`Usage::live_bytes`].
    Live,
    /// `peak`: [`Usage::peak_bytes`].
    Peak,
}

impl Quantity {
    /// Every quantity, in the order budgets are listed.
    pub const ALL: [Quantity; 6] = [
        Quantity::Allocated,
        Quantity::AllocatedObjects,
        Quantity::Freed,
        Quantity::FreedObjects,
        Quantity::Live,
        Quantity::Peak,
    ];

    /// The name a budget gives it (`allocated`, `peak`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Quantity::Allocated => "allocated",
            Quantity::AllocatedObjects => "allocated_objects",
            Quantity::Freed => "freed",
            Quantity::FreedObjects => "freed_objects",
            Quantity::Live => "live",
            Quantity::Peak => "peak",
        }
    }

    /// The quantity named `name`.
    ///
    /// ```
    /// use memprof_wire::usage::Quantity;
    /// assert_eq!(Quantity::named("peak"), Some(Quantity::Peak));
    /// assert_eq!(Quantity::named("heap"), None);
    /// ```
    pub fn named(name: &str) -> Option<Quantity> {
        Quantity::ALL.into_iter().find(|quantity| quantity.name() == name)
    }

    /// Whether it is in bytes (a size such as `"1 MiB"` bounds it), rather than a count of objects.
    pub fn is_bytes(self) -> bool {
        !matches!(self, Quantity::AllocatedObjects | Quantity::FreedObjects)
    }

    fn measured_with_bytes_only(self) -> bool {
        matches!(self, Quantity::Allocated | Quantity::Freed | Quantity::Live)
    }
}

/// How a budget compares a measure with its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// `<=`
    AtMost,
    /// `<`
    Below,
    /// `==`
    Exactly,
    /// `>=`
    AtLeast,
    /// `>`
    Above,
}

impl Comparison {
    /// Every comparison with its operator, as a budget writes it.
    pub const ALL: [(Comparison, &'static str); 5] = [
        (Comparison::AtMost, "<="),
        (Comparison::Below, "<"),
        (Comparison::Exactly, "=="),
        (Comparison::AtLeast, ">="),
        (Comparison::Above, ">"),
    ];

    fn holds(self, measure: i128, limit: i128) -> bool {
        match self {
            Comparison::AtMost => measure <= limit,
            Comparison::Below => measure < limit,
            Comparison::Exactly => measure == limit,
            Comparison::AtLeast => measure >= limit,
            Comparison::Above => measure > limit,
        }
    }

    /// How a measure that breaks it stands against the limit.
    fn broken(self) -> &'static str {
        match self {
            Comparison::AtMost => "over the budget of",
            Comparison::Below => "not below",
            Comparison::Exactly => "not exactly",
            Comparison::AtLeast => "under the least of",
            Comparison::Above => "not above",
        }
    }
}

/// A heap budget: a [`Quantity`] of a test's [`Usage`] held to a limit (`allocated <= "1 MiB"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// What it bounds.
    pub quantity: Quantity,
    /// How.
    pub comparison: Comparison,
    /// The limit: bytes, or objects for the counts (below 0 only for `live`).
    pub limit: i64,
    /// The budget as written, for the message of a broken one.
    pub written: &'static str,
}

impl Budget {
    /// Whether `usage` keeps this budget: `Err` says how it breaks it (or that it was not measured).
    pub fn check(&self, usage: &Usage) -> Result<(), String> {
        let measure = usage.quantity(self.quantity).map_err(|why| format!("{}: {why}", self.written))?;
        if self.comparison.holds(measure, i128::from(self.limit)) {
            return Ok(());
        }
        let (measure, limit) = if self.quantity.is_bytes() {
            (Bytes(measure).to_string(), Bytes(self.limit.into()).to_string())
        } else {
            (measure.to_string(), self.limit.to_string())
        };
        let name = match self.quantity {
            Quantity::AllocatedObjects => "objects allocated",
            Quantity::FreedObjects => "objects freed",
            other => other.name(),
        };
        Err(format!("{}: {measure} {name}, {} {limit}", self.written, self.comparison.broken()))
    }
}

/// Bytes as exact figure and, from 1 KiB, in binary units: `4096 B (4.0 KiB)`.
struct Bytes(i128);

impl fmt::Display for Bytes {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.abs() < 1024 {
            write!(formatter, "{} B", self.0)
        } else {
            write!(formatter, "{} B ({})", self.0, human(self.0 as f64))
        }
    }
}

/// `4.0 KiB`, `1.5 MiB`: bytes in binary units, one decimal.
fn human(bytes: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value.abs() >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{value:.0} B") } else { format!("{value:.1} {}", units[unit]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage() -> Usage {
        Usage {
            allocated_bytes: 3 << 20,
            allocated_objects: 3,
            freed_bytes: 2 << 20,
            freed_objects: 2,
            live_bytes: 1 << 20,
            peak_bytes: 2 << 20,
            ..Usage::exact()
        }
    }

    #[test]
    fn each_comparison_holds_or_says_how_it_breaks() {
        let budget = |quantity, comparison, limit| Budget { quantity, comparison, limit, written: "b" };
        let usage = usage();
        assert!(budget(Quantity::Allocated, Comparison::AtMost, 3 << 20).check(&usage).is_ok());
        assert!(budget(Quantity::Allocated, Comparison::Below, 3 << 20).check(&usage).is_err());
        assert!(budget(Quantity::Live, Comparison::Exactly, 1 << 20).check(&usage).is_ok());
        assert!(budget(Quantity::Peak, Comparison::AtLeast, 2 << 20).check(&usage).is_ok());
        assert!(budget(Quantity::FreedObjects, Comparison::Above, 2).check(&usage).is_err());
        assert_eq!(
            budget(Quantity::AllocatedObjects, Comparison::AtMost, 1).check(&usage).unwrap_err(),
            "b: 3 objects allocated, over the budget of 1"
        );
        assert_eq!(
            budget(Quantity::Live, Comparison::Exactly, 0).check(&usage).unwrap_err(),
            "b: 1048576 B (1.0 MiB) live, not exactly 0 B"
        );
    }

    #[test]
    fn a_budget_on_what_was_not_measured_breaks_and_says_why() {
        let bytes_only = Usage { measured: Measured::BytesOnly("not memprof's allocator".into()), ..usage() };
        let peak = Budget { quantity: Quantity::Peak, comparison: Comparison::AtMost, limit: 1 << 30, written: "p" };
        assert_eq!(peak.check(&bytes_only).unwrap_err(), "p: peak was not measured: not memprof's allocator");
        let live = Budget { quantity: Quantity::Live, comparison: Comparison::AtMost, limit: 1 << 30, written: "l" };
        assert!(live.check(&bytes_only).is_ok());
        assert!(live.check(&Usage::nothing("compiled out")).is_err());
    }

    #[test]
    fn polls_add_up_and_a_later_polls_peak_stands_on_what_earlier_ones_left() {
        let first = Usage { allocated_bytes: 100, live_bytes: 100, peak_bytes: 150, ..Usage::exact() };
        let second = Usage { freed_bytes: 100, live_bytes: -100, peak_bytes: 20, ..Usage::exact() };
        let third = Usage { allocated_bytes: 80, live_bytes: 80, peak_bytes: 80, ..Usage::exact() };
        let all = first.then(&second).then(&third);
        assert_eq!((all.allocated_bytes, all.freed_bytes, all.live_bytes, all.peak_bytes), (180, 100, 80, 150));
        let bytes_only = Usage { measured: Measured::BytesOnly("why".into()), ..Usage::exact() };
        assert_eq!(first.then(&bytes_only).measured, bytes_only.measured);
    }

    #[test]
    fn usage_prints_exact_figures_and_the_stacks_from_the_allocating_function_out() {
        let mut usage = usage();
        usage.stacks.push(AllocatingStack {
            function: "parser::parse".into(),
            bytes: 3.0 * 1048576.0,
            frames: vec!["alloc::vec::Vec<T>::push".into(), "parser::parse".into(), "tests::parses".into()],
        });
        assert_eq!(
            usage.to_string(),
            "allocated 3145728 B (3.0 MiB) in 3 objects, freed 2097152 B (2.0 MiB) in 2 objects, \
             live 1048576 B (1.0 MiB), peak 2097152 B (2.0 MiB)\n\
             the functions that allocated the most (sampled estimates):\n     3.0 MiB  parser::parse\n              <- tests::parses"
        );
    }
}
