//! What OpenTelemetry's resource conventions say of this process: the attributes an OTLP download and
//! every OTLP push carry (`process.pid`, `process.executable.*`, `host.name`), the service's as the SDK
//! reads them (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, else `unknown_service:<executable>`), and an
//! OTLP resource over a time.

/// The executable's file name (empty when unknown).
pub(crate) fn executable_name() -> String {
    let executable = crate::process::executable::path().unwrap_or_default();
    executable.rsplit('/').next().unwrap_or_default().to_owned()
}

/// The variable of the resource's attributes.
pub(crate) const ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";

/// The variable of the service's name.
const SERVICE_NAME: &str = "OTEL_SERVICE_NAME";

/// A value of [`ATTRIBUTES`] that is not its pairs, or of `OTEL_SERVICE_NAME` that is no name.
#[derive(Debug)]
pub(crate) struct MalformedAttributes {
    /// The variable.
    pub(crate) name: &'static str,
    /// The value.
    pub(crate) value: String,
    /// What it should be, and why it is not.
    pub(crate) expected: String,
}

/// The service's attributes read through `lookup` (the environment's reading, at the settings'
/// resolution), the SDK's rule: `OTEL_RESOURCE_ATTRIBUTES`' pairs, `OTEL_SERVICE_NAME` winning over their
/// `service.name`, and without either `unnamed` (`unknown_service:<executable>`); `service.name` first. A
/// malformed [`ATTRIBUTES`] is answered as its value and what it should be.
pub(crate) fn service_attributes(
    lookup: impl Fn(&str) -> Option<String>,
    unnamed: &str,
) -> Result<Vec<(String, String)>, MalformedAttributes> {
    let set = |name: &str| lookup(name).map(|value| value.trim().to_owned()).filter(|value| !value.is_empty());
    let mut attributes = match set(ATTRIBUTES) {
        Some(text) => pairs(&text).map_err(|error| MalformedAttributes {
            name: ATTRIBUTES,
            expected: format!("`key=value,...` pairs ({error})"),
            value: text,
        })?,
        None => Vec::new(),
    };
    let named = set(SERVICE_NAME);
    if let Some(named) = named.as_ref().filter(|named| named.chars().any(char::is_control)) {
        let expected = "a name without control characters".to_owned();
        return Err(MalformedAttributes { name: SERVICE_NAME, value: named.clone(), expected });
    }
    if named.is_some() || !attributes.iter().any(|(key, _)| key == "service.name") {
        attributes.retain(|(key, _)| key != "service.name");
        attributes.insert(0, ("service.name".to_owned(), named.unwrap_or_else(|| unnamed.to_owned())));
    }
    Ok(attributes)
}

/// `key=value` pairs separated by commas, values percent-decoded (the W3C Baggage form the SDK reads
/// `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_EXPORTER_OTLP_HEADERS` in).
pub(crate) fn pairs(text: &str) -> Result<Vec<(String, String)>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').ok_or_else(|| format!("{pair:?} is not key=value"))?;
            let decoded =
                |text: &str| percent_encoding::percent_decode_str(text.trim()).decode_utf8_lossy().into_owned();
            let (key, value) = (decoded(key), decoded(value));
            if key.is_empty() || key.chars().any(char::is_control) || value.chars().any(char::is_control) {
                return Err(format!("{pair:?} has an empty key or a control character"));
            }
            Ok((key, value))
        })
        .collect()
}

/// This process's attributes, in order.
pub(crate) fn process_attributes() -> Vec<(String, String)> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    [
        ("process.pid", std::process::id().to_string()),
        ("process.executable.name", executable_name()),
        ("process.executable.path", crate::process::executable::path().unwrap_or_default()),
        ("host.name", host.trim().to_owned()),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value))
    .collect()
}

/// The resource of OTLP profiles with `attributes`, over the time from `started` to `stopped`, each
/// profile with `profile_attributes` (how it was sampled).
pub(crate) fn otlp_resource(
    attributes: Vec<(String, String)>,
    profile_attributes: Vec<(String, String)>,
    started: std::time::SystemTime,
    stopped: std::time::SystemTime,
) -> memprof_analysis::OtlpResource {
    let unix_nanos = |time: std::time::SystemTime| {
        time.duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_nanos() as u64)
    };
    let (started, stopped) = (unix_nanos(started), unix_nanos(stopped));
    memprof_analysis::OtlpResource {
        attributes,
        time_unix_nano: started,
        duration_nano: stopped.saturating_sub(started),
        profile_attributes,
    }
}
