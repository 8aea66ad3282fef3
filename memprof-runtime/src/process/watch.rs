//! memprof's watch: one thread, waiting (`poll`) for what memprof must answer the moment it happens: an
//! arena jemalloc made, to be hooked before it maps anything ([`crate::jemalloc::ArenaWatch`]), and
//! SIGTERM or SIGINT where the program asked memprof to end on them ([`super::signals::SignalWatch`]).
//! One thread for both, where each had its own: an idle service runs three of memprof's threads (the
//! watch, the counters, the server's door).
//!
//! Started at start-up, before memprof's other threads allocate, and at most once; it never ends.

use std::ffi::c_int;
use std::sync::mpsc::SyncSender;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, poll};

use super::signals::SignalWatch;
use crate::jemalloc::ArenaWatch;

/// What the watch waits for.
pub(crate) struct Watched {
    /// Whether arenas are hooked as they are made (where memprof reads the memory, and the hooks are in).
    pub(crate) arenas: bool,
    /// The signals memprof ends on, and what it runs then.
    pub(crate) signals: Vec<c_int>,
    pub(crate) end_memprof: fn(),
}

/// What could not be watched, and why.
#[derive(Debug, Default)]
pub(crate) struct Unwatched {
    /// The arenas are not watched (the thread could not start).
    pub(crate) arenas: Option<std::io::Error>,
    /// The signals are not watched.
    pub(crate) signals: Option<std::io::Error>,
}

/// Starts the watch's thread for what `watched` names, unless it names nothing.
pub(crate) fn start(watched: Watched) -> Unwatched {
    let mut unwatched = Unwatched::default();
    let signals = if watched.signals.is_empty() {
        None
    } else {
        match SignalWatch::new(&watched.signals, watched.end_memprof) {
            Ok(signals) => Some(signals),
            Err(error) => {
                unwatched.signals = Some(error);
                None
            }
        }
    };
    if !watched.arenas && signals.is_none() {
        return unwatched;
    }
    let signals_asked = signals.is_some();
    let arenas = watched.arenas;
    let (begun, beginning) = std::sync::mpsc::sync_channel(1);
    match super::threads::spawn("memprof-watch", move || watch(arenas, signals, &begun)) {
        // The arenas of the threads born after this one are hooked as they are made: the watch begins first.
        Ok(()) if arenas => drop(beginning.recv_timeout(BEGUN_WITHIN)),
        Ok(()) => {}
        Err(error) => {
            unwatched.signals = signals_asked.then(|| std::io::Error::new(error.kind(), error.to_string()));
            unwatched.arenas = arenas.then_some(error);
        }
    }
    unwatched
}

/// How long start-up waits for the watch to begin (a thread not scheduled by then hooks the arenas made
/// meanwhile late, and `explain` says its reading may be incomplete).
const BEGUN_WITHIN: Duration = Duration::from_secs(2);

/// The watch's loop: never returns. Nothing allocated in it: the poll set is a fixed pair.
fn watch(arenas: bool, mut signals: Option<SignalWatch>, begun: &SyncSender<()>) {
    let mut arenas = arenas.then(ArenaWatch::begin).flatten();
    let _ = begun.try_send(());
    loop {
        let wanted = [arenas.as_ref().map(ArenaWatch::announcements), signals.as_ref().map(SignalWatch::arrivals)];
        let Some(any) = wanted.iter().flatten().next().copied() else {
            return; // nothing to watch: the arenas' hooks were not installed, and no signal was asked for
        };
        // A slot with nothing to watch polls the other's descriptor again; its readiness is not read.
        let mut waits = wanted.map(|fd| PollFd::from_borrowed_fd(fd.unwrap_or(any), PollFlags::IN));
        if poll(&mut waits, None).is_err() {
            continue; // EINTR
        }
        let ready: [bool; 2] =
            std::array::from_fn(|index| wanted[index].is_some() && !waits[index].revents().is_empty());
        if let (Some(arenas), true) = (arenas.as_mut(), ready[0]) {
            arenas.answer();
        }
        if let (Some(signals), true) = (signals.as_mut(), ready[1]) {
            signals.check();
        }
    }
}
