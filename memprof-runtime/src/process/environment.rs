//! Every environment variable memprof reads, in one place, with what it does; and the only reading of them.
//! docs/configuration.md's table of variables is checked against [`ALL`] by a test
//! (`memprof-tests/tests/documentation.rs`), so neither can name a variable the other does not.
//!
//! The environment is read once, the first time memprof needs any of it: every variable of [`ALL`] and
//! every other `MEMPROF_*` (a misspelt one is reported), taken together; the settings are resolved from
//! that reading, once (by the runtime's settings), so a setting needed late (the profile root at the first run,
//! `MEMPROF_FINAL_DUMP` at the end) agrees with those read at start-up, whatever the program did to its
//! environment meanwhile. The two variables a program names itself (its switch and its token,
//! `#[memprof::main(env = ..)]`) are read at that resolution too.
//!
//! ```
//! let names: Vec<&str> = memprof_runtime::environment::ALL.iter().map(|variable| variable.name).collect();
//! assert!(names.contains(&"MEMPROF_HTTP"));
//! ```

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::sync::LazyLock;

/// A variable and what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable {
    /// Its name.
    pub name: &'static str,
    /// What it does, in one sentence.
    pub meaning: &'static str,
}

/// Switches the built-in server on with `true` (unless the program names another variable).
pub const SWITCH: &str = "LIBPROCESS_MEMORY_PROFILING";
/// The built-in server's address, overriding the program's (the attribute's `http`).
pub const HTTP: &str = "MEMPROF_HTTP";
/// The older name of [`HTTP`], read while that is unset (and said).
pub const OLDER_HTTP: &str = "MEMPROF_ADDR";
/// The access token (unless the program names another variable).
pub const TOKEN: &str = "MEMPROF_TOKEN";
/// Where a run still active at the end leaves its profile.
pub const FINAL_DUMP: &str = "MEMPROF_FINAL_DUMP";
/// Where profile directories are made.
pub const DIRECTORY: &str = "MEMPROF_DIR";
/// `libgcc`: samples walk the stack with libgcc even where frame pointers would do.
pub const UNWINDER: &str = "MEMPROF_UNWINDER";
/// A dump each time this many bytes were allocated.
pub const DUMP_EVERY: &str = "MEMPROF_DUMP_EVERY";
/// A dump at each new high-water mark this much above the last.
pub const DUMP_HIGH_WATER: &str = "MEMPROF_DUMP_HIGH_WATER";
/// A dump when the resident set crosses this share of the memory limit.
pub const DUMP_AT_RESIDENT: &str = "MEMPROF_DUMP_AT_RESIDENT";
/// How many automatic dumps are kept.
pub const DUMP_KEEP: &str = "MEMPROF_DUMP_KEEP";
/// How many bytes of automatic dumps are kept.
pub const DUMP_MAX_BYTES: &str = "MEMPROF_DUMP_MAX_BYTES";
/// `continuous` or `on-demand`: how sampling runs, over the program's choice.
pub const SAMPLING: &str = "MEMPROF_SAMPLING";
/// A directory where the whole run's profiles are kept when the program exits.
pub const WHOLE_RUN: &str = "MEMPROF_WHOLE_RUN";
/// `true` or `false`: whether `scope!` blocks profile, over the endpoints' switch.
pub const SCOPES: &str = "MEMPROF_SCOPES";
/// `off`, `error`, `warn` or `info`: the most detailed of memprof's messages said (on stderr, or through the
/// program's logger).
pub const LOG: &str = "MEMPROF_LOG";
/// The share of one core continuous sampling may take before it is thinned, or `off`.
pub const SAMPLING_BUDGET: &str = "MEMPROF_SAMPLING_BUDGET";
/// How many live sampled objects the continuous record holds.
pub const RECORD_OBJECTS: &str = "MEMPROF_RECORD_OBJECTS";
/// The mean bytes between samples while `memprof::measure` runs in a program that did not start memprof.
pub const MEASURE_SAMPLE: &str = "MEMPROF_MEASURE_SAMPLE";
/// How often the interval's heap profiles are pushed over OTLP.
pub const OTLP_INTERVAL: &str = "MEMPROF_OTLP_INTERVAL";
/// How long an ending program waits for its last OTLP push.
pub const OTLP_EXIT_TIMEOUT: &str = "MEMPROF_OTLP_EXIT_TIMEOUT";
/// jemalloc's own configuration, read by unprefixed builds (Linux).
pub const MALLOC_CONF: &str = crate::jemalloc::malloc_conf::CONFIG_VARIABLES[0];
/// jemalloc's own configuration, read by prefixed builds (Apple, Android, DragonFly).
pub const PREFIXED_MALLOC_CONF: &str = crate::jemalloc::malloc_conf::CONFIG_VARIABLES[1];

/// Every variable memprof reads.
pub const ALL: &[Variable] = &[
    Variable { name: SWITCH, meaning: "`true` serves the built-in endpoints (the program may name another variable)" },
    Variable { name: HTTP, meaning: "the built-in server's address, over the program's own (the attribute's `http`)" },
    Variable {
        name: OLDER_HTTP,
        meaning: "the older name of `MEMPROF_HTTP`: read while that is unset, and said at start",
    },
    Variable { name: TOKEN, meaning: "the token every request must send (the program may name another variable)" },
    Variable {
        name: LOG,
        meaning: "`off`, `error`, `warn` or `info`: the messages memprof says (default `info` where profiling is asked for, `off` where nothing is: the switch off, no other setting)",
    },
    Variable { name: FINAL_DUMP, meaning: "where a run still active when the program ends leaves its profile" },
    Variable { name: DIRECTORY, meaning: "where profile directories are made (else TMPDIR, else /tmp)" },
    Variable { name: "TMPDIR", meaning: "where profile directories are made without MEMPROF_DIR" },
    Variable {
        name: "DEBUGINFOD_URLS",
        meaning: "debuginfod servers (space-separated base URLs) asked by build id for a stripped binary's debug info",
    },
    Variable {
        name: "DEBUGINFOD_CACHE_PATH",
        meaning: "where debug info from debuginfod servers is kept (else $XDG_CACHE_HOME/debuginfod_client, else ~/.cache/debuginfod_client)",
    },
    Variable { name: "DEBUGINFOD_TIMEOUT", meaning: "seconds a debuginfod server may take to answer (default 30)" },
    Variable {
        name: "DEBUGINFOD_MAXSIZE",
        meaning: "the largest debug file downloaded from a debuginfod server, in bytes (default 4 GiB)",
    },
    Variable {
        name: UNWINDER,
        meaning: "`unwind-tables` or `libgcc`: how samples walk the stack, whatever frame pointers allow",
    },
    Variable { name: DUMP_EVERY, meaning: "an automatic dump each time this many bytes were allocated" },
    Variable {
        name: DUMP_HIGH_WATER,
        meaning: "an automatic dump at each new high-water mark this much above the last",
    },
    Variable {
        name: DUMP_AT_RESIDENT,
        meaning: "an automatic dump when the resident set crosses this share of the limit",
    },
    Variable {
        name: DUMP_KEEP,
        meaning: "how many automatic dumps are kept, and how many profiles of earlier processes",
    },
    Variable {
        name: DUMP_MAX_BYTES,
        meaning: "how many bytes of automatic dumps are kept, and of profiles of earlier processes",
    },
    Variable {
        name: SAMPLING,
        meaning: "`continuous` (sampling always on, runs are windows: the default with the switch on) or `on-demand` (sampling only during runs: the default with the switch off), over the program's choice",
    },
    Variable {
        name: SAMPLING_BUDGET,
        meaning: "the share of one core continuous sampling may take, such as `2%` (default `0.5%`, none for a whole run; `off`: no bound)",
    },
    Variable {
        name: MEASURE_SAMPLE,
        meaning: "the mean bytes between samples of measured blocks in a program that did not start memprof (a test binary), for the stacks a broken heap budget names (default 64KiB; `off`: no stacks)",
    },
    Variable {
        name: RECORD_OBJECTS,
        meaning: "how many live sampled objects the continuous record holds (default 65536; 32 bytes each)",
    },
    Variable {
        name: WHOLE_RUN,
        meaning: "a directory: sampling from start-up, and at exit the whole run's profiles (and automatic dumps) kept there",
    },
    Variable {
        name: SCOPES,
        meaning: "`true` or `false`: whether `scope!` blocks profile (else they do when the endpoints' switch is on)",
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_ENDPOINT",
        meaning: "an OTLP/HTTP base URL: heap profiles are pushed to its `/v1development/profiles`, sampled from start-up",
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT",
        meaning: "the full URL heap profiles are pushed to, over the base endpoint",
    },
    Variable { name: "OTEL_EXPORTER_OTLP_HEADERS", meaning: "`key=value,...` headers each push sends" },
    Variable { name: "OTEL_EXPORTER_OTLP_TIMEOUT", meaning: "milliseconds a push may take (default 10000)" },
    Variable { name: "OTEL_EXPORTER_OTLP_COMPRESSION", meaning: "`gzip` or `none` (the default) for pushed bodies" },
    Variable {
        name: "OTEL_EXPORTER_OTLP_PROTOCOL",
        meaning: "only `http/protobuf` is pushed; another value is an error and nothing is pushed",
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_PROFILES_HEADERS",
        meaning: "headers each push sends, over `OTEL_EXPORTER_OTLP_HEADERS`",
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT",
        meaning: "milliseconds a push may take, over `OTEL_EXPORTER_OTLP_TIMEOUT`",
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION",
        meaning: "`gzip` or `none` for pushed bodies, over `OTEL_EXPORTER_OTLP_COMPRESSION`",
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL",
        meaning: "the push's protocol, over `OTEL_EXPORTER_OTLP_PROTOCOL` (only `http/protobuf`)",
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_CERTIFICATE",
        meaning: "a PEM file of the certificates an https endpoint is trusted by (a private CA), in place of the Mozilla roots",
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE",
        meaning: "the same for profiles alone, over `OTEL_EXPORTER_OTLP_CERTIFICATE`",
    },
    Variable { name: "OTEL_SERVICE_NAME", meaning: "the pushed profiles' `service.name`" },
    Variable {
        name: "OTEL_RESOURCE_ATTRIBUTES",
        meaning: "`key=value,...` attributes of the pushed profiles' resource",
    },
    Variable { name: OTLP_INTERVAL, meaning: "how often heap profiles are pushed, such as `30secs` (default 15 s)" },
    Variable {
        name: OTLP_EXIT_TIMEOUT,
        meaning: "how long an ending program waits for its last push, such as `2secs` (default 5 s)",
    },
    Variable { name: MALLOC_CONF, meaning: "jemalloc's configuration; memprof reports what it changes" },
    Variable {
        name: PREFIXED_MALLOC_CONF,
        meaning: "jemalloc's configuration in prefixed builds; reported when ignored",
    },
];

/// The prefix of memprof's own variables: one with it near a name of [`ALL`] is a misspelling, reported.
pub(crate) const PREFIX: &str = "MEMPROF_";

/// The variables memprof reads, as the environment held them when first needed: a few hundred bytes, made
/// where the first reader allocates (the program's main thread at start-up, unsampled), not moved to
/// memprof's arena: that move flushes the thread's cache twice, a sixth of what a start with the switch
/// off costs.
static READ: LazyLock<HashMap<OsString, OsString>> = LazyLock::new(|| {
    std::env::vars_os()
        .filter(|(name, _)| {
            name.to_str().is_some_and(|name| name.starts_with(PREFIX) || ALL.iter().any(|known| known.name == name))
        })
        .collect()
});

/// The value of variable `name`, when set and not empty: one of [`ALL`] as the one reading holds it, another
/// (the switch and the token the program names itself, `#[memprof::main(env = ..)]`) as it is now. Only
/// the settings' resolution calls it ([`crate::settings`]).
pub(crate) fn read(name: &str) -> Option<OsString> {
    let value = if ALL.iter().any(|known| known.name == name) {
        READ.get(OsStr::new(name)).cloned()
    } else {
        std::env::var_os(name)
    };
    value.filter(|value| !value.is_empty())
}

/// Whether `test` holds for any variable set (its name and value, as bytes), the environment scanned in place:
/// nothing copied, nothing allocated. For the one judgment made before the environment is read (whether a
/// program asks anything of memprof at all, [`crate::settings`]): a command-line tool run with the switch
/// off pays this scan alone.
#[allow(unsafe_code)]
#[inline]
pub(crate) fn any_set(mut test: impl FnMut(&[u8], &[u8]) -> bool) -> bool {
    unsafe extern "C" {
        /// The process's environment, as `getenv` reads it: `NAME=value` strings, a null pointer last.
        static environ: *const *const std::ffi::c_char;
    }
    // SAFETY: read as the C library's `getenv` reads it, each string to its terminator. A program that
    // changes its environment while another thread reads it breaks every such reader; Rust makes that
    // change `unsafe` (`std::env::set_var`) for this reason, and memprof reads here once, at start-up.
    let mut entry = unsafe { environ };
    while !entry.is_null() {
        // SAFETY: `entry` points into the null-terminated array `environ` holds, not past its end.
        let string = unsafe { *entry };
        if string.is_null() {
            break;
        }
        // SAFETY: every entry of `environ` is a C string.
        let bytes = unsafe { std::ffi::CStr::from_ptr(string) }.to_bytes();
        let (name, value) = match bytes.iter().position(|&byte| byte == b'=') {
            Some(at) => (&bytes[..at], &bytes[at + 1..]),
            None => (bytes, &b""[..]),
        };
        if test(name, value) {
            return true;
        }
        // SAFETY: `string` was not null, so the array goes on at least to its null pointer.
        entry = unsafe { entry.add(1) };
    }
    false
}

/// The `MEMPROF_*` variables set that memprof does not read but are within two edits of one it does (a
/// misspelling, which would otherwise do nothing without a word), each with the one meant, sorted. Others
/// are left alone: `MEMPROF_URL` is the command-line tool's, and tools of the same name may have their own.
pub(crate) fn misspelt() -> Vec<(String, &'static str)> {
    let mut misspelt: Vec<(String, &'static str)> = READ
        .keys()
        .filter_map(|name| name.to_str())
        .filter(|name| name.starts_with(PREFIX) && !ALL.iter().any(|known| known.name == *name))
        .filter_map(|name| Some((name.to_owned(), nearest(name)?)))
        .collect();
    misspelt.sort();
    misspelt
}

/// The known variable within two edits of `name`, if any.
fn nearest(name: &str) -> Option<&'static str> {
    ALL.iter().map(|known| known.name).filter(|known| edits(name, known) <= 2).min_by_key(|known| edits(name, known))
}

/// Levenshtein's distance between `a` and `b`, in characters.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, a) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, b) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(a != *b));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_variable_is_matched_to_the_one_meant() {
        assert_eq!(nearest("MEMPROF_SAMPLNG"), Some(SAMPLING));
        assert_eq!(nearest("MEMPROF_DUMP_EVRY"), Some(DUMP_EVERY));
        assert_eq!(nearest("MEMPROF_SOMETHING_ELSE"), None);
        assert_eq!((edits("", "ab"), edits("kitten", "sitting"), edits("same", "same")), (2, 3, 0));
    }
}
