//! The unit tests' one way to wait for a condition, with a deadline and never a fixed sleep (as
//! `memprof_tests::waiting` is the acceptance tests').

use std::time::{Duration, Instant};

/// Sampling is one switch for the whole process: tests that turn it on take turns.
pub(crate) static SAMPLING: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// How long a unit test waits for a condition: a bound against hangs, not a measurement.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// Asks `seen` every 2 ms until it answers `Ok` (its value is returned), failing after [`PATIENCE`] with
/// what was awaited and what `seen` last answered as `Err`.
pub(crate) fn wait_until<T>(what: &str, mut seen: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match seen() {
            Ok(value) => return value,
            Err(last) => assert!(Instant::now() < deadline, "waited {PATIENCE:?} for {what}; last seen: {last}"),
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}
