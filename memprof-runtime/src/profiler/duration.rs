//! Run lengths over HTTP: the one grammar of durations (`memprof_wire::duration`: Mesos's `30secs`,
//! `1.5hrs`, `500ms`, or `30s`, `5m`), bounded as every run is, the errors worded as Mesos words them.

use std::time::Duration;

use memprof_wire::duration::RUN_LENGTHS;
pub(crate) use memprof_wire::duration::parse;

/// The shortest run `start` accepts.
pub(crate) const MIN_RUN: Duration = *RUN_LENGTHS.start();
/// The longest run `start` accepts.
pub(crate) const MAX_RUN: Duration = *RUN_LENGTHS.end();
/// The run length when `start` is given no `duration`.
pub(crate) const DEFAULT_RUN: Duration = Duration::from_secs(5 * 60);

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
    fn run_lengths_are_bounded_inclusively() {
        assert_eq!(parse_run_length("1secs"), Ok(MIN_RUN));
        assert_eq!(parse_run_length("1days"), Ok(MAX_RUN));
        assert_eq!(parse_run_length("24hrs"), Ok(MAX_RUN));
        assert_eq!(parse_run_length("5m"), Ok(Duration::from_secs(300)));
        for text in ["999ms", "25hrs", "0secs", "2weeks"] {
            assert_eq!(parse_run_length(text), Err(format!("Duration '{text}' must be between 1secs and 1days")));
        }
        assert!(parse_run_length("5x").unwrap_err().starts_with(
            "Could not parse parameter 'duration': unknown duration unit 'x' in '5x'; supported units are"
        ));
    }
}
