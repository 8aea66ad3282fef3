//! OTLP push: the heap profiles of each interval sent to an OpenTelemetry Collector (or any OTLP/HTTP
//! profiles endpoint: Grafana Pyroscope 2), configured by the SDK's own variables ([`crate::settings::otlp`]).
//!
//! One memprof thread (unsampled, in memprof's arena) makes an export every interval from the record of
//! continuous sampling ([`payload`]), queues it ([`queue`]: bounded, the oldest dropped) and sends the
//! queue's head ([`sender`]), after any failure not before the queue's backoff ends (jittered, doubling,
//! lengthened by the server's `Retry-After`), whichever export is at the head. The program
//! never waits for it: nothing the program does takes its lock. As the program ends ([`at_exit`]), the
//! last interval is made and everything queued sent within the exit deadline, so a batch job that ends
//! by itself leaves its profile with the Collector and still exits on time when the Collector is gone.
//!
//! What it sent, dropped, refused and retried, and the last reason, is in `state` and `/metrics`
//! ([`report`]), and the log says when exports start failing and when they succeed again.

mod payload;
mod queue;
mod sender;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use parking_lot::{Condvar, Mutex};

use crate::process::messages;
use crate::sampler::record::table::Table;
use crate::settings::otlp::PushSettings;
use queue::{AfterFailure, Export, Queue};

/// The push, once started.
static PUSH: OnceLock<Push> = OnceLock::new();

struct Push {
    settings: PushSettings,
    record: &'static Table,
    state: Mutex<State>,
    /// Wakes the thread (the program ends), and the ending program (the last export is done).
    changed: Condvar,
    tally: Tally,
    /// Whether the thread runs (it could be started).
    running: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct State {
    queue: Queue,
    /// When the program ends: the deadline of its last exports.
    ending: Option<Instant>,
    /// The last exports are done (sent, or their deadline passed).
    ended: bool,
    /// The last reason an export failed, and whether the failure is still going on.
    last_error: Option<String>,
    failing: bool,
}

/// What the push did since start-up.
#[derive(Default)]
struct Tally {
    sent: AtomicU64,
    sent_bytes: AtomicU64,
    retried: AtomicU64,
    refused: AtomicU64,
    dropped: AtomicU64,
    rejected_profiles: AtomicU64,
    last_sent_unix_ms: AtomicU64,
}

/// Starts pushing the record's profiles as `settings` say: once, on a memprof thread of its own; an error
/// says why nothing is pushed (a certificate file that cannot be read, a thread that cannot start).
pub(crate) fn start(settings: PushSettings, record: &'static Table) -> Result<(), String> {
    let agent = sender::agent(&settings)?;
    let running = std::sync::atomic::AtomicBool::new(true);
    let push =
        Push { settings, record, state: Mutex::default(), changed: Condvar::new(), tally: Tally::default(), running };
    if PUSH.set(push).is_err() {
        return Ok(());
    }
    let started = crate::process::threads::spawn("memprof-otlp", move || {
        if let Some(push) = PUSH.get() {
            push.run(&agent);
        }
    });
    if started.is_err()
        && let Some(push) = PUSH.get()
    {
        push.running.store(false, Ordering::Release);
    }
    started.map_err(|error| format!("cannot start a thread ({error})"))
}

/// The program ends: the last interval's export is made and everything queued sent, waiting at most the
/// exit deadline (`MEMPROF_OTLP_EXIT_TIMEOUT`); said in the log when it could not be.
pub(crate) fn at_exit() {
    let Some(push) = PUSH.get() else { return };
    let deadline = Instant::now() + push.settings.exit_timeout;
    let mut state = push.state.lock();
    state.ending = Some(deadline);
    push.changed.notify_all();
    // A moment past the deadline: the request's own timeout ends it.
    let margin = deadline + Duration::from_millis(200);
    while !state.ended && push.running.load(Ordering::Acquire) {
        if push.changed.wait_until(&mut state, margin).timed_out() {
            break;
        }
    }
    let missed = !state.ended && push.running.load(Ordering::Acquire);
    drop(state);
    if missed {
        messages::warn(&format!(
            "The last heap profiles were not pushed to {} before the program ended (MEMPROF_OTLP_EXIT_TIMEOUT: {:?}): still being made or sent",
            without_credentials(&push.settings.endpoint),
            push.settings.exit_timeout
        ));
    }
}

/// What the push did, if it runs, as `state` says it (`/metrics` too).
pub(crate) fn report() -> Option<memprof_wire::OtlpPush> {
    PUSH.get().map(Push::report)
}

impl Push {
    fn report(&self) -> memprof_wire::OtlpPush {
        let state = self.state.lock();
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        memprof_wire::OtlpPush {
            endpoint: without_credentials(&self.settings.endpoint),
            interval_seconds: self.settings.interval.as_secs(),
            sent: load(&self.tally.sent),
            sent_bytes: load(&self.tally.sent_bytes),
            retried: load(&self.tally.retried),
            refused: load(&self.tally.refused),
            dropped: load(&self.tally.dropped),
            rejected_profiles: load(&self.tally.rejected_profiles),
            queued: state.queue.len(),
            backoff_ms: state.queue.backoff(Instant::now()).as_millis() as u64,
            last_error: state.last_error.clone(),
            last_sent: Some(load(&self.tally.last_sent_unix_ms)).filter(|&ms| ms > 0).map(|ms| ms as f64 / 1000.0),
        }
    }

    /// The thread's life: an export every interval, the queue's head sent when due, the last exports as
    /// the program ends.
    fn run(&self, agent: &ureq::Agent) {
        let mut interval = payload::Interval::first();
        let mut next_export = Instant::now() + self.settings.interval;
        loop {
            let ending = {
                let mut state = self.state.lock();
                loop {
                    if state.ending.is_some() {
                        break;
                    }
                    let due = state.queue.due(Instant::now()).map_or(next_export, |due| due.min(next_export));
                    if Instant::now() >= due {
                        break;
                    }
                    self.changed.wait_until(&mut state, due);
                }
                state.ending
            };
            if let Some(deadline) = ending {
                self.make(&mut interval);
                self.send_until(agent, deadline);
                let unsent = self.state.lock().queue.len();
                if unsent > 0 {
                    self.tally.dropped.fetch_add(unsent as u64, Ordering::Relaxed);
                    messages::warn(&format!(
                        "{unsent} export{} of heap profiles {} not pushed to {} before the program ended (MEMPROF_OTLP_EXIT_TIMEOUT: {:?}): {}",
                        if unsent == 1 { "" } else { "s" },
                        if unsent == 1 { "was" } else { "were" },
                        without_credentials(&self.settings.endpoint),
                        self.settings.exit_timeout,
                        self.state.lock().last_error.clone().unwrap_or_default()
                    ));
                }
                self.state.lock().ended = true;
                self.changed.notify_all();
                return;
            }
            let now = Instant::now();
            if now >= next_export {
                self.make(&mut interval);
                // Intervals missed (a machine suspended) are not made up: the next is one interval away.
                next_export = now + self.settings.interval;
            }
            let now = Instant::now();
            if self.state.lock().queue.due(now).is_some_and(|due| due <= now) {
                self.send_head(agent, None);
            }
        }
    }

    /// Makes the interval's export and queues it (the oldest dropped if the queue is full).
    fn make(&self, interval: &mut payload::Interval) {
        match payload::make(self.record, interval, &self.settings) {
            Ok(made) => {
                let dropped = self.state.lock().queue.push(Export::new(made.body, made.profiles));
                if dropped > 0 {
                    self.tally.dropped.fetch_add(dropped as u64, Ordering::Relaxed);
                    self.failed("exports waiting to be sent were dropped for newer ones: the queue was full", false);
                }
            }
            Err(why) => {
                self.tally.dropped.fetch_add(1, Ordering::Relaxed);
                self.failed(&format!("an export could not be made: {why}"), true);
            }
        }
    }

    /// Sends everything queued, one after another, until `deadline` (no waiting for a retry past it).
    fn send_until(&self, agent: &ureq::Agent, deadline: Instant) {
        while self.state.lock().queue.head().is_some() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.state.lock().last_error = Some("the deadline passed before it was sent".to_owned());
                return;
            }
            if !self.send_head(agent, Some(left)) {
                return;
            }
        }
    }

    /// Sends the queue's head (within `left`, else the request timeout); whether it left the queue.
    fn send_head(&self, agent: &ureq::Agent, left: Option<Duration>) -> bool {
        let Some(body) = self.state.lock().queue.head().map(|head| head.body.clone()) else { return true };
        let timeout = left.map_or(self.settings.timeout, |left| left.min(self.settings.timeout));
        let answer = sender::post(agent, &self.settings, &body, timeout);
        let mut state = self.state.lock();
        match answer {
            sender::Answer::Accepted { rejected, message } => {
                state.queue.pop(true);
                drop(state);
                self.tally.sent.fetch_add(1, Ordering::Relaxed);
                self.tally.sent_bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
                let unix_ms =
                    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |since| since.as_millis());
                self.tally.last_sent_unix_ms.store(unix_ms as u64, Ordering::Relaxed);
                if rejected > 0 {
                    self.tally.rejected_profiles.fetch_add(rejected as u64, Ordering::Relaxed);
                    self.failed(&format!("the collector rejected {rejected} profiles of an export: {message}"), false);
                } else {
                    self.recovered();
                }
                true
            }
            sender::Answer::Refused { why } => {
                state.queue.pop(false);
                drop(state);
                self.tally.refused.fetch_add(1, Ordering::Relaxed);
                self.failed(&why, true);
                true
            }
            sender::Answer::Retry { after, why } => {
                let jitter = f64::from(
                    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().subsec_nanos() % 1000,
                ) / 1000.0;
                let after_failure = state.queue.failed(Instant::now(), after, jitter);
                drop(state);
                match after_failure {
                    Some(AfterFailure::GivenUp(_)) => {
                        self.tally.dropped.fetch_add(1, Ordering::Relaxed);
                        self.failed(
                            &format!("{why}; the export was dropped after {:?} of tries", queue::GIVE_UP_AFTER),
                            true,
                        );
                        true
                    }
                    _ => {
                        self.tally.retried.fetch_add(1, Ordering::Relaxed);
                        self.failed(&format!("{why}; tried again later"), true);
                        false
                    }
                }
            }
        }
    }

    /// Remembers why an export failed (a one-off keeps the reason of a run of failures in progress); says
    /// it in the log when a run of failures begins (`ongoing`: the exports keep failing until one
    /// succeeds), or at once for a one-off.
    fn failed(&self, why: &str, ongoing: bool) {
        let mut state = self.state.lock();
        let first = !state.failing;
        // A one-off during a run of failures (the queue full meanwhile) leaves the run's reason said.
        if ongoing || first {
            state.last_error = Some(why.to_owned());
        }
        state.failing |= ongoing;
        drop(state);
        if first {
            messages::warn(&format!("Heap profiles pushed to {}: {why}", without_credentials(&self.settings.endpoint)));
        }
    }

    /// An export succeeded: a run of failures ends, and the log says so.
    fn recovered(&self) {
        let mut state = self.state.lock();
        if std::mem::take(&mut state.failing) {
            drop(state);
            messages::info(&format!(
                "Heap profiles are pushed to {} again",
                without_credentials(&self.settings.endpoint)
            ));
        }
    }
}

/// `endpoint` without the `user:password@` a URL may carry.
pub(crate) fn without_credentials(endpoint: &str) -> String {
    let Some((scheme, rest)) = endpoint.split_once("://") else { return endpoint.to_owned() };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => endpoint.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn credentials_are_left_out_of_what_is_said() {
        assert_eq!(super::without_credentials("https://user:secret@collector:4318/v1"), "https://collector:4318/v1");
        assert_eq!(super::without_credentials("http://collector:4318/a@b"), "http://collector:4318/a@b");
        assert_eq!(super::without_credentials("http://collector"), "http://collector");
    }
}
