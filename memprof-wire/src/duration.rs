//! Durations, one grammar wherever memprof reads one (a run's `duration` over HTTP, the command-line tool's
//! `--duration`, `MEMPROF_OTLP_INTERVAL`): a non-negative decimal number immediately followed by a unit,
//! Mesos's (`30secs`, `5mins`, `1.5hrs`, `500ms`, as libprocess's `/memory-profiler/start` takes them) or
//! its short form (`30s`, `5m`, `2h`, `1d`).
//!
//! ```
//! use std::time::Duration;
//! use memprof_wire::duration::{parse, RUN_LENGTHS};
//!
//! assert_eq!(parse("1.5secs"), Ok(Duration::from_millis(1500)));
//! assert_eq!(parse("5m"), parse("5mins"));
//! assert!(RUN_LENGTHS.contains(&parse("1d").unwrap()));
//! assert_eq!(parse("600").unwrap_err().to_string(), "'600' has no unit; write a number followed by one of \
//!     'ns', 'us', 'ms', 's' or 'secs', 'm' or 'mins', 'h' or 'hrs', 'd' or 'days', 'w' or 'weeks', such as '30secs'");
//! ```

use std::fmt;
use std::ops::RangeInclusive;
use std::time::Duration;

/// The units, each with its names (Mesos's last, as the one shown) and its length in nanoseconds.
const UNITS: [(&[&str], f64); 8] = [
    (&["ns"], 1.0),
    (&["us"], 1e3),
    (&["ms"], 1e6),
    (&["s", "sec", "secs"], 1e9),
    (&["m", "min", "mins"], 60e9),
    (&["h", "hr", "hrs"], 3600e9),
    (&["d", "day", "days"], 86_400e9),
    (&["w", "week", "weeks"], 604_800e9),
];

/// How long a run may last, from 1 s to a day, inclusive: over HTTP and in the command-line tool alike.
pub const RUN_LENGTHS: RangeInclusive<Duration> = Duration::from_secs(1)..=Duration::from_secs(86_400);

/// Why a text is not a duration; its `Display` is a sentence fragment for an error message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationError(String);

impl fmt::Display for DurationError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for DurationError {}

/// The units as an error lists them: `'ns', 'us', 'ms', 's' or 'secs', ...`.
fn supported_units() -> String {
    let names: Vec<String> = UNITS
        .iter()
        .map(|(names, _)| match names {
            [only] => format!("'{only}'"),
            [short, .., long] => format!("'{short}' or '{long}'"),
            [] => String::new(),
        })
        .collect();
    names.join(", ")
}

/// Parses a duration such as `5mins`, `5m` or `1.5hrs`.
///
/// # Errors
/// When the text does not start with a non-negative decimal number, has no unit or an unknown one, or is
/// too long to represent; the error says which, quoting the text.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let number_length =
        text.find(|character: char| !(character.is_ascii_digit() || character == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(number_length);
    let not_a_number = || {
        DurationError(format!(
            "'{text}' does not start with a non-negative decimal number, such as '30secs' or '1.5hrs'"
        ))
    };
    if number.is_empty() {
        return Err(not_a_number());
    }
    if unit.is_empty() {
        return Err(DurationError(format!(
            "'{text}' has no unit; write a number followed by one of {}, such as '30secs'",
            supported_units()
        )));
    }
    let Some(&(_, nanos_per_unit)) = UNITS.iter().find(|(names, _)| names.contains(&unit)) else {
        return Err(DurationError(format!(
            "unknown duration unit '{unit}' in '{text}'; supported units are {}",
            supported_units()
        )));
    };
    let value: f64 = number.parse().map_err(|_| not_a_number())?;
    Duration::try_from_secs_f64(value * nanos_per_unit / 1e9)
        .map_err(|_| DurationError(format!("'{text}' is too long to represent")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_parses_in_both_forms() {
        let cases = [
            ("1500000000ns", 1500),
            ("1500000us", 1500),
            ("1500ms", 1500),
            ("1.5secs", 1500),
            ("1.5s", 1500),
            ("1.5sec", 1500),
            ("2mins", 120_000),
            ("2m", 120_000),
            ("0.5hrs", 1_800_000),
            ("0.5h", 1_800_000),
            ("1days", 86_400_000),
            ("1d", 86_400_000),
            ("1weeks", 604_800_000),
            ("1w", 604_800_000),
            (".5secs", 500),
        ];
        for (text, millis) in cases {
            assert_eq!(parse(text), Ok(Duration::from_millis(millis)), "{text}");
        }
    }

    #[test]
    fn malformed_durations_say_why() {
        let message = |text| parse(text).unwrap_err().to_string();
        assert!(message("5x").starts_with("unknown duration unit 'x' in '5x'; supported units are 'ns', 'us'"));
        assert!(message("-5mins").starts_with("'-5mins' does not start with a non-negative decimal number"));
        assert!(message("1.2.3secs").starts_with("'1.2.3secs' does not start"));
        assert!(message("").starts_with("'' does not start"));
        assert!(message("secs").starts_with("'secs' does not start"));
        assert!(message("5 mins").starts_with("unknown duration unit ' mins'"));
        assert!(message("1e9secs").starts_with("unknown duration unit 'e9secs'"));
        assert_eq!(message("99999999999999999999999weeks"), "'99999999999999999999999weeks' is too long to represent");
    }
}
