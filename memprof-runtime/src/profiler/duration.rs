//! Mesos `Duration` syntax (stout): a decimal number immediately followed by a unit, such as `30secs`,
//! `1.5hrs` or `500ms`.

use std::fmt;
use std::time::Duration;

/// The units Mesos accepts, with their length in nanoseconds.
const UNITS: [(&str, f64); 8] = [
    ("ns", 1.0),
    ("us", 1e3),
    ("ms", 1e6),
    ("secs", 1e9),
    ("mins", 60e9),
    ("hrs", 3600e9),
    ("days", 86_400e9),
    ("weeks", 604_800e9),
];

/// The shortest run `start` accepts.
pub(crate) const MIN_RUN: Duration = Duration::from_secs(1);
/// The longest run `start` accepts.
pub(crate) const MAX_RUN: Duration = Duration::from_secs(24 * 3600);
/// The run length when `start` is given no `duration`.
pub(crate) const DEFAULT_RUN: Duration = Duration::from_secs(5 * 60);

/// Why a duration could not be parsed; its `Display` is a sentence fragment for an error message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DurationError(String);

impl fmt::Display for DurationError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

fn supported_units() -> String {
    let names: Vec<String> = UNITS.iter().map(|(name, _)| format!("'{name}'")).collect();
    names.join(", ")
}

/// Parses a Mesos duration such as `5mins`.
///
/// ```text
/// parse("1.5secs") == Ok(Duration::from_millis(1500))
/// parse("600")     == Err("'600' has no unit; ...")
/// ```
pub(crate) fn parse(text: &str) -> Result<Duration, DurationError> {
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
    let Some(&(_, nanos_per_unit)) = UNITS.iter().find(|(name, _)| *name == unit) else {
        return Err(DurationError(format!(
            "unknown duration unit '{unit}' in '{text}'; supported units are {}",
            supported_units()
        )));
    };
    let value: f64 = number.parse().map_err(|_| not_a_number())?;
    Duration::try_from_secs_f64(value * nanos_per_unit / 1e9)
        .map_err(|_| DurationError(format!("'{text}' is too long to represent")))
}

/// Parses the `duration` parameter of a run and checks it is between [`MIN_RUN`] and [`MAX_RUN`]
/// inclusive; the error is the whole message for the operator, worded as Mesos words it.
pub(crate) fn parse_run_length(text: &str) -> Result<Duration, String> {
    match parse(text) {
        Ok(length) if (MIN_RUN..=MAX_RUN).contains(&length) => Ok(length),
        Ok(_) => Err(format!("Duration '{text}' must be between 1secs and 1days")),
        Err(error) => Err(format!("Could not parse parameter 'duration': {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_parses() {
        let cases = [
            ("1500000000ns", 1500),
            ("1500000us", 1500),
            ("1500ms", 1500),
            ("1.5secs", 1500),
            ("2mins", 120_000),
            ("0.5hrs", 1_800_000),
            ("1days", 86_400_000),
            ("1weeks", 604_800_000),
            (".5secs", 500),
        ];
        for (text, millis) in cases {
            assert_eq!(parse(text), Ok(Duration::from_millis(millis)), "{text}");
        }
    }

    #[test]
    fn malformed_durations_say_why() {
        let message = |text| parse(text).unwrap_err().to_string();
        assert_eq!(
            message("600"),
            "'600' has no unit; write a number followed by one of 'ns', 'us', 'ms', 'secs', 'mins', 'hrs', 'days', 'weeks', such as '30secs'"
        );
        assert!(message("5m").starts_with("unknown duration unit 'm' in '5m'; supported units are 'ns'"));
        assert!(message("-5mins").starts_with("'-5mins' does not start with a non-negative decimal number"));
        assert!(message("1.2.3secs").starts_with("'1.2.3secs' does not start"));
        assert!(message("").starts_with("'' does not start"));
        assert!(message("secs").starts_with("'secs' does not start"));
        assert!(message("5 mins").starts_with("unknown duration unit ' mins'"));
        assert_eq!(message("99999999999999999999999weeks"), "'99999999999999999999999weeks' is too long to represent");
    }

    #[test]
    fn run_lengths_are_bounded_inclusively() {
        assert_eq!(parse_run_length("1secs"), Ok(MIN_RUN));
        assert_eq!(parse_run_length("1days"), Ok(MAX_RUN));
        assert_eq!(parse_run_length("24hrs"), Ok(MAX_RUN));
        for text in ["999ms", "25hrs", "0secs", "2weeks"] {
            assert_eq!(parse_run_length(text), Err(format!("Duration '{text}' must be between 1secs and 1days")));
        }
        assert_eq!(
            parse_run_length("5m").unwrap_err(),
            "Could not parse parameter 'duration': unknown duration unit 'm' in '5m'; supported units are 'ns', 'us', 'ms', 'secs', 'mins', 'hrs', 'days', 'weeks'"
        );
    }
}
