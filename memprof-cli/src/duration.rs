//! Run lengths as the tool takes them (`30s 5m 2h 1d`, or Mesos's `30secs 5mins 1.5hrs`), checked here in
//! the tool's own units, so that a mistake is bad usage (exit 2) said in the words the operator typed.

use std::time::Duration;

/// The shortest and longest run the service accepts.
const RANGE: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(86_400));

/// Parses a run length.
///
/// ```ignore
/// assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
/// assert_eq!(parse("1.5hrs"), Ok(Duration::from_secs(5400)));
/// ```
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let split = text.find(|character: char| !(character.is_ascii_digit() || character == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let seconds_per_unit = match unit {
        "s" | "sec" | "secs" => 1.0,
        "m" | "min" | "mins" => 60.0,
        "h" | "hr" | "hrs" => 3600.0,
        "d" | "day" | "days" => 86_400.0,
        "ms" => 0.001,
        "" => return Err(format!("'{text}' has no unit: write it as 30s, 5m, 2h or 1d")),
        _ => return Err(format!("'{text}' has an unknown unit '{unit}': use s, m, h or d (30s, 5m, 2h, 1d)")),
    };
    let number: f64 =
        number.parse().map_err(|_| format!("'{text}' is not a number and a unit, such as 30s or 1.5h"))?;
    let length =
        Duration::try_from_secs_f64(number * seconds_per_unit).map_err(|_| format!("'{text}' is not a run length"))?;
    if length < RANGE.0 || length > RANGE.1 {
        return Err(format!("a run lasts from 1s to 1d; '{text}' is outside"));
    }
    Ok(length)
}

/// A length as the service's `duration` parameter: whole milliseconds.
pub(crate) fn for_service(length: Duration) -> String {
    format!("{}ms", length.as_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_read_in_the_tools_units_and_checked() {
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1.5hrs"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse("5"), Err("'5' has no unit: write it as 30s, 5m, 2h or 1d".to_owned()));
        assert_eq!(parse("2x"), Err("'2x' has an unknown unit 'x': use s, m, h or d (30s, 5m, 2h, 1d)".to_owned()));
        assert_eq!(parse("0.5s"), Err("a run lasts from 1s to 1d; '0.5s' is outside".to_owned()));
        assert_eq!(parse("2d"), Err("a run lasts from 1s to 1d; '2d' is outside".to_owned()));
        assert_eq!(parse("s"), Err("'s' is not a number and a unit, such as 30s or 1.5h".to_owned()));
        assert_eq!(for_service(Duration::from_millis(1500)), "1500ms");
    }
}
