//! How sampling runs: on demand (off until a run starts it; a run resets the samples and switches them off
//! at its end) or continuously (on from start-up; runs are windows over the samples, kept in the
//! [`crate::sampler::record`]). The choice is made here, from the program's option, `MEMPROF_SAMPLING`,
//! jemalloc's `opt.prof_active` and the switch, and nowhere else. With nothing set, sampling is continuous
//! when the switch is on (the endpoints served: someone may ask about the past) and on demand when it is
//! off (a command-line tool run thousands of times a day samples nothing).

use crate::process::environment::{SAMPLING as SAMPLING_VARIABLE, WHOLE_RUN as WHOLE_RUN_VARIABLE};

/// How sampling runs, in the words `MEMPROF_SAMPLING` and `state` use (`on-demand`, `continuous`).
///
/// ```
/// assert_eq!(memprof_runtime::Sampling::OnDemand.name(), "on-demand");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// Off until a run starts it; each run starts afresh (Mesos's way).
    OnDemand,
    /// On from start-up; runs are windows over it.
    Continuous,
}

/// The mode, and what chose it (for `state` and the start-up message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Choice {
    pub(crate) mode: Sampling,
    pub(crate) because: String,
}

impl Sampling {
    /// Its name in `state`, in `MEMPROF_SAMPLING` and in the attribute's `sampling`.
    pub const fn name(self) -> &'static str {
        match self {
            Sampling::OnDemand => "on-demand",
            Sampling::Continuous => "continuous",
        }
    }
}

/// What chooses the mode, as the settings say it at start-up.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Asked {
    /// The program's option (the attribute's `sampling = ...`, `Options::sampling`).
    pub(crate) option: Option<Sampling>,
    /// `MEMPROF_SAMPLING`, which overrides everything else.
    pub(crate) variable: Option<Sampling>,
    /// Whether `MEMPROF_WHOLE_RUN` asks for the whole run.
    pub(crate) whole_run: bool,
    /// Whether jemalloc started with sampling on (`MALLOC_CONF=prof_active:true`, taken as asking for
    /// continuous sampling).
    pub(crate) active_at_start: bool,
    /// Whether the switch is on (the program's environment variable is `true`).
    pub(crate) switched_on: bool,
    /// Whether heap profiles are pushed over OTLP (an OTLP endpoint is set): pushed from the record of
    /// continuous sampling.
    pub(crate) pushing: bool,
}

/// The mode `asked` chooses.
pub(crate) fn choose(asked: Asked) -> Choice {
    let Asked { option, variable, whole_run, active_at_start, switched_on, pushing } = asked;
    if let Some(mode) = variable {
        return choice(mode, format!("{SAMPLING_VARIABLE}={}", mode.name()));
    }
    match option {
        _ if whole_run => choice(Sampling::Continuous, format!("{WHOLE_RUN_VARIABLE}: the whole run is sampled")),
        _ if pushing => choice(Sampling::Continuous, PUSHING_BECAUSE.to_owned()),
        Some(chosen) => choice(chosen, format!("the program's `sampling = \"{}\"`", chosen.name())),
        None if active_at_start => choice(Sampling::Continuous, "MALLOC_CONF's prof_active:true".to_owned()),
        None => default_choice(switched_on),
    }
}

/// Why continuous is the default with the switch on, as `state` and the start-up log say it.
pub(crate) const DEFAULT_BECAUSE: &str = "the default with the switch on: the past is kept for when a question \
     comes, at under 1 % of a tokio server's request threads (BENCHMARKS.md, \"Always on\"); MEMPROF_SAMPLING=on-demand \
     samples only during runs";

/// Why sampling is continuous when profiles are pushed.
pub(crate) const PUSHING_BECAUSE: &str = "an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT): each interval's heap \
     profiles are pushed from the record of samples, kept from start-up";

/// Why on demand is the default with the switch off.
pub(crate) const SWITCHED_OFF_BECAUSE: &str = "the default with the switch off: nothing is served, so nothing \
     samples until code starts a run (memprof::scope!); MEMPROF_SAMPLING=continuous or `sampling = \"continuous\"` \
     sample from start-up";

/// The default choice, with the switch on or off, and why.
pub(crate) fn default_choice(switched_on: bool) -> Choice {
    if switched_on {
        choice(Sampling::Continuous, DEFAULT_BECAUSE.to_owned())
    } else {
        choice(Sampling::OnDemand, SWITCHED_OFF_BECAUSE.to_owned())
    }
}

fn choice(mode: Sampling, because: String) -> Choice {
    Choice { mode, because }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_overrides_the_program_and_prof_active_asks_for_continuous() {
        let asked = |option, variable, active| Asked { option, variable, active_at_start: active, ..Asked::default() };
        let mode = |option, variable, active| choose(asked(option, variable, active)).mode;
        assert_eq!(mode(None, None, false), Sampling::OnDemand, "the switch off");
        assert_eq!(choose(Asked::default()).because, SWITCHED_OFF_BECAUSE, "the default says why");
        let whole_run = choose(Asked { whole_run: true, ..asked(Some(Sampling::OnDemand), None, false) });
        assert_eq!(whole_run.mode, Sampling::Continuous, "the operator's whole run over the program's word");
        let first = Asked { whole_run: true, ..asked(None, Some(Sampling::OnDemand), false) };
        assert_eq!(choose(first).mode, Sampling::OnDemand, "MEMPROF_SAMPLING first");
        assert_eq!(mode(None, None, true), Sampling::Continuous);
        assert_eq!(
            mode(Some(Sampling::OnDemand), None, true),
            Sampling::OnDemand,
            "the program's word over jemalloc's option"
        );
        assert_eq!(mode(Some(Sampling::Continuous), Some(Sampling::OnDemand), true), Sampling::OnDemand);
        assert_eq!(mode(Some(Sampling::OnDemand), Some(Sampling::Continuous), false), Sampling::Continuous);
        assert_eq!(
            choose(asked(Some(Sampling::Continuous), None, false)),
            Choice { mode: Sampling::Continuous, because: "the program's `sampling = \"continuous\"`".into() }
        );
    }

    #[test]
    fn with_the_switch_on_and_nothing_else_set_sampling_is_continuous() {
        let on = Asked { switched_on: true, ..Asked::default() };
        assert_eq!(choose(on), Choice { mode: Sampling::Continuous, because: DEFAULT_BECAUSE.into() });
        let program_says = Asked { option: Some(Sampling::OnDemand), ..on };
        assert_eq!(choose(program_says).mode, Sampling::OnDemand, "`sampling = \"on-demand\"`");
        let operator_says = Asked { variable: Some(Sampling::OnDemand), ..on };
        assert_eq!(choose(operator_says).mode, Sampling::OnDemand, "MEMPROF_SAMPLING=on-demand");
    }

    #[test]
    fn a_push_samples_from_start_up_unless_the_operator_says_on_demand() {
        let pushing = Asked { pushing: true, option: Some(Sampling::OnDemand), ..Asked::default() };
        assert_eq!(choose(pushing), Choice { mode: Sampling::Continuous, because: PUSHING_BECAUSE.into() });
        let operator_says = Asked { variable: Some(Sampling::OnDemand), ..pushing };
        assert_eq!(choose(operator_says).mode, Sampling::OnDemand, "MEMPROF_SAMPLING=on-demand");
    }
}
