//! `explain`, `purge` and `decay` for a person: the resident set class by class with its shares, the
//! verdict and its fix; what a purge returned; the purging settings.

use memprof_wire::{DecaySettings, Explanation, MemoryClass, Purged};

use crate::terminal::one_line;

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

/// The class tree with sizes and shares of the resident set, then the verdict, its fix and the container.
///
/// ```ignore
/// println!("{}", describe_explanation(&client.get(paths::EXPLAIN)?.parse()?));
/// ```
pub(crate) fn describe_explanation(explanation: &Explanation) -> String {
    let mut lines = vec![format!("RSS {}, class by class (the leaves add up to it):", mib(explanation.rss_bytes))];
    fn walk(classes: &[MemoryClass], depth: usize, rss: u64, lines: &mut Vec<String>) {
        for class in classes {
            let name = match class.count {
                Some(count) => format!("{} ({count} threads)", one_line(&class.id)),
                None => one_line(&class.id),
            };
            let share = if rss == 0 { 0.0 } else { 100.0 * class.bytes as f64 / rss as f64 };
            let indent = "  ".repeat(depth + 1);
            lines.push(format!(
                "{indent}{name:<width$} {:>11} {share:>5.1} %",
                mib(class.bytes),
                // Names line up in one column; a tree nested deeper than any memprof makes still prints.
                width = 34usize.saturating_sub(2 * depth)
            ));
            walk(&class.children, depth + 1, rss, lines);
        }
    }
    walk(&explanation.classes, 0, explanation.rss_bytes, &mut lines);
    let verdict = &explanation.verdict;
    let kind = serde_json::to_value(verdict.kind).ok().and_then(|kind| kind.as_str().map(str::to_owned));
    lines.push(String::new());
    lines.push(format!("Verdict: {}: {}", one_line(&kind.unwrap_or_default()), one_line(&verdict.summary)));
    for stack in &verdict.stacks {
        // A stack starts where the answer's `function` does, the program's own (its allocation site in std's or
        // a dependency's code said after it), as the JSON and the dashboard name it.
        let site = stack.frames.iter().position(|frame| *frame == stack.function).unwrap_or(0);
        let mut frames: Vec<String> = stack.frames[site..].iter().map(|frame| one_line(frame)).collect();
        if site > 0 {
            frames[0] = format!("{} (allocating through {})", frames[0], one_line(&stack.frames[0]));
        }
        // Sampled continuously, the program says how old what the stack holds is.
        let age = stack.age.as_ref().map_or(String::new(), |age| {
            format!(
                " ({:.0} % of the {} held older than {:.0} s)",
                age.older_share.clamp(0.0, 1.0) * 100.0,
                mib(age.held_bytes.max(0.0) as u64),
                age.older_than_seconds.max(0.0)
            )
        });
        // Labelled, what it grew by under each label set.
        let labels: Vec<String> = stack
            .by_label
            .iter()
            .map(|share| format!("{} {}", one_line(&share.labels), mib(share.bytes.max(0.0) as u64)))
            .collect();
        let labels = if labels.is_empty() { String::new() } else { format!(" [{}]", labels.join(", ")) };
        let error = stack.error_bytes.map(|error| format!(" +- {}", mib(error.max(0.0) as u64))).unwrap_or_default();
        lines.push(format!("  {}{error}{age} {}{labels}", mib(stack.bytes.max(0.0) as u64), frames.join(" <- ")));
    }
    lines.push(format!("Fix: {}", one_line(&verdict.fix)));
    if let Some(container) = &explanation.container {
        lines.push(format!("Container: {}", one_line(&container.summary)));
    }
    lines.join("\n")
}

/// What a purge returned.
pub(crate) fn describe_purged(purged: &Purged) -> String {
    one_line(&purged.message)
}

/// jemalloc's purging settings.
pub(crate) fn describe_decay(settings: &DecaySettings) -> String {
    let time = |ms: i64| if ms < 0 { "never".to_owned() } else { format!("after {ms} ms") };
    let said = format!(
        "dirty pages are returned {}, muzzy pages {}; background threads are {}",
        time(settings.dirty_decay_ms),
        time(settings.muzzy_decay_ms),
        if settings.background_thread { "on" } else { "off" }
    );
    match &settings.cost {
        Some(cost) => format!("{said}\nCost: {}", one_line(cost)),
        None => said,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memprof_wire::{Verdict, VerdictKind};

    #[test]
    fn the_tree_shows_sizes_shares_and_the_verdict() {
        let leaf = |id: &str, bytes: u64| MemoryClass { id: id.into(), bytes, count: None, children: Vec::new() };
        let explanation = Explanation {
            rss_bytes: 400 << 20,
            classes: vec![
                MemoryClass { children: vec![leaf("heap/free", 300 << 20)], ..leaf("heap", 300 << 20) },
                MemoryClass { count: Some(3), ..leaf("stacks", 100 << 20) },
            ],
            verdict: Verdict {
                kind: VerdictKind::Retention,
                summary: "jemalloc keeps 300.0 MiB of freed pages resident (75 % of RSS)".into(),
                fix: "POST /memory-profiler/purge returns them now.".into(),
                stacks: Vec::new(),
            },
            evidence: Vec::new(),
            container: None,
        };
        assert_eq!(
            describe_explanation(&explanation),
            "RSS 400.0 MiB, class by class (the leaves add up to it):\n  \
             heap                                 300.0 MiB  75.0 %\n    \
             heap/free                          300.0 MiB  75.0 %\n  \
             stacks (3 threads)                   100.0 MiB  25.0 %\n\n\
             Verdict: retention: jemalloc keeps 300.0 MiB of freed pages resident (75 % of RSS)\n\
             Fix: POST /memory-profiler/purge returns them now."
        );
    }

    #[test]
    fn a_hostile_tree_neither_panics_nor_forges_lines() {
        let leaf = |id: &str| MemoryClass { id: id.into(), bytes: 1 << 20, count: None, children: Vec::new() };
        let deep = (0..40).fold(leaf("bottom"), |child, depth| MemoryClass {
            children: vec![child],
            ..leaf(&format!("level {depth}"))
        });
        let explanation = Explanation {
            rss_bytes: 1 << 20,
            classes: vec![deep],
            verdict: Verdict {
                kind: VerdictKind::Healthy,
                summary: "fine\nVerdict: healthy: nothing".into(),
                fix: "none".into(),
                stacks: vec![memprof_wire::GrowingStack {
                    function: "main".into(),
                    frames: vec!["main\nFix: run rm -rf".into()],
                    by_label: Vec::new(),
                    bytes: 1.0,
                    error_bytes: None,
                    age: Some(memprof_wire::HeldAge {
                        held_bytes: 2.0 * 1048576.0,
                        older_share: 0.92,
                        older_than_seconds: 600.0,
                    }),
                }],
            },
            evidence: Vec::new(),
            container: None,
        };
        let described = describe_explanation(&explanation);
        assert_eq!(described.lines().count(), 1 + 41 + 1 + 1 + 1 + 1, "{described}");
        assert!(described.contains("fine\\nVerdict: healthy") && described.contains("main\\nFix: run"), "{described}");
        assert!(described.contains("\n  0.0 MiB (92 % of the 2.0 MiB held older than 600 s) main"), "{described}");
        let purged = Purged {
            rss_before_bytes: 1,
            rss_after_bytes: 1,
            milliseconds: 1.0,
            message: "Returned 1 MiB\nall good".into(),
        };
        assert_eq!(describe_purged(&purged), "Returned 1 MiB\\nall good");
    }

    #[test]
    fn a_stack_starts_at_the_programs_function_with_its_allocation_site_said() {
        let stack = |function: &str| memprof_wire::GrowingStack {
            function: function.into(),
            frames: vec!["hashbrown::raw::alloc::inner::do_alloc".into(), "app::index".into(), "app::main".into()],
            bytes: 1048576.0,
            error_bytes: Some(524288.0),
            age: None,
            by_label: Vec::new(),
        };
        let explanation = |stacks| Explanation {
            rss_bytes: 1 << 20,
            classes: Vec::new(),
            verdict: Verdict { kind: VerdictKind::Leak, summary: "grows".into(), fix: "look".into(), stacks },
            evidence: Vec::new(),
            container: None,
        };
        let described = describe_explanation(&explanation(vec![stack("app::index")]));
        assert!(
            described.contains(
                "\n  1.0 MiB +- 0.5 MiB app::index (allocating through hashbrown::raw::alloc::inner::do_alloc) <- app::main\n"
            ),
            "{described}"
        );
        let unnamed = describe_explanation(&explanation(vec![stack("elsewhere")]));
        assert!(
            unnamed
                .contains("\n  1.0 MiB +- 0.5 MiB hashbrown::raw::alloc::inner::do_alloc <- app::index <- app::main\n")
        );
    }
}
