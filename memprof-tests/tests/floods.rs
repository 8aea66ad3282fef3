//! The example service under a flood of clients: `state` and `stop` answer every single try; and under
//! clients that ask for the largest symbol answers and never read them.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use memprof_tests::http::try_get;
use memprof_tests::process::Program;

/// 64 clients cycle start, stop and state on fresh connections (twice the server's places): an operator's
/// single `state` or `stop` is answered every time, and no request on its way is thrown out for another.
#[test]
fn state_and_stop_answer_every_single_try_under_a_flood_of_clients() {
    let service = Program::service().spawn();
    let address = service.address();
    let flooding = AtomicBool::new(true);
    let thrown_out = std::sync::Mutex::new(Vec::new());
    let probes: Vec<(&str, Option<u16>)> = std::thread::scope(|scope| {
        for _ in 0..64 {
            scope.spawn(|| {
                while flooding.load(Ordering::Relaxed) {
                    for target in
                        ["/memory-profiler/start?duration=1hrs", "/memory-profiler/stop", "/memory-profiler/state"]
                    {
                        let answer = try_get(address, target).map(|response| response.text());
                        if answer.as_deref().is_some_and(|text| text.contains("closed to make room")) {
                            thrown_out.lock().unwrap().push(answer);
                        }
                    }
                }
            });
        }
        let probes = (0..40)
            .map(|turn| {
                let target = if turn % 2 == 0 { "/memory-profiler/state" } else { "/memory-profiler/stop" };
                (target, try_get(address, target).map(|response| response.status))
            })
            .collect();
        flooding.store(false, Ordering::Relaxed);
        probes
    });
    for (target, status) in probes {
        // `stop` with no run active is 409; with one, 200: either way answered, never 503.
        let answered = if target.ends_with("state") { status == Some(200) } else { matches!(status, Some(200 | 409)) };
        assert!(answered, "{target}: {status:?}");
    }
    assert_eq!(thrown_out.into_inner().unwrap(), Vec::<Option<String>>::new());
}

/// Clients post a large symbol lookup (16,384 addresses: an answer of some 1 MB, twice what the kernel
/// holds for a connection, named in 1.5 s in a debug build whose symbolizing crates the workspace's dev
/// profile optimizes: the second must be named before the first is cut off) and never read the answers, their
/// receive buffers small: the two answered hold the two job places (a third lookup gets 503) only until
/// the server's write deadline cuts them off, their answers unfinished; meanwhile `state` answers, and
/// afterwards a client that reads gets its answer.
#[test]
fn answers_nobody_reads_are_cut_off_and_the_service_serves_on() {
    let service = Program::service().spawn();
    let body = memprof_tests::sockets::spread_addresses(service.pid(), 1 << 14);
    let head =
        format!("POST /debug/pprof/symbol HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n", body.len());
    let patience = memprof_tests::process::PATIENCE;
    // Two answered lookups whose clients read nothing (a lookup told 503, one at a time, is asked again).
    let mut unread: Vec<TcpStream> = Vec::new();
    memprof_tests::waiting::wait_every("two lookups answered and left unread", patience, Duration::ZERO, || {
        let mut stream = memprof_tests::sockets::connect_reading_nothing(service.address()).unwrap();
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&body).unwrap();
        let mut status = [0; 12];
        // Peeked, not read: the answer stays unread in the small buffer.
        while stream.peek(&mut status).unwrap() < status.len() {
            std::thread::sleep(Duration::from_millis(20));
        }
        if &status == b"HTTP/1.1 200" {
            unread.push(stream);
        }
        if unread.len() < 2 { Err(format!("{} answered", unread.len())) } else { Ok(()) }
    });
    let third = memprof_tests::http::request_with_body(service.address(), "POST", "/debug/pprof/symbol", b"0x1");
    assert_eq!(
        (third.status, third.text()),
        (503, "2 other profiles or symbol lookups are being worked on; try again in a second.\n".to_owned())
    );
    assert_eq!(service.get("/memory-profiler/state").status, 200);
    // Cut off at the write deadline: a reading client gets its answer, the unread ones end unfinished.
    let every = Duration::from_millis(250);
    memprof_tests::waiting::wait_every("the unread answers to be cut off", patience, every, || {
        let lookup = memprof_tests::http::request_with_body(service.address(), "POST", "/debug/pprof/symbol", b"0x1");
        assert!(matches!(lookup.status, 200 | 503), "{}", lookup.text());
        (lookup.status == 200).then_some(()).ok_or_else(|| "a reading lookup told 503".to_owned())
    });
    // The first answered was the first cut off (the second may still be being written, and read now).
    let mut received = Vec::new();
    // The end of what was sent: the server's close, or a reset for what it could not send.
    let _ = unread[0].read_to_end(&mut received);
    let answer = memprof_tests::http::parse(&received);
    let announced: usize = answer.header("content-length").unwrap().parse().unwrap();
    assert!(answer.body.len() < announced, "{} of {announced} bytes: cut off unfinished", answer.body.len());
}
