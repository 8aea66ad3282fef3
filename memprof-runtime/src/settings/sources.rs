//! [`Settings::resolve`]: each setting read from its sources in the order they win (the environment over
//! the program's options, the program's options over the defaults), each value through its grammar, each
//! malformed one a [`Problem`] naming what is done instead. Pure: the environment comes as a reading.

use std::cell::RefCell;
#[cfg(test)]
use std::ffi::OsString;
use std::path::PathBuf;

use super::grammar::{self, Problem};
use super::options::Options;
use super::{DumpTriggers, EndOn, ProfileParent, Reading, Retention, SamplingAsked, Settings, otlp};
use crate::jemalloc::malloc_conf::JemallocVariables;
use crate::process::environment as variables;
use crate::sampler::budget::Budget;
use crate::sampler::record::table::Capacity;
use crate::sampler::record::{DEFAULT_CAPACITY, RECORD_OBJECTS_RANGE};

/// log2 of the mean bytes between samples of measured blocks where memprof was not started: 64 KiB.
const DEFAULT_MEASURE_LG_SAMPLE: u32 = 16;
use crate::sampler::sampling::Sampling;
use crate::stack_walk::WalkAsked;

/// What is read of one reading, and the problems met.
struct Reader<'a> {
    reading: Reading<'a>,
    problems: RefCell<Vec<Problem>>,
}

impl Reader<'_> {
    /// The value of `name` as a path ([`grammar::path`]: any bytes); blank is unset, and a value that is no
    /// path a problem saying `instead`.
    fn path(&self, name: &str, instead: &str) -> Option<PathBuf> {
        use std::os::unix::ffi::OsStrExt;
        let value = (self.reading)(name)?;
        let bytes = value.as_bytes();
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let path = grammar::path(bytes);
        if path.is_none() {
            let expected = "an absolute path (or one starting ./ or ../) without control characters";
            self.said(Problem::malformed(name, &value.to_string_lossy(), expected, instead));
        }
        path
    }

    /// The value of `name` as text; a value that is not UTF-8 is a problem.
    fn text(&self, name: &str, instead: &str) -> Option<String> {
        match (self.reading)(name)?.into_string() {
            Ok(text) => Some(text),
            Err(bytes) => {
                self.said(Problem::malformed(name, &bytes.to_string_lossy(), "UTF-8 text", instead));
                None
            }
        }
    }

    /// Keeps `problem`, to be said.
    fn said(&self, problem: Problem) {
        self.problems.borrow_mut().push(problem);
    }

    /// The value of `name` read by `parse`, else a problem saying `expected` and `instead`.
    fn parsed<T>(&self, name: &str, parse: impl FnOnce(&str) -> Option<T>, expected: &str, instead: &str) -> Option<T> {
        let text = self.text(name, instead)?;
        let parsed = parse(&text);
        if parsed.is_none() {
            self.said(Problem::malformed(name, &text, expected, instead));
        }
        parsed
    }
}

/// The token of a token variable set to bytes that are not text: one no request can send.
const UNSENDABLE_TOKEN: &str = "\n";

/// The words of the sampling mode, as `MEMPROF_SAMPLING`, the attribute and `state` say them.
const SAMPLING_WORDS: [(&str, Sampling); 2] =
    [(Sampling::Continuous.name(), Sampling::Continuous), (Sampling::OnDemand.name(), Sampling::OnDemand)];

/// The levels `MEMPROF_LOG` names.
const LOG_WORDS: [(&str, log::LevelFilter); 4] = [
    ("off", log::LevelFilter::Off),
    ("error", log::LevelFilter::Error),
    ("warn", log::LevelFilter::Warn),
    ("info", log::LevelFilter::Info),
];

/// The walks `MEMPROF_UNWINDER` names.
const WALK_WORDS: [(&str, WalkAsked); 2] = [("unwind-tables", WalkAsked::UnwindTables), ("libgcc", WalkAsked::Libgcc)];

impl Settings {
    /// The settings the program's `options` and the environment's `reading` give; `executable` names the
    /// service where the environment does not (`unknown_service:<executable>`, the SDK's rule).
    pub(crate) fn resolve(options: &Options, reading: Reading<'_>, executable: &str) -> Settings {
        let read = Reader { reading, problems: RefCell::new(Vec::new()) };
        let switched_on = read
            .parsed(&options.env, grammar::boolean, "`true` or `false`", "heap profiling endpoints are not served")
            .unwrap_or(false);
        // A token set but unreadable protects as a token does: no request can send a line break in a header.
        let token = read
            .text(&options.token_env, "every request is refused")
            .or_else(|| (read.reading)(&options.token_env).map(|_| UNSENDABLE_TOKEN.to_owned()));
        let address = read.text(variables::HTTP, "the program's address is served").or_else(|| {
            let older = read.text(variables::OLDER_HTTP, "the program's address is served")?;
            read.said(Problem::Renamed { older: variables::OLDER_HTTP, name: variables::HTTP });
            Some(older)
        });
        let address = address.unwrap_or(options.http.clone());
        let sampling = SamplingAsked {
            variable: read.parsed(
                variables::SAMPLING,
                |text| grammar::word(text, &SAMPLING_WORDS),
                &grammar::expected_words(&SAMPLING_WORDS),
                "it is ignored",
            ),
            program: options.sampling,
        };
        let whole_run = read.path(variables::WHOLE_RUN, "no whole run is kept");
        let scopes = read.parsed(
            variables::SCOPES,
            grammar::boolean,
            "`true` or `false`",
            if switched_on {
                "scope! blocks profile, as the endpoints' switch is on"
            } else {
                "scope! blocks profile nothing"
            },
        );
        let budget = match read.parsed(
            variables::SAMPLING_BUDGET,
            Budget::parse,
            "a share of one core above 0 and at most 100 % (such as `0.5%`), nor `off`",
            &format!("the budget is {} % of a core", Budget::DEFAULT.share() * 100.0),
        ) {
            Some(budget) => budget,
            None if whole_run.is_some() && (read.reading)(variables::SAMPLING_BUDGET).is_none() => None,
            None => Some(Budget::DEFAULT),
        };
        let record = read
            .parsed(
                variables::RECORD_OBJECTS,
                |text| grammar::count(text, RECORD_OBJECTS_RANGE),
                &format!("a count from {} to {}", RECORD_OBJECTS_RANGE.start(), RECORD_OBJECTS_RANGE.end()),
                &format!("the record holds {} objects", DEFAULT_CAPACITY.objects),
            )
            .map_or(DEFAULT_CAPACITY, |objects| Capacity::for_objects(objects as usize));
        let measure_lg_sample = read
            .parsed(
                variables::MEASURE_SAMPLE,
                |text| match text.trim() {
                    "off" => Some(None),
                    text => grammar::size(text).map(|bytes| Some(bytes.max(1).ilog2())),
                },
                "a size such as 64KiB (rounded down to a power of two), or off",
                "measured blocks are sampled every 64 KiB",
            )
            .unwrap_or(Some(DEFAULT_MEASURE_LG_SAMPLE));
        let unwinder = read.parsed(
            variables::UNWINDER,
            |text| grammar::word(text, &WALK_WORDS),
            &grammar::expected_words(&WALK_WORDS),
            "samples walk the stack as memprof chooses",
        );
        let automatic_dumps = dump_triggers(&read);
        let retention = Retention {
            keep: read
                .parsed(
                    variables::DUMP_KEEP,
                    |text| grammar::count(text, 1..=65_535),
                    "a count from 1 to 65535",
                    &format!("{} are kept", Retention::DEFAULT.keep),
                )
                .map_or(Retention::DEFAULT.keep, |keep| keep as usize),
            max_bytes: read
                .parsed(
                    variables::DUMP_MAX_BYTES,
                    grammar::size,
                    "a size such as 256MiB",
                    &format!("{} MiB are kept", Retention::DEFAULT.max_bytes >> 20),
                )
                .unwrap_or(Retention::DEFAULT.max_bytes),
        };
        let profile_parent = match read.path(variables::DIRECTORY, "profile directories are made in TMPDIR") {
            Some(path) => ProfileParent { path, named: true },
            None => ProfileParent {
                path: read.path("TMPDIR", "profile directories are made in /tmp").unwrap_or_else(|| "/tmp".into()),
                named: false,
            },
        };
        let final_dump = read.path(variables::FINAL_DUMP, "no final dump is left");
        let unnamed = format!("unknown_service:{executable}");
        let service = crate::process::resource::service_attributes(|name| read.text(name, "it is ignored"), &unnamed)
            .unwrap_or_else(|malformed| {
                let instead = format!("profiles name the service {unnamed}");
                read.said(Problem::malformed(malformed.name, &malformed.value, &malformed.expected, &instead));
                vec![("service.name".to_owned(), unnamed.clone())]
            });
        let push = otlp::read(|name| read.text(name, otlp::NOT_PUSHED), &service).unwrap_or_else(|problem| {
            read.said(problem);
            None
        });
        let log = read.parsed(
            variables::LOG,
            |text| grammar::word(&text.to_ascii_lowercase(), &LOG_WORDS),
            &grammar::expected_words(&LOG_WORDS),
            "memprof speaks where profiling is asked for",
        );
        let jemalloc_variables = JemallocVariables {
            unprefixed: read.text(variables::MALLOC_CONF, "it is ignored"),
            prefixed: read.text(variables::PREFIXED_MALLOC_CONF, "it is ignored"),
        };
        Settings {
            switched_on,
            token,
            token_variable: options.token_env.clone(),
            address,
            built_in_server: options.built_in_server,
            keep_runs: options.keep_runs as usize,
            end_on: EndOn { sigterm: options.dump_on_sigterm, sigint: options.dump_on_sigint },
            sampling,
            whole_run,
            scopes,
            budget,
            record,
            measure_lg_sample,
            unwinder,
            automatic_dumps,
            retention,
            profile_parent,
            final_dump,
            push,
            service,
            jemalloc_variables,
            log,
            problems: read.problems.into_inner(),
        }
    }
}

/// The automatic dumps the environment asks for, `None` when it asks for none.
fn dump_triggers(read: &Reader<'_>) -> Option<DumpTriggers> {
    let triggers = DumpTriggers {
        every: read.parsed(variables::DUMP_EVERY, grammar::size, "a size such as 1GiB", "it is ignored"),
        high_water_step: read.parsed(
            variables::DUMP_HIGH_WATER,
            |text| grammar::percent(text, 0.001..=10.0),
            "a percentage from 0.1% to 1000%, such as 10%",
            "it is ignored",
        ),
        resident_share: read.parsed(
            variables::DUMP_AT_RESIDENT,
            |text| grammar::percent(text, 0.001..=1.0),
            "a percentage from 0.1% to 100%, such as 90%",
            "it is ignored",
        ),
    };
    (triggers.every.is_some() || triggers.high_water_step.is_some() || triggers.resident_share.is_some())
        .then_some(triggers)
}

/// Every variable a resolution reads, in the order it reads them, with the program's two named as the
/// defaults name them: for the test that keeps [`variables::ALL`] and [`Settings`] one list.
#[cfg(test)]
pub(super) fn names_read() -> Vec<String> {
    let asked = std::cell::RefCell::new(Vec::new());
    // An endpoint set: the push's every variable is read too.
    let reading = |name: &str| -> Option<OsString> {
        asked.borrow_mut().push(name.to_owned());
        (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://collector:4318".into())
    };
    Settings::resolve(&Options::default(), &reading, "test");
    asked.into_inner()
}
