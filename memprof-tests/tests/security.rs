//! Access control of the endpoints: the shared-secret token, and the warning for an open, non-loopback port.

use std::process::Command;

use memprof_tests::http::Response;
use memprof_tests::process::{Program, built_binary};

/// `GET target` with `headers` (each line ending in CRLF) as written, from a client on this machine.
fn request_with_headers(service: &Program, target: &str, headers: &str) -> Response {
    let request = format!("GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}\r\n");
    memprof_tests::http::exchange(service.address(), request.as_bytes())
}

#[test]
fn with_a_token_every_request_must_present_it() {
    let service = Program::service().env("MEMPROF_TOKEN", "s3cret-token").spawn();
    let missing = service.get("/memory-profiler/state");
    assert_eq!(
        (missing.status, missing.text()),
        (
            401,
            "These endpoints need a token: send 'Authorization: Bearer <token>' (memprof --token, or MEMPROF_TOKEN).\n"
                .to_owned()
        )
    );
    assert_eq!(missing.header("www-authenticate"), Some("Bearer realm=\"memprof\""));
    for wrong in [
        "Authorization: Bearer s3cret-tokeN\r\n",
        "Authorization: Bearer s3cret\r\n",
        "Authorization: Basic czNjcmV0\r\n",
    ] {
        let response = request_with_headers(&service, "/memory-profiler/start?duration=1mins", wrong);
        assert_eq!(response.status, 401, "{wrong}");
    }
    let state = request_with_headers(&service, "/memory-profiler/state", "Authorization: Bearer s3cret-token\r\n");
    assert_eq!(state.status, 200);
    let state: memprof_wire::State = state.parsed("state");
    assert!(state.memory_profiler.auth_required);
    // Nothing was started by the refused requests.
    assert!(matches!(state.memory_profiler.current_run, memprof_wire::CurrentRun::Idle { .. }), "{state:?}");

    let cli = |token: Option<&str>| {
        let mut command = Command::new(built_binary("memprof-tool"));
        command.args(["--url", &format!("http://{}", service.address()), "state"]).env_remove("MEMPROF_TOKEN");
        if let Some(token) = token {
            command.env("MEMPROF_TOKEN", token);
        }
        command.output().unwrap()
    };
    let refused = cli(None);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).starts_with("memprof: These endpoints need a token"));
    let allowed = cli(Some("s3cret-token"));
    assert!(allowed.status.success(), "{}", String::from_utf8_lossy(&allowed.stderr));
}

/// A web page the operator has open cannot drive the endpoints: an `<img>` pointing at `start` (marked
/// cross-site by the browser), a form posted from another origin, a page whose name was made to resolve to
/// 127.0.0.1 (DNS rebinding). None of them starts a run; each is told why.
#[test]
fn web_pages_of_other_sites_cannot_start_runs_or_read_profiles() {
    let service = Program::service().spawn();
    let start = "/memory-profiler/start?duration=1days";
    let image = request_with_headers(&service, start, "Sec-Fetch-Site: cross-site\r\nSec-Fetch-Dest: image\r\n");
    assert_eq!(image.status, 403);
    assert!(
        image.text().starts_with("Refused: the request came from a page of another site, and web pages of other sites cannot use the heap profiling endpoints"),
        "{}",
        image.text()
    );
    let form = request_with_headers(&service, start, "Origin: http://evil.example\r\n");
    assert_eq!(form.status, 403);
    assert!(
        form.text().starts_with("Refused: the request came from a page of http://evil.example,"),
        "{}",
        form.text()
    );
    let rebound = format!(
        "POST {start} HTTP/1.1\r\nHost: rebind.evil.example:{}\r\nOrigin: http://rebind.evil.example:{}\r\nSec-Fetch-Site: same-origin\r\nConnection: close\r\n\r\n",
        service.address().port(),
        service.address().port()
    );
    let rebound = memprof_tests::http::exchange(service.address(), rebound.as_bytes());
    assert_eq!(rebound.status, 403);
    assert!(rebound.text().contains("is refused: this server listens on a loopback address"), "{}", rebound.text());
    let state = request_with_headers(&service, "/memory-profiler/state", "Sec-Fetch-Site: cross-site\r\n");
    assert_eq!(state.status, 403, "profiles and state are not read by other sites either");
    // Nothing was started; the same requests from the dashboard itself (same origin), curl or the CLI work.
    let state = service.state();
    assert_eq!(state.current_run.id(), None, "{state:?}");
    let origin = "Origin: http://localhost\r\nSec-Fetch-Site: same-origin\r\n";
    assert_eq!(request_with_headers(&service, "/memory-profiler/state", origin).status, 200);
    // The dashboard page may be opened from a link anywhere; it cannot be framed.
    let page = request_with_headers(&service, "/memory-profiler/", "Sec-Fetch-Site: cross-site\r\n");
    assert_eq!(page.status, 200);
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert!(page.header("content-security-policy").is_some_and(|policy| policy.contains("frame-ancestors 'none'")));
}

#[test]
fn without_a_token_auth_is_off() {
    let open = Program::service().spawn();
    assert!(!open.state().auth_required);
}

#[test]
fn an_open_port_beyond_loopback_is_reported() {
    let service = Program::service().env("MEMPROF_HTTP", "0.0.0.0:0").spawn();
    service.wait_for_line(|line| {
        line.starts_with("[memprof] WARN The heap profiling endpoints on 0.0.0.0:")
            && line.ends_with("set MEMPROF_TOKEN to require a token, or bind 127.0.0.1")
    });
}

#[test]
fn oversized_requests_are_refused_and_the_server_lives_on() {
    let service = Program::service().spawn();
    let huge_query = format!("/memory-profiler/state?{}", "x".repeat(1 << 20));
    let response = service.get(&huge_query);
    assert_eq!((response.status, response.text()), (414, "The request target is longer than 8192 bytes.\n".to_owned()));
    let many_headers: String = (0..64).map(|index| format!("X-Padding-{index}: {}\r\n", "y".repeat(512))).collect();
    let response = request_with_headers(&service, "/memory-profiler/state", &many_headers);
    assert_eq!(
        (response.status, response.text()),
        (431, "The request headers are larger than 16384 bytes.\n".to_owned())
    );
    let body = vec![b'0'; (1 << 20) + 1];
    let response = memprof_tests::http::request_with_body(service.address(), "POST", "/debug/pprof/symbol", &body);
    assert_eq!(
        (response.status, response.text()),
        (413, "The request body is larger than 1048576 bytes.\n".to_owned())
    );
    assert_eq!(service.get("/memory-profiler/state").status, 200);
}

/// Slowloris: more stalled clients than the server has places, each halfway through its request head.
#[test]
fn stalled_clients_cannot_keep_state_or_stop_out_and_get_408() {
    use std::io::{Read, Write};
    let service = Program::service().spawn();
    let stalled: Vec<std::net::TcpStream> = (0..50)
        .map(|_| {
            let mut stream = std::net::TcpStream::connect(service.address()).unwrap();
            stream.write_all(b"GET /memory-profiler/state HTTP/1.1\r\nHost:").unwrap();
            stream
        })
        .collect();
    assert!(service.whole_state().jemalloc.profiling_enabled);
    let started = service.start("?duration=1hrs");
    let stopped = service.stop();
    assert_eq!(stopped.message, format!("Successfully stopped heap profiling run {}.", started.id));
    // The newest stalled client still has its place, until its deadline: then 408 and the connection closes.
    let mut newest = stalled.last().unwrap().try_clone().unwrap();
    newest.set_read_timeout(Some(memprof_tests::process::PATIENCE)).unwrap();
    let mut raw = Vec::new();
    newest.read_to_end(&mut raw).unwrap();
    let response = memprof_tests::http::parse(&raw);
    assert_eq!((response.status, response.text()), (408, "The request was not sent in time.\n".to_owned()));
    assert_eq!(response.header("connection"), Some("close"));
}

/// Requests that are not HTTP/1.x as it is written, sent byte for byte.
#[test]
fn malformed_requests_get_400_and_the_server_lives_on() {
    use std::io::{Read, Write};
    let service = Program::service().spawn();
    let cases: &[(&[u8], u16, &str)] = &[
        (b"GET /memory-profiler/st\xffate HTTP/1.1\r\n\r\n", 400, "Malformed request (invalid token).\n"),
        (b"GET /memory-profiler/state HTTP/2.0\r\n\r\n", 400, "Malformed request (invalid HTTP version).\n"),
        (
            b"GET /memory-profiler/state HTTP/1.1\r\nBad Name: x\r\n\r\n",
            400,
            "Malformed request (invalid header name).\n",
        ),
        (b"POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400, "Invalid Content-Length '1x'.\n"),
        (
            b"POST /debug/pprof/symbol HTTP/1.1\r\nHost: localhost\r\nContent-Length: 9\r\n\r\n0x1",
            400,
            "The request body ended before its announced length.\n",
        ),
        (
            b"POST /debug/pprof/symbol HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            400,
            "Malformed chunked request body.\n",
        ),
        (
            b"POST /debug/pprof/symbol HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            501,
            "Transfer-Encoding 'gzip' is not supported; use chunked.\n",
        ),
        // Bodies two parties could frame differently (request smuggling behind a proxy).
        (
            b"POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 30\r\n\r\n0x1",
            400,
            "A request cannot have more than one Content-Length.\n",
        ),
        (
            b"POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
            "A request cannot have both Transfer-Encoding and Content-Length.\n",
        ),
        (b"POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: +3\r\n\r\n0x1", 400, "Invalid Content-Length '+3'.\n"),
    ];
    for (raw, status, message) in cases {
        let mut stream = std::net::TcpStream::connect(service.address()).unwrap();
        stream.write_all(raw).unwrap();
        // A request cut short: the client says it has nothing more to send.
        stream.shutdown(std::net::Shutdown::Write).unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).unwrap();
        let response = memprof_tests::http::parse(&answer);
        assert_eq!((response.status, response.text().as_str()), (*status, *message), "{}", raw.escape_ascii());
    }
    // Absolute-form targets (as sent through proxies) are served like paths.
    let absolute = format!("http://{}/memory-profiler/state", service.address());
    assert_eq!(memprof_tests::http::request(service.address(), "GET", &absolute).status, 200);
}

/// RFC 9110 details a proxy or monitor relies on: `HEAD` wherever `GET` is allowed, a `Date` on every answer,
/// and an HTTP/1.0 client's `Connection: keep-alive` answered in kind on a connection that stays open.
#[test]
fn head_date_and_http_1_0_keep_alive() {
    use std::io::{Read, Write};
    let service = Program::service().spawn();
    let get = service.get("/memory-profiler/state");
    let head = memprof_tests::http::request(service.address(), "HEAD", "/memory-profiler/state");
    assert_eq!(head.status, 200);
    assert_eq!(head.body, b"", "HEAD sends no body");
    assert_eq!(head.header("content-type"), get.header("content-type"));
    let length: usize = head.header("content-length").unwrap().parse().unwrap();
    assert!(length > 100, "HEAD announces the GET answer's length: {length}");
    let date = get.header("date").expect("a Date header");
    let sent = httpdate::parse_http_date(date).unwrap_or_else(|error| panic!("{date:?}: {error}"));
    let skew = std::time::SystemTime::now().duration_since(sent).unwrap_or_default();
    assert!(skew < std::time::Duration::from_secs(60), "{date}");
    let not_found = memprof_tests::http::request(service.address(), "HEAD", "/memory-profiler/nowhere");
    assert_eq!((not_found.status, not_found.body.len()), (404, 0));

    // Two requests on one HTTP/1.0 connection: the first answer says keep-alive, the second closes.
    let mut stream = std::net::TcpStream::connect(service.address()).unwrap();
    stream.set_read_timeout(Some(memprof_tests::process::PATIENCE)).unwrap();
    stream.write_all(b"GET /memory-profiler/state HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").unwrap();
    let mut first = Vec::new();
    while memprof_tests::http::complete_length(&first).is_none() {
        let mut chunk = [0; 4096];
        let read = stream.read(&mut chunk).unwrap();
        assert!(read > 0, "the connection closed after the first answer");
        first.extend_from_slice(&chunk[..read]);
    }
    assert_eq!(memprof_tests::http::parse(&first).header("connection"), Some("keep-alive"));
    stream.write_all(b"GET /memory-profiler/state HTTP/1.0\r\n\r\n").unwrap();
    let mut second = Vec::new();
    stream.read_to_end(&mut second).unwrap();
    let second = memprof_tests::http::parse(&second);
    assert_eq!((second.status, second.header("connection")), (200, Some("close")));
}
