//! Connections that find no place: answered at the door, waiting there for a place, or cut off.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use super::{Gate, echo, exchange, gated, serve, take_places};
use crate::http::reply::Reply;
use crate::http::request::Request;
use crate::http::server::{MAX_CONNECTIONS, door};

/// Reads from `stream` until what was read ends with `expected`.
fn read_until_end(stream: &mut TcpStream, expected: &str) {
    let mut answer = vec![0; 512];
    let mut read = 0;
    while !String::from_utf8_lossy(&answer[..read]).ends_with(expected) {
        let more = stream.read(&mut answer[read..]).unwrap();
        assert!(more > 0, "{}", String::from_utf8_lossy(&answer[..read]));
        read += more;
    }
}

#[test]
fn with_every_place_busy_state_is_answered_at_the_door_and_the_rest_wait_for_a_place_then_503() {
    let gate = Gate::new();
    let address = gated(&gate);
    let busy = take_places(address, &gate, "/busy", MAX_CONNECTIONS);
    // No place comes free within the door's patience: 503, the request not run.
    let answer = exchange(address, "GET /other HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{answer}");
    assert!(answer.contains("Retry-After: 1\r\nConnection: close\r\n"), "{answer}");
    assert!(answer.ends_with(&format!("More than {MAX_CONNECTIONS} connections are busy; try again.\n")), "{answer}");
    assert_eq!(gate.inside.load(Ordering::SeqCst), MAX_CONNECTIONS);
    // A urgent request is answered at the door at once, and so is a malformed one.
    let state = exchange(address, "GET /state HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(state.starts_with("HTTP/1.1 200 OK\r\n") && state.ends_with("/state answered"), "{state}");
    let head = exchange(address, "HEAD /state HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("Connection: close\r\n\r\n"), "{head}");
    let malformed = exchange(address, "GET /st\x01ate HTTP/1.1\r\n\r\n");
    assert!(malformed.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{malformed}");
    // A request that waits at the door gets a place once one is free: here the first the busy ones leave
    // when their client has been quiet for the grace.
    let mut queued = TcpStream::connect(address).unwrap();
    queued.write_all(b"GET /queued HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    gate.release();
    read_until_end(&mut queued, "/queued answered");
    for mut stream in busy {
        read_until_end(&mut stream, "/busy answered");
    }
}

#[test]
fn a_flood_of_new_clients_throws_out_no_request_on_its_way_and_state_is_always_answered() {
    let address = serve(|request: &Request| {
        if request.target == "/work" {
            thread::sleep(Duration::from_millis(5));
        }
        echo(request)
    });
    let clients: Vec<_> = (0..3 * MAX_CONNECTIONS)
        .map(|client| {
            thread::spawn(move || {
                (0..20)
                    .map(|turn| {
                        let target = if (client + turn) % 2 == 0 { "/state" } else { "/work" };
                        let request = format!("GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
                        (target, exchange(address, &request))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for client in clients {
        for (target, answer) in client.join().unwrap() {
            assert!(!answer.contains("closed to make room"), "{answer}");
            if target == "/state" || answer.starts_with("HTTP/1.1 200 OK\r\n") {
                assert!(
                    answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.ends_with(&format!("GET {target} ")),
                    "{answer}"
                );
            } else {
                assert!(answer.ends_with("connections are busy; try again.\n"), "{answer}");
            }
        }
    }
}

#[test]
fn a_full_door_closes_the_connection_that_came_first() {
    let gate = Gate::new();
    let address = gated(&gate);
    let busy = take_places(address, &gate, "/busy", MAX_CONNECTIONS);
    // Stalled at the door halfway through their heads: more than it holds.
    let mut stalled: Vec<TcpStream> = (0..door::CAPACITY + 1)
        .map(|_| {
            let mut stream = TcpStream::connect(address).unwrap();
            stream.write_all(b"GET /state HTTP/1.1\r\nHost:").unwrap();
            stream
        })
        .collect();
    let mut first = stalled.remove(0);
    first.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut nothing = Vec::new();
    assert_eq!(first.read_to_end(&mut nothing).unwrap(), 0, "closed without an answer");
    let state = exchange(address, "GET /state HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(state.ends_with("/state answered"), "{state}");
    // The others' deadline: 408.
    let mut newest = stalled.pop().unwrap();
    newest.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut answer = String::new();
    newest.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{answer}");
    gate.release();
    drop(busy);
}

#[test]
fn an_answer_nobody_reads_is_cut_off_and_its_place_given_back() {
    let gate = Gate::new();
    let gated = Arc::clone(&gate);
    let address = serve(move |request| {
        if request.target == "/big" {
            // Far more than the sockets' buffers hold.
            return Reply::bytes("application/octet-stream", vec![b'x'; 64 << 20]).into_response();
        }
        if request.target == "/next" {
            return echo(request);
        }
        gated.handle(request)
    });
    let busy = take_places(address, &gate, "/busy", MAX_CONNECTIONS - 1);
    let mut unread = TcpStream::connect(address).unwrap();
    unread.write_all(b"GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    // Every place is taken until the answer nobody reads is cut off: then the next request gets its place.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = exchange(address, "GET /next HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        if answer.starts_with("HTTP/1.1 200 OK\r\n") {
            break;
        }
        assert!(answer.ends_with("connections are busy; try again.\n"), "{answer}");
        assert!(Instant::now() < deadline, "the unread answer still holds its place");
    }
    let mut cut = Vec::new();
    unread.read_to_end(&mut cut).unwrap();
    assert!(cut.starts_with(b"HTTP/1.1 200 OK\r\n") && cut.len() < 64 << 20, "{} bytes", cut.len());
    gate.release();
    drop(busy);
}

#[test]
fn a_large_body_refused_for_want_of_a_place_still_reads_its_503() {
    let gate = Gate::new();
    let address = gated(&gate);
    let busy = take_places(address, &gate, "/busy", MAX_CONNECTIONS);
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = "POST /big HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1048576\r\n\r\n";
    stream.write_all(head.as_bytes()).unwrap();
    // The whole body is sent (the server drains it), then the answer is read whole: no reset.
    stream.write_all(&vec![b'x'; 1 << 20]).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{answer}");
    gate.release();
    drop(busy);
}
