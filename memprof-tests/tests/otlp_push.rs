//! The OTLP push against the real OpenTelemetry Collector (memprof-tests/go/collector, built from its
//! modules): what the Collector's receiver took, read back by the Collector's own pdata
//! (memprof-tests/go/otlpcheck); the push when the Collector refuses, throttles or never answers; and a
//! program that ends by itself pushing its last profile.

use std::time::{Duration, Instant};

use memprof_tests::collector::Collector;
use memprof_tests::process::{PATIENCE, Program, built_binary};
use memprof_tests::tools::{self, Scratch};
use memprof_tests::waiting::wait_until;

const MIB: f64 = (1 << 20) as f64;

/// What pdata reads in an export the Collector received.
fn read(export: &std::path::Path) -> Option<tools::OtlpSummary> {
    tools::otlpcheck(&std::fs::read(export).unwrap())
}

/// The service's GNU build id, in hexadecimal.
fn build_id_of_the_service() -> String {
    let program = std::fs::read(built_binary("service")).unwrap();
    let file = object::File::parse(&*program).unwrap();
    object::Object::build_id(&file).unwrap().expect("a GNU build id").iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The example service pushes every second, gzip-compressed, with the SDK's variables: each export the
/// Collector took holds the four sample types over its interval, the resource the variables name, the
/// header they add, the service's build id, the 16 MiB its sessions hold (within sampling error, sampled
/// every 64 KiB with no budget), split by tenant 3:1, and what the interval allocated.
#[test]
fn the_example_service_pushes_each_intervals_profiles_to_the_real_collector() {
    let Some(collector) = Collector::start() else { return };
    let service = Program::service()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .env("OTEL_SERVICE_NAME", "checkout")
        .env("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test,service.name=overridden")
        .env("OTEL_EXPORTER_OTLP_HEADERS", "X-Scope-OrgID=tenant-7")
        .env("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
        .env("MEMPROF_OTLP_INTERVAL", "1secs")
        .env("MEMPROF_SAMPLING_BUDGET", "off")
        .env("MALLOC_CONF", "lg_prof_sample:16")
        .spawn();
    let exports = collector.wait_for_exports(3);
    // The intervals follow each other without a gap or an overlap, however long each took to make.
    let times: Vec<(u64, u64)> = exports
        .iter()
        .filter_map(|export| read(export))
        .map(|summary| (summary.profiles[0].time_unix_nano, summary.profiles[0].duration_nano))
        .collect();
    for pair in times.windows(2) {
        assert_eq!(pair[0].0 + pair[0].1, pair[1].0, "{times:?}");
        assert!(pair[0].1 > 0, "{times:?}");
    }
    let build_id = build_id_of_the_service();
    for export in &exports[1..3] {
        assert_eq!(collector.tenant_of(export), "tenant-7");
        let Some(summary) = read(export) else { return };
        let resource = |key: &str| summary.resource.get(key).map(String::as_str);
        assert_eq!(resource("service.name"), Some("checkout"), "{summary:?}");
        assert_eq!(resource("deployment.environment"), Some("test"), "{summary:?}");
        assert_eq!(resource("process.pid"), Some(service.pid().to_string().as_str()), "{summary:?}");
        assert_eq!(resource("process.executable.name"), Some("service"), "{summary:?}");
        assert!(resource("memprof.version").is_some(), "{summary:?}");
        let profiles = &summary.profiles;
        let types: Vec<String> = profiles.iter().map(|profile| format!("{}/{}", profile.kind, profile.unit)).collect();
        assert_eq!(types, ["alloc_objects/count", "alloc_space/bytes", "inuse_objects/count", "inuse_space/bytes"]);
        for profile in profiles {
            assert_eq!(profile.period, 65536, "{profile:?}");
            let attribute = |key: &str| profile.attributes.get(key).map(String::as_str);
            assert_eq!(attribute("memprof.sampling.interval_bytes.configured"), Some("65536"), "{profile:?}");
            assert_eq!(attribute("memprof.sampling.budget_share"), None, "no budget: {profile:?}");
            // The record started with the service: what is in use is calibrated by size class.
            assert_eq!(attribute("memprof.sampling.inuse.calibrated"), Some("size_class"), "{profile:?}");
            let unreached =
                attribute("memprof.sampling.inuse.unreached_bytes").and_then(|bytes| bytes.parse::<f64>().ok());
            assert!(unreached.is_some_and(|bytes| bytes < MIB), "{profile:?}");
            assert_eq!(
                (profile.time_unix_nano, profile.duration_nano),
                (profiles[0].time_unix_nano, profiles[0].duration_nano)
            );
        }
        assert!(summary.build_ids.contains(&build_id), "{summary:?}");
        // Its 64 KiB class (256 sessions, one being built) counted whole, some 160 samples reaching it; the
        // counts and the samples read a moment apart, as sessions are replaced every ~0.1 ms.
        let held = summary.of_function("inuse_space", "service::open_session") / MIB;
        assert!((15.5..16.5).contains(&held), "open_session holds 16 MiB: {held:.2} MiB: {summary:?}");
        let tenants = &summary.inuse_space_by_attribute;
        let tenant = |name: &str| tenants.get(name).copied().unwrap_or(0) as f64;
        let (acme, initech) = (tenant("tenant=acme"), tenant("tenant=initech"));
        assert!(acme > 1.5 * initech && initech > 0.0, "acme {acme}, initech {initech}");
        let allocated = summary.of_function("alloc_space", "service::open_session");
        assert!(allocated > 0.0, "{summary:?}");
    }
    let push = service.state().otlp_push.expect("state says the push");
    assert_eq!(push.endpoint, format!("{}/v1development/profiles", collector.endpoint()));
    assert!(push.sent >= 3 && push.sent_bytes > 0, "{push:?}");
    assert_eq!((push.refused, push.dropped, push.last_error.as_deref()), (0, 0, None), "{push:?}");
    let metrics = service.get("/metrics").text();
    assert!(metrics.contains("memprof_otlp_exports_total{outcome=\"sent\"} "), "{metrics}");
    if let Some(checked) = tools::promtool_check_metrics(&metrics) {
        assert!(checked.is_ok(), "{checked:?}");
    }
}

/// The Collector throttles (503 with Retry-After: the export is kept and sent once it takes again, and the
/// log says when exports work again), refuses (400: never sent again) and goes away; meanwhile the service
/// serves its endpoints, and `state` says what happened and why.
#[test]
fn a_collector_that_throttles_refuses_or_goes_away_is_said_and_never_stops_the_service() {
    let Some(collector) = Collector::start() else { return };
    collector.answer("unavailable 1");
    let service = Program::service()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .env("MEMPROF_OTLP_INTERVAL", "1secs")
        .spawn();
    let push = || service.state().otlp_push.expect("state says the push");
    wait_until("a retried export", PATIENCE, || {
        let push = push();
        if push.retried >= 2 { Ok(()) } else { Err(format!("{push:?}")) }
    });
    let throttled = push();
    assert!(throttled.last_error.as_deref().unwrap().contains("503"), "{throttled:?}");
    assert_eq!(throttled.sent, 0, "{throttled:?}");
    collector.answer("");
    collector.wait_for_exports(2);
    service.wait_for_line(|line| line.contains("Heap profiles are pushed to") && line.ends_with("again"));
    collector.answer("invalid");
    wait_until("a refused export", PATIENCE, || {
        let push = push();
        if push.refused >= 1 { Ok(()) } else { Err(format!("{push:?}")) }
    });
    assert!(push().last_error.unwrap().contains("400"), "{:?}", push());
    let received = collector.exports().len();
    drop(collector);
    let before = push();
    wait_until("a send to the stopped Collector", PATIENCE, || {
        let push = push();
        if push.retried > before.retried { Ok(push) } else { Err(format!("{push:?}")) }
    });
    let gone = push();
    assert!(gone.last_error.as_deref().unwrap().contains("no answer"), "{gone:?}");
    assert!(gone.sent >= received as u64 && gone.queued <= 8, "{gone:?}");
    assert_eq!(service.get("/memory-profiler/state").status, 200);
}

/// A program that ends by itself (the example with SERVICE_SECONDS) pushes its whole run once, as it
/// exits: one export, of the run's length, holding what it allocated. With a Collector that accepts the
/// connection and never answers, it exits within its exit deadline all the same, and says so.
#[test]
fn a_program_that_ends_pushes_its_last_profile_and_exits_on_time_when_no_collector_answers() {
    let Some(collector) = Collector::start() else { return };
    let mut job = Program::service()
        .env_remove("LIBPROCESS_MEMORY_PROFILING")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .env("MEMPROF_OTLP_INTERVAL", "1hrs")
        // Making the export symbolizes a debug build for the first time: slow on a loaded machine. The
        // program exits as soon as it is sent.
        .env("MEMPROF_OTLP_EXIT_TIMEOUT", "1mins")
        .env("SERVICE_SECONDS", "2")
        .spawn();
    assert!(job.wait(), "{:#?}", job.output());
    let exports = collector.exports();
    assert_eq!(exports.len(), 1, "{:#?}", job.output());
    let Some(summary) = read(&exports[0]) else { return };
    let seconds = summary.profiles[0].duration_nano as f64 / 1e9;
    assert!(seconds >= 2.0, "the whole run: {summary:?}");
    let allocated = summary.of_function("alloc_space", "service::open_session");
    assert!(allocated > 16.0 * MIB, "{summary:?}");

    // Connections are taken by the kernel's backlog, and never answered.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let started = Instant::now();
    let mut job = Program::service()
        .env_remove("LIBPROCESS_MEMORY_PROFILING")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{}", silent.local_addr().unwrap()))
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "60000")
        .env("MEMPROF_OTLP_EXIT_TIMEOUT", "1secs")
        .env("SERVICE_SECONDS", "1")
        .spawn();
    assert!(job.wait(), "{:#?}", job.output());
    // Far below the request's own 60 s: the exit deadline ended it.
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
    let said = job
        .output()
        .into_iter()
        .any(|line| line.contains(" not pushed to ") && line.contains("before the program ended"));
    assert!(said, "{:#?}", job.output());
}

/// A certificate authority of the test's own (openssl), and a certificate it signed for 127.0.0.1: the
/// CA's, the server's and the server's key, PEM files in `scratch`; `None` where openssl is missing.
fn private_ca(scratch: &Scratch) -> Option<[std::path::PathBuf; 3]> {
    let openssl = tools::find("openssl", "openssl")?;
    let paths =
        ["ca.pem", "ca.key", "server.pem", "server.key", "server.csr", "server.ext"].map(|name| scratch.join(name));
    let [ca, ca_key, server, server_key, request, extensions] =
        paths.clone().map(|path| path.to_str().unwrap().to_owned());
    std::fs::write(&extensions, "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n").unwrap();
    let key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    let commands = [
        format!("req -x509 {key} -keyout {ca_key} -out {ca} -days 1 -subj /CN=memprof-test-CA"),
        format!("req {key} -keyout {server_key} -out {request} -subj /CN=127.0.0.1"),
        format!(
            "x509 -req -in {request} -CA {ca} -CAkey {ca_key} -CAcreateserial -out {server} -days 1 -extfile {extensions}"
        ),
    ];
    for command in &commands {
        tools::run(&openssl, &command.split(' ').collect::<Vec<_>>(), &[]);
    }
    let [ca, _, server, server_key, ..] = paths;
    Some([ca, server, server_key])
}

/// The Collector serving TLS with a certificate of a private CA: a service told of the CA
/// (`OTEL_EXPORTER_OTLP_CERTIFICATE`) pushes to it; one that trusts the Mozilla roots alone does not, and
/// `state` says why.
#[test]
fn https_endpoints_are_trusted_through_the_sdks_certificate_variable() {
    let scratch = Scratch::new("tls");
    let Some([ca, certificate, key]) = private_ca(&scratch) else { return };
    let Some(collector) = Collector::start_tls(&certificate, &key) else { return };
    assert!(collector.endpoint().starts_with("https://"));
    let service = |trusting: bool| {
        let launch = Program::service()
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
            .env("MEMPROF_OTLP_INTERVAL", "1secs");
        if trusting { launch.env("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca) } else { launch }.spawn()
    };
    let (untrusting, trusting) = (service(false), service(true));
    let exports = collector.wait_for_exports(1);
    let Some(summary) = read(&exports[0]) else { return };
    assert_eq!(summary.resource.get("process.pid"), Some(&trusting.pid().to_string()), "{summary:?}");
    let refused = wait_until("the untrusting service to fail a push", PATIENCE, || {
        let push = untrusting.state().otlp_push.unwrap();
        if push.retried >= 1 { Ok(push) } else { Err(format!("{push:?}")) }
    });
    assert!(refused.last_error.as_deref().unwrap().contains("certificate"), "{refused:?}");
    assert_eq!(refused.sent, 0, "{refused:?}");
}

/// A Collector that takes connections and answers none (the kernel's backlog takes them): each export times
/// out (`OTEL_EXPORTER_OTLP_TIMEOUT`) and waits its turn again; exports made meanwhile queue up to eight, the
/// oldest then dropped and counted. The service serves on, `state` says why, and what memprof holds in its
/// own arena (`explain`'s `heap/profiler`) does not grow while exports keep being dropped.
#[test]
fn a_collector_that_never_answers_costs_a_bounded_queue_and_the_service_serves_on() {
    use memprof_wire::{Explanation, class};
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let service = Program::service()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{}", silent.local_addr().unwrap()))
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "300")
        .env("MEMPROF_OTLP_INTERVAL", "1secs")
        .spawn();
    let push = || service.state().otlp_push.expect("state says the push");
    let own = || {
        let explanation: Explanation = serde_json::from_value(service.get_json("/memory-profiler/explain")).unwrap();
        explanation.class(class::HEAP_PROFILER).map_or(0, |class| class.bytes)
    };
    let dropped_at_least = |dropped: u64| {
        wait_until("exports dropped from the full queue", PATIENCE, || {
            let push = push();
            if push.dropped >= dropped { Ok(push) } else { Err(format!("{push:?}")) }
        })
    };
    let full = dropped_at_least(1);
    let held = own();
    assert_eq!((full.sent, full.queued), (0, 8), "{full:?}");
    assert!(full.retried >= 1, "{full:?}");
    // The drop is counted; the reason said stays the run of failures' own.
    assert!(full.last_error.as_deref().is_some_and(|error| error.contains("no answer from")), "{full:?}");
    let later = dropped_at_least(full.dropped + 8);
    assert!(later.queued <= 8, "{later:?}");
    let grown = own().saturating_sub(held);
    assert!(grown < 2 << 20, "memprof's arena grew {grown} bytes while exports were dropped: {later:?}");
    assert_eq!(service.get("/memory-profiler/state").status, 200);
}

/// A collector that pushes back with one fixed answer (`head`, a status line and headers) to every request:
/// the requests it got, counted as they come.
struct PushingBack {
    address: std::net::SocketAddr,
    requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl PushingBack {
    fn start(head: &'static str) -> PushingBack {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let requests = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|read| read > 0) && line != "\r\n" {
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap_or(0);
                    }
                    line.clear();
                }
                let _ = reader.take(length).read_to_end(&mut Vec::new());
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ =
                    stream.write_all(format!("{head}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes());
            }
        });
        PushingBack { address, requests }
    }

    fn requests(&self) -> usize {
        self.requests.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Collectors that push back, each with its own service exporting every second: 429 with `Retry-After: 0`
/// (0 is not "now": memprof's backoff stands), 503 with `Retry-After: 120` (followed, whatever the queue
/// holds), 429 without one. Over 20 s memprof sends each at most 12, 2 and 12 requests (it sent 4,896 in 20 s
/// to the first when 0 meant now), and `state` and `/metrics` say the backoff in force.
#[test]
fn collectors_that_push_back_are_not_flooded() {
    let collectors = [
        ("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0", 12),
        ("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 120", 2),
        ("HTTP/1.1 429 Too Many Requests", 12),
    ]
    .map(|(head, most)| (PushingBack::start(head), most, head));
    let services: Vec<Program> = collectors
        .iter()
        .map(|(collector, ..)| {
            Program::service()
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{}", collector.address))
                .env("MEMPROF_OTLP_INTERVAL", "1secs")
                .spawn()
        })
        .collect();
    let started = Instant::now();
    wait_until("every collector to be tried", PATIENCE, || {
        let tried: Vec<usize> = collectors.iter().map(|(collector, ..)| collector.requests()).collect();
        if tried.iter().all(|&requests| requests > 0) { Ok(()) } else { Err(format!("{tried:?}")) }
    });
    std::thread::sleep(Duration::from_secs(20).saturating_sub(started.elapsed()));
    for ((collector, most, head), service) in collectors.iter().zip(&services) {
        let requests = collector.requests();
        println!("{head:?}: {requests} requests in 20 s");
        assert!((1..=*most).contains(&requests), "{head:?}: {requests} requests in 20 s");
        // A backoff ends the moment its retry goes (then `backoff_ms` is 0 until the answer starts the
        // next): read while one is in force, which is all but those moments.
        let push = wait_until("the backoff in force said", PATIENCE, || {
            let push = service.state().otlp_push.expect("state says the push");
            if push.backoff_ms > 0 { Ok(push) } else { Err(format!("{push:?}")) }
        });
        assert!(push.retried >= 1 && push.sent == 0, "{head:?}: {push:?}");
        let status = &head["HTTP/1.1 ".len()..][..3];
        assert!(push.last_error.as_deref().is_some_and(|why| why.contains(status)), "{head:?}: {push:?}");
        let metrics = service.get("/metrics").text();
        assert!(metrics.contains("\nmemprof_otlp_backoff_seconds "), "{metrics}");
    }
}

/// Headers that would contradict the client (`Host`, `Content-Length`: every push failed, retried forever)
/// are refused at start, said once with what is done instead, and no push runs, so none is ever sent.
#[test]
fn the_clients_own_headers_are_refused_at_start_and_never_sent() {
    let collector = PushingBack::start("HTTP/1.1 200 OK");
    let service = Program::service()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{}", collector.address))
        .env("OTEL_EXPORTER_OTLP_HEADERS", "Host=evil.example,Content-Length=5")
        .env("MEMPROF_OTLP_INTERVAL", "1secs")
        .spawn();
    let said = service.wait_for_line(|line| line.contains("OTEL_EXPORTER_OTLP_HEADERS="));
    assert!(
        said.starts_with("[memprof] ERROR ")
            && said.contains("Host is the client's own header")
            && said.ends_with("; heap profiles are not pushed over OTLP"),
        "{said}"
    );
    assert_eq!(service.state().otlp_push, None, "no push runs");
    assert_eq!(collector.requests(), 0);
}

/// Thinned through a storm, the exports say so: each profile's `memprof.sampling.*` attributes, read by the
/// Collector's pdata, give the budget, the configured interval and the longest in force since start-up
/// (its `period` stays the configured one: each sample weighs what the interval it was drawn at says).
#[test]
fn an_export_after_thinning_says_how_it_was_sampled() {
    let Some(collector) = Collector::start() else { return };
    let program = Program::windows()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .env("MEMPROF_OTLP_INTERVAL", "1secs")
        .spawn();
    program.wait_for_line(|line| line == "windows: ready");
    program.tell("storm 2 64 4", "windows: done storm 2 64 4");
    let thinned = program.state().sampling.budget.expect("a budget");
    assert!(thinned.most_thinned_by > 1, "{thinned:?}");
    let after = collector.exports().len() + 1;
    let exports = collector.wait_for_exports(after);
    let Some(summary) = read(&exports[after - 1]) else { return };
    for profile in &summary.profiles {
        let number =
            |key: &str| profile.attributes.get(key).unwrap_or_else(|| panic!("{key}: {profile:?}")).parse::<f64>();
        assert_eq!(number("memprof.sampling.interval_bytes.configured"), Ok(524288.0), "{profile:?}");
        assert_eq!(number("memprof.sampling.budget_share"), Ok(0.005), "{profile:?}");
        assert!(number("memprof.sampling.interval_bytes.most").unwrap() > 524288.0, "{profile:?}");
        assert!(number("memprof.sampling.thinned_seconds").unwrap() > 0.0, "{profile:?}");
        assert_eq!(profile.period, 524288, "{profile:?}");
    }
}
