//! What OpenTelemetry's resource conventions say of this process: the attributes an OTLP download and
//! every OTLP push carry (`process.pid`, `process.executable.*`, `host.name`), and the name of a service
//! that names none (`unknown_service:<executable>`, the SDK's default), and an OTLP resource over a time.

/// The executable's file name (empty when unknown).
pub(crate) fn executable_name() -> String {
    let executable = crate::process::executable::path().unwrap_or_default();
    executable.rsplit('/').next().unwrap_or_default().to_owned()
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

/// The resource of OTLP profiles with `attributes`, over the time from `started` to `stopped`.
pub(crate) fn otlp_resource(
    attributes: Vec<(String, String)>,
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
    }
}
