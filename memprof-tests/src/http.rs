//! A deliberately plain HTTP/1.1 client: one request per connection, any method and target, the raw
//! status, headers and body back. Tests need that control (odd methods, huge queries), not convenience.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long a test waits for a program to print or answer what it must; a bound against hangs, not a
/// measurement.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// An answer.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON.
    ///
    /// # Panics
    /// When it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|error| panic!("not JSON ({error}): {}", self.text()))
    }

    /// The body as memprof-wire's type `T`, the answer to `what` (said when it is not one, or not a 200).
    ///
    /// # Panics
    /// When the status is not 200 or the body is not a `T`.
    pub fn parsed<T: serde::de::DeserializeOwned>(&self, what: &str) -> T {
        assert_eq!(self.status, 200, "{what}: {}", self.text());
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|error| panic!("{what}: not a {} ({error}): {}", std::any::type_name::<T>(), self.text()))
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }
}

/// Sends `method target` to `address` and reads the whole answer.
///
/// ```no_run
/// let address = "127.0.0.1:5050".parse().unwrap();
/// let response = memprof_tests::http::request(address, "GET", "/memory-profiler/state");
/// assert_eq!(response.status, 200);
/// ```
pub fn request(address: SocketAddr, method: &str, target: &str) -> Response {
    request_with_body(address, method, target, b"")
}

/// Sends `method target` with `body` to `address` and reads the whole answer.
///
/// ```no_run
/// let address = "127.0.0.1:5050".parse().unwrap();
/// let response = memprof_tests::http::request_with_body(address, "POST", "/debug/pprof/symbol", b"0x1000");
/// assert_eq!(response.status, 200);
/// ```
pub fn request_with_body(address: SocketAddr, method: &str, target: &str, body: &[u8]) -> Response {
    request_with_headers(address, method, target, &[], body)
}

/// Sends `method target` with `headers` and `body` to `address` and reads the whole answer.
///
/// ```no_run
/// let address = "127.0.0.1:3000".parse().unwrap();
/// let headers = [("X-Tenant", "acme")];
/// let response = memprof_tests::http::request_with_headers(address, "POST", "/sessions", &headers, b"");
/// assert_eq!(response.status, 200);
/// ```
pub fn request_with_headers(
    address: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let headers: String = headers.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
    let mut request = format!(
        "{method} {target} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    exchange(address, &request)
}

/// Sends `request` to `address` byte for byte, as written (its own `Host`, any header, any framing), and
/// reads the whole answer: for requests the other helpers would not send.
///
/// ```no_run
/// let address = "127.0.0.1:5050".parse().unwrap();
/// let request = b"GET /memory-profiler/state HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n";
/// assert_eq!(memprof_tests::http::exchange(address, request).status, 403);
/// ```
pub fn exchange(address: SocketAddr, request: &[u8]) -> Response {
    let mut stream = TcpStream::connect_timeout(&address, PATIENCE).expect("connect");
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream.write_all(request).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the response");
    parse(&raw)
}

/// Sends `GET target` on a fresh connection and reads the answer; `None` when the connection ends with no
/// whole answer (refused, reset or cut), for tests of a server under overload.
///
/// ```no_run
/// let address = "127.0.0.1:5050".parse().unwrap();
/// if let Some(response) = memprof_tests::http::try_get(address, "/memory-profiler/state") {
///     assert!(matches!(response.status, 200 | 503));
/// }
/// ```
pub fn try_get(address: SocketAddr, target: &str) -> Option<Response> {
    let mut stream = TcpStream::connect_timeout(&address, PATIENCE).ok()?;
    stream.set_read_timeout(Some(PATIENCE)).ok()?;
    write!(stream, "GET {target} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n").ok()?;
    let mut raw = Vec::new();
    // A reset after a whole answer still counts as that answer.
    let _ = stream.read_to_end(&mut raw);
    complete_length(&raw).map(|length| parse(&raw[..length]))
}

/// A kept-alive connection that sends one `GET` after another.
pub struct KeptAlive {
    address: SocketAddr,
    stream: Option<TcpStream>,
}

impl KeptAlive {
    /// A client of `address`; it connects on its first request, and again after the server closed.
    pub fn new(address: SocketAddr) -> Self {
        Self { address, stream: None }
    }

    /// Sends `GET target` and reads its answer; `None` when the connection ended first (it reconnects
    /// on the next call).
    pub fn get(&mut self, target: &str) -> Option<Response> {
        let answer = self.exchange(target);
        if answer.is_none() {
            self.stream = None;
        }
        answer
    }

    fn exchange(&mut self, target: &str) -> Option<Response> {
        if self.stream.is_none() {
            let stream = TcpStream::connect_timeout(&self.address, PATIENCE).ok()?;
            stream.set_read_timeout(Some(PATIENCE)).ok()?;
            self.stream = Some(stream);
        }
        let stream = self.stream.as_mut()?;
        write!(stream, "GET {target} HTTP/1.1\r\nHost: {}\r\n\r\n", self.address).ok()?;
        let mut raw = Vec::new();
        loop {
            if let Some(length) = complete_length(&raw) {
                return Some(parse(&raw[..length]));
            }
            let mut chunk = [0; 16 << 10];
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(read) => raw.extend_from_slice(&chunk[..read]),
            }
        }
    }
}

/// Parses a whole raw HTTP/1.1 response (for tests that write their own requests).
///
/// ```
/// let response = memprof_tests::http::parse(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
/// assert_eq!((response.status, response.text()), (200, "ok".to_owned()));
/// ```
pub fn parse(raw: &[u8]) -> Response {
    let end = raw.windows(4).position(|window| window == b"\r\n\r\n").expect("a complete header");
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status = lines.next().and_then(|line| line.split(' ').nth(1)).and_then(|code| code.parse().ok()).unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let mut response = Response { status, headers, body: raw[end + 4..].to_vec() };
    if response.header("transfer-encoding") == Some("chunked") {
        response.body = dechunk(&response.body);
    }
    response
}

/// The length of a whole response with a `Content-Length` at the start of `raw`, once all of it is there.
///
/// ```
/// assert_eq!(memprof_tests::http::complete_length(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), Some(40));
/// assert_eq!(memprof_tests::http::complete_length(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\no"), None);
/// ```
pub fn complete_length(raw: &[u8]) -> Option<usize> {
    let end = raw.windows(4).position(|window| window == b"\r\n\r\n")? + 4;
    let length: usize = parse(&raw[..end]).header("content-length")?.parse().ok()?;
    (raw.len() >= end + length).then_some(end + length)
}

fn dechunk(mut chunked: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line_end = chunked.windows(2).position(|window| window == b"\r\n").expect("a chunk size");
        let size = usize::from_str_radix(String::from_utf8_lossy(&chunked[..line_end]).trim(), 16).unwrap();
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&chunked[line_end + 2..line_end + 2 + size]);
        chunked = &chunked[line_end + 4 + size..];
    }
}
