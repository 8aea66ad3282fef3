//! A request as the handlers see it, whichever server read it, and how a handler waits on its client.

use std::sync::Arc;
use std::time::Duration;

use super::bodies::Held;
use super::head::{Fields, Head};
use super::reply::{HttpError, Persistence};

/// A request to answer.
pub(crate) struct Request {
    /// `GET`, `POST`, ...
    pub(crate) method: String,
    /// The path and query.
    pub(crate) target: String,
    /// The header fields memprof reads.
    pub(crate) fields: Fields,
    /// The body, de-chunked.
    pub(crate) body: Vec<u8>,
    /// The body's bytes as its server counts them, given back when the request is dropped.
    pub(crate) body_held: Option<Held>,
    /// How a handler waits on this request's client; `None`: the wait is a plain sleep.
    pub(crate) waiting: Option<Arc<dyn Wait>>,
    /// Whether the client keeps the connection for another request, and whether the answer must say so.
    pub(crate) persistence: Persistence,
}

/// A wait that ends early when it need not go on: the client left, or the server needs the place.
pub(crate) trait Wait: Send + Sync {
    /// Waits `duration`; an error says why the wait ended early (and is the answer, if any can be sent).
    fn wait(&self, duration: Duration) -> Result<(), HttpError>;
}

/// Why a wait ended early when its client left (an answer nobody reads).
pub(crate) fn client_gone() -> HttpError {
    HttpError::bad_request("The client left before the answer was ready")
}

/// How often a wait looks at whether it should end early.
const WAIT_STEP: Duration = Duration::from_millis(50);

/// Waits `duration` in short steps, ending early with the error `interrupted` gives when it gives one.
pub(crate) fn wait_unless(duration: Duration, interrupted: impl Fn() -> Option<HttpError>) -> Result<(), HttpError> {
    let deadline = std::time::Instant::now() + duration;
    loop {
        if let Some(error) = interrupted() {
            return Err(error);
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(WAIT_STEP));
    }
}

impl Request {
    /// A request with no header fields, kept alive: read by another server (the program's own, see
    /// `crate::mounted::respond`), or made by a test.
    pub(crate) fn new(method: &str, target: &str, body: Vec<u8>) -> Self {
        Self {
            method: method.to_owned(),
            target: target.to_owned(),
            fields: Fields::default(),
            body,
            body_held: None,
            waiting: None,
            persistence: Persistence::KeepAlive,
        }
    }

    /// The request whose head this server read, with its body and what the body counts.
    pub(crate) fn read(head: Head, body: Vec<u8>, held: Option<Held>) -> Self {
        Self {
            fields: head.fields,
            body,
            body_held: held,
            persistence: head.persistence,
            ..Self::new(&head.method, &head.target, Vec::new())
        }
    }

    /// Lets the body go once it has been answered: its memory, and its count among the server's bodies, are
    /// not held while the answer is written to a client that may read it slowly.
    pub(crate) fn drop_body(&mut self) {
        self.body = Vec::new();
        self.body_held = None;
    }

    /// Waits `duration` for a handler that answers later (`/debug/pprof/heap?seconds=N`). While it waits,
    /// the request holds no busy place: the wait ends early, with an error, when the client leaves or the
    /// server needs the connection for another client.
    pub(crate) fn wait(&self, duration: Duration) -> Result<(), HttpError> {
        match &self.waiting {
            Some(waiting) => waiting.wait(duration),
            None => {
                std::thread::sleep(duration);
                Ok(())
            }
        }
    }
}

impl std::fmt::Debug for Request {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Request").field("method", &self.method).field("target", &self.target).finish()
    }
}
