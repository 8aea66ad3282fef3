//! One HTTP/1.1 connection: reads requests (the head parsed by [`super::head`], the body by `Content-Length` or
//! chunked) under deadlines and size limits, and writes answers. A client that stalls, sends too much or sends garbage gets
//! its status code and the connection is closed; it never holds a thread longer than a deadline.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bodies::{Bodies, Held};
use super::head::{BodyLength, MAX_BODY, MAX_HEAD, MAX_HEADERS, body_too_large, line_end, oversized_head, parse_head};
use super::reply::{Framing, HttpError, Persistence, Response};
use super::request::Request;

/// How long a client has to send a request's head, and how long an idle kept-alive connection stays open.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client has to send a request's body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a client may take to make room for the next [`WRITE_CHUNK`] of its answer before it is cut off.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The most bytes of an answer handed to the socket at once.
const WRITE_CHUNK: usize = 64 << 10;
/// What the kernel may hold of a connection's answers not yet taken by its client (it counts double this,
/// for its own bookkeeping): without a bound it grows the buffer to 4 MiB a connection, charged to the
/// program's cgroup, and a client that reads nothing would leave whole answers there.
const SEND_BUFFER: libc::c_int = 256 << 10;
/// How long, and how much, is read and dropped after a refusal, so the client receives the answer instead of
/// a reset.
const LINGER: (Duration, usize) = (Duration::from_secs(1), 4 << 20);

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
    /// Shared with the accept loop, which may shut its reading side to make room for another client.
    stream: Arc<TcpStream>,
    /// Bytes read but not consumed yet (the start of a pipelined request).
    buffer: Vec<u8>,
    /// What every connection's request bodies hold, which a body must fit before it is read.
    bodies: Arc<Bodies>,
}

impl Connection {
    /// Wraps an accepted stream (read with blocking reads under deadlines), of which `read` was read
    /// already; its request bodies are counted in `bodies`.
    pub(crate) fn new(stream: Arc<TcpStream>, read: Vec<u8>, bodies: Arc<Bodies>) -> io::Result<Self> {
        stream.set_nonblocking(false)?;
        stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
        stream.set_nodelay(true)?;
        bound_send_buffer(&stream)?;
        Ok(Self { stream, buffer: read, bodies })
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

    /// Whether part of a next request has been read.
    pub(crate) fn has_partial_request(&self) -> bool {
        !self.buffer.is_empty()
    }

    /// Writes `response`; returns whether the connection can take another request.
    pub(crate) fn answer(&mut self, request: Option<&Request>, response: Response) -> bool {
        let framing = request.map_or(Framing::CLOSE, |request| Framing {
            connection: request.persistence,
            head_only: request.method == "HEAD",
        });
        let keep_alive = framing.connection != Persistence::Close;
        let written = response.write_to(&mut Paced::new(&self.stream), framing).and_then(|()| (&*self.stream).flush());
        if written.is_ok() && keep_alive {
            return true;
        }
        if written.is_ok() {
            self.linger();
        }
        false
    }

    /// Writes `response` and closes at once, reading nothing more: for a connection closed to make room,
    /// whose thread must be free again at once.
    pub(crate) fn answer_and_close(&mut self, response: Response) {
        let _ = response.write_to(&mut Paced::new(&self.stream), Framing::CLOSE).and_then(|()| (&*self.stream).flush());
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// Reads and drops what the client still sends, for a moment, before the connection is closed.
    fn linger(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
        let deadline = Instant::now() + LINGER.0;
        let mut dropped = 0;
        let mut scratch = [0; 16 << 10];
        while dropped < LINGER.1 {
            match read_before(&self.stream, deadline, &mut scratch) {
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
        // Counted before it is read (and before the client is told to send it): one that does not fit is
        // refused unread.
        let mut held = self.bodies.reserve(match head.body {
            BodyLength::Fixed(length) => length,
            BodyLength::Chunked => 0,
        })?;
        if head.expects_continue {
            (&*self.stream).write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        let deadline = Instant::now() + BODY_TIMEOUT;
        let body = match head.body {
            BodyLength::Fixed(length) => self.take(length, deadline)?,
            BodyLength::Chunked => self.take_chunked(deadline, &mut held)?,
        };
        Ok(Some(Request::read(head, body, Some(held))))
    }

    /// Reads more bytes into the buffer, up to `limit` buffered; returns how many came (0: the client closed).
    fn fill(&mut self, deadline: Instant, limit: usize) -> io::Result<usize> {
        let mut chunk = [0; 16 << 10];
        let room = limit.saturating_sub(self.buffer.len()).clamp(1, chunk.len());
        let read = read_before(&self.stream, deadline, &mut chunk[..room])?;
        self.buffer.extend_from_slice(&chunk[..read]);
        Ok(read)
    }

    /// The next `length` bytes: read into a buffer of that size (`length` is at most [`MAX_BODY`] bytes), and
    /// handed over whole when nothing was sent after them (no copy).
    fn take(&mut self, length: usize, deadline: Instant) -> Result<Vec<u8>, Failure> {
        self.buffer.reserve_exact(length.saturating_sub(self.buffer.len()));
        while self.buffer.len() < length {
            if self.fill(deadline, length)? == 0 {
                return Err(truncated());
            }
        }
        if self.buffer.len() == length {
            return Ok(std::mem::take(&mut self.buffer));
        }
        Ok(self.buffer.drain(..length).collect())
    }

    /// A chunked body: `size CRLF data CRLF` until a zero size, then optional trailer fields and CRLF; each
    /// chunk is counted in `held` before it is read.
    fn take_chunked(&mut self, deadline: Instant, held: &mut Held) -> Result<Vec<u8>, Failure> {
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
            held.grow(size)?;
            let chunk = self.take(line + size, deadline)?;
            body.extend_from_slice(&chunk[line..]);
            // The data ends with an empty line, ended as every line is.
            match self.next_line(deadline, "Malformed chunked request body")? {
                Some(line) if line.is_empty() => {}
                Some(_) => return Err(HttpError::bad_request("Malformed chunked request body").into()),
                None => return Err(truncated()),
            }
        }
    }

    /// Drops the trailer fields after the last chunk, up to the empty line; a field without a colon is 400.
    fn skip_trailer(&mut self, deadline: Instant) -> Result<(), Failure> {
        const MALFORMED: &str = "Malformed trailer after the chunked request body";
        loop {
            match self.next_line(deadline, MALFORMED)? {
                Some(line) if line.is_empty() => return Ok(()),
                Some(line) if line.contains(&b':') => {}
                _ => return Err(HttpError::bad_request(MALFORMED).into()),
            }
        }
    }

    /// The next line (without its ending, `\r\n` or a bare `\n` as in heads), taken off the buffer; `None`
    /// when the client closed first. A line longer than [`MAX_HEADERS`] is refused with `malformed`.
    fn next_line(&mut self, deadline: Instant, malformed: &str) -> Result<Option<Vec<u8>>, Failure> {
        loop {
            if let Some((content, length)) = line_end(&self.buffer) {
                let line = self.buffer[..content].to_vec();
                self.buffer.drain(..length);
                return Ok(Some(line));
            }
            if self.buffer.len() >= MAX_HEADERS {
                return Err(HttpError::bad_request(malformed).into());
            }
            if self.fill(deadline, MAX_HEADERS)? == 0 {
                return Ok(None);
            }
        }
    }
}

/// A writer to a client that must keep reading: each [`WRITE_CHUNK`] bytes of an answer must be taken
/// within [`WRITE_TIMEOUT`] of the chunk's start, or the write fails. A client that reads nothing is cut off
/// once the socket's buffers are full, and one that takes a few bytes now and then (to keep the connection
/// and what its answer holds) once it takes less than a chunk in that time: the socket's own timeout would
/// start again at each of those bytes.
struct Paced<'a> {
    stream: &'a TcpStream,
    /// When the chunk being written began, and how much of it has been taken.
    chunk: (Instant, usize),
}

impl<'a> Paced<'a> {
    fn new(stream: &'a TcpStream) -> Self {
        Self { stream, chunk: (Instant::now(), 0) }
    }
}

impl Write for Paced<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.chunk.1 >= WRITE_CHUNK {
            self.chunk = (Instant::now(), 0);
        }
        let left = WRITE_TIMEOUT.saturating_sub(self.chunk.0.elapsed());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.set_write_timeout(Some(left))?;
        let written = self.stream.write(&bytes[..bytes.len().min(WRITE_CHUNK - self.chunk.1)])?;
        self.chunk.1 += written;
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        (&*self.stream).flush()
    }
}

/// Sets the socket's send buffer to [`SEND_BUFFER`] (which also ends the kernel's growing it).
#[allow(unsafe_code)]
fn bound_send_buffer(stream: &TcpStream) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let size = SEND_BUFFER;
    let length = libc::socklen_t::try_from(std::mem::size_of_val(&size)).unwrap_or(libc::socklen_t::MAX);
    // SAFETY: SO_SNDBUF reads a C int; `size` lives through the call and `length` is its size.
    let code = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&raw const size).cast::<libc::c_void>(),
            length,
        )
    };
    if code == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Reads once, waiting no later than `deadline`.
fn read_before(stream: &TcpStream, deadline: Instant, into: &mut [u8]) -> io::Result<usize> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::ErrorKind::TimedOut.into());
    }
    stream.set_read_timeout(Some(left))?;
    loop {
        match (&*stream).read(into) {
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
