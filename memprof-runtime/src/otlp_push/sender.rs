//! One export: the body posted as OTLP/HTTP asks (`Content-Type: application/x-protobuf`, gzip when
//! configured), the answer judged by OTLP/HTTP's rules ([`judge`], pure): 2xx accepted (its partial
//! success read), 429, 502, 503 and 504 retried after the server's `Retry-After` or a backoff, anything
//! else refused for good (a 400 says the payload itself is wrong: sending it again cannot help).
//!
//! A Collector that never answers, answers slowly or answers without end costs the push thread at most
//! the request's deadline and [`MOST_ANSWER_BYTES`] of memory; redirects are not followed (the body would
//! go where the operator did not point it).

use std::io::Read;
use std::time::{Duration, SystemTime};

use prost::Message;

use crate::settings::otlp::PushSettings;

/// The most of an answer's body read (a partial success's message, an error's text).
const MOST_ANSWER_BYTES: u64 = 64 * 1024;

/// The longest wait a `Retry-After` is followed for.
const MOST_RETRY_AFTER: Duration = Duration::from_secs(300);

/// What the Collector made of an export.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// Taken (2xx); `rejected` profiles of it were not, for the reason given (OTLP's partial success).
    Accepted { rejected: i64, message: String },
    /// Not now: send it again after `after` (the server's word), or after the backoff's next step.
    Retry { after: Option<Duration>, why: String },
    /// Never: the reason.
    Refused { why: String },
}

/// `ExportProfilesServiceResponse` and its `ExportProfilesPartialSuccess`, as far as memprof reads them.
#[derive(Clone, PartialEq, prost::Message)]
struct ExportResponse {
    #[prost(message, optional, tag = "1")]
    partial_success: Option<PartialSuccess>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PartialSuccess {
    #[prost(int64, tag = "1")]
    rejected_profiles: i64,
    #[prost(string, tag = "2")]
    error_message: String,
}

/// Posts `body` (already compressed when `settings.gzip`) to the endpoint within `deadline` and judges
/// the answer; a failure to connect, send or read is a reason to try again.
pub(crate) fn post(agent: &ureq::Agent, settings: &PushSettings, body: &[u8], deadline: Duration) -> Answer {
    let mut request = agent
        .post(&settings.endpoint)
        .header("Content-Type", "application/x-protobuf")
        .header("User-Agent", concat!("memprof/", env!("CARGO_PKG_VERSION")));
    if settings.gzip {
        request = request.header("Content-Encoding", "gzip");
    }
    for (name, value) in &settings.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let request = request.config().timeout_global(Some(deadline)).build();
    match request.send(body) {
        Ok(response) => {
            let status = response.status().as_u16();
            let retry_after =
                response.headers().get("retry-after").and_then(|value| value.to_str().ok()).map(str::to_owned);
            let mut answer = Vec::new();
            // What the body says is a courtesy: an unreadable one leaves the status to judge by.
            let _ = response.into_body().into_reader().take(MOST_ANSWER_BYTES).read_to_end(&mut answer);
            judge(status, retry_after.as_deref(), &answer, SystemTime::now())
        }
        Err(error) => Answer::Retry { after: None, why: format!("no answer from {}: {error}", settings.endpoint) },
    }
}

/// The agent every export goes through: HTTP statuses are answers, not errors; no redirect is followed;
/// https trusts the certificates of `settings.certificate` when it names a file (read now, once), else the
/// Mozilla roots. An unreadable file, or one without a certificate, is an error naming it.
pub(crate) fn agent(settings: &PushSettings) -> Result<ureq::Agent, String> {
    let mut config = ureq::Agent::config_builder().http_status_as_error(false).max_redirects(0);
    if let Some(path) = &settings.certificate {
        let shown = crate::profile_root::untrusted::printable(&path.display().to_string());
        let pem = std::fs::read(path).map_err(|error| format!("cannot read the certificate file {shown}: {error}"))?;
        let certificates: Vec<ureq::tls::Certificate<'static>> = ureq::tls::parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(ureq::tls::PemItem::Certificate(certificate)) => Some(certificate),
                _ => None,
            })
            .collect();
        if certificates.is_empty() {
            return Err(format!("the certificate file {shown} holds no PEM certificate"));
        }
        let roots = ureq::tls::RootCerts::new_with_certs(&certificates);
        config = config.tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build());
    }
    Ok(config.build().new_agent())
}

/// What an answer of `status`, with `retry_after` and `body`, received at `now`, means for the export.
pub(crate) fn judge(status: u16, retry_after: Option<&str>, body: &[u8], now: SystemTime) -> Answer {
    let said = || {
        let text = String::from_utf8_lossy(&body[..body.len().min(512)]);
        crate::profile_root::untrusted::printable(text.trim())
    };
    match status {
        200..=299 => match ExportResponse::decode(body).ok().and_then(|response| response.partial_success) {
            Some(partial) => Answer::Accepted {
                rejected: partial.rejected_profiles,
                message: crate::profile_root::untrusted::printable(&partial.error_message),
            },
            None => Answer::Accepted { rejected: 0, message: String::new() },
        },
        429 | 502 | 503 | 504 => Answer::Retry {
            after: retry_after.and_then(|value| retry_after_of(value, now)),
            why: format!("the collector answered {status} {}", said()),
        },
        _ => Answer::Refused { why: format!("the collector refused the export: {status} {}", said()) },
    }
}

/// A `Retry-After` value (seconds, or an HTTP date) as a wait from `now`, at most [`MOST_RETRY_AFTER`].
fn retry_after_of(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let wait = match value.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        Err(_) => httpdate::parse_http_date(value).ok()?.duration_since(now).unwrap_or_default(),
    };
    Some(wait.min(MOST_RETRY_AFTER))
}

#[cfg(test)]
mod tests;
