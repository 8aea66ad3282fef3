//! The opt-in end of memprof on SIGTERM ([`crate::Options::dump_on_sigterm`]), for programs that have no
//! SIGTERM handler of their own: services are stopped by SIGTERM (systemd, Kubernetes, `docker stop`),
//! whose default action ends the process without running `main`'s destructors, leaving the profile
//! directory behind and losing a run in progress.
//!
//! signal-hook's handler only wakes an unsampled thread (a signal handler may not allocate or lock); that
//! thread runs what start-up hands it (memprof's [`crate::shutdown`]) and then lets the signal take its
//! default action, so the process still
//! ends as killed by SIGTERM. signal-hook chains with handlers installed through it or `tokio::signal`
//! (both would run); a program that handles SIGTERM itself calls [`crate::shutdown`] from its handler
//! instead.

use signal_hook::consts::SIGTERM;
use signal_hook::iterator::Signals;

/// Starts the thread that runs `end_memprof`, then ends the process, on SIGTERM.
pub(crate) fn watch(end_memprof: fn()) -> std::io::Result<()> {
    let mut signals = Signals::new([SIGTERM])?;
    crate::process::threads::spawn("memprof-sigterm", move || {
        if let Some(signal) = signals.forever().next() {
            end_memprof();
            // Restores the default action and raises the signal again: the process ends as it would have.
            let _ = signal_hook::low_level::emulate_default_handler(signal);
        }
    })?;
    Ok(())
}
