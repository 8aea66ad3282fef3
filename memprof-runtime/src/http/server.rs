//! The accept loop: one thread takes connections and hands each to a thread of a pool started with the
//! server, up to a bound.
//!
//! A stalled or slow client holds only its own place, and only until a deadline. When the bound is reached,
//! the connection that has waited longest for its client (between requests, or in a handler's wait such as
//! `?seconds=N`) is closed to make room, so a flood of stalled clients or long scrapes cannot keep `state`
//! or `stop` out. A connection is never closed to make room while a request it read is being answered: a
//! request that was read is answered, and one refused has had no effect and gets 503 with `Retry-After`.
//! When every place is busy in a handler, a few more connections are admitted for control requests only
//! ([`RESERVED`]); past those, a new connection gets 503 at once. The pool's threads are unsampled, born
//! when a connection needs one while sampling is off (all of them before a run switches it on), and end
//! after ten idle seconds with sampling off ([`crate::threads::Pool`]), so serving never shows in a profile
//! and an idle program keeps none.

use std::io::{self, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::connection::{Connection, Incoming};
use super::reply::{Framing, HttpError, Response, guarded};
use super::request::{Request, Wait, client_gone, wait_unless};
use crate::messages;
use crate::threads::{self, Pool};

/// The most connections served at once.
pub(crate) const MAX_CONNECTIONS: usize = 32;
/// Connections admitted beyond [`MAX_CONNECTIONS`] while every one is busy in a handler: on them, only
/// control requests are answered (`Request::reserved`).
pub(crate) const RESERVED: usize = 4;
/// Pool threads beyond the connections': for refusals that drain what the client still sends, and for
/// connections closed to make room that are still saying so.
const SPARE: usize = 4;
/// How long the accept loop waits for a thread of the pool when a place was found (never for a client).
const THREAD_PATIENCE: Duration = Duration::from_millis(200);
/// How long a connection refused for want of a place has to send its request, to be answered if it is a
/// control request (`state`, `stop`).
const CONTROL_HEAD_TIMEOUT: Duration = Duration::from_secs(1);

/// Answers one request.
pub(crate) type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// Starts the accept loop on `listener`; each request is answered by `handle`.
pub(crate) fn start(listener: TcpListener, handle: Handler) -> io::Result<()> {
    let loopback = listener.local_addr()?.ip().is_loopback();
    let pool = Pool::new("memprof-http-c", MAX_CONNECTIONS + RESERVED + SPARE)?;
    let server = Server { handle, loopback, pool, open: Arc::new(Connections::default()), lanes: Arc::default() };
    threads::spawn("memprof-http", move || server.accept_forever(&listener))
}

/// What the accept loop serves with.
struct Server {
    handle: Handler,
    /// Whether the server listens on a loopback address (and so answers only loopback host names).
    loopback: bool,
    pool: Pool,
    open: Arc<Connections>,
    /// Connections refused for want of a place whose one request is being read, to answer it if it is a
    /// control request: at most [`SPARE`], so they never take the threads the places need.
    lanes: Arc<AtomicUsize>,
}

impl Server {
    fn accept_forever(&self, listener: &TcpListener) {
        let mut failures_reported = false;
        loop {
            let stream = match listener.accept() {
                Ok((stream, _)) => Arc::new(stream),
                Err(error) => {
                    // Out of descriptors or memory, say: wait and go on; the server never gives up.
                    if !failures_reported {
                        messages::warn(&format!(
                            "Cannot accept a connection on the heap profiling endpoints ({error}); retrying"
                        ));
                        failures_reported = true;
                    }
                    thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            let Some(slot) = Connections::admit(&self.open, &stream) else {
                let message = format!("More than {} connections are busy; try again", MAX_CONNECTIONS + RESERVED);
                self.answer_control_only(stream, HttpError::busy(message, 1));
                continue;
            };
            let (handle, loopback, served) = (Arc::clone(&self.handle), self.loopback, Arc::clone(&stream));
            let job = Box::new(move || serve_connection(&served, slot, &handle, loopback));
            // A place was found, so a thread is free or about to be (one whose connection was just
            // closed to make room says so and ends at once): wait for it a moment.
            if let Err(job) = self.pool.run_within(job, THREAD_PATIENCE) {
                drop(job);
                self.refuse(stream, HttpError::busy("Every thread of the server is busy; try again", 1));
            }
        }
    }

    /// With no place left: on a spare pool thread, reads the one request the client sends (within
    /// [`CONTROL_HEAD_TIMEOUT`]) and answers it as on a reserved place (`state` and `stop` are answered, the
    /// rest refused), then closes; a flood that takes every place cannot keep the operator's `state` or
    /// `stop` out. Without a spare thread, `error` at once.
    fn answer_control_only(&self, stream: Arc<TcpStream>, error: HttpError) {
        if self.lanes.fetch_add(1, Ordering::SeqCst) >= SPARE {
            self.lanes.fetch_sub(1, Ordering::SeqCst);
            return self.refuse(stream, error);
        }
        let lane = Lane(Arc::clone(&self.lanes));
        let (handle, loopback, refused) = (Arc::clone(&self.handle), self.loopback, Arc::clone(&stream));
        let job = Box::new(move || {
            let _lane = lane;
            let Ok(connection) = Connection::new(refused) else { return };
            let mut connection = connection.with_head_timeout(CONTROL_HEAD_TIMEOUT);
            let response = match connection.next_request() {
                Incoming::Request(mut request) => {
                    request.reserved = true;
                    match refused_host(&request, loopback) {
                        Some(refusal) => refusal.into_response(),
                        None => guarded(|| handle(&request)),
                    }
                }
                Incoming::Refused(refusal) => refusal.into_response(),
                Incoming::Closed => error.into_response(),
            };
            // Its request was read whole: nothing is left to drain, and the lane is free again at once.
            connection.answer_and_close(response);
        });
        if let Err(job) = self.pool.try_run(job) {
            drop(job);
            let message = format!("More than {} connections are busy; try again", MAX_CONNECTIONS + RESERVED);
            self.refuse(stream, HttpError::busy(message, 1));
        }
    }

    /// Answers `error` and closes: on a pool thread, which first reads what the client still sends (so the
    /// answer is not lost to a reset); else at once, without waiting for the client (the accept loop must
    /// never block on one).
    fn refuse(&self, stream: Arc<TcpStream>, error: HttpError) {
        let (refused, lingering) = (Arc::clone(&stream), error.clone());
        let job = Box::new(move || {
            if let Ok(mut connection) = Connection::new(refused) {
                connection.answer(None, lingering.into_response());
            }
        });
        if self.pool.try_run(job).is_ok() {
            return;
        }
        let mut bytes = Vec::new();
        if error.into_response().write_to(&mut bytes, Framing::CLOSE).is_ok() && stream.set_nonblocking(true).is_ok() {
            let _ = (&*stream).write_all(&bytes);
            // Unread bytes would make closing reset the connection, and the client might lose the answer.
            let _ = io::Read::read(&mut &*stream, &mut [0; 4096]);
        }
    }
}

/// A connection being read by [`Server::answer_control_only`]: counted in [`Server::lanes`] until dropped.
struct Lane(Arc<AtomicUsize>);

impl Drop for Lane {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The connections being served.
#[derive(Default)]
struct Connections {
    entries: Mutex<Vec<Entry>>,
    next_id: AtomicU64,
}

struct Entry {
    id: u64,
    /// The connection's socket, to close its reading side from the accept loop.
    stream: Arc<TcpStream>,
    /// Since when the connection may be closed to make room; `None` while a request is being answered.
    idle_since: Option<Instant>,
}

impl Connections {
    /// A place for `stream`: when all [`MAX_CONNECTIONS`] are taken, the connection idle the longest is
    /// closed for it, or else, while there are some, a reserved place; `None` when there is no place.
    fn admit(connections: &Arc<Self>, stream: &Arc<TcpStream>) -> Option<Arc<Slot>> {
        let mut entries = connections.entries.lock();
        let mut reserved = false;
        if entries.len() >= MAX_CONNECTIONS {
            let longest = (0..entries.len())
                .filter(|&index| entries[index].idle_since.is_some())
                .min_by_key(|&index| entries[index].idle_since);
            match longest {
                Some(index) => {
                    // Its thread sees the end of its input, or that its place is gone, and says why.
                    let evicted = entries.swap_remove(index);
                    let _ = evicted.stream.shutdown(Shutdown::Read);
                }
                None if entries.len() < MAX_CONNECTIONS + RESERVED => reserved = true,
                None => return None,
            }
        }
        let id = connections.next_id.fetch_add(1, Ordering::Relaxed);
        entries.push(Entry { id, stream: Arc::clone(stream), idle_since: Some(Instant::now()) });
        Some(Arc::new(Slot { connections: Arc::clone(connections), id, reserved }))
    }
}

/// A connection's place among those served; given back when the connection ends.
struct Slot {
    connections: Arc<Connections>,
    id: u64,
    /// Admitted beyond [`MAX_CONNECTIONS`]: for control requests only.
    reserved: bool,
}

impl Slot {
    /// The connection waits for its client since `since`, or its handler waits: it may be closed to make
    /// room.
    fn set_idle(&self, since: Instant) {
        self.set_idle_since(Some(since));
    }

    /// Takes the place for answering a request: from now on the connection is not closed to make room.
    /// `false` when it was closed to make room already.
    fn claim(&self) -> bool {
        self.set_idle_since(None)
    }

    /// Whether the connection was closed to make room.
    fn evicted(&self) -> bool {
        !self.connections.entries.lock().iter().any(|entry| entry.id == self.id)
    }

    fn set_idle_since(&self, since: Option<Instant>) -> bool {
        let mut entries = self.connections.entries.lock();
        let entry = entries.iter_mut().find(|entry| entry.id == self.id);
        entry.map(|entry| entry.idle_since = since).is_some()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.connections.entries.lock().retain(|entry| entry.id != self.id);
    }
}

/// 503 for a request on a connection closed to make room: it was not run.
fn evicted() -> HttpError {
    HttpError::busy("This connection was closed to make room for another client; try again", 1)
}

/// A handler's wait on a connection: the connection may be closed to make room meanwhile, and the wait
/// ends when the client leaves.
struct Watch {
    slot: Arc<Slot>,
    stream: Arc<TcpStream>,
}

impl Wait for Watch {
    fn wait(&self, duration: Duration) -> Result<(), HttpError> {
        self.slot.set_idle(Instant::now());
        let waited = wait_unless(duration, || {
            if self.slot.evicted() { Some(evicted()) } else { client_left(&self.stream).then(client_gone) }
        });
        if self.slot.claim() { waited } else { waited.and(Err(evicted())) }
    }
}

/// Whether the client closed its side (or the connection failed): a peek that does not wait reads its end.
fn client_left(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return false;
    }
    let peeked = stream.peek(&mut [0; 1]);
    let _ = stream.set_nonblocking(false);
    match peeked {
        Ok(0) => true,
        Ok(_) => false,
        Err(error) => !matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted),
    }
}

/// Answers the connection's requests until it closes.
fn serve_connection(stream: &Arc<TcpStream>, slot: Arc<Slot>, handle: &Handler, loopback: bool) {
    let Ok(mut connection) = Connection::new(Arc::clone(stream)) else {
        return;
    };
    loop {
        let incoming = connection.next_request();
        if !slot.claim() {
            // Closed to make room while reading: what was sent of a request is refused, not run.
            if !matches!(incoming, Incoming::Closed) || connection.has_partial_request() {
                connection.answer_and_close(evicted().into_response());
            }
            return;
        }
        // Once the answer is written, the connection waits for its client since the answer began (so
        // connections answered earlier count as waiting longer, whichever thread got to say so first).
        let answered_at = Instant::now();
        let keep_open = match incoming {
            Incoming::Request(mut request) => {
                request.reserved = slot.reserved;
                request.waiting = Some(Arc::new(Watch { slot: Arc::clone(&slot), stream: Arc::clone(stream) }));
                let response = match refused_host(&request, loopback) {
                    Some(error) => error.into_response(),
                    None => guarded(|| handle(&request)),
                };
                connection.answer(Some(&request), response)
            }
            Incoming::Refused(error) => connection.answer(None, error.into_response()),
            Incoming::Closed => false,
        };
        if !keep_open {
            return;
        }
        slot.set_idle(answered_at);
    }
}

/// On a loopback address, a request for another host name is refused: a web page whose name was made to
/// resolve to 127.0.0.1 (DNS rebinding) would otherwise reach the endpoints as if from the same origin.
fn refused_host(request: &Request, loopback: bool) -> Option<HttpError> {
    let host = request.fields.host.as_deref()?;
    (loopback && !memprof_wire::is_loopback_host(host)).then(|| {
        HttpError::new(
            403,
            format!(
                "Host '{host}' is refused: this server listens on a loopback address and answers only localhost, 127.0.0.1 or [::1] (a page whose name resolves here must not reach it)"
            ),
        )
    })
}

#[cfg(test)]
mod tests;
