//! One HTTP/1.1 connection: reads requests (head parsed by httparse, body by `Content-Length` or chunked) under
//! deadlines and size limits, and writes answers. A client that stalls, sends too much or sends garbage gets
//! its status code and the connection is closed; it never holds a thread longer than a deadline.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use super::reply::{Framing, HttpError, Persistence, Response};

/// The longest request target (path and query) answered.
pub(crate) const MAX_TARGET: usize = 8 << 10;
/// The most header bytes (names and values) answered.
pub(crate) const MAX_HEADERS: usize = 16 << 10;
/// The largest request body read (a symbol lookup of some 50,000 addresses).
pub(crate) const MAX_BODY: usize = 1 << 20;
/// The most header fields parsed.
const MAX_HEADER_FIELDS: usize = 128;
/// The most bytes a request head may take (line, fields, separators).
const MAX_HEAD: usize = MAX_TARGET + MAX_HEADERS + 4 * MAX_HEADER_FIELDS + 64;

/// How long a client has to send a request's head, and how long an idle kept-alive connection stays open.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client has to send a request's body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a write may wait for a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long, and how much, is read and dropped after a refusal, so the client receives the answer instead of
/// a reset.
const LINGER: (Duration, usize) = (Duration::from_secs(1), 4 << 20);

/// A request read off a connection.
#[derive(Debug)]
pub(crate) struct Request {
    /// `GET`, `POST`, ...
    pub(crate) method: String,
    /// The path and query.
    pub(crate) target: String,
    /// The `Authorization` header, if any.
    pub(crate) authorization: Option<String>,
    /// The body, de-chunked.
    pub(crate) body: Vec<u8>,
    /// Whether the client keeps the connection for another request, and whether the answer must say so.
    persistence: Persistence,
}

impl Request {
    /// A request read by another server: the program's own (see [`crate::endpoints::respond`]), or a test.
    #[cfg(any(test, feature = "http"))]
    pub(crate) fn new(method: String, target: String, authorization: Option<String>, body: Vec<u8>) -> Self {
        Self { method, target, authorization, body, persistence: Persistence::KeepAlive }
    }
}

/// What the next read off a connection gave.
pub(crate) enum Incoming {
    /// A whole request.
    Request(Request),
    /// The client closed the connection, or left it idle past the deadline: nothing to answer.
    Closed,
    /// A request that is answered with an error, after which the connection is closed.
    Refused(HttpError),
}

/// A client's connection.
pub(crate) struct Connection {
    stream: TcpStream,
    /// Bytes read but not consumed yet (the start of a pipelined request).
    buffer: Vec<u8>,
}

impl Connection {
    /// Wraps an accepted stream.
    pub(crate) fn new(stream: TcpStream) -> io::Result<Self> {
        stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Self { stream, buffer: Vec::new() })
    }

    /// Reads the next request.
    pub(crate) fn next_request(&mut self) -> Incoming {
        match self.read_request() {
            Ok(Some(request)) => Incoming::Request(request),
            Ok(None) => Incoming::Closed,
            Err(Failure::Refused(error)) => Incoming::Refused(error),
            Err(Failure::Io(error)) if is_timeout(&error) => {
                Incoming::Refused(HttpError::new(408, "The request was not sent in time"))
            }
            Err(Failure::Io(_)) => Incoming::Closed,
        }
    }

    /// Writes `response`; returns whether the connection can take another request.
    pub(crate) fn answer(&mut self, request: Option<&Request>, response: Response) -> bool {
        let framing = request.map_or(Framing::CLOSE, |request| Framing {
            connection: request.persistence,
            head_only: request.method == "HEAD",
        });
        let keep_alive = framing.connection != Persistence::Close;
        let written = response.write_to(&mut self.stream, framing).and_then(|()| self.stream.flush());
        if written.is_ok() && keep_alive {
            return true;
        }
        if written.is_ok() {
            self.linger();
        }
        false
    }

    /// Reads and drops what the client still sends, for a moment, before the connection is closed.
    fn linger(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
        let deadline = Instant::now() + LINGER.0;
        let mut dropped = 0;
        let mut scratch = [0; 16 << 10];
        while dropped < LINGER.1 {
            match read_before(&mut self.stream, deadline, &mut scratch) {
                Ok(0) | Err(_) => break,
                Ok(read) => dropped += read,
            }
        }
    }

    fn read_request(&mut self) -> Result<Option<Request>, Failure> {
        let deadline = Instant::now() + HEAD_TIMEOUT;
        let head = loop {
            if let Some(head) = parse_head(&self.buffer)? {
                break head;
            }
            if self.buffer.len() >= MAX_HEAD {
                return Err(oversized_head(&self.buffer).into());
            }
            if self.fill(deadline, MAX_HEAD).map_err(|error| idle_is_closed(error, self.buffer.is_empty()))? == 0 {
                return Ok(None);
            }
        };
        self.buffer.drain(..head.length);
        if head.expects_continue {
            self.stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        let deadline = Instant::now() + BODY_TIMEOUT;
        let body = match head.body {
            BodyLength::Fixed(length) => self.take(length, deadline)?,
            BodyLength::Chunked => self.take_chunked(deadline)?,
        };
        Ok(Some(Request {
            method: head.method,
            target: head.target,
            authorization: head.authorization,
            body,
            persistence: head.persistence,
        }))
    }

    /// Reads more bytes into the buffer, up to `limit` buffered; returns how many came (0: the client closed).
    fn fill(&mut self, deadline: Instant, limit: usize) -> io::Result<usize> {
        let mut chunk = [0; 16 << 10];
        let room = limit.saturating_sub(self.buffer.len()).clamp(1, chunk.len());
        let read = read_before(&mut self.stream, deadline, &mut chunk[..room])?;
        self.buffer.extend_from_slice(&chunk[..read]);
        Ok(read)
    }

    /// The next `length` bytes.
    fn take(&mut self, length: usize, deadline: Instant) -> Result<Vec<u8>, Failure> {
        while self.buffer.len() < length {
            if self.fill(deadline, length)? == 0 {
                return Err(truncated());
            }
        }
        Ok(self.buffer.drain(..length).collect())
    }

    /// A chunked body: `size CRLF data CRLF` until a zero size, then optional trailer fields and CRLF.
    fn take_chunked(&mut self, deadline: Instant) -> Result<Vec<u8>, Failure> {
        let mut body = Vec::new();
        loop {
            let (line, size) = loop {
                match httparse::parse_chunk_size(&self.buffer) {
                    Ok(httparse::Status::Complete(parsed)) => break parsed,
                    Ok(httparse::Status::Partial) if self.buffer.len() < 1024 => {
                        if self.fill(deadline, 1024)? == 0 {
                            return Err(truncated());
                        }
                    }
                    _ => return Err(HttpError::bad_request("Malformed chunked request body").into()),
                }
            };
            let size = usize::try_from(size).unwrap_or(usize::MAX);
            if size == 0 {
                self.buffer.drain(..line);
                self.skip_trailer(deadline)?;
                return Ok(body);
            }
            if body.len().saturating_add(size) > MAX_BODY {
                return Err(body_too_large().into());
            }
            let chunk = self.take(line + size + 2, deadline)?;
            if !chunk.ends_with(b"\r\n") {
                return Err(HttpError::bad_request("Malformed chunked request body").into());
            }
            body.extend_from_slice(&chunk[line..line + size]);
        }
    }

    /// Drops the trailer fields after the last chunk, up to the empty line.
    fn skip_trailer(&mut self, deadline: Instant) -> Result<(), Failure> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|pair| pair == b"\r\n") {
                let empty = end == 0;
                self.buffer.drain(..end + 2);
                if empty {
                    return Ok(());
                }
            } else if self.buffer.len() >= MAX_HEADERS || self.fill(deadline, MAX_HEADERS)? == 0 {
                return Err(HttpError::bad_request("Malformed trailer after the chunked request body").into());
            }
        }
    }
}

/// Reads once, waiting no later than `deadline`.
fn read_before(stream: &mut TcpStream, deadline: Instant, into: &mut [u8]) -> io::Result<usize> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::ErrorKind::TimedOut.into());
    }
    stream.set_read_timeout(Some(left))?;
    loop {
        match stream.read(into) {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// Why a request could not be read.
enum Failure {
    /// It is answered with this error.
    Refused(HttpError),
    /// The connection failed or timed out.
    Io(io::Error),
}

impl From<HttpError> for Failure {
    fn from(error: HttpError) -> Self {
        Self::Refused(error)
    }
}

impl From<io::Error> for Failure {
    fn from(error: io::Error) -> Self {
        Self::Io(error)
    }
}

fn is_timeout(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// A connection idle between requests that times out is simply closed, not answered 408.
fn idle_is_closed(error: io::Error, idle: bool) -> Failure {
    if idle && is_timeout(&error) { Failure::Io(io::ErrorKind::ConnectionAborted.into()) } else { Failure::Io(error) }
}

fn truncated() -> Failure {
    HttpError::bad_request("The request body ended before its announced length").into()
}

/// 413: a body larger than any endpoint takes.
pub(crate) fn body_too_large() -> HttpError {
    HttpError::new(413, format!("The request body is larger than {MAX_BODY} bytes"))
}

/// 414 while the request line is not even complete, else 431.
fn oversized_head(buffer: &[u8]) -> HttpError {
    if buffer.windows(2).any(|pair| pair == b"\r\n") { headers_too_large() } else { target_too_long() }
}

fn target_too_long() -> HttpError {
    HttpError::new(414, format!("The request target is longer than {MAX_TARGET} bytes"))
}

fn headers_too_large() -> HttpError {
    HttpError::new(431, format!("The request headers are larger than {MAX_HEADERS} bytes"))
}

/// How the body's end is known.
pub(crate) enum BodyLength {
    Fixed(usize),
    Chunked,
}

/// A parsed request head.
pub(crate) struct Head {
    /// Bytes it took in the buffer.
    length: usize,
    method: String,
    target: String,
    authorization: Option<String>,
    body: BodyLength,
    persistence: Persistence,
    expects_continue: bool,
}

/// Parses a request head from the start of `buffer`; `None` while it is incomplete.
pub(crate) fn parse_head(buffer: &[u8]) -> Result<Option<Head>, HttpError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADER_FIELDS];
    let mut request = httparse::Request::new(&mut fields);
    let length = match request.parse(buffer) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(headers_too_large()),
        Err(error) => return Err(HttpError::bad_request(format!("Malformed request ({error})"))),
    };
    let target = origin_form(request.path.unwrap_or_default());
    if target.len() > MAX_TARGET {
        return Err(target_too_long());
    }
    if request.headers.iter().map(|field| field.name.len() + field.value.len()).sum::<usize>() > MAX_HEADERS {
        return Err(headers_too_large());
    }
    let values = |name: &str| -> Vec<String> {
        let matching = request.headers.iter().filter(|field| field.name.eq_ignore_ascii_case(name));
        matching.map(|field| String::from_utf8_lossy(field.value).trim().to_owned()).collect()
    };
    let field = |name: &str| values(name).into_iter().next();
    let has_token = |name: &str, token: &str| {
        field(name).is_some_and(|value| value.split(',').any(|part| part.trim().eq_ignore_ascii_case(token)))
    };
    // A request whose body's end two parties could read differently is refused: behind a proxy that reads
    // it the other way, the rest would be taken for a second request (request smuggling, RFC 9112 6.3).
    let codings = values("transfer-encoding");
    let lengths = values("content-length");
    let body = match (codings.as_slice(), lengths.as_slice()) {
        ([_, ..], [_, ..]) => {
            return Err(HttpError::bad_request("A request cannot have both Transfer-Encoding and Content-Length"));
        }
        ([_, _, ..], []) => {
            return Err(HttpError::bad_request("A request cannot have more than one Transfer-Encoding"));
        }
        ([], [_, _, ..]) => return Err(HttpError::bad_request("A request cannot have more than one Content-Length")),
        ([coding], []) if coding.eq_ignore_ascii_case("chunked") => BodyLength::Chunked,
        ([coding], []) => {
            return Err(HttpError::new(501, format!("Transfer-Encoding '{coding}' is not supported; use chunked")));
        }
        ([], [length]) => match parse_content_length(length) {
            Some(length) if length > MAX_BODY => return Err(body_too_large()),
            Some(length) => BodyLength::Fixed(length),
            None => return Err(HttpError::bad_request(format!("Invalid Content-Length '{length}'"))),
        },
        ([], []) => BodyLength::Fixed(0),
    };
    let persistence = match request.version {
        Some(1) if has_token("connection", "close") => Persistence::Close,
        Some(1) => Persistence::KeepAlive,
        _ if has_token("connection", "keep-alive") => Persistence::KeepAliveSaid,
        _ => Persistence::Close,
    };
    Ok(Some(Head {
        length,
        method: request.method.unwrap_or_default().to_owned(),
        target: target.to_owned(),
        authorization: field("authorization"),
        body,
        persistence,
        expects_continue: request.version == Some(1) && has_token("expect", "100-continue"),
    }))
}

/// `Content-Length`: digits only (`+5`, ` 5` or `0x5` are refused, which `str::parse` would not all do).
fn parse_content_length(text: &str) -> Option<usize> {
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().or(Some(usize::MAX))
}

/// The path and query of a target in absolute form (`http://host/path?query`, which servers must accept).
fn origin_form(target: &str) -> &str {
    let Some(rest) = target.strip_prefix("http://").or_else(|| target.strip_prefix("https://")) else {
        return target;
    };
    rest.find('/').map_or("/", |path| &rest[path..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &str) -> Head {
        parse_head(raw.as_bytes()).unwrap().unwrap()
    }

    fn refusal(raw: &str) -> (u16, String) {
        match parse_head(raw.as_bytes()) {
            Err(error) => (error.status, error.message),
            Ok(_) => panic!("accepted: {raw}"),
        }
    }

    #[test]
    fn heads_say_how_the_body_ends_and_whether_the_connection_stays() {
        let get = head("GET /memory-profiler/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\n");
        assert_eq!((get.method.as_str(), get.target.as_str()), ("GET", "/memory-profiler/state"));
        assert_eq!((get.authorization.as_deref(), get.persistence), (Some("Bearer t"), Persistence::KeepAlive));
        assert!(matches!(get.body, BodyLength::Fixed(0)));
        let post = head("POST /s HTTP/1.1\r\ncontent-length: 12\r\nConnection: close\r\nExpect: 100-continue\r\n\r\n");
        assert!(matches!(post.body, BodyLength::Fixed(12)) && post.expects_continue);
        assert_eq!(post.persistence, Persistence::Close);
        assert_eq!(head("GET / HTTP/1.0\r\n\r\n").persistence, Persistence::Close);
        let kept = head("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        assert_eq!(kept.persistence, Persistence::KeepAliveSaid);
        let chunked = head("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert!(matches!(chunked.body, BodyLength::Chunked));
        assert!(parse_head(b"GET /memory-profiler/state HTTP/1.1\r\nHost:").unwrap().is_none());
        let absolute = head("GET http://127.0.0.1:5050/memory-profiler/state?x=1 HTTP/1.1\r\n\r\n");
        assert_eq!(absolute.target, "/memory-profiler/state?x=1");
        assert_eq!(head("GET http://host HTTP/1.1\r\n\r\n").target, "/");
    }

    #[test]
    fn bad_heads_get_their_status() {
        assert_eq!(
            refusal("GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"),
            (400, "Invalid Content-Length '-1'".into())
        );
        assert_eq!(refusal("GET / HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n").0, 413);
        assert_eq!(refusal("GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n").0, 501);
        assert_eq!(
            refusal("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n"),
            (400, "A request cannot have both Transfer-Encoding and Content-Length".into())
        );
        assert_eq!(
            refusal("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"),
            (400, "A request cannot have more than one Content-Length".into())
        );
        assert_eq!(
            refusal("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"),
            (400, "A request cannot have more than one Transfer-Encoding".into())
        );
        for length in ["+5", "0x5", "5 5", "", "5.0"] {
            let request = format!("POST / HTTP/1.1\r\nContent-Length: {length}\r\n\r\n");
            assert_eq!(refusal(&request), (400, format!("Invalid Content-Length '{length}'")), "{length:?}");
        }
        assert_eq!(refusal(&format!("POST / HTTP/1.1\r\nContent-Length: {}0\r\n\r\n", usize::MAX)).0, 413);
        assert_eq!(refusal("GET\x01 / HTTP/1.1\r\n\r\n"), (400, "Malformed request (invalid token)".into()));
        let many: String = (0..200).map(|index| format!("X-{index}: y\r\n")).collect();
        assert_eq!(refusal(&format!("GET / HTTP/1.1\r\n{many}\r\n")).0, 431);
        assert_eq!(refusal(&format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_TARGET))).0, 414);
        assert_eq!(oversized_head(b"GET /aaaa").status, 414);
        assert_eq!(oversized_head(b"GET / HTTP/1.1\r\nX: aaaa").status, 431);
    }
}
