//! The door: a connection that finds no place waits here, on the accept loop's thread, with no thread of
//! its own. Its request's head is read as it comes (the sockets are polled, never waited on); an urgent
//! request (`state`, `stop`) is answered at the door at once, any other waits for a place for up to
//! [`PLACE_PATIENCE`], then gets 503. So no flood of clients, stalled or busy, keeps the operator's `state`
//! or `stop` out, and a newcomer never needs to throw out a connection whose request is on its way.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::places::MAX_CONNECTIONS;
use crate::http::head::{Head, MAX_HEAD, oversized_head, parse_head};
use crate::http::reply::{Framing, HttpError, Response};

/// The most connections waiting at the door; a newcomer past them closes the one that came first.
pub(super) const CAPACITY: usize = 256;
/// How long a client at the door has to send its request's head.
const HEAD_PATIENCE: Duration = Duration::from_secs(2);
/// How long a request that is not an urgent request waits at the door for a place, before 503.
const PLACE_PATIENCE: Duration = Duration::from_secs(1);
/// How often a request waiting for a place looks for one.
const PLACE_STEP: Duration = Duration::from_millis(10);
/// How long an answer at the door may take to be written.
const WRITE_PATIENCE: Duration = Duration::from_secs(2);
/// How long, and how much, is read and dropped after an answer at the door, so the client reads the answer
/// instead of a reset.
const LINGER: (Duration, usize) = (Duration::from_secs(1), 4 << 20);

/// What the server does with a connection at the door.
pub(super) trait Host {
    /// The answer to `head`'s request, given at the door: an urgent request without a body. `None`: the
    /// request waits for a place.
    fn answer_at_door(&self, head: Head) -> Option<Response>;
    /// Gives the connection a place and a thread, with the bytes already read from it (taken); `false`, and
    /// the bytes left, when none is free.
    fn place(&self, stream: &Arc<TcpStream>, read: &mut Vec<u8>) -> bool;
}

/// The connections waiting at the door, oldest first.
#[derive(Default)]
pub(super) struct Door {
    waiting: Vec<Waiting>,
}

struct Waiting {
    stream: Arc<TcpStream>,
    step: Step,
}

/// Where a connection at the door is; each step ends by a deadline.
enum Step {
    /// Its request's head is being read.
    Reading { read: Vec<u8>, until: Instant },
    /// Its head is whole, and it waits for a place.
    Queued { read: Vec<u8>, until: Instant },
    /// Its answer is being written; then the connection is closed.
    Writing { answer: Vec<u8>, written: usize, until: Instant },
    /// What the client still sends is read and dropped.
    Lingering { dropped: usize, until: Instant },
}

impl Door {
    /// Lets `stream` wait at the door; with the door full, the connection that came first is closed.
    pub(super) fn enter(&mut self, stream: Arc<TcpStream>) {
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        if self.waiting.len() >= CAPACITY {
            self.waiting.remove(0);
        }
        let step = Step::Reading { read: Vec::new(), until: Instant::now() + HEAD_PATIENCE };
        self.waiting.push(Waiting { stream, step });
    }

    /// What each waiting connection's socket is polled for, in the door's order.
    pub(super) fn interests(&self) -> impl Iterator<Item = libc::pollfd> + '_ {
        self.waiting.iter().map(|waiting| libc::pollfd {
            fd: waiting.stream.as_raw_fd(),
            events: waiting.step.events(),
            revents: 0,
        })
    }

    /// How long the door can wait for its sockets before it has something to do; `None`: nobody waits.
    pub(super) fn patience(&self, now: Instant) -> Option<Duration> {
        self.waiting.iter().map(|waiting| waiting.step.patience(now)).min()
    }

    /// Moves each waiting connection on, as its socket's poll result (`ready`, in [`Door::interests`]'
    /// order) allows; a connection whose step is over leaves.
    pub(super) fn turn(&mut self, ready: &[libc::c_short], host: &impl Host) {
        let now = Instant::now();
        let waiting = std::mem::take(&mut self.waiting);
        for (index, mut entry) in waiting.into_iter().enumerate() {
            let ready = ready.get(index).is_some_and(|revents| *revents != 0);
            if entry.advance(ready, now, host) {
                self.waiting.push(entry);
            }
        }
    }
}

impl Step {
    fn events(&self) -> libc::c_short {
        match self {
            Step::Reading { .. } | Step::Lingering { .. } => libc::POLLIN,
            Step::Writing { .. } => libc::POLLOUT,
            Step::Queued { .. } => 0,
        }
    }

    fn patience(&self, now: Instant) -> Duration {
        match self {
            Step::Queued { until, .. } => until.saturating_duration_since(now).min(PLACE_STEP),
            Step::Reading { until, .. } | Step::Writing { until, .. } | Step::Lingering { until, .. } => {
                until.saturating_duration_since(now)
            }
        }
    }
}

impl Waiting {
    /// Takes the connection as far as it can go now; `false` when it has left the door.
    fn advance(&mut self, mut ready: bool, now: Instant, host: &impl Host) -> bool {
        loop {
            let next = match &mut self.step {
                Step::Reading { read, until } => {
                    if ready && !matches!(read_into(&self.stream, read, MAX_HEAD), Ok(true)) {
                        return false;
                    }
                    match parse_head(read) {
                        Err(refusal) => answer(refusal.into_response(), Framing::CLOSE, now),
                        Ok(Some(head)) => {
                            let framing = Framing { head_only: head.method == "HEAD", ..Framing::CLOSE };
                            match host.answer_at_door(head) {
                                Some(response) => answer(response, framing, now),
                                None => Step::Queued { read: std::mem::take(read), until: now + PLACE_PATIENCE },
                            }
                        }
                        Ok(None) if read.len() >= MAX_HEAD => {
                            answer(oversized_head(read).into_response(), Framing::CLOSE, now)
                        }
                        // A client that sent nothing in time is closed without an answer, as on a place.
                        Ok(None) if now >= *until && read.is_empty() => return false,
                        Ok(None) if now >= *until => answer(
                            HttpError::new(408, "The request was not sent in time").into_response(),
                            Framing::CLOSE,
                            now,
                        ),
                        Ok(None) => return true,
                    }
                }
                Step::Queued { read, until } => {
                    if host.place(&self.stream, read) {
                        return false;
                    }
                    if now < *until {
                        return true;
                    }
                    let busy = format!("More than {MAX_CONNECTIONS} connections are busy; try again");
                    answer(HttpError::busy(busy, 1).into_response(), Framing::CLOSE, now)
                }
                Step::Writing { answer, written, until } => {
                    if ready {
                        match nonblocking((&*self.stream).write(&answer[*written..])) {
                            Ok(Some(count)) => *written += count,
                            Ok(None) => {}
                            Err(_) => return false,
                        }
                    }
                    if *written < answer.len() {
                        return now < *until;
                    }
                    let _ = self.stream.shutdown(Shutdown::Write);
                    Step::Lingering { dropped: 0, until: now + LINGER.0 }
                }
                Step::Lingering { dropped, until } => {
                    if ready {
                        let mut scratch = Vec::with_capacity(16 << 10);
                        match read_into(&self.stream, &mut scratch, 16 << 10) {
                            Ok(true) => *dropped += scratch.len(),
                            _ => return false,
                        }
                    }
                    return *dropped < LINGER.1 && now < *until;
                }
            };
            self.step = next;
            // A new step is tried at once: its socket is most likely ready for it.
            ready = true;
        }
    }
}

/// Waits until one of `entries` is ready, or `timeout` has passed (with `None`, until one is ready).
#[allow(unsafe_code)]
pub(super) fn poll(entries: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<()> {
    let milliseconds =
        timeout.map_or(-1, |timeout| i32::try_from(timeout.as_micros().div_ceil(1000)).unwrap_or(i32::MAX));
    let count = libc::nfds_t::try_from(entries.len()).unwrap_or(libc::nfds_t::MAX);
    // SAFETY: `entries` is a live array of `count` pollfd entries for the call's duration.
    if unsafe { libc::poll(entries.as_mut_ptr(), count, milliseconds) } < 0 {
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
    Ok(())
}

/// The step that writes `response`.
fn answer(response: Response, framing: Framing, now: Instant) -> Step {
    let mut bytes = Vec::new();
    // Writing into memory fails only for a file body cut short, which no answer at the door has.
    let _ = response.write_to(&mut bytes, framing);
    Step::Writing { answer: bytes, written: 0, until: now + WRITE_PATIENCE }
}

/// Reads what the socket has, up to `limit` bytes in `into`, without waiting; `false` when the client has
/// closed its side.
fn read_into(stream: &TcpStream, into: &mut Vec<u8>, limit: usize) -> io::Result<bool> {
    let mut chunk = [0; 4096];
    while into.len() < limit {
        let room = (limit - into.len()).min(chunk.len());
        match nonblocking((&*stream).read(&mut chunk[..room]))? {
            Some(0) => return Ok(false),
            Some(count) => into.extend_from_slice(&chunk[..count]),
            None => break,
        }
    }
    Ok(true)
}

/// `None` where a non-blocking call would have had to wait (or was interrupted: it is tried again later).
fn nonblocking<T>(result: io::Result<T>) -> io::Result<Option<T>> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(error) if matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => Ok(None),
        Err(error) => Err(error),
    }
}
