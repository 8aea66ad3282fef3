//! How sampling runs: on demand (off until a run starts it; a run resets the samples and switches them off
//! at its end) or continuously (on from start-up; runs are windows over the samples, kept in the
//! [`crate::profiler::record`]). The choice is read here, from the program's option, `MEMPROF_SAMPLING`
//! and jemalloc's `opt.prof_active`, and nowhere else.

use crate::process::environment::{SAMPLING as SAMPLING_VARIABLE, WHOLE_RUN as WHOLE_RUN_VARIABLE};

/// How sampling runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Off until a run starts it.
    OnDemand,
    /// On from start-up; runs are windows.
    Continuous,
}

/// The mode, and what chose it (for `state` and the start-up message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Choice {
    pub(crate) mode: Mode,
    pub(crate) because: String,
}

impl Mode {
    /// Its name in `state` and in `MEMPROF_SAMPLING`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::OnDemand => "on-demand",
            Mode::Continuous => "continuous",
        }
    }
}

/// The mode, from the program's option (`continuous = ...`, `Options::continuous`), the value of
/// `MEMPROF_SAMPLING` (which overrides it) and whether jemalloc started with sampling on
/// (`MALLOC_CONF=prof_active:true`, taken as asking for continuous sampling); an unknown value of the
/// variable is an error, and the program's choice stands.
pub(crate) fn choose(
    option: Option<bool>,
    variable: Option<&str>,
    whole_run: bool,
    active_at_start: bool,
) -> (Choice, Option<String>) {
    let mut warning = None;
    match variable {
        Some("continuous") => return (choice(Mode::Continuous, format!("{SAMPLING_VARIABLE}=continuous")), None),
        Some("on-demand") => return (choice(Mode::OnDemand, format!("{SAMPLING_VARIABLE}=on-demand")), None),
        Some(other) => {
            warning = Some(format!(
                "{SAMPLING_VARIABLE}={} is not understood (expected `continuous` or `on-demand`); it is ignored",
                crate::profile_root::untrusted::printable(other)
            ))
        }
        None => {}
    }
    let chosen = match option {
        _ if whole_run => choice(Mode::Continuous, format!("{WHOLE_RUN_VARIABLE}: the whole run is sampled")),
        Some(true) => choice(Mode::Continuous, "the program's `continuous = true`".to_owned()),
        Some(false) => choice(Mode::OnDemand, "the program's `continuous = false`".to_owned()),
        None if active_at_start => choice(Mode::Continuous, "MALLOC_CONF's prof_active:true".to_owned()),
        None => default_choice(),
    };
    (chosen, warning)
}

/// Why on demand is the default, as `state` says it: continuous sampling by default needs its cost within 1 %
/// on a request handler and on a tokio server under load, and the server's is not (BENCHMARKS.md).
pub(crate) const DEFAULT_BECAUSE: &str = "the default: continuous sampling costs a tokio server under load 1-2 % \
     (within 1 % is the bar for a default; BENCHMARKS.md, \"Continuous sampling\"); MEMPROF_SAMPLING=continuous or \
     `continuous = true` switch it on";

/// The default choice: on demand, and why.
pub(crate) fn default_choice() -> Choice {
    choice(Mode::OnDemand, DEFAULT_BECAUSE.to_owned())
}

fn choice(mode: Mode, because: String) -> Choice {
    Choice { mode, because }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_overrides_the_program_and_prof_active_asks_for_continuous() {
        let mode = |option, variable, active| choose(option, variable, false, active).0.mode;
        assert_eq!(mode(None, None, false), Mode::OnDemand);
        assert_eq!(choose(None, None, false, false).0.because, DEFAULT_BECAUSE, "the default says why");
        let whole_run = choose(Some(false), None, true, false).0;
        assert_eq!(whole_run.mode, Mode::Continuous, "the operator's whole run over the program's word");
        assert_eq!(choose(None, Some("on-demand"), true, false).0.mode, Mode::OnDemand, "MEMPROF_SAMPLING first");
        assert_eq!(mode(None, None, true), Mode::Continuous);
        assert_eq!(mode(Some(false), None, true), Mode::OnDemand, "the program's word over jemalloc's option");
        assert_eq!(mode(Some(true), Some("on-demand"), true), Mode::OnDemand);
        assert_eq!(mode(Some(false), Some("continuous"), false), Mode::Continuous);
        let (chosen, warning) = choose(Some(true), Some("always\u{1b}[2J"), false, false);
        assert_eq!(chosen, Choice { mode: Mode::Continuous, because: "the program's `continuous = true`".into() });
        assert!(warning.unwrap().starts_with("MEMPROF_SAMPLING=always\\u{1b}[2J is not understood"));
    }
}
