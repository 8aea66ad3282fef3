//! Waiting for a condition with a deadline, never a fixed sleep: one helper whose failure says what was
//! awaited and what was last seen.

use std::time::{Duration, Instant};

/// How often a condition is looked at again, unless told.
const EVERY: Duration = Duration::from_millis(100);

/// Asks `seen` until it answers `Ok` (its value is returned) or `patience` has passed (the test fails
/// saying `what` was awaited and what `seen` last answered as `Err`), every 100 ms.
///
/// ```no_run
/// use std::time::Duration;
/// let ready = memprof_tests::waiting::wait_until("the file", Duration::from_secs(5), || {
///     std::fs::read_to_string("/tmp/ready").map_err(|error| error.to_string())
/// });
/// ```
pub fn wait_until<T>(what: &str, patience: Duration, seen: impl FnMut() -> Result<T, String>) -> T {
    wait_every(what, patience, EVERY, seen)
}

/// [`wait_until`], looking again every `every` instead: for a condition whose every look costs the
/// program something (a request that keeps its endpoints busy, an `explain`), or one that must be looked at
/// often.
///
/// ```no_run
/// use std::time::Duration;
/// let (patience, every) = (Duration::from_secs(60), Duration::from_secs(12));
/// memprof_tests::waiting::wait_every("an idle minute", patience, every, || Err::<(), _>("busy".to_owned()));
/// ```
pub fn wait_every<T>(
    what: &str,
    patience: Duration,
    every: Duration,
    mut seen: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + patience;
    loop {
        match seen() {
            Ok(value) => return value,
            Err(last) => assert!(Instant::now() < deadline, "waited {patience:?} for {what}; last seen: {last}"),
        }
        std::thread::sleep(every);
    }
}
