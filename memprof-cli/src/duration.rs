//! Run lengths as the tool takes them: the one grammar of durations (`memprof_wire::duration`: `30s 5m
//! 2h 1d`, or Mesos's `30secs 5mins 1.5hrs`), checked here against the bounds every run has, so that a
//! mistake is bad usage (exit 2) said before anything is sent.

use std::time::Duration;

use memprof_wire::duration::RUN_LENGTHS;

/// Parses a run length.
///
/// ```ignore
/// assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
/// assert_eq!(parse("1.5hrs"), Ok(Duration::from_secs(5400)));
/// ```
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let length = memprof_wire::duration::parse(text).map_err(|error| error.to_string())?;
    if !RUN_LENGTHS.contains(&length) {
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
    fn lengths_are_read_in_the_one_grammar_and_checked() {
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1.5hrs"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("1d"), Ok(Duration::from_secs(86_400)));
        assert!(parse("5").unwrap_err().starts_with("'5' has no unit; write a number followed by one of 'ns'"));
        assert!(parse("2x").unwrap_err().starts_with("unknown duration unit 'x' in '2x'; supported units are"));
        assert_eq!(parse("0.5s"), Err("a run lasts from 1s to 1d; '0.5s' is outside".to_owned()));
        assert_eq!(parse("2d"), Err("a run lasts from 1s to 1d; '2d' is outside".to_owned()));
        assert!(parse("s").unwrap_err().starts_with("'s' does not start with a non-negative decimal number"));
        assert_eq!(for_service(Duration::from_millis(1500)), "1500ms");
    }
}
