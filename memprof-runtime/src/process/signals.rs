//! The opt-in end of memprof on SIGTERM and SIGINT ([`crate::Options::dump_on_sigterm`],
//! [`crate::Options::dump_on_sigint`]), for programs that have no handler of their own: services are stopped
//! by SIGTERM (systemd, Kubernetes, `docker stop`), batch programs by Ctrl-C, and either signal's default
//! action ends the process without running `main`'s destructors, leaving the profile directory behind and
//! losing a run in progress.
//!
//! signal-hook's handler only wakes an unsampled thread, memprof's watch (a signal handler may not allocate
//! or lock); that thread runs what start-up hands it (memprof's [`crate::shutdown`]) and then lets the signal take its
//! default action, so the process still ends as killed by that signal. signal-hook chains with handlers
//! installed through it or `tokio::signal` (both would run); a program that handles the signal itself
//! calls [`crate::shutdown`] from its handler instead.
//!
//! A child of `fork` inherits the handler but not the thread it wakes: there, a second action of the
//! handler's (run in the signal handler itself, so it only compares process ids and restores the default
//! action) lets the signal end the child at once, as it would without memprof. The parent's memprof is
//! not the child's to end ([`super::lineage`]).
#![allow(unsafe_code)]

use std::ffi::c_int;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;

use signal_hook::iterator::backend::SignalDelivery;
use signal_hook::iterator::exfiltrator::SignalOnly;

/// The watch of `signals`: once one arrives, [`SignalWatch::check`] runs what start-up handed it, then ends
/// the process as the signal would have. Kept by memprof's watch thread ([`super::watch`]), woken through
/// [`SignalWatch::arrivals`].
pub(crate) struct SignalWatch {
    delivery: SignalDelivery<UnixStream, SignalOnly>,
    end_memprof: fn(),
}

impl SignalWatch {
    /// Registers the handlers of `signals`: each only writes to a socket the watch thread waits on.
    pub(crate) fn new(signals: &[c_int], end_memprof: fn()) -> std::io::Result<SignalWatch> {
        let watching = std::process::id();
        for &signal in signals {
            // SAFETY: the action is async-signal-safe: it allocates nothing and takes no lock; it calls
            // getpid, then (in a forked child only) sigaction, sigprocmask and raise (signal-hook's default
            // emulation).
            unsafe {
                signal_hook::low_level::register(signal, move || {
                    if libc::getpid() as u32 != watching {
                        let _ = signal_hook::low_level::emulate_default_handler(signal);
                    }
                })
            }?;
        }
        let (read, write) = UnixStream::pair()?;
        read.set_nonblocking(true)?;
        write.set_nonblocking(true)?;
        let delivery = SignalDelivery::with_pipe(read, write, SignalOnly, signals)?;
        Ok(SignalWatch { delivery, end_memprof })
    }

    /// Readable when a signal arrived.
    pub(crate) fn arrivals(&self) -> BorrowedFd<'_> {
        self.delivery.get_read().as_fd()
    }

    /// When a watched signal arrived: ends memprof, then lets the signal take its default action (restored
    /// and raised again), so the process ends as it would have.
    pub(crate) fn check(&mut self) {
        if let Some(signal) = self.delivery.pending().next() {
            (self.end_memprof)();
            let _ = signal_hook::low_level::emulate_default_handler(signal);
        }
    }
}
