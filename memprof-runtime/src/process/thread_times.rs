//! What the kernel accounts of the calling thread's life: when it was born (`/proc/thread-self/stat`'s
//! `starttime`), how long it ran and waited to run, and in how many slices (`/proc/thread-self/schedstat`),
//! read against the boot clock those are kept on. Read without allocating (a sample hook reads it), parsed by
//! pure functions tested on recorded files.

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};

/// The calling thread's accounts, as read at `now_ns` on the boot clock (`CLOCK_BOOTTIME`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ThreadTimes {
    /// The boot clock as they were read (ns).
    pub(crate) now_ns: u64,
    /// When the thread was born, to the clock tick: on the boot clock (ns), the tick's start.
    pub(crate) born_ns: u64,
    /// The length of a clock tick (`_SC_CLK_TCK`'s), in which `born_ns` is kept (ns).
    pub(crate) tick_ns: u64,
    /// How long it ran on a CPU (ns; the scheduler updates it at its own ticks, so it may be some
    /// milliseconds behind).
    pub(crate) ran_ns: u64,
    /// How long it waited, runnable, for a CPU (ns).
    pub(crate) waited_ns: u64,
    /// In how many slices it ran.
    pub(crate) slices: u64,
}

/// The calling thread's accounts now; `None` where the kernel does not keep or give them (no `/proc`,
/// schedstat not built in).
pub(crate) fn this_thread() -> Option<ThreadTimes> {
    let mut buffer = [0u8; 1024];
    let stat = read(c"/proc/thread-self/stat", &mut buffer)?;
    let born_ticks = born_ticks(stat)?;
    let mut buffer = [0u8; 128];
    let (ran_ns, waited_ns, slices) = schedstat(read(c"/proc/thread-self/schedstat", &mut buffer)?)?;
    let tick_ns = tick_ns()?;
    let now_ns = boot_clock_ns()?;
    Some(ThreadTimes { now_ns, born_ns: born_ticks.saturating_mul(tick_ns), tick_ns, ran_ns, waited_ns, slices })
}

/// The boot clock now (ns), as the accounts are read against; `None` where it cannot be read.
pub(crate) fn boot_clock_ns() -> Option<u64> {
    // CLOCK_BOOTTIME exists on every Linux since 2.6.39.
    clock_ns(libc::CLOCK_BOOTTIME)
}

/// The CPU time the calling thread ran (ns, `CLOCK_THREAD_CPUTIME_ID`: the scheduler's account to the
/// nanosecond, a system call); `None` where it cannot be read.
pub(crate) fn this_thread_cpu_ns() -> Option<u64> {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// `clock` now (ns).
fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid `timespec` to write; an unknown clock is an error returned.
    if unsafe { libc::clock_gettime(clock, &mut now) } != 0 {
        return None;
    }
    Some((now.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(now.tv_nsec as u64))
}

/// A clock tick's length (ns), read once.
fn tick_ns() -> Option<u64> {
    static TICK_NS: AtomicU64 = AtomicU64::new(0);
    let known = TICK_NS.load(Ordering::Relaxed);
    if known > 0 {
        return Some(known);
    }
    // SAFETY: sysconf reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let tick_ns = u64::try_from(ticks).ok().filter(|&ticks| ticks > 0).map(|ticks| 1_000_000_000 / ticks)?;
    TICK_NS.store(tick_ns, Ordering::Relaxed);
    Some(tick_ns)
}

/// The file at `path` into `buffer`, whole (a file that fills it is refused: its end is not known).
fn read<'b>(path: &std::ffi::CStr, buffer: &'b mut [u8]) -> Option<&'b str> {
    // SAFETY: `path` is a C string; the descriptor is closed below on every path.
    let descriptor = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if descriptor < 0 {
        return None;
    }
    let mut length = 0;
    let whole = loop {
        // SAFETY: the rest of `buffer` is valid to write.
        let read = unsafe { libc::read(descriptor, buffer[length..].as_mut_ptr().cast(), buffer.len() - length) };
        match read {
            0 => break true,
            read if read > 0 => {
                length += read as usize;
                if length == buffer.len() {
                    break false;
                }
            }
            _ => break false,
        }
    };
    // SAFETY: the descriptor opened above, closed once.
    unsafe { libc::close(descriptor) };
    if !whole {
        return None;
    }
    std::str::from_utf8(&buffer[..length]).ok()
}

/// `starttime` of a `/proc/<pid>/task/<tid>/stat` line: the 22nd field, the 20th after the command's closing
/// parenthesis (the command itself may hold spaces and parentheses).
fn born_ticks(stat: &str) -> Option<u64> {
    let (_, after_command) = stat.rsplit_once(')')?;
    after_command.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// `/proc/<pid>/task/<tid>/schedstat`: the time run and waited (ns) and the slices run.
fn schedstat(text: &str) -> Option<(u64, u64, u64)> {
    let mut fields = text.split_ascii_whitespace().map(str::parse::<u64>);
    Some((fields.next()?.ok()?, fields.next()?.ok()?, fields.next()?.ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_birth_is_read_after_a_command_holding_spaces_and_parentheses() {
        // Recorded from a thread named "a) b (c" of this machine's kernel (6.x).
        let stat = "4242 (a) b (c) R 4200 4200 4100 34816 4242 4194368 130 0 0 0 3 1 0 0 20 0 9 0 \
                    123456789 12345678 420 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 -1 1 0 0 0 0 0\n";
        assert_eq!(born_ticks(stat), Some(123_456_789));
        assert_eq!(born_ticks("4242 (cut short) R 1 2"), None);
        assert_eq!(schedstat("1581228 47021 12\n"), Some((1_581_228, 47_021, 12)));
        assert_eq!(schedstat("1581228 47021\n"), None);
    }

    #[test]
    fn this_thread_was_born_before_now_and_ran() {
        let started = boot_clock_ns().unwrap();
        let times = std::thread::spawn(this_thread).join().unwrap().expect("Linux keeps threads' accounts");
        assert!(times.born_ns <= times.now_ns && times.born_ns + times.tick_ns >= started, "{times:?} {started}");
        assert!(times.slices >= 1 && times.now_ns >= started, "{times:?}");
    }
}
