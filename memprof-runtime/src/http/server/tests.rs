//! The accept loop on real sockets: the protocol, bounds and evictions (`door`: what finds no place).

mod door;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::{Condvar, Mutex};

use super::*;
use crate::http::head::MAX_BODY;
use crate::http::reply::Reply;
use crate::testing::wait_until;

/// The tests' service: answers by a function; `/state` is the urgent request.
struct Answers<F>(F);

impl<F: Fn(&Request) -> Response + Send + Sync + 'static> Service for Answers<F> {
    fn answer(&self, request: &Request) -> Response {
        (self.0)(request)
    }

    fn is_urgent(&self, request: &Request) -> bool {
        request.target == "/state"
    }

    fn when_idle(&self) -> fn() {
        || {}
    }
}

fn serve(handle: impl Fn(&Request) -> Response + Send + Sync + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(start(listener, Arc::new(Answers(handle))).unwrap());
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

/// Waits until `count` requests are inside the gated handler.
fn wait_inside(gate: &Gate, count: usize) {
    wait_until(&format!("{count} requests inside the handler"), || {
        let inside = gate.inside.load(Ordering::SeqCst);
        if inside == count { Ok(()) } else { Err(format!("{inside} inside")) }
    });
}

/// Waits until `count` of the handler's waits have ended.
fn wait_waits_ended(gate: &Gate, count: usize) {
    wait_until(&format!("{count} waits to end"), || {
        let ended = gate.waits_ended.lock().clone();
        if ended.len() == count { Ok(()) } else { Err(format!("{ended:?}")) }
    });
}

#[test]
fn nothing_is_answered_before_the_opening_is_dropped() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let opening = start(listener, Arc::new(Answers(echo))).unwrap();
    let mut early = TcpStream::connect(address).unwrap();
    early.write_all(b"GET /early HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    early.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut byte = [0; 1];
    let before = early.read(&mut byte).map_err(|error| error.kind());
    assert!(matches!(before, Err(io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)), "{before:?}");
    drop(opening);
    early.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut answer = String::new();
    early.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("GET /early "), "{answer}");
}

#[test]
fn a_panicking_handler_answers_500_and_the_connection_thread_lives_on() {
    let address = serve(panics);
    let answer = exchange(
        address,
        "GET /panic HTTP/1.1\r\nHost: localhost\r\n\r\nGET /after HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
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
        "POST /a HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\nxyzPOST /b HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer: t\r\n\r\n",
    );
    assert!(
        answer.contains("Content-Length: 11\r\nCache-Control: no-store\r\n\r\nPOST /a xyzHTTP/1.1 200"),
        "{answer}"
    );
    assert!(answer.ends_with("Connection: close\r\n\r\nPOST /b abcde"), "{answer}");
}

#[test]
fn a_chunked_trailer_ends_lines_as_heads_do_and_its_fields_need_a_colon() {
    let address = serve(echo);
    // The empty line after the last chunk ends with a bare LF, as a head's may: the next request follows.
    let answer = exchange(
        address,
        "POST /a HTTP/1.1\r\nHost: [::1]\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n0\r\n\n\
         GET /next HTTP/1.1\r\nHost: [::1]\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.contains("POST /a zHTTP/1.1 200 OK"), "{answer}");
    assert!(answer.ends_with("GET /next "), "{answer}");
    let answer = exchange(
        address,
        "POST /a HTTP/1.1\r\nHost: [::1]\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nno colon here\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
    assert!(answer.ends_with("Malformed trailer after the chunked request body.\n"), "{answer}");
}

#[test]
fn http_1_0_with_transfer_encoding_is_answered_then_closed() {
    let address = serve(echo);
    let answer = exchange(
        address,
        "POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n1\r\nz\r\n0\r\n\r\n\
         GET /next HTTP/1.0\r\n\r\n",
    );
    assert!(answer.ends_with("Connection: close\r\n\r\nPOST /a z"), "{answer}");
}

#[test]
fn on_loopback_only_loopback_host_names_are_answered() {
    let address = serve(echo);
    for host in ["localhost", "LOCALHOST:5050", "app.localhost", "127.0.0.1:80", "127.1.2.3", "[::1]:5050"] {
        let answer = exchange(address, &format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"));
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{host}: {answer}");
    }
    for host in ["rebind.evil.example", "evil.example:5050", "10.0.0.1", "localhost.evil.example"] {
        let answer = exchange(address, &format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"));
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{host}: {answer}");
        assert!(answer.contains(&format!("Host '{host}' is refused")), "{answer}");
    }
    let answer = exchange(address, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
    let answer = exchange(address, "GET / HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\n\r\n");
    assert!(answer.ends_with("A request cannot have more than one Host field.\n"), "{answer}");
}

#[test]
fn expect_continue_is_answered_before_the_body_is_sent() {
    let address = serve(echo);
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .write_all(
            b"POST /e HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n",
        )
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
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
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
            let mut stream = held_after(address, b"GET /first HTTP/1.1\r\nHost: localhost\r\n\r\n", b"HTTP/1.1 200");
            stream.write_all(b"GET /second HTTP/1.1\r\nHost:").unwrap();
            stream
        })
        .collect();
    let answer = exchange(address, "GET /new HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.ends_with("GET /new "), "{answer}");
    // The oldest stalled connection was closed for it: the rest of its first answer, then a 503 for the
    // request it had begun, which was not run.
    let mut rest = String::new();
    stalled[0].read_to_string(&mut rest).unwrap();
    assert!(rest.contains("GET /first HTTP/1.1 503 Service Unavailable\r\n"), "{rest}");
    assert!(rest.contains("Retry-After: 1\r\n"), "{rest}");
    assert!(rest.ends_with("This connection was closed to make room for another client; try again.\n"), "{rest}");
    stalled[1].set_nonblocking(true).unwrap();
    let mut pending = [0; 256];
    let read = stalled[1].read(&mut pending).unwrap();
    assert!(stalled[1].read(&mut pending[read..]).is_err(), "the second oldest stays open");
    stalled.clear();
}

/// A handler that blocks until released, counting the requests inside it; `/wait` waits 60 s instead,
/// and `/state` (the urgent request of these tests) is answered at once.
struct Gate {
    released: Mutex<bool>,
    opened: Condvar,
    inside: AtomicUsize,
    waits_ended: Mutex<Vec<Result<(), u16>>>,
}

impl Gate {
    fn new() -> Arc<Self> {
        Arc::new(Gate {
            released: Mutex::new(false),
            opened: Condvar::new(),
            inside: AtomicUsize::new(0),
            waits_ended: Mutex::new(Vec::new()),
        })
    }

    fn handle(&self, request: &Request) -> Response {
        self.inside.fetch_add(1, Ordering::SeqCst);
        if request.target == "/state" {
            return Reply::bytes("text/plain", b"/state answered".to_vec()).into_response();
        }
        if request.target == "/wait" {
            let waited = request.wait(Duration::from_secs(60));
            self.waits_ended.lock().push(waited.clone().map_err(|error| error.status));
            if let Err(error) = waited {
                return error.into_response();
            }
        } else {
            let mut released = self.released.lock();
            while !*released {
                self.opened.wait(&mut released);
            }
        }
        let text = format!("{} answered", request.target);
        Reply::bytes("text/plain", text.into_bytes()).into_response()
    }

    fn release(&self) {
        *self.released.lock() = true;
        self.opened.notify_all();
    }
}

fn gated(gate: &Arc<Gate>) -> SocketAddr {
    let gate = Arc::clone(gate);
    serve(move |request| gate.handle(request))
}

/// Takes `count` places, one at a time, with requests for `target` that stay in `gate`'s handler (until it
/// is released, or for `/wait` until their wait ends).
fn take_places(address: SocketAddr, gate: &Gate, target: &str, count: usize) -> Vec<TcpStream> {
    (1..=count)
        .map(|inside| {
            let request = format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n");
            let stream = held_after(address, request.as_bytes(), b"");
            wait_inside(gate, inside);
            stream
        })
        .collect()
}

#[test]
fn a_handlers_wait_ends_when_the_client_leaves() {
    let gate = Gate::new();
    let address = gated(&gate);
    let leaving = held_after(address, b"GET /wait HTTP/1.1\r\nHost: localhost\r\n\r\n", b"");
    wait_inside(&gate, 1);
    drop(leaving);
    // At once, not after the 60 s asked for (a 400 that nobody reads).
    wait_waits_ended(&gate, 1);
    assert_eq!(gate.waits_ended.lock()[0], Err(400));
}

#[test]
fn a_waiting_handler_holds_no_busy_place() {
    let gate = Gate::new();
    let address = gated(&gate);
    gate.release();
    // Every place taken by waiting scrapes: a new request is answered, the longest wait is cut with 503.
    let mut waiting = take_places(address, &gate, "/wait", MAX_CONNECTIONS);
    let answer = exchange(address, "GET /state HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert!(answer.ends_with("/state answered"), "{answer}");
    wait_waits_ended(&gate, 1);
    assert_eq!(gate.waits_ended.lock()[0], Err(503));
    let mut cut = String::new();
    waiting[0].read_to_string(&mut cut).unwrap();
    assert!(cut.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{cut}");
    assert!(cut.ends_with("This connection was closed to make room for another client; try again.\n"), "{cut}");
    waiting.clear();
}

#[test]
fn a_body_beyond_what_bodies_may_hold_is_refused_before_it_is_sent() {
    let gate = Gate::new();
    let address = gated(&gate);
    // Two of the largest bodies, read whole and held in the handler: all bodies may hold.
    let head = format!("POST /lookup HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n", MAX_BODY);
    let holding: Vec<TcpStream> = (1..=2)
        .map(|inside| {
            let mut stream = TcpStream::connect(address).unwrap();
            stream.write_all(head.as_bytes()).unwrap();
            stream.write_all(&vec![b'0'; MAX_BODY]).unwrap();
            wait_inside(&gate, inside);
            stream
        })
        .collect();
    // A third announces ten bytes and sends none: it is refused unread, so it need not send them.
    let refused = exchange(address, "POST /lookup HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n");
    assert!(refused.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{refused}");
    assert!(refused.contains("Retry-After: 1\r\n"), "{refused}");
    assert!(
        refused.ends_with(
            "Other requests' bodies take the 2097152 bytes set aside for request bodies; try again in a second.\n"
        ),
        "{refused}"
    );
    assert_eq!(gate.inside.load(Ordering::SeqCst), 2, "the refused request never reached the handler");
    gate.release();
    for mut stream in holding {
        let mut status = [0; 15];
        stream.read_exact(&mut status).unwrap();
        assert_eq!(&status, b"HTTP/1.1 200 OK");
    }
    // Answered and dropped, their bodies are counted no more.
    let answer = exchange(
        address,
        "POST /lookup HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
    );
    assert!(answer.ends_with("/lookup answered"), "{answer}");
}
