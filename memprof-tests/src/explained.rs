//! The explained test program (src/bin/explained.rs) put into a known memory state, and `explain` read from
//! it checked against the kernel's own figures (`/proc/<pid>/status`), not taken from memprof.

use memprof_wire::{Explanation, class};

use crate::process::Program;

const MIB: u64 = 1 << 20;

/// The explained program in `state`, once it says the state is reached.
pub fn explained(state: &str) -> Program {
    let program = Program::explained(&[state]).spawn();
    program.wait_for_line(|line| line == "explained: ready");
    program
}

/// `VmRSS` of the program, as the kernel says it.
pub fn kernel_rss(program: &Program) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", program.pid())).unwrap();
    let line = status.lines().find(|line| line.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// How many times `explain` is asked for a reading of RSS between the kernel's two.
const ATTEMPTS: usize = 10;

/// `explain`, checked against the kernel's RSS read just before and after, and its leaves' sum. A program
/// whose RSS moves by megabytes within a request (a cache filling beside buffers that come and go: 71.3 MB
/// before, 68.5 MB explained, 72.0 MB after) is asked again, up to ten times, for a reading within 2 MiB of
/// the kernel's two; one that is never within fails.
pub fn explain(program: &Program) -> Explanation {
    let mut seen = Vec::new();
    let explanation = loop {
        let before = kernel_rss(program);
        let explanation: Explanation = serde_json::from_value(program.get_json("/memory-profiler/explain")).unwrap();
        let after = kernel_rss(program);
        let rss = explanation.rss_bytes;
        if rss + 2 * MIB >= before.min(after) && rss <= before.max(after) + 2 * MIB {
            break explanation;
        }
        seen.push((before, rss, after));
        assert!(seen.len() < ATTEMPTS, "explain's RSS against the kernel's before and after: {seen:?}");
    };
    let rss = explanation.rss_bytes;
    let leaves: u64 = explanation.leaves().iter().map(|leaf| leaf.bytes).sum();
    assert_eq!(leaves, rss, "{explanation:#?}");
    let ids: Vec<&str> = explanation.leaves().iter().map(|leaf| leaf.id.as_str()).collect();
    assert_eq!(ids, class::LEAVES);
    explanation
}
