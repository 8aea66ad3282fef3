//! The memprof endpoints of one service, over HTTP.

use std::io::Read;
use std::time::Duration;

use crate::Failure;

/// A service's endpoints, at `http://host:port`.
pub(crate) struct Client {
    base: String,
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
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(120)))
            .build();
        let base = url.trim_end_matches('/').trim_end_matches("/memory-profiler").to_owned();
        let authorization = token.filter(|token| !token.is_empty()).map(|token| format!("Bearer {token}"));
        Self { base, agent: config.into(), authorization }
    }

    /// `GET path` (below the service's root): the body on 2xx, else the service's message.
    pub(crate) fn get(&self, path: &str) -> Result<Answer, Failure> {
        let url = format!("{}{path}", self.base);
        let mut request = self.agent.get(&url);
        if let Some(authorization) = &self.authorization {
            request = request.header("Authorization", authorization);
        }
        answer(&url, request.call())
    }

    /// `POST path` with no body: the body on 2xx, else the service's message.
    pub(crate) fn post(&self, path: &str) -> Result<Answer, Failure> {
        let url = format!("{}{path}", self.base);
        let mut request = self.agent.post(&url);
        if let Some(authorization) = &self.authorization {
            request = request.header("Authorization", authorization);
        }
        answer(&url, request.send_empty())
    }
}

/// What `url` answered: the body on 2xx, else the service's message.
fn answer(url: &str, response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<Answer, Failure> {
    let mut response = response.map_err(|error| {
        Failure::Unreachable(format!(
            "cannot reach {url}: {error}; is the service running, with its profiling endpoints switched on (LIBPROCESS_MEMORY_PROFILING=true)?"
        ))
    })?;
    let status = response.status().as_u16();
    let mut body = Vec::new();
    response
        .body_mut()
        .as_reader()
        .read_to_end(&mut body)
        .map_err(|error| Failure::Unreachable(format!("the answer from {url} broke off: {error}")))?;
    if (200..300).contains(&status) {
        Ok(Answer { body })
    } else {
        let message = String::from_utf8_lossy(&body).trim_end().trim_end_matches('.').to_owned();
        Err(Failure::Refused(format!("{message} (HTTP {status} from {url})")))
    }
}
