use super::*;

fn read_from(variables: &[(&str, &str)]) -> Result<Option<PushSettings>, String> {
    let variables: Vec<(String, String)> =
        variables.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect();
    let lookup = |name: &str| variables.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone());
    let service = crate::process::resource::service_attributes(lookup, "unknown_service:server")
        .map_err(|malformed| format!("{malformed:?}"))?;
    read(lookup, &service).map_err(|problem| problem.to_string())
}

#[test]
fn nothing_is_pushed_without_an_endpoint() {
    assert_eq!(read_from(&[]), Ok(None));
    assert_eq!(read_from(&[("OTEL_SERVICE_NAME", "api"), ("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]), Ok(None));
}

#[test]
fn the_base_endpoint_gets_the_signals_path_and_the_signals_own_is_used_as_it_is() {
    let base = read_from(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")]).unwrap().unwrap();
    assert_eq!(base.endpoint, "http://collector:4318/v1development/profiles");
    let own = read_from(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
        ("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "https://profiles.example/ingest"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(own.endpoint, "https://profiles.example/ingest");
    assert_eq!(
        (own.timeout, own.gzip, own.interval, own.exit_timeout),
        (Duration::from_secs(10), false, DEFAULT_INTERVAL, DEFAULT_EXIT_TIMEOUT)
    );
    assert!(read_from(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")]).unwrap_err().contains("not an http"));
}

#[test]
fn the_service_is_named_as_the_sdk_names_it() {
    let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
    let unnamed = read_from(&[endpoint]).unwrap().unwrap();
    assert_eq!(unnamed.resource, [("service.name".to_owned(), "unknown_service:server".to_owned())]);
    let attributes = ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod, service.name=from%20attributes");
    let from_attributes = read_from(&[endpoint, attributes]).unwrap().unwrap();
    assert_eq!(
        from_attributes.resource,
        [
            ("deployment.environment".to_owned(), "prod".to_owned()),
            ("service.name".to_owned(), "from attributes".to_owned())
        ]
    );
    let named = read_from(&[endpoint, attributes, ("OTEL_SERVICE_NAME", "api")]).unwrap().unwrap();
    assert_eq!(named.resource[0], ("service.name".to_owned(), "api".to_owned()));
    assert_eq!(named.resource.len(), 2);
}

#[test]
fn headers_timeout_and_compression_prefer_the_signals_own_variables() {
    let settings = read_from(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-scope-orgid=general"),
        ("OTEL_EXPORTER_OTLP_PROFILES_HEADERS", "x-scope-orgid=tenant%2C1,authorization=Bearer a+b"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
        ("OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION", "gzip"),
        ("MEMPROF_OTLP_INTERVAL", "1mins"),
        ("MEMPROF_OTLP_EXIT_TIMEOUT", "500ms"),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/general.pem"),
        ("OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE", "/etc/ca.pem"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(
        settings.headers,
        [("x-scope-orgid".to_owned(), "tenant,1".to_owned()), ("authorization".to_owned(), "Bearer a+b".to_owned())]
    );
    assert_eq!(
        (settings.timeout, settings.gzip, settings.interval, settings.exit_timeout),
        (Duration::from_millis(2500), true, Duration::from_secs(60), Duration::from_millis(500))
    );
    assert_eq!(settings.certificate.as_deref(), Some(std::path::Path::new("/etc/ca.pem")));
}

#[test]
fn malformed_values_are_errors_naming_their_variable() {
    let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
    let cases = [
        (("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), "OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\""),
        (("OTEL_EXPORTER_OTLP_TIMEOUT", "10s"), "OTEL_EXPORTER_OTLP_TIMEOUT=\"10s\""),
        (("OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION", "zstd"), "OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION=\"zstd\""),
        (("OTEL_EXPORTER_OTLP_HEADERS", "novalue"), "OTEL_EXPORTER_OTLP_HEADERS=\"novalue\" is not `key=value,...`"),
        (("OTEL_EXPORTER_OTLP_HEADERS", "a=b%0d%0aInjected: 1"), "control character"),
        (("MEMPROF_OTLP_INTERVAL", "100ms"), "MEMPROF_OTLP_INTERVAL=\"100ms\" is not a duration from 1s to 3600s"),
        (("MEMPROF_OTLP_INTERVAL", "15"), "MEMPROF_OTLP_INTERVAL=\"15\""),
    ];
    for (variable, said) in cases {
        let error = read_from(&[endpoint, variable]).unwrap_err();
        assert!(error.contains(said), "{variable:?}: {error}");
    }
    assert!(read_from(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")]).is_ok());
}

/// What would fail every push, or contradict the client, is refused at start instead: header names that
/// are not HTTP tokens, the client's own headers, endpoints that are not URLs, a service name with a
/// control character. Each names its variable, and the push is off.
#[test]
fn what_would_fail_every_push_is_refused_at_start() {
    let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
    for (headers, said) in [
        ("Host=evil.example,Content-Length=5", "Host is the client's own header"),
        ("content-type=text/plain", "content-type is the client's own header"),
        ("Transfer-Encoding=chunked", "the client's own"),
        ("Connection=close", "the client's own"),
        ("Content-Encoding=br", "the client's own"),
        ("bad key=v", "\"bad key\" is not a header name"),
        ("k%3Ax=v", "\"k:x\" is not a header name"),
    ] {
        let error = read_from(&[endpoint, ("OTEL_EXPORTER_OTLP_HEADERS", headers)]).unwrap_err();
        assert!(error.starts_with("OTEL_EXPORTER_OTLP_HEADERS=") && error.contains(said), "{headers}: {error}");
        assert!(error.ends_with(NOT_PUSHED), "{error}");
    }
    let fine = read_from(&[endpoint, ("OTEL_EXPORTER_OTLP_HEADERS", "X-Scope-OrgID=tenant%201,api-key=k")]);
    assert_eq!(
        fine.unwrap().unwrap().headers,
        [("X-Scope-OrgID".to_owned(), "tenant 1".to_owned()), ("api-key".to_owned(), "k".to_owned())]
    );
    for wrong in ["http://h/a b", "http://", "ftp://c:21", "https:///path", "http://c:4318/\u{7f}"] {
        let error = read_from(&[("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", wrong)]).unwrap_err();
        assert!(error.contains("is not an http:// or https:// URL"), "{wrong}: {error}");
    }
    let named = read_from(&[endpoint, ("OTEL_SERVICE_NAME", "api\nInjected: 1")]).unwrap_err();
    assert!(named.contains("OTEL_SERVICE_NAME") && named.contains("control characters"), "{named}");
}
