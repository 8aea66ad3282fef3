//! What a handler answers: a [`Reply`], or an [`HttpError`] whose text says what happened and what to do.

use std::fs::File;
use std::io::Cursor;
use std::sync::Arc;

use tiny_http::{Header, Response, ResponseBox, StatusCode};

use crate::profiler;

/// A successful answer.
pub(crate) struct Reply {
    status: u16,
    content_type: &'static str,
    body: Body,
    attachment: Option<String>,
}

enum Body {
    Bytes(Vec<u8>),
    Shared(Arc<Vec<u8>>),
    File(File),
}

impl Reply {
    /// 200 with a JSON document.
    pub(crate) fn json(value: &serde_json::Value) -> Self {
        Self::bytes("application/json; charset=utf-8", value.to_string().into_bytes())
    }

    /// 200 with bytes of the given type.
    pub(crate) fn bytes(content_type: &'static str, bytes: Vec<u8>) -> Self {
        Self { status: 200, content_type, body: Body::Bytes(bytes), attachment: None }
    }

    /// 200 with a file to save as `filename`.
    pub(crate) fn download(file: File, filename: String) -> Self {
        Self {
            status: 200,
            content_type: "application/octet-stream",
            body: Body::File(file),
            attachment: Some(filename),
        }
    }

    /// 200 with a rendered profile; shown in the browser unless `download` asks to save it as `filename`.
    pub(crate) fn rendered(content_type: &'static str, bytes: Arc<Vec<u8>>, filename: String, download: bool) -> Self {
        Self { status: 200, content_type, body: Body::Shared(bytes), attachment: download.then_some(filename) }
    }

    /// The tiny_http response.
    pub(crate) fn into_response(self) -> ResponseBox {
        let mut headers = vec![header("Content-Type", self.content_type), header("Cache-Control", "no-store")];
        if let Some(filename) = &self.attachment {
            headers.push(header("Content-Disposition", &format!("attachment; filename=\"{filename}\"")));
        }
        let (reader, length): (Box<dyn std::io::Read + Send>, Option<usize>) = match self.body {
            Body::Bytes(bytes) => {
                let length = bytes.len();
                (Box::new(Cursor::new(bytes)), Some(length))
            }
            Body::Shared(bytes) => {
                let length = bytes.len();
                (Box::new(Cursor::new(SharedBytes(bytes))), Some(length))
            }
            Body::File(file) => {
                let length = file.metadata().ok().and_then(|metadata| usize::try_from(metadata.len()).ok());
                (Box::new(file), length)
            }
        };
        Response::new(StatusCode(self.status), headers, reader, length, None).boxed()
    }
}

/// Cached bytes served without copying them.
struct SharedBytes(Arc<Vec<u8>>);

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("header names and values are ASCII")
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

    /// The tiny_http response: the message as plain text, ending with ".\n" like Mesos's.
    pub(crate) fn into_response(self) -> ResponseBox {
        let body = format!("{}.\n", self.message.trim_end_matches('.'));
        let mut response = Response::from_string(body)
            .with_status_code(self.status)
            .with_header(header("Content-Type", "text/plain; charset=utf-8"));
        for (name, value) in &self.headers {
            response.add_header(header(name, value));
        }
        response.boxed()
    }
}

impl From<profiler::Error> for HttpError {
    fn from(error: profiler::Error) -> Self {
        let status = match &error {
            profiler::Error::Unavailable(_) => 503,
            profiler::Error::StartedExternally | profiler::Error::Busy(_) => 409,
            profiler::Error::UnknownRun(_) => 404,
            profiler::Error::Failed(_) => 500,
        };
        Self::new(status, error.to_string())
    }
}
