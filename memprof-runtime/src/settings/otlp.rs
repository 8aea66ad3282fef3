//! Where and how profiles are pushed, read once from the OpenTelemetry SDK's own variables (so a service
//! already configured for traces and metrics pushes its profiles to the same Collector) and memprof's two.
//! Pure: the variables come through a lookup, so every rule is unit-tested without touching the process's
//! environment.

use std::time::Duration;

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
const INTERVALS: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(3600));

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

/// Reads the settings through `lookup` (the process's environment in production): `Ok(None)` when no
/// OTLP endpoint is set (nothing is pushed), an error naming the variable when one is malformed.
/// `executable` names the service when neither `OTEL_SERVICE_NAME` nor the resource attributes do
/// (`unknown_service:<executable>`, the SDK's rule).
pub(crate) fn read(lookup: impl Fn(&str) -> Option<String>, executable: &str) -> Result<Option<PushSettings>, String> {
    let set = |name: &str| lookup(name).map(|value| value.trim().to_owned()).filter(|value| !value.is_empty());
    // The signal's own variable first, then the general one (the SDK's precedence).
    let either = |suffix: &str| {
        let specific = format!("OTEL_EXPORTER_OTLP_PROFILES_{suffix}");
        set(&specific).map(|value| (specific, value)).or_else(|| {
            let general = format!("OTEL_EXPORTER_OTLP_{suffix}");
            set(&general).map(|value| (general, value))
        })
    };
    let endpoint = match (set("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT"), set("OTEL_EXPORTER_OTLP_ENDPOINT")) {
        (Some(full), _) => full,
        (None, Some(base)) => format!("{}{SIGNAL_PATH}", base.trim_end_matches('/')),
        (None, None) => return Ok(None),
    };
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(format!("the OTLP endpoint {endpoint:?} is not an http:// or https:// URL"));
    }
    if let Some((name, protocol)) = either("PROTOCOL")
        && protocol != "http/protobuf"
    {
        return Err(format!(
            "{name}={protocol:?}: memprof pushes OTLP/HTTP with protobuf bodies (`http/protobuf`, the Collector's port 4318)"
        ));
    }
    let headers = match either("HEADERS") {
        Some((name, text)) => crate::process::resource::pairs(&text).map_err(|error| format!("{name}: {error}"))?,
        None => Vec::new(),
    };
    let timeout = match either("TIMEOUT") {
        Some((name, text)) => match text.parse::<u64>() {
            Ok(millis) if millis > 0 => Duration::from_millis(millis),
            _ => return Err(format!("{name}={text:?} is not a positive whole number of milliseconds")),
        },
        None => DEFAULT_TIMEOUT,
    };
    let gzip = match either("COMPRESSION") {
        Some((_, value)) if value == "gzip" => true,
        Some((_, value)) if value == "none" => false,
        Some((name, value)) => return Err(format!("{name}={value:?} is neither gzip nor none")),
        None => false,
    };
    let resource = crate::process::resource::service_attributes(&lookup, executable)?;
    let length = |name: &str, default: Duration, range: (Duration, Duration)| match set(name) {
        None => Ok(default),
        Some(text) => crate::profiler::duration::parse(&text)
            .map_err(|error| error.to_string())
            .and_then(|length| {
                if (range.0..=range.1).contains(&length) {
                    Ok(length)
                } else {
                    Err(format!("from {:?} to {:?}", range.0, range.1))
                }
            })
            .map_err(|why| format!("{name}={text:?}: {why}")),
    };
    Ok(Some(PushSettings {
        endpoint,
        headers,
        timeout,
        gzip,
        resource,
        interval: length(OTLP_INTERVAL, DEFAULT_INTERVAL, INTERVALS)?,
        exit_timeout: length(OTLP_EXIT_TIMEOUT, DEFAULT_EXIT_TIMEOUT, (Duration::ZERO, Duration::from_secs(60)))?,
        certificate: either("CERTIFICATE").map(|(_, path)| path.into()),
    }))
}

#[cfg(test)]
mod tests;
