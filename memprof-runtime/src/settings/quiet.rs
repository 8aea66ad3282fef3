//! Whether a program asks anything of memprof at start-up, judged before the settings are resolved:
//! [`asks`], from the program's options and one variable at a time, without allocating. Where nothing does
//! (a command-line tool run with the switch off, nothing else set), start-up resolves nothing, reads and
//! copies nothing, and says nothing; the settings are resolved, with the same options, when memprof is
//! first needed (a `scope!`, a mounted router).
//!
//! The judgment errs one way only: a variable it does not know to be harmless asks, and the settings are
//! then resolved at start as always (their problems said, a misspelt `MEMPROF_*` named). So a program the
//! judgment lets through is one whose resolved settings have nothing to start and nothing to say (checked
//! by this module's tests against [`Settings::resolve`](super::Settings::resolve)).
//!
//! ```ignore
//! let options = Options::new();
//! assert!(!asks(&options, b"LIBPROCESS_MEMORY_PROFILING", b"false"));
//! assert!(asks(&options, b"LIBPROCESS_MEMORY_PROFILING", b"true"));
//! assert!(asks(&options, b"MEMPROF_SAMPLNG", b"continuous")); // misspelt: said at start
//! ```

use super::grammar;
use super::options::Options;
use crate::process::environment;

/// Whether `options` ask anything at start whatever the environment says: a signal to end memprof on.
#[inline]
pub(crate) fn options_ask(options: &Options) -> bool {
    options.dump_on_sigterm || options.dump_on_sigint
}

/// Whether the variable `name`, set to `value`, may ask something of memprof or be a problem to say: the
/// program's switch but `false`, any `MEMPROF_*` (a setting, or a misspelt one) but the program's token,
/// a `TMPDIR` that is no path, and every other variable memprof reads but those of debuginfod (read only
/// when a profile is symbolized). An empty value is unset.
#[inline]
pub(crate) fn asks(options: &Options, name: &[u8], value: &[u8]) -> bool {
    if value.is_empty() {
        return false;
    }
    if name == options.env.as_bytes() {
        return value.trim_ascii() != b"false";
    }
    if name == options.token_env.as_bytes() {
        // A token alone starts nothing, and any value of it is taken (one no request can send, at worst).
        return false;
    }
    if name.starts_with(environment::PREFIX.as_bytes()) {
        return true;
    }
    if name == b"TMPDIR" {
        return !(value.iter().all(u8::is_ascii_whitespace) || grammar::is_path(value));
    }
    environment::ALL.iter().any(|variable| {
        variable.name.as_bytes() == name && !memprof_analysis::DEBUGINFOD_VARIABLES.contains(&variable.name)
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;
    use crate::settings::Settings;

    /// The settings `options` and `environment` resolve to.
    fn resolved(options: &Options, environment: &[(&str, &str)]) -> Settings {
        let reading = |name: &str| {
            environment
                .iter()
                .find(|(set, value)| *set == name && !value.is_empty())
                .map(|(_, value)| OsString::from(value))
        };
        Settings::resolve(options, &reading, "tool")
    }

    /// Whether the judgment lets `environment` through.
    fn quiet(options: &Options, environment: &[(&str, &str)]) -> bool {
        !options_ask(options)
            && !environment.iter().any(|(name, value)| asks(options, name.as_bytes(), value.as_bytes()))
    }

    #[test]
    fn what_the_judgment_lets_through_has_nothing_to_start_and_nothing_to_say() {
        let named = Options::new().env("PROFILING").token_env("PROFILER_TOKEN").http("0.0.0.0:6060");
        let environments: &[&[(&str, &str)]] = &[
            &[],
            &[("LIBPROCESS_MEMORY_PROFILING", "false")],
            &[("LIBPROCESS_MEMORY_PROFILING", " false ")],
            &[("LIBPROCESS_MEMORY_PROFILING", "")],
            &[("MEMPROF_TOKEN", "secret\n")],
            &[("TMPDIR", "/var/tmp"), ("DEBUGINFOD_URLS", "https://debuginfod.debian.net"), ("HOME", "/root")],
            &[("TMPDIR", "  "), ("OTEL_SDK_DISABLED", "true"), ("PATH", "/usr/bin")],
            &[("PROFILING", "false"), ("PROFILER_TOKEN", "t")],
        ];
        let mut let_through = 0;
        for options in [Options::new(), named.clone()] {
            for environment in environments {
                if !quiet(&options, environment) {
                    continue;
                }
                let_through += 1;
                let settings = resolved(&options, environment);
                assert!(settings.nothing_to_start(), "{environment:?}");
                assert!(settings.problems.is_empty() && settings.log.is_none(), "{environment:?}: {settings:?}");
            }
        }
        // Every environment above but, for the program naming its own switch and token, the three that set
        // the default ones: variables memprof reads, so resolved at start (to no effect there).
        assert_eq!(let_through, 2 * environments.len() - 3);
    }

    #[test]
    fn what_may_ask_or_be_wrong_is_resolved_at_start() {
        let options = Options::new();
        let asking: &[(&str, &str)] = &[
            ("LIBPROCESS_MEMORY_PROFILING", "true"),
            ("LIBPROCESS_MEMORY_PROFILING", "yes"),
            ("MEMPROF_SAMPLING", "continuous"),
            ("MEMPROF_LOG", "info"),
            ("MEMPROF_DIR", "/var/tmp/profiles"),
            ("TMPDIR", "relative"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SERVICE_NAME", "api\nInjected: 1"),
            ("MALLOC_CONF", "prof_active:true"),
        ];
        for (name, value) in asking {
            assert!(asks(&options, name.as_bytes(), value.as_bytes()), "{name}={value}");
            let settings = resolved(&options, &[(name, value)]);
            let said = !settings.problems.is_empty() || settings.log.is_some();
            // Each one either starts something, says something, or reaches jemalloc's sources.
            assert!(!settings.nothing_to_start() || said || name.contains("MALLOC_CONF"), "{name}={value}");
        }
        // A misspelt variable is named when the settings are resolved (`environment::misspelt`).
        assert!(asks(&options, b"MEMPROF_SAMPLNG", b"continuous"));
        assert!(options_ask(&Options::new().dump_on_sigterm(true)));
        assert!(!options_ask(&Options::new().keep_runs(8).http("127.0.0.1:0")));
    }
}
