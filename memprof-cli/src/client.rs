//! The memprof endpoints of one service, over HTTP. What a service answers is a claim, as is its size: JSON
//! answers and error messages are read up to a bound, profiles are streamed to where they go, redirects are
//! not followed, loopback is never reached through a proxy, and a password in the URL is never repeated.

use std::io::{Read, Write};
use std::time::Duration;

use crate::failure::Failure;

/// The largest JSON answer read (`state` of a service with many profiles is a few kB).
const MAX_ANSWER: u64 = 16 << 20;
/// The most of an error's body read for its message.
const MAX_MESSAGE: u64 = 64 << 10;

/// A service's endpoints, at `http://host:port`.
pub(crate) struct Client {
    base: String,
    /// `base` as said in messages: without a user name or password.
    shown: String,
    agent: ureq::Agent,
    /// `Bearer <token>`, when the service wants one.
    authorization: Option<String>,
}

/// A successful answer.
pub(crate) struct Answer {
    pub(crate) body: Vec<u8>,
}

impl Answer {
    /// The body as one of the service's typed answers ([`memprof_wire`]).
    pub(crate) fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, Failure> {
        serde_json::from_slice(&self.body).map_err(|error| {
            Failure::Refused(format!("the service answered something memprof does not understand ({error})"))
        })
    }
}

impl Client {
    /// A client for the service at `url` (`http://host:port`, a trailing slash or path ignored), sending
    /// `token` when given.
    pub(crate) fn new(url: &str, token: Option<&str>) -> Self {
        let base = url.trim_end_matches('/').trim_end_matches("/memory-profiler").to_owned();
        let shown = without_credentials(&base);
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(Duration::from_secs(120)));
        if is_loopback(&base) {
            config = config.proxy(None);
        }
        let authorization = token.filter(|token| !token.is_empty()).map(|token| format!("Bearer {token}"));
        Self { base, shown, agent: config.build().into(), authorization }
    }

    /// `GET path` (below the service's root): the body on 2xx, else the service's message.
    pub(crate) fn get(&self, path: &str) -> Result<Answer, Failure> {
        let response = self.call(path, false)?;
        Ok(Answer { body: self.read(response, path, MAX_ANSWER)? })
    }

    /// `POST path` with no body: the body on 2xx, else the service's message.
    pub(crate) fn post(&self, path: &str) -> Result<Answer, Failure> {
        let response = self.call(path, true)?;
        Ok(Answer { body: self.read(response, path, MAX_ANSWER)? })
    }

    /// `GET path`, its body streamed into `out` (a profile: as large as the service makes it).
    pub(crate) fn download(&self, path: &str, out: &mut dyn Write) -> Result<(), Failure> {
        let mut response = self.call(path, false)?;
        let url = format!("{}{path}", self.shown);
        std::io::copy(&mut response.body_mut().as_reader(), out).map_err(|error| match error.kind() {
            std::io::ErrorKind::BrokenPipe => Failure::Closed,
            _ => Failure::Unreachable(format!("the download from {url} broke off: {error}")),
        })?;
        Ok(())
    }

    /// Sends the request; a response that is not 2xx is the service's refusal.
    fn call(&self, path: &str, post: bool) -> Result<ureq::http::Response<ureq::Body>, Failure> {
        let url = format!("{}{path}", self.base);
        let shown = format!("{}{path}", self.shown);
        let response = if post {
            let mut request = self.agent.post(&url);
            if let Some(authorization) = &self.authorization {
                request = request.header("Authorization", authorization);
            }
            request.send_empty()
        } else {
            let mut request = self.agent.get(&url);
            if let Some(authorization) = &self.authorization {
                request = request.header("Authorization", authorization);
            }
            request.call()
        };
        let response = response.map_err(|error| {
            let error = error.to_string().replace(&self.base, &self.shown);
            Failure::Unreachable(format!(
                "cannot reach {shown}: {error}; is the service running, with its profiling endpoints switched on (LIBPROCESS_MEMORY_PROFILING=true)?"
            ))
        })?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(response);
        }
        let location = response.headers().get("location").and_then(|value| value.to_str().ok()).map(str::to_owned);
        let message = error_message(response);
        let message = match (status, location) {
            (300..=399, location) => format!(
                "the service redirected to {}; memprof does not follow redirects: point --url at the service itself",
                location.as_deref().map_or_else(|| "nowhere".to_owned(), without_credentials)
            ),
            (401, _) if message.is_empty() => {
                "the service wants a token: pass it with --token or MEMPROF_TOKEN".to_owned()
            }
            (401, _) if self.authorization.is_none() => {
                format!("{message}; pass the service's token with --token or MEMPROF_TOKEN")
            }
            _ => message,
        };
        Err(Failure::Refused(format!("{message} (HTTP {status} from {shown})")))
    }

    /// The body, up to `limit` bytes; more is refused.
    fn read(&self, mut response: ureq::http::Response<ureq::Body>, path: &str, limit: u64) -> Result<Vec<u8>, Failure> {
        let url = format!("{}{path}", self.shown);
        let mut body = Vec::new();
        response
            .body_mut()
            .as_reader()
            .take(limit + 1)
            .read_to_end(&mut body)
            .map_err(|error| Failure::Unreachable(format!("the answer from {url} broke off: {error}")))?;
        if body.len() as u64 > limit {
            return Err(Failure::Refused(format!(
                "the answer from {url} is larger than {} MiB, more than any memprof answer; it was not read",
                limit >> 20
            )));
        }
        Ok(body)
    }
}

/// The message of an error answer, on one line: its first [`MAX_MESSAGE`] bytes, and a note when it goes on
/// (a longer body is not memprof's, but its start still says what the server meant).
fn error_message(mut response: ureq::http::Response<ureq::Body>) -> String {
    let mut body = Vec::new();
    let read = response.body_mut().as_reader().take(MAX_MESSAGE + 1).read_to_end(&mut body);
    let longer = body.len() as u64 > MAX_MESSAGE;
    body.truncate(MAX_MESSAGE as usize);
    let mut message = crate::terminal::one_line(String::from_utf8_lossy(&body).trim_end().trim_end_matches('.'));
    if longer || read.is_err() {
        message.push_str(" [the rest of the message is not shown]");
    }
    message
}

/// `url` without a user name and password (`http://user:secret@host` is said as `http://host`).
fn without_credentials(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// Whether `url` names this machine (`localhost`, `127.x.x.x`, `[::1]`): no proxy is used to reach it.
fn is_loopback(url: &str) -> bool {
    let rest = without_credentials(url);
    let rest = rest.split_once("://").map_or(rest.as_str(), |(_, rest)| rest);
    memprof_wire::is_loopback_host(rest.split('/').next().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_never_said_and_loopback_is_told_apart() {
        assert_eq!(without_credentials("http://user:s3cret@10.0.0.1:5050/x"), "http://10.0.0.1:5050/x");
        assert_eq!(without_credentials("http://127.0.0.1:5050"), "http://127.0.0.1:5050");
        for loopback in ["http://127.0.0.1:5050", "http://localhost", "http://[::1]:80", "http://u:p@127.1.1.1:1"] {
            assert!(is_loopback(loopback), "{loopback}");
        }
        for remote in ["http://10.0.0.1:5050", "http://example.com", "http://127.0.0.1.example.com"] {
            assert!(!is_loopback(remote), "{remote}");
        }
    }
}
