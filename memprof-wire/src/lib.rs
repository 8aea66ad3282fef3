//! What memprof's endpoints say, as typed values: the paths ([`paths`]), the grammars of durations
//! ([`duration`]) and sizes ([`size`]), what a block allocated ([`usage`]), and the JSON answers of `start`,
//! `stop`, `state`, `heap_profile` and `memory`, serialized by the server and read back by the `memprof`
//! tool and anyone else's client. The field names are Mesos's where Mesos has the field.
//!
//! ```
//! let answer = r#"{"id":1795354618996,"remaining_seconds":30.0,"message":"Successfully started new heap profiling run."}"#;
//! let started: memprof_wire::Started = serde_json::from_str(answer).unwrap();
//! assert_eq!(started.id, 1795354618996);
//! ```
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]
#![deny(unsafe_code)]

pub mod duration;
mod earlier;
mod error;
mod explain;
mod labels;
mod memory;
pub mod paths;
mod runs;
pub mod size;
mod state;
pub mod usage;

pub use earlier::{ActiveRun, EarlierProcess, EarlierProfile, LastSeen, Provenance};
pub use error::{Cause, DumpOf, Error};
pub use explain::{
    ClassBytes, Container, DecaySettings, Evidence, Explanation, GrowingStack, HeldAge, LabelledBytes, MemoryClass,
    Purged, Verdict, VerdictKind, class,
};
pub use labels::{InvalidLabel, LabelBytes, LabelCounts, label_filter, label_key};
pub use memory::{Growing, GrowingSeries, HeapCounters, Memory, Reading, SeriesPoint};
pub use runs::{KeptProfile, ProfileUrls, RunAnswer, RunOwner, Started, Switches};
pub use state::{
    AutomaticDumpSettings, AutomaticDumps, CurrentRun, Failure, JemallocState, MallocConfSources, OtlpPush,
    ProfilerState, SampleRecord, Sampling, SamplingBudget, StackWalk, State,
};

/// Whether a host (`host`, `host:port`, `[v6]:port`: a `Host` field or a URL's authority) names this
/// machine's loopback interface: `localhost` (and `*.localhost`, RFC 6761), `127.x.x.x` or `[::1]`. The
/// server answers only such names when it listens on loopback; the tool reaches them without a proxy.
///
/// ```
/// assert!(memprof_wire::is_loopback_host("127.0.0.1:5050"));
/// assert!(memprof_wire::is_loopback_host("[::1]:80"));
/// assert!(memprof_wire::is_loopback_host("app.localhost"));
/// assert!(!memprof_wire::is_loopback_host("localhost.evil.example"));
/// ```
pub fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(bracketed) => bracketed.split_once(']').map_or(bracketed, |(address, _)| address),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|address| address.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_current_run_is_mesoss_null_id() {
        assert_eq!(serde_json::to_string(&CurrentRun::Idle { id: () }).unwrap(), r#"{"id":null}"#);
        let active: CurrentRun =
            serde_json::from_str(r#"{"id":7,"remaining_seconds":null,"started_by":"code: load"}"#).unwrap();
        let started_by = "code: load".into();
        assert_eq!(active, CurrentRun::Active { id: 7, remaining_seconds: None, started_by, samples: None });
        assert_eq!(serde_json::from_str::<CurrentRun>(r#"{"id":null}"#).unwrap(), CurrentRun::Idle { id: () });
    }

    #[test]
    fn stop_without_a_run_has_no_urls_and_with_one_has_mesoss_three() {
        let idle = RunAnswer { active: None, id: None, message: "No run.".into(), urls: None };
        assert_eq!(serde_json::to_string(&idle).unwrap(), r#"{"id":null,"message":"No run."}"#);
        let stopped = RunAnswer {
            active: None,
            id: Some(7),
            message: "RunAnswer.".into(),
            urls: Some(ProfileUrls::of(7, ["text"])),
        };
        let json: serde_json::Value = serde_json::to_value(&stopped).unwrap();
        assert_eq!(json["url_raw_profile"], "/memory-profiler/download/raw?id=7");
        assert_eq!(json["downloads"]["text"], "/memory-profiler/download/text?id=7");
        assert_eq!(serde_json::from_value::<RunAnswer>(json).unwrap(), stopped);
    }
}
