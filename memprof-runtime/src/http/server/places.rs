//! The places of the connections being served, and which one is closed to make room for a newcomer: the one
//! that has waited longest, in a handler's wait (`?seconds=N`) or for its client, but never one whose
//! client may be sending its request right now ([`CLIENT_GRACE`]) nor one whose request is being answered.

use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::http::reply::HttpError;

/// The most connections served at once.
pub(crate) const MAX_CONNECTIONS: usize = 32;

/// How long a connection's client may send nothing before the connection may be closed to make room: a
/// request on its way is never thrown out for a newcomer (each would throw out the next, in a loop, under a
/// flood of clients), while a client stalled longer than this gives its place up.
pub(crate) const CLIENT_GRACE: Duration = Duration::from_millis(500);

/// The connections being served.
#[derive(Default)]
pub(super) struct Connections {
    entries: Mutex<Vec<Entry>>,
    next_id: AtomicU64,
}

struct Entry {
    id: u64,
    /// The connection's socket, to close its reading side when it is closed to make room.
    stream: Arc<TcpStream>,
    /// What the connection waits for, since when; `None` while a request is being answered.
    idle: Option<Idle>,
}

/// What an idle connection waits for.
#[derive(Clone, Copy)]
enum Idle {
    /// Its client's next request (or its first): since its last answer began (which orders connections as
    /// their clients were answered), and since it was written (from which the grace counts).
    Client { began: Instant, written: Instant },
    /// The end of its handler's wait, since it began.
    Handler(Instant),
}

impl Idle {
    /// Since when it waits, if it may be closed to make room at `now`.
    fn closable_since(self, now: Instant) -> Option<Instant> {
        match self {
            Idle::Client { began, written } => {
                (now.saturating_duration_since(written) >= CLIENT_GRACE).then_some(began)
            }
            Idle::Handler(since) => Some(since),
        }
    }
}

impl Connections {
    /// A place for `stream`: when all [`MAX_CONNECTIONS`] are taken, the connection that has waited the
    /// longest is closed for it, if one may be; `None` when there is no place.
    pub(super) fn admit(connections: &Arc<Self>, stream: &Arc<TcpStream>) -> Option<Arc<Slot>> {
        let mut entries = connections.entries.lock();
        if entries.len() >= MAX_CONNECTIONS {
            let now = Instant::now();
            let longest = (0..entries.len())
                .filter_map(|index| Some((index, entries[index].idle?.closable_since(now)?)))
                .min_by_key(|&(_, since)| since)?;
            // Its thread sees the end of its input, or that its place is gone, and says why.
            let evicted = entries.swap_remove(longest.0);
            let _ = evicted.stream.shutdown(Shutdown::Read);
        }
        let id = connections.next_id.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        entries.push(Entry { id, stream: Arc::clone(stream), idle: Some(Idle::Client { began: now, written: now }) });
        Some(Arc::new(Slot { connections: Arc::clone(connections), id }))
    }
}

/// A connection's place among those served; given back when the connection ends.
pub(super) struct Slot {
    connections: Arc<Connections>,
    id: u64,
}

impl Slot {
    /// The connection waits for its client's next request, its last answer begun at `began` and written
    /// now.
    pub(super) fn wait_for_client(&self, began: Instant) {
        self.set_idle(Some(Idle::Client { began, written: Instant::now() }));
    }

    /// The connection's handler waits (`?seconds=N`) from now: it may be closed to make room meanwhile.
    pub(super) fn wait_in_handler(&self) {
        self.set_idle(Some(Idle::Handler(Instant::now())));
    }

    /// Takes the place for answering a request: from now on the connection is not closed to make room.
    /// `false` when it was closed to make room already.
    pub(super) fn claim(&self) -> bool {
        self.set_idle(None)
    }

    /// Whether the connection was closed to make room.
    pub(super) fn evicted(&self) -> bool {
        !self.connections.entries.lock().iter().any(|entry| entry.id == self.id)
    }

    fn set_idle(&self, idle: Option<Idle>) -> bool {
        let mut entries = self.connections.entries.lock();
        let entry = entries.iter_mut().find(|entry| entry.id == self.id);
        entry.map(|entry| entry.idle = idle).is_some()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.connections.entries.lock().retain(|entry| entry.id != self.id);
    }
}

/// 503 for a request on a connection closed to make room: it was not run.
pub(super) fn evicted() -> HttpError {
    HttpError::busy("This connection was closed to make room for another client; try again", 1)
}
