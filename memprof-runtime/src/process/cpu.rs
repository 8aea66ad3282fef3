//! The CPU time the whole process has taken, all its threads together, and the calling thread's: what the budget of sampling work
//! reads while sampling is off for a slot, to see the load fall without waiting for a sampled slot.
#![allow(unsafe_code)]

use std::time::Duration;

/// The CPU time this process's threads have taken since it started (`CLOCK_PROCESS_CPUTIME_ID`: exact,
/// one system call that sums the threads' clocks); `None` where the clock cannot be read.
///
/// ```ignore
/// let before = cpu_time().unwrap();
/// let spin = std::time::Instant::now();
/// while spin.elapsed() < std::time::Duration::from_millis(5) {}
/// assert!(cpu_time().unwrap() - before >= std::time::Duration::from_millis(4));
/// ```
pub(crate) fn cpu_time() -> Option<Duration> {
    read(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// The CPU time the calling thread has taken (`CLOCK_THREAD_CPUTIME_ID`: one system call); zero
/// where the clock cannot be read.
pub(crate) fn thread_cpu_time() -> Option<Duration> {
    read(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn read(clock: libc::clockid_t) -> Option<Duration> {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid, writable timespec; the clock id is a constant the kernel knows.
    if unsafe { libc::clock_gettime(clock, &mut now) } != 0 {
        return None;
    }
    Some(Duration::new(now.tv_sec.max(0) as u64, now.tv_nsec.clamp(0, 999_999_999) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread spinning until its own clock says 20 ms adds at least that to the process's clock: no
    /// wall-clock assumption (a loaded machine gives the spin less of the time it waits).
    #[test]
    fn a_thread_spinning_adds_its_time() {
        let (process_before, thread_before) = (cpu_time().unwrap(), thread_cpu_time().unwrap());
        assert!(process_before > Duration::ZERO);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let spun = loop {
            let spun = thread_cpu_time().unwrap() - thread_before;
            if spun >= Duration::from_millis(20) {
                break spun;
            }
            assert!(std::time::Instant::now() < deadline, "the thread's clock stood still: {spun:?}");
            std::hint::black_box(());
        };
        let taken = cpu_time().unwrap() - process_before;
        assert!(taken >= spun, "the process took {taken:?}, the thread alone {spun:?}");
    }
}
