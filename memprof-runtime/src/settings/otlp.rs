//! Where and how profiles are pushed, read once from the OpenTelemetry SDK's own variables (so a service
//! already configured for traces and metrics pushes its profiles to the same Collector) and memprof's two.
//! Read when the settings are resolved ([`super::Settings::resolve`]), every malformed value a [`Problem`].
//! Pure: the variables come through a lookup, so every rule is unit-tested without touching the process's
//! environment.

use std::ops::RangeInclusive;
use std::time::Duration;

use super::grammar::{self, Problem};
use crate::process::environment::{OTLP_EXIT_TIMEOUT, OTLP_INTERVAL};

/// The signal's path under a base endpoint (OTLP/HTTP, `v1development` while profiles are in development).
pub(crate) const SIGNAL_PATH: &str = "/v1development/profiles";

/// How often the interval's profiles are pushed unless `MEMPROF_OTLP_INTERVAL` says otherwise.
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_secs(15);

/// How long an exiting program waits for its last push unless `MEMPROF_OTLP_EXIT_TIMEOUT` says otherwise.
pub(crate) const DEFAULT_EXIT_TIMEOUT: Duration = Duration::from_secs(5);

/// The SDK's default export timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`, milliseconds).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The shortest and longest interval accepted.
const INTERVALS: RangeInclusive<Duration> = Duration::from_secs(1)..=Duration::from_secs(3600);

/// The variable of the full URL profiles are posted to.
const PROFILES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT";

/// The variable of the base URL, under which profiles go to [`SIGNAL_PATH`].
const BASE_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// Everything the push needs to know, read once at start-up.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PushSettings {
    /// The full URL profiles are posted to.
    pub(crate) endpoint: String,
    /// Extra request headers (`OTEL_EXPORTER_OTLP_HEADERS`: an API key, a tenant).
    pub(crate) headers: Vec<(String, String)>,
    /// How long one request may take.
    pub(crate) timeout: Duration,
    /// Whether bodies are gzip-compressed.
    pub(crate) gzip: bool,
    /// The resource's attributes: `OTEL_RESOURCE_ATTRIBUTES`, then `service.name`.
    pub(crate) resource: Vec<(String, String)>,
    /// How often the interval's profiles are pushed.
    pub(crate) interval: Duration,
    /// How long an exiting program waits for its last push.
    pub(crate) exit_timeout: Duration,
    /// A PEM file of the certificates an https endpoint is trusted by, in place of the Mozilla roots
    /// (`OTEL_EXPORTER_OTLP_CERTIFICATE`: a private CA).
    pub(crate) certificate: Option<std::path::PathBuf>,
}

/// What a malformed OTLP value means: the push is off (a wrong protocol or endpoint pushed to anyway would
/// fail at every interval, or reach the wrong place).
pub(crate) const NOT_PUSHED: &str = "heap profiles are not pushed over OTLP";

/// Reads the settings through `lookup` (the process's environment in production): `Ok(None)` when no
/// OTLP endpoint is set (nothing is pushed), the problem when a value is malformed. `resource` is the
/// service's attributes ([`crate::process::resource::service_attributes`]).
pub(crate) fn read(
    lookup: impl Fn(&str) -> Option<String>,
    resource: &[(String, String)],
) -> Result<Option<PushSettings>, Problem> {
    let set = |name: &str| lookup(name).map(|value| value.trim().to_owned()).filter(|value| !value.is_empty());
    let malformed = |name: &str, value: &str, expected: &str| Problem::malformed(name, value, expected, NOT_PUSHED);
    // The signal's own variable first, then the general one (the SDK's precedence).
    let either = |suffix: &str| {
        let specific = format!("OTEL_EXPORTER_OTLP_PROFILES_{suffix}");
        set(&specific).map(|value| (specific, value)).or_else(|| {
            let general = format!("OTEL_EXPORTER_OTLP_{suffix}");
            set(&general).map(|value| (general, value))
        })
    };
    let (name, endpoint) = match (set(PROFILES_ENDPOINT), set(BASE_ENDPOINT)) {
        (Some(full), _) => (PROFILES_ENDPOINT, full),
        (None, Some(base)) => (BASE_ENDPOINT, format!("{}{SIGNAL_PATH}", base.trim_end_matches('/'))),
        (None, None) => return Ok(None),
    };
    if !is_url(&endpoint) {
        return Err(malformed(name, &endpoint, "an http:// or https:// URL"));
    }
    if let Some((name, protocol)) = either("PROTOCOL")
        && protocol != "http/protobuf"
    {
        let expected = "`http/protobuf` (memprof pushes OTLP/HTTP with protobuf bodies, the Collector's port 4318)";
        return Err(malformed(&name, &protocol, expected));
    }
    let headers = match either("HEADERS") {
        Some((name, text)) => crate::process::resource::pairs(&text)
            .and_then(|pairs| pairs.into_iter().map(header).collect())
            .map_err(|error| malformed(&name, &text, &format!("`key=value,...` headers ({error})")))?,
        None => Vec::new(),
    };
    let timeout = match either("TIMEOUT") {
        Some((name, text)) => match grammar::count(&text, 1..=u64::MAX) {
            Some(millis) => Duration::from_millis(millis),
            None => return Err(malformed(&name, &text, "a positive whole number of milliseconds")),
        },
        None => DEFAULT_TIMEOUT,
    };
    let gzip = match either("COMPRESSION") {
        Some((name, value)) => grammar::word(&value, &[("gzip", true), ("none", false)])
            .ok_or_else(|| malformed(&name, &value, "`gzip` or `none`"))?,
        None => false,
    };
    let length = |name: &str, default: Duration, range: RangeInclusive<Duration>| match set(name) {
        None => Ok(default),
        Some(text) => grammar::duration(&text, range.clone()).ok_or_else(|| {
            malformed(name, &text, &format!("a duration from {:?} to {:?}, such as 30s", range.start(), range.end()))
        }),
    };
    Ok(Some(PushSettings {
        endpoint,
        headers,
        timeout,
        gzip,
        resource: resource.to_vec(),
        interval: length(OTLP_INTERVAL, DEFAULT_INTERVAL, INTERVALS)?,
        exit_timeout: length(OTLP_EXIT_TIMEOUT, DEFAULT_EXIT_TIMEOUT, Duration::ZERO..=Duration::from_secs(60))?,
        certificate: either("CERTIFICATE").map(|(_, path)| path.into()),
    }))
}

/// Whether `endpoint` is an `http` or `https` URL with a host that a request can be sent to (a space or a
/// control character in it would fail every push, not the start).
fn is_url(endpoint: &str) -> bool {
    endpoint.parse::<ureq::http::Uri>().is_ok_and(|uri| {
        matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some_and(|host| !host.is_empty())
    })
}

/// The headers the client writes itself, which a configured header would contradict (a second `Host`, a
/// `Content-Length` that is not the body's: every push failed, tried again forever).
const CLIENTS_OWN: [&str; 6] =
    ["host", "content-length", "content-type", "content-encoding", "transfer-encoding", "connection"];

/// `pair` as a header a push may send: its name an HTTP token (RFC 9110's `tchar`s) and none of the
/// client's own ([`CLIENTS_OWN`]); its value without control characters (already refused by the pairs).
fn header((name, value): (String, String)) -> Result<(String, String), String> {
    const TOKEN_PUNCTUATION: &str = "!#$%&'*+-.^_`|~";
    if !name.chars().all(|character| character.is_ascii_alphanumeric() || TOKEN_PUNCTUATION.contains(character)) {
        return Err(format!("{name:?} is not a header name"));
    }
    if CLIENTS_OWN.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(format!("{name} is the client's own header"));
    }
    Ok((name, value))
}

#[cfg(test)]
mod tests;
