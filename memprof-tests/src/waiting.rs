//! Waiting for a condition with a deadline, never a fixed sleep: one helper whose failure says what was
//! awaited and what was last seen.

use std::time::{Duration, Instant};

/// How often a condition is looked at again.
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
pub fn wait_until<T>(what: &str, patience: Duration, mut seen: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + patience;
    loop {
        match seen() {
            Ok(value) => return value,
            Err(last) => assert!(Instant::now() < deadline, "waited {patience:?} for {what}; last seen: {last}"),
        }
        std::thread::sleep(EVERY);
    }
}
