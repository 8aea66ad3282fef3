//! What a handler answers: a [`Reply`], or an [`HttpError`] whose text says what happened and what to do.

use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;

/// A successful answer.
pub(crate) struct Reply {
    status: u16,
    content_type: &'static str,
    body: Body,
    /// The file the body is (`Content-Disposition`): its name, and whether to save it rather than show it.
    file: Option<(String, Disposition)>,
    headers: &'static [(&'static str, &'static str)],
    held: Held,
}

/// Whether a browser shows a named body or saves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Disposition {
    Inline,
    Attachment,
}

/// What an answer holds until it is written (or dropped unwritten): a bound on work that the answer's
/// memory counts against.
type Held = Option<Box<dyn Send>>;

enum Body {
    Bytes(Vec<u8>),
    /// Written one after the other: an answer built a piece at a time is never copied into one buffer.
    Pieces(Vec<Vec<u8>>),
    Shared(Arc<Vec<u8>>),
    File(File),
}

impl Reply {
    /// 200 with a JSON document (a type of [`memprof_wire`]).
    pub(crate) fn json(value: &impl serde::Serialize) -> Self {
        let body = serde_json::to_vec(value).unwrap_or_else(|error| format!("{{\"error\":\"{error}\"}}").into_bytes());
        Self::bytes("application/json; charset=utf-8", body)
    }

    /// 200 with bytes of the given type.
    pub(crate) fn bytes(content_type: &'static str, bytes: Vec<u8>) -> Self {
        Self { status: 200, content_type, body: Body::Bytes(bytes), file: None, headers: &[], held: None }
    }

    /// 200 with bytes of the given type, in pieces sent one after the other.
    pub(crate) fn pieces(content_type: &'static str, pieces: Vec<Vec<u8>>) -> Self {
        Self { body: Body::Pieces(pieces), ..Self::bytes(content_type, Vec::new()) }
    }

    /// 200 with a file to save as `filename`.
    pub(crate) fn download(file: File, filename: String) -> Self {
        Self {
            status: 200,
            content_type: "application/octet-stream",
            body: Body::File(file),
            file: Some((filename, Disposition::Attachment)),
            headers: &[],
            held: None,
        }
    }

    /// 200 with bytes shared with a cache, sent without copying them.
    pub(crate) fn shared(content_type: &'static str, bytes: Arc<Vec<u8>>) -> Self {
        Self { status: 200, content_type, body: Body::Shared(bytes), file: None, headers: &[], held: None }
    }

    /// 200 with rendered bytes named `filename`: saved when `download` (pprof), else shown, its name still
    /// saying which profile it is.
    pub(crate) fn rendered(content_type: &'static str, bytes: Arc<Vec<u8>>, filename: String, download: bool) -> Self {
        let disposition = if download { Disposition::Attachment } else { Disposition::Inline };
        Self { file: Some((filename, disposition)), ..Self::shared(content_type, bytes) }
    }

    /// The same reply, holding `held` until it is written or dropped (a job's place, for an answer as
    /// large as the job's memory: a client that does not read holds the place, not a new job's memory too).
    pub(crate) fn holding(self, held: impl Send + 'static) -> Self {
        Self { held: Some(Box::new(held)), ..self }
    }

    /// The same reply with these header fields too.
    pub(crate) fn with_headers(self, headers: &'static [(&'static str, &'static str)]) -> Self {
        Self { headers, ..self }
    }

    /// The response to write.
    pub(crate) fn into_response(self) -> Response {
        let mut headers = vec![("Cache-Control", "no-store".to_owned())];
        headers.extend(self.headers.iter().map(|&(name, value)| (name, value.to_owned())));
        if let Some((filename, disposition)) = self.file {
            let disposition = if disposition == Disposition::Attachment { "attachment" } else { "inline" };
            headers.push(("Content-Disposition", format!("{disposition}; filename=\"{filename}\"")));
        }
        Response { status: self.status, content_type: self.content_type, headers, body: self.body, _held: self.held }
    }
}

/// What is written back: status, headers and body.
pub(crate) struct Response {
    status: u16,
    content_type: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Body,
    /// Dropped once the response is written (`write_to` consumes it) or dropped unwritten.
    _held: Held,
}

impl Response {
    /// The status code.
    #[cfg(test)]
    pub(crate) fn status(&self) -> u16 {
        self.status
    }

    /// Writes the response as `framing` says: whether the connection stays open after it, and whether the
    /// body is sent (not for `HEAD`, whose answer has the `GET` answer's head, `Content-Length` included).
    pub(crate) fn write_to(self, out: &mut impl Write, framing: Framing) -> io::Result<()> {
        let length = match &self.body {
            Body::Bytes(bytes) => bytes.len() as u64,
            Body::Pieces(pieces) => pieces.iter().map(|piece| piece.len() as u64).sum(),
            Body::Shared(bytes) => bytes.len() as u64,
            Body::File(file) => file.metadata()?.len(),
        };
        let mut head = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        head += &format!("Date: {}\r\n", httpdate::fmt_http_date(std::time::SystemTime::now()));
        head += &format!("Content-Type: {}\r\nContent-Length: {length}\r\n", self.content_type);
        for (name, value) in &self.headers {
            head += &format!("{name}: {value}\r\n");
        }
        head += match framing.connection {
            Persistence::Close => "Connection: close\r\n\r\n",
            Persistence::KeepAlive => "\r\n",
            // An HTTP/1.0 client keeps the connection only when the answer says so too.
            Persistence::KeepAliveSaid => "Connection: keep-alive\r\n\r\n",
        };
        out.write_all(head.as_bytes())?;
        if framing.head_only {
            return Ok(());
        }
        match self.body {
            Body::Bytes(bytes) => out.write_all(&bytes),
            Body::Pieces(pieces) => pieces.iter().try_for_each(|piece| out.write_all(piece)),
            Body::Shared(bytes) => out.write_all(&bytes),
            Body::File(file) => {
                let copied = io::copy(&mut io::Read::take(file, length), out)?;
                // A file cut short under us would leave the client waiting for the rest.
                if copied == length { Ok(()) } else { Err(io::ErrorKind::UnexpectedEof.into()) }
            }
        }
    }
}

/// Answers with what `handle` returns, or 500 if it panics: a bug in one handler must not take the
/// connection's thread, or the program's, down with it.
pub(crate) fn guarded(handle: impl FnOnce() -> Response) -> Response {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(handle)).unwrap_or_else(|_| {
        HttpError::internal("memprof failed while answering this request; see the program's log").into_response()
    })
}

#[cfg(feature = "http")]
impl Response {
    /// The response as the `http` crate's type, its body read whole. The server it goes to adds `Date` and
    /// `Content-Length`, and drops the body of an answer to `HEAD`.
    pub(crate) fn into_http(self) -> io::Result<::http::Response<Vec<u8>>> {
        let body = match self.body {
            Body::Bytes(bytes) => bytes,
            Body::Pieces(pieces) => pieces.concat(),
            Body::Shared(bytes) => bytes.to_vec(),
            Body::File(mut file) => {
                let mut bytes = Vec::new();
                io::Read::read_to_end(&mut file, &mut bytes)?;
                bytes
            }
        };
        let mut response =
            ::http::Response::builder().status(self.status).header(::http::header::CONTENT_TYPE, self.content_type);
        for (name, value) in self.headers {
            response = response.header(name, value);
        }
        response.body(body).map_err(io::Error::other)
    }
}

/// How a response is framed on its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Framing {
    /// What becomes of the connection after the response.
    pub(crate) connection: Persistence,
    /// Only the head is sent: the answer to a `HEAD` request.
    pub(crate) head_only: bool,
}

impl Framing {
    /// A whole response, after which the connection is closed.
    pub(crate) const CLOSE: Self = Self { connection: Persistence::Close, head_only: false };
}

/// Whether a connection stays open after a response, and whether the response must say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Persistence {
    /// Closed: `Connection: close`.
    Close,
    /// Kept, as HTTP/1.1 does unless told otherwise.
    KeepAlive,
    /// Kept for an HTTP/1.0 client that asked with `Connection: keep-alive`, echoed back.
    KeepAliveSaid,
}

/// The reason phrase of the statuses memprof answers.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// A failed request: its status code and a message for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpError {
    pub(crate) status: u16,
    pub(crate) message: String,
    /// Headers that go with the status: `Allow` (405), `WWW-Authenticate` (401), `Retry-After` (503).
    headers: Vec<(&'static str, String)>,
}

impl HttpError {
    /// An error with any status.
    pub(crate) fn new(status: u16, message: impl Into<String>) -> Self {
        Self { status, message: message.into(), headers: Vec::new() }
    }

    /// 400: a parameter is malformed.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, message)
    }

    /// 401: the token is missing or wrong.
    pub(crate) fn unauthorized(message: impl Into<String>) -> Self {
        Self { headers: vec![("WWW-Authenticate", "Bearer realm=\"memprof\"".to_owned())], ..Self::new(401, message) }
    }

    /// 404: no such path, run or profile.
    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(404, message)
    }

    /// 405: the path does not take this method.
    pub(crate) fn method_not_allowed(method: &str, allow: &'static str) -> Self {
        let message = format!("Method {method} is not allowed here; use {allow}");
        Self { headers: vec![("Allow", allow.to_owned())], ..Self::new(405, message) }
    }

    /// 409: the request conflicts with the profiler's state.
    pub(crate) fn conflict(message: impl Into<String>) -> Self {
        Self::new(409, message)
    }

    /// 503 with `Retry-After`: too much expensive work is under way; try again in `seconds`.
    pub(crate) fn busy(message: impl Into<String>, seconds: u32) -> Self {
        Self { headers: vec![("Retry-After", seconds.to_string())], ..Self::new(503, message) }
    }

    /// 500: reading or writing a profile failed.
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(500, message)
    }

    /// The response: the message as plain text, ending with ".\n" like Mesos's.
    pub(crate) fn into_response(self) -> Response {
        let body = format!("{}.\n", self.message.trim_end_matches('.'));
        Response {
            status: self.status,
            content_type: "text/plain; charset=utf-8",
            headers: self.headers,
            body: Body::Bytes(body.into_bytes()),
            _held: None,
        }
    }
}
