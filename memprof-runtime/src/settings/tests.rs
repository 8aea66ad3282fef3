use std::collections::BTreeSet;
use std::os::unix::ffi::OsStringExt;

use super::*;
use crate::process::environment::ALL;

/// The settings of the default options and the environment `recorded`.
fn resolve(recorded: &[(&str, &str)]) -> Settings {
    resolve_with(&Options::default(), recorded)
}

fn resolve_with(options: &Options, recorded: &[(&str, &str)]) -> Settings {
    let reading = |name: &str| -> Option<OsString> {
        recorded.iter().find(|(key, value)| *key == name && !value.is_empty()).map(|(_, value)| (*value).into())
    };
    Settings::resolve(options, &reading, "server")
}

fn said(settings: &Settings) -> Vec<String> {
    settings.problems.iter().map(ToString::to_string).collect()
}

#[test]
fn with_nothing_set_every_setting_is_its_default() {
    let settings = resolve(&[]);
    assert!(!settings.switched_on && settings.token.is_none() && settings.built_in_server);
    assert_eq!(settings.address, crate::DEFAULT_ADDRESS);
    assert_eq!((settings.sampling, settings.scopes, settings.unwinder), (SamplingAsked::default(), None, None));
    assert_eq!((settings.budget, settings.record), (Some(Budget::DEFAULT), crate::sampler::record::DEFAULT_CAPACITY));
    assert_eq!((settings.automatic_dumps, settings.retention), (None, Retention::DEFAULT));
    assert_eq!(settings.profile_parent, ProfileParent { path: "/tmp".into(), named: false });
    assert_eq!((settings.whole_run, settings.final_dump, settings.push), (None, None, None));
    assert_eq!(settings.service, [("service.name".to_owned(), "unknown_service:server".to_owned())]);
    assert_eq!(settings.problems, []);
}

#[test]
fn the_environment_wins_over_the_program_and_is_read_typed() {
    let options = Options::new().http("0.0.0.0:6060").env("PROFILING").token_env("SECRET").sampling(Sampling::OnDemand);
    let settings = resolve_with(
        &options,
        &[
            ("PROFILING", "true"),
            ("LIBPROCESS_MEMORY_PROFILING", "false"),
            ("SECRET", "s3cret"),
            ("MEMPROF_HTTP", "127.0.0.1:7070"),
            ("MEMPROF_ADDR", "127.0.0.1:8080"),
            ("MEMPROF_SAMPLING", "continuous"),
            ("MEMPROF_UNWINDER", "libgcc"),
            ("MEMPROF_SCOPES", "false"),
            ("MEMPROF_RECORD_OBJECTS", "4096"),
            ("MEMPROF_DUMP_EVERY", "1 GB"),
            ("MEMPROF_DUMP_AT_RESIDENT", "90%"),
            ("MEMPROF_DUMP_KEEP", "3"),
            ("MEMPROF_DIR", "/var/lib/profiles"),
            ("TMPDIR", "/elsewhere"),
        ],
    );
    assert!(settings.switched_on, "the program's own switch");
    assert_eq!((settings.token.as_deref(), settings.address.as_str()), (Some("s3cret"), "127.0.0.1:7070"));
    assert_eq!(
        settings.sampling,
        SamplingAsked { variable: Some(Sampling::Continuous), program: Some(Sampling::OnDemand) }
    );
    assert_eq!((settings.unwinder, settings.scopes), (Some(WalkAsked::Libgcc), Some(false)));
    assert_eq!(settings.record, Capacity::for_objects(4096));
    assert_eq!(
        settings.automatic_dumps,
        Some(DumpTriggers { every: Some(1_000_000_000), high_water_step: None, resident_share: Some(0.9) })
    );
    assert_eq!(settings.retention, Retention { keep: 3, max_bytes: 256 << 20 });
    assert_eq!(settings.profile_parent, ProfileParent { path: "/var/lib/profiles".into(), named: true });
    assert_eq!(settings.problems, []);
}

#[test]
fn the_older_name_of_a_variable_is_read_and_said() {
    let older = resolve(&[("MEMPROF_ADDR", "127.0.0.1:8080")]);
    assert_eq!(older.address, "127.0.0.1:8080");
    assert_eq!(
        said(&older),
        ["MEMPROF_ADDR is the older name of MEMPROF_HTTP: it is read while MEMPROF_HTTP is unset; rename it"]
    );
    assert!(!older.problems[0].is_error());
}

#[test]
fn a_whole_run_has_no_budget_unless_one_is_asked_for() {
    assert_eq!(resolve(&[("MEMPROF_WHOLE_RUN", "/out")]).budget, None, "a run asked for is sampled whole");
    let asked = resolve(&[("MEMPROF_WHOLE_RUN", "/out"), ("MEMPROF_SAMPLING_BUDGET", "2%")]);
    assert_eq!(asked.budget, Budget::parse("2%").unwrap());
    assert_eq!(resolve(&[("MEMPROF_SAMPLING_BUDGET", "off")]).budget, None);
    let malformed = resolve(&[("MEMPROF_WHOLE_RUN", "/out"), ("MEMPROF_SAMPLING_BUDGET", "lots")]);
    assert_eq!(malformed.budget, Some(Budget::DEFAULT), "a malformed budget is the default, said");
}

#[test]
fn every_malformed_value_is_said_alike_and_its_default_kept() {
    let cases = [
        ("LIBPROCESS_MEMORY_PROFILING", "yes", "`true` or `false`; heap profiling endpoints are not served"),
        ("MEMPROF_SAMPLING", "always", "`continuous` or `on-demand`; it is ignored"),
        ("MEMPROF_SCOPES", "maybe", "`true` or `false`; scope! blocks profile nothing"),
        ("MEMPROF_UNWINDER", "fast", "`unwind-tables` or `libgcc`; samples walk the stack as memprof chooses"),
        ("MEMPROF_RECORD_OBJECTS", "10", "a count from 1024 to 16777216; the record holds 65536 objects"),
        ("MEMPROF_DUMP_EVERY", "lots", "a size such as 1GiB; it is ignored"),
        ("MEMPROF_DUMP_HIGH_WATER", "10", "a percentage from 0.1% to 1000%, such as 10%; it is ignored"),
        ("MEMPROF_DUMP_AT_RESIDENT", "120%", "a percentage from 0.1% to 100%, such as 90%; it is ignored"),
        ("MEMPROF_DUMP_KEEP", "0", "a count from 1 to 65535; 8 are kept"),
        ("MEMPROF_DUMP_MAX_BYTES", "-1", "a size such as 256MiB; 256 MiB are kept"),
        (
            "MEMPROF_SAMPLING_BUDGET",
            "lots",
            "a share of one core above 0 and at most 100 % (such as `0.5%`), nor `off`; the budget is 0.5 % of a core",
        ),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "novalue",
            "`key=value,...` pairs (\"novalue\" is not key=value); profiles name the service unknown_service:server",
        ),
    ];
    for (name, value, rest) in cases {
        let settings = resolve(&[(name, value)]);
        assert_eq!(said(&settings), [format!("{name}={value:?} is not {rest}")], "{name}");
        let defaults = resolve(&[]);
        assert_eq!(Settings { problems: Vec::new(), ..settings }, defaults, "{name}: the default kept");
    }
    let otlp = resolve(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
    assert_eq!(otlp.push, None);
    assert!(said(&otlp)[0].starts_with("OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\" is not `http/protobuf`"), "{otlp:?}");
    assert!(said(&otlp)[0].ends_with("; heap profiles are not pushed over OTLP"), "{otlp:?}");
}

#[test]
fn text_that_is_not_utf8_is_said_and_a_path_may_be_any_bytes() {
    let bytes = || OsString::from_vec(b"/\xff\xfe".to_vec());
    let reading = |name: &str| (name == "MEMPROF_SAMPLING" || name == "MEMPROF_FINAL_DUMP").then(bytes);
    let settings = Settings::resolve(&Options::default(), &reading, "server");
    assert_eq!(settings.sampling.variable, None);
    assert_eq!(said(&settings), ["MEMPROF_SAMPLING=\"/\u{fffd}\u{fffd}\" is not UTF-8 text; it is ignored"]);
    assert_eq!(settings.final_dump, Some(PathBuf::from(bytes())));
}

#[test]
fn a_token_that_is_not_text_refuses_every_request_rather_than_none() {
    let reading = |name: &str| (name == "MEMPROF_TOKEN").then(|| OsString::from_vec(b"\xff".to_vec()));
    let settings = Settings::resolve(&Options::default(), &reading, "server");
    assert_eq!(settings.token.as_deref(), Some("\n"), "a token no header can carry");
    assert_eq!(said(&settings), ["MEMPROF_TOKEN=\"\u{fffd}\" is not UTF-8 text; every request is refused"]);
}

/// Every variable of the environment's list is read by the resolution (or by the symbolizing, debuginfod's),
/// and nothing else is: the list (and docs/configuration.md, checked against it by tests/documentation.rs)
/// and [`Settings`] stay one.
#[test]
fn the_settings_read_every_listed_variable_and_no_other() {
    let mut read: BTreeSet<String> = sources::names_read().into_iter().collect();
    read.extend(memprof_analysis::DEBUGINFOD_VARIABLES.map(str::to_owned));
    let listed: BTreeSet<String> = ALL.iter().map(|variable| variable.name.to_owned()).collect();
    assert_eq!(read, listed);
}

/// With nothing asking for profiling memprof says nothing; anything that asks (or a setting set wrongly)
/// makes it say everything;
/// `MEMPROF_LOG` says how much, whatever is asked; a level that is not one is said, and the default stands.
#[test]
fn memprof_speaks_where_profiling_is_asked_for_or_memprof_log_says() {
    use log::LevelFilter::{Info, Off, Warn};
    assert_eq!(resolve(&[]).said_up_to(), Off, "the switch unset: a command-line tool");
    assert_eq!(resolve(&[("MEMPROF_SCOPES", "false"), ("MEMPROF_SAMPLING", "on-demand")]).said_up_to(), Off);
    for asking in [
        ("LIBPROCESS_MEMORY_PROFILING", "true"),
        ("MEMPROF_WHOLE_RUN", "/var/tmp/run"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
        ("MEMPROF_DUMP_AT_RESIDENT", "90%"),
        ("MEMPROF_SAMPLING", "continuous"),
        ("MEMPROF_SCOPES", "true"),
    ] {
        assert_eq!(resolve(&[asking]).said_up_to(), Info, "{asking:?}");
    }
    assert_eq!(resolve(&[("LIBPROCESS_MEMORY_PROFILING", "yes")]).said_up_to(), Info, "a switch set wrongly");
    assert_eq!(resolve(&[("MEMPROF_LOG", "WARN")]).said_up_to(), Warn);
    assert_eq!(resolve(&[("MEMPROF_LOG", "off"), ("LIBPROCESS_MEMORY_PROFILING", "true")]).said_up_to(), Off);
    let wrong = resolve(&[("MEMPROF_LOG", "loud"), ("LIBPROCESS_MEMORY_PROFILING", "true")]);
    assert_eq!(wrong.said_up_to(), Info);
    assert_eq!(
        said(&wrong),
        ["MEMPROF_LOG=\"loud\" is not `off`, `error`, `warn` or `info`; memprof speaks where profiling is asked for"]
    );
}

/// A path setting that is blank is unset; one that is not a path (a number, words, a line break) is said
/// and ignored, never made a directory in the working directory; a path is taken as it is, any bytes.
#[test]
fn path_settings_take_paths_and_say_what_is_not_one() {
    assert_eq!(resolve(&[("MEMPROF_WHOLE_RUN", " ")]).whole_run, None);
    assert_eq!(said(&resolve(&[("MEMPROF_WHOLE_RUN", " ")])), Vec::<String>::new());
    for wrong in ["-1", "0", "5 parsecs", "/tmp/10\n20", "runs"] {
        let settings = resolve(&[("MEMPROF_WHOLE_RUN", wrong)]);
        assert_eq!(settings.whole_run, None, "{wrong:?}");
        let problems = said(&settings);
        assert!(
            problems.len() == 1
                && problems[0].starts_with("MEMPROF_WHOLE_RUN=")
                && problems[0].ends_with("; no whole run is kept"),
            "{wrong:?}: {problems:?}"
        );
    }
    for right in ["/var/tmp/run", "./runs", "../runs"] {
        assert_eq!(resolve(&[("MEMPROF_WHOLE_RUN", right)]).whole_run, Some(right.into()), "{right}");
    }
    let elsewhere = resolve(&[("MEMPROF_DIR", "profiles"), ("TMPDIR", "/var/tmp"), ("MEMPROF_FINAL_DUMP", "1")]);
    assert_eq!(elsewhere.profile_parent, ProfileParent { path: "/var/tmp".into(), named: false });
    assert_eq!((&elsewhere.final_dump, said(&elsewhere).len()), (&None, 2), "{:?}", said(&elsewhere));
    let reading = |name: &str| (name == "MEMPROF_DIR").then(|| OsString::from_vec(b"/srv/\xffprofiles".to_vec()));
    let bytes = Settings::resolve(&Options::default(), &reading, "server");
    assert_eq!(bytes.profile_parent.path.as_os_str().len(), 14, "not UTF-8, and a path all the same");
}
