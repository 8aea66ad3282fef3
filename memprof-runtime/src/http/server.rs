//! The accept loop: one thread takes connections and hands each to a thread of a pool, up to a bound of
//! places ([`places`]); a connection that finds no place waits at the door ([`door`]), on the accept loop's
//! own thread, which polls the sockets waiting there.
//!
//! A stalled or slow client holds only its own place, and only until a deadline. When every place is
//! taken, the connection that has waited longest (for its client, past a grace that lets a request on its
//! way arrive, or in a handler's wait such as `?seconds=N`) is closed to make room. A connection is never
//! closed to make room while a request it read is being answered: a request that was read is answered, and
//! one refused has had no effect and gets 503 with `Retry-After`. At the door, urgent requests (`state`,
//! `stop`: which ones, the endpoints say) are answered at once, and the rest wait a moment for a place; so a
//! flood of clients cannot keep `state` or `stop` out. The pool's threads are unsampled, born when a
//! connection needs one while sampling is off (all of them before a run switches it on), and end after ten
//! idle seconds with sampling off ([`crate::process::threads::Pool`]), so serving never shows in a profile and an
//! idle program keeps none.

mod door;
mod places;

use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use self::door::Door;
pub(crate) use self::places::MAX_CONNECTIONS;
use self::places::{Connections, Slot, evicted};
use super::bodies::Bodies;
use super::connection::{Connection, Incoming};
use super::head::{BodyLength, Head};
use super::reply::{HttpError, Response, guarded};
use super::request::{Request, Wait, client_gone, wait_unless};
use crate::process::messages;
use crate::process::threads::{self, Pool};

/// Pool threads beyond the connections': for connections closed to make room that are still saying so.
const SPARE: usize = 4;
/// How long the accept loop waits for a thread of the pool when a place was found (never for a client).
const THREAD_PATIENCE: Duration = Duration::from_millis(200);
/// The most connections taken off the listener before the door's waiting connections get a turn.
const ACCEPTS_PER_TURN: usize = 64;

/// What a server serves: the answer to each request, which requests are urgent requests (answered even
/// when every place is taken, at the door), and what to let go of when its threads have all been idle a
/// while. The transport knows nothing else of it: in the program it is the endpoints (`Endpoints` in
/// `endpoints/`), in the transport's own tests a few canned answers.
pub(crate) trait Service: Send + Sync + 'static {
    /// The answer to `request` (a panic in it becomes a 500).
    fn answer(&self, request: &Request) -> Response;

    /// Whether `request` is an urgent request.
    fn is_urgent(&self, request: &Request) -> bool;

    /// What the pool's threads run once they have all been idle a while.
    fn when_idle(&self) -> fn();
}

/// Starts the accept loop on `listener`, answering with `service` once the [`Opening`] it returns is
/// dropped.
pub(crate) fn start(listener: TcpListener, service: Arc<dyn Service>) -> io::Result<Opening> {
    let loopback = listener.local_addr()?.ip().is_loopback();
    listener.set_nonblocking(true)?;
    let pool = Pool::new("memprof-http-c", MAX_CONNECTIONS + SPARE, service.when_idle())?;
    let (open, bodies) = (Arc::new(Connections::default()), Arc::new(Bodies::default()));
    let server = Server { service, loopback, pool, open, bodies };
    let opening = Opening(Arc::default());
    let opened = Arc::clone(&opening.0);
    threads::spawn("memprof-http", move || {
        opened.wait();
        server.accept_forever(&listener)
    })?;
    Ok(opening)
}

/// Held while the program's start-up finishes what the endpoints report (the sampling mode chosen, the
/// push started): the accept loop answers nothing until it is dropped, and the connections made meanwhile
/// wait in the kernel's backlog (milliseconds). So no client reads a `state` from the middle of start-up.
#[must_use = "the endpoints answer once it is dropped"]
pub(crate) struct Opening(Arc<Latch>);

impl Drop for Opening {
    fn drop(&mut self) {
        *self.0.open.lock() = true;
        self.0.opened.notify_all();
    }
}

/// Whether an [`Opening`] was dropped, and the accept loop's wait for it.
#[derive(Default)]
struct Latch {
    open: Mutex<bool>,
    opened: parking_lot::Condvar,
}

impl Latch {
    fn wait(&self) {
        let mut open = self.open.lock();
        while !*open {
            self.opened.wait(&mut open);
        }
    }
}

/// What the accept loop serves with.
struct Server {
    service: Arc<dyn Service>,
    /// Whether the server listens on a loopback address (and so answers only loopback host names).
    loopback: bool,
    pool: Pool,
    open: Arc<Connections>,
    /// What the connections' request bodies hold.
    bodies: Arc<Bodies>,
}

impl Server {
    fn accept_forever(&self, listener: &TcpListener) {
        let mut door = Door::default();
        let mut failures_reported = false;
        loop {
            let mut polled: Vec<libc::pollfd> =
                std::iter::once(libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 })
                    .chain(door.interests())
                    .collect();
            if door::poll(&mut polled, door.patience(Instant::now())).is_err() {
                thread::sleep(Duration::from_millis(100));
            }
            // The door first: its poll results are in its order, which accepting would change.
            let ready: Vec<libc::c_short> = polled[1..].iter().map(|entry| entry.revents).collect();
            door.turn(&ready, self);
            if polled[0].revents != 0 {
                self.accept_ready(listener, &mut door, &mut failures_reported);
            }
        }
    }

    /// Takes the connections waiting on the listener: each gets a place, or waits at the door.
    fn accept_ready(&self, listener: &TcpListener, door: &mut Door, failures_reported: &mut bool) {
        for _ in 0..ACCEPTS_PER_TURN {
            match listener.accept() {
                Ok((stream, _)) => {
                    let stream = Arc::new(stream);
                    // A place was found, so a thread is free or about to be (one whose connection was just
                    // closed to make room says so and ends at once): wait for it a moment.
                    if !self.place(&stream, &mut Vec::new(), THREAD_PATIENCE) {
                        door.enter(stream);
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
                Err(error) => {
                    // Out of descriptors or memory, say: wait and go on; the server never gives up.
                    if !*failures_reported {
                        messages::warn(&format!(
                            "Cannot accept a connection on the heap profiling endpoints ({error}); retrying"
                        ));
                        *failures_reported = true;
                    }
                    thread::sleep(Duration::from_millis(100));
                    return;
                }
            }
        }
    }

    /// Gives `stream` a place and a pool thread, which answers its requests starting with the bytes `read`
    /// already (taken); `false`, `read` left as it was, when there is no place, or no thread within
    /// `patience`.
    fn place(&self, stream: &Arc<TcpStream>, read: &mut Vec<u8>, patience: Duration) -> bool {
        let Some(slot) = Connections::admit(&self.open, stream) else {
            return false;
        };
        let read_already = Arc::new(Mutex::new(std::mem::take(read)));
        let (service, loopback, served, bytes, bodies) = (
            Arc::clone(&self.service),
            self.loopback,
            Arc::clone(stream),
            Arc::clone(&read_already),
            Arc::clone(&self.bodies),
        );
        let job = Box::new(move || {
            let read = std::mem::take(&mut *bytes.lock());
            let Ok(connection) = Connection::new(Arc::clone(&served), read, bodies) else { return };
            serve_connection(&served, connection, slot, &*service, loopback);
        });
        match self.pool.run_within(job, patience) {
            Ok(()) => true,
            Err(job) => {
                // The place goes with the job; the bytes stay with the connection.
                drop(job);
                *read = std::mem::take(&mut *read_already.lock());
                false
            }
        }
    }
}

impl door::Host for Server {
    fn answer_at_door(&self, head: Head) -> Option<Response> {
        if !matches!(head.body, BodyLength::Fixed(0)) {
            return None;
        }
        let request = Request::read(head, Vec::new(), None);
        self.service.is_urgent(&request).then(|| respond(&*self.service, self.loopback, &request))
    }

    fn place(&self, stream: &Arc<TcpStream>, read: &mut Vec<u8>) -> bool {
        self.place(stream, read, Duration::ZERO)
    }
}

/// A handler's wait on a connection: the connection may be closed to make room meanwhile, and the wait
/// ends when the client leaves.
struct Watch {
    slot: Arc<Slot>,
    stream: Arc<TcpStream>,
}

impl Wait for Watch {
    fn wait(&self, duration: Duration) -> Result<(), HttpError> {
        self.slot.wait_in_handler();
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
fn serve_connection(
    stream: &Arc<TcpStream>,
    mut connection: Connection,
    slot: Arc<Slot>,
    service: &dyn Service,
    loopback: bool,
) {
    loop {
        let incoming = connection.next_request();
        if !slot.claim() {
            // Closed to make room while reading: what was sent of a request is refused, not run.
            if !matches!(incoming, Incoming::Closed) || connection.has_partial_request() {
                connection.answer_and_close(evicted().into_response());
            }
            return;
        }
        // Connections are closed to make room in the order their answers began (whichever thread got to say
        // so first), each after a grace from its answer's end.
        let answered_at = Instant::now();
        let keep_open = match incoming {
            Incoming::Request(mut request) => {
                request.waiting = Some(Arc::new(Watch { slot: Arc::clone(&slot), stream: Arc::clone(stream) }));
                let response = respond(service, loopback, &request);
                request.drop_body();
                connection.answer(Some(&request), response)
            }
            Incoming::Refused(error) => connection.answer(None, error.into_response()),
            Incoming::Closed => false,
        };
        if !keep_open {
            return;
        }
        slot.wait_for_client(answered_at);
    }
}

/// The answer to `request`: `service`'s, unless its host is refused.
fn respond(service: &dyn Service, loopback: bool, request: &Request) -> Response {
    match refused_host(request, loopback) {
        Some(error) => error.into_response(),
        None => guarded(|| service.answer(request)),
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
