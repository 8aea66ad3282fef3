//! The accept loop: one thread takes connections and gives each its own thread, up to a bound. A stalled or
//! slow client holds only its own thread, and only until a deadline; when the bound is reached, the connection
//! that has waited longest for its client's request is closed to make room (so a flood of stalled clients
//! cannot keep `state` or `stop` out), and only when every connection is inside a handler does a new one get
//! an immediate 503. Every thread memprof starts here is unsampled, so serving never shows in a profile.

use std::io::{self, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::connection::{Connection, Incoming, Request};
use super::reply::{Framing, HttpError, Response, guarded};
use crate::{jemalloc, report};

/// The most connections served at once.
pub(crate) const MAX_CONNECTIONS: usize = 32;

/// Answers one request.
pub(crate) type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// Starts the accept loop on `listener`; each request is answered by `handle`.
pub(crate) fn start(listener: TcpListener, handle: Handler) -> io::Result<()> {
    thread::Builder::new().name("memprof-http".to_owned()).spawn(move || {
        jemalloc::set_this_thread_sampled(false);
        accept_forever(&listener, handle);
    })?;
    Ok(())
}

fn accept_forever(listener: &TcpListener, handle: Handler) {
    let open = Arc::new(Connections::default());
    let mut failures_reported = false;
    loop {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of descriptors or memory, say: wait and go on; the server never gives up.
                if !failures_reported {
                    report::warn(&format!(
                        "Cannot accept a connection on the heap profiling endpoints ({error}); retrying"
                    ));
                    failures_reported = true;
                }
                thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let Some(slot) = Connections::admit(&open, &stream) else {
            refuse(stream);
            continue;
        };
        let handle = Arc::clone(&handle);
        let spawned = thread::Builder::new().name("memprof-http-c".to_owned()).spawn(move || {
            jemalloc::set_this_thread_sampled(false);
            serve_connection(stream, &slot, &handle);
        });
        if let Err(error) = spawned {
            report::warn(&format!("Cannot start a thread for a connection to the heap profiling endpoints ({error})"));
        }
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
    /// A handle on the socket, to close it from the accept loop.
    stream: TcpStream,
    /// Since when the connection has been waiting for its client; `None` while a handler runs.
    waiting_since: Option<Instant>,
}

impl Connections {
    /// Makes room for `stream`, closing the connection that has waited longest for its client if all places
    /// are taken; `None` when every connection is busy in a handler.
    fn admit(connections: &Arc<Self>, stream: &TcpStream) -> Option<Slot> {
        let handle = stream.try_clone().ok()?;
        let mut entries = connections.entries.lock();
        if entries.len() >= MAX_CONNECTIONS {
            let longest = (0..entries.len())
                .filter(|&index| entries[index].waiting_since.is_some())
                .min_by_key(|&index| entries[index].waiting_since)?;
            let evicted = entries.swap_remove(longest);
            let _ = evicted.stream.shutdown(Shutdown::Both);
        }
        let id = connections.next_id.fetch_add(1, Ordering::Relaxed);
        entries.push(Entry { id, stream: handle, waiting_since: Some(Instant::now()) });
        Some(Slot { connections: Arc::clone(connections), id })
    }
}

/// A connection's place among those served; given back when the connection ends.
struct Slot {
    connections: Arc<Connections>,
    id: u64,
}

impl Slot {
    /// Records whether the connection waits for its client (and may be closed to make room) or is busy.
    fn set_waiting(&self, waiting: bool) {
        let mut entries = self.connections.entries.lock();
        if let Some(entry) = entries.iter_mut().find(|entry| entry.id == self.id) {
            entry.waiting_since = waiting.then(Instant::now);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.connections.entries.lock().retain(|entry| entry.id != self.id);
    }
}

/// Answers 503 without waiting for the client (the accept loop must never block on one).
fn refuse(mut stream: TcpStream) {
    let busy = HttpError::busy(format!("More than {MAX_CONNECTIONS} connections are busy; try again"), 1);
    let mut bytes = Vec::new();
    if busy.into_response().write_to(&mut bytes, Framing::CLOSE).is_ok() && stream.set_nonblocking(true).is_ok() {
        let _ = stream.write_all(&bytes);
        // Unread bytes would make closing reset the connection, and the client might lose the answer.
        let _ = io::Read::read(&mut stream, &mut [0; 4096]);
    }
}

/// Answers the connection's requests until it closes.
fn serve_connection(stream: TcpStream, slot: &Slot, handle: &Handler) {
    let Ok(mut connection) = Connection::new(stream) else {
        return;
    };
    // A connection waits for its client from its admission, and again from the moment its answer is ready
    // (sending it is up to the client too), until the next request has been read.
    loop {
        let incoming = connection.next_request();
        slot.set_waiting(false);
        let keep_open = match incoming {
            Incoming::Request(request) => {
                let response = guarded(|| handle(&request));
                slot.set_waiting(true);
                connection.answer(Some(&request), response)
            }
            Incoming::Refused(error) => connection.answer(None, error.into_response()),
            Incoming::Closed => false,
        };
        if !keep_open {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::SocketAddr;

    use super::*;
    use crate::http::reply::Reply;

    fn serve(handle: fn(&Request) -> Response) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        start(listener, Arc::new(handle)).unwrap();
        address
    }

    fn exchange(address: SocketAddr, request: &str) -> String {
        let mut stream = TcpStream::connect(address).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    }

    fn echo(request: &Request) -> Response {
        let text = format!("{} {} {}", request.method, request.target, String::from_utf8_lossy(&request.body));
        Reply::bytes("text/plain", text.into_bytes()).into_response()
    }

    fn panics(request: &Request) -> Response {
        if request.target == "/panic" {
            panic!("a handler bug");
        }
        echo(request)
    }

    #[test]
    fn a_panicking_handler_answers_500_and_the_connection_thread_lives_on() {
        let address = serve(panics);
        let answer = exchange(address, "GET /panic HTTP/1.1\r\n\r\nGET /after HTTP/1.1\r\nConnection: close\r\n\r\n");
        let (first, second) = answer.split_once("\r\n\r\n").unwrap();
        assert!(first.starts_with("HTTP/1.1 500 Internal Server Error\r\n"), "{answer}");
        assert!(
            second.starts_with("memprof failed while answering this request; see the program's log.\nHTTP/1.1 200 OK"),
            "{answer}"
        );
        assert!(answer.ends_with("GET /after "), "{answer}");
    }

    #[test]
    fn pipelined_requests_and_chunked_bodies_are_answered_in_order() {
        let address = serve(echo);
        let answer = exchange(
            address,
            "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyzPOST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\
             Connection: close\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer: t\r\n\r\n",
        );
        assert!(
            answer.contains("Content-Length: 11\r\nCache-Control: no-store\r\n\r\nPOST /a xyzHTTP/1.1 200"),
            "{answer}"
        );
        assert!(answer.ends_with("Connection: close\r\n\r\nPOST /b abcde"), "{answer}");
    }

    #[test]
    fn expect_continue_is_answered_before_the_body_is_sent() {
        let address = serve(echo);
        let mut stream = TcpStream::connect(address).unwrap();
        stream
            .write_all(b"POST /e HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut interim = [0; 25];
        stream.read_exact(&mut interim).unwrap();
        assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
        stream.write_all(b"ok").unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.ends_with("POST /e ok"), "{answer}");
    }

    /// Sends a request and reads the start of its answer, leaving the connection open.
    fn held_after(address: SocketAddr, request: &[u8], expected_status: &[u8]) -> TcpStream {
        let mut stream = TcpStream::connect(address).unwrap();
        stream.write_all(request).unwrap();
        let mut status = vec![0; expected_status.len()];
        stream.read_exact(&mut status).unwrap();
        assert_eq!(status, expected_status);
        stream
    }

    #[test]
    fn a_flood_of_stalled_clients_makes_room_for_new_requests_oldest_first() {
        let address = serve(echo);
        // Answered once each, so they are surely counted, then stalled halfway through a second request.
        let mut stalled: Vec<TcpStream> = (0..MAX_CONNECTIONS)
            .map(|_| {
                let mut stream = held_after(address, b"GET /first HTTP/1.1\r\n\r\n", b"HTTP/1.1 200");
                stream.write_all(b"GET /second HTTP/1.1\r\nHost:").unwrap();
                stream
            })
            .collect();
        let answer = exchange(address, "GET /new HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.ends_with("GET /new "), "{answer}");
        // The oldest stalled connection was closed for it: the rest of its first answer, then the end.
        let mut rest = String::new();
        stalled[0].read_to_string(&mut rest).unwrap();
        assert!(rest.ends_with("GET /first "), "{rest}");
        stalled[1].set_nonblocking(true).unwrap();
        let mut pending = [0; 256];
        let read = stalled[1].read(&mut pending).unwrap();
        assert!(stalled[1].read(&mut pending[read..]).is_err(), "the second oldest stays open");
        stalled.clear();
    }

    static RELEASE: (parking_lot::Mutex<bool>, parking_lot::Condvar) =
        (parking_lot::Mutex::new(false), parking_lot::Condvar::new());

    static WAITING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    fn waits_for_release(request: &Request) -> Response {
        WAITING.fetch_add(1, Ordering::SeqCst);
        let mut released = RELEASE.0.lock();
        while !*released {
            RELEASE.1.wait(&mut released);
        }
        echo(request)
    }

    #[test]
    fn when_every_connection_is_busy_a_new_one_gets_503_at_once() {
        let address = serve(waits_for_release);
        let busy: Vec<TcpStream> =
            (0..MAX_CONNECTIONS).map(|_| held_after(address, b"GET /busy HTTP/1.1\r\n\r\n", b"")).collect();
        while WAITING.load(Ordering::SeqCst) < MAX_CONNECTIONS {
            thread::sleep(Duration::from_millis(5));
        }
        let answer = exchange(address, "");
        assert!(answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{answer}");
        assert!(answer.contains("Retry-After: 1\r\n"), "{answer}");
        assert!(answer.ends_with(&format!("More than {MAX_CONNECTIONS} connections are busy; try again.\n")));
        *RELEASE.0.lock() = true;
        RELEASE.1.notify_all();
        for mut stream in busy {
            let mut status = [0; 12];
            stream.read_exact(&mut status).unwrap();
            assert_eq!(&status, b"HTTP/1.1 200");
        }
    }
}
