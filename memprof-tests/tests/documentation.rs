//! The README says what the code does: its table of environment variables lists exactly the variables
//! memprof reads (`memprof_runtime::environment::ALL`).

use std::collections::BTreeSet;
use std::path::Path;

#[test]
fn the_readme_lists_every_environment_variable_and_no_other() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let section = readme.split("### Environment variables").nth(1).expect("the README has the section");
    let table = section.lines().skip_while(|line| !line.starts_with('|')).take_while(|line| line.starts_with('|'));
    let documented: BTreeSet<&str> = table
        .skip(2)
        .filter_map(|row| row.trim_start_matches('|').trim_start().strip_prefix('`')?.split('`').next())
        .collect();
    let read: BTreeSet<&str> = memprof_runtime::environment::ALL.iter().map(|variable| variable.name).collect();
    assert_eq!(documented, read);
}

/// The README's `curl` commands against the example service (`127.0.0.1:5050`), run in order against the
/// real example with curl, the example run's id in place of the README's: each succeeds, and what the README
/// shows of an answer is what comes back (the JSON fields and message of `start`, the text table's
/// functions).
#[test]
fn the_readmes_curl_session_runs_against_the_example() {
    const EXAMPLE_ID: &str = "1795354618996";
    let Some(curl) = memprof_tests::tools::find("curl", "curl") else { return };
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let service = memprof_tests::process::Program::service().spawn();
    let scratch = memprof_tests::tools::Scratch::new("readme");
    let mut id = EXAMPLE_ID.to_owned();
    let lines: Vec<&str> = readme.lines().collect();
    let mut ran = 0;
    for (index, line) in lines.iter().enumerate() {
        let Some(command) = line.strip_prefix("$ curl ").filter(|command| command.contains("127.0.0.1:5050")) else {
            continue;
        };
        // What the README shows of the answer: the lines up to the next command, blank line or block end.
        let shown: Vec<&str> = lines[index + 1..]
            .iter()
            .take_while(|line| !line.starts_with('$') && !line.is_empty() && !line.starts_with("```"))
            .copied()
            .collect();
        let command = command.split("  #").next().unwrap().trim().replace(EXAMPLE_ID, &id);
        let command = command.replace("127.0.0.1:5050", &service.address().to_string());
        let arguments: Vec<String> =
            command.split_whitespace().map(|argument| argument.trim_matches('\'').to_owned()).collect();
        let output = std::process::Command::new(&curl)
            .args(["--silent", "--show-error", "--fail-with-body"])
            .args(&arguments)
            .current_dir(scratch.join(""))
            .output()
            .unwrap();
        let answer = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{line}: {answer}{}", String::from_utf8_lossy(&output.stderr));
        if command.contains("/start?") {
            let started: serde_json::Value = serde_json::from_str(&answer).unwrap();
            id = started["id"].to_string();
        }
        let shown = shown.join("\n").replace(EXAMPLE_ID, &id);
        if let Ok(expected) = serde_json::from_str::<serde_json::Value>(&shown) {
            let actual: serde_json::Value = serde_json::from_str(&answer).unwrap();
            let keys = |value: &serde_json::Value| value.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
            assert_eq!(keys(&actual), keys(&expected), "{line}");
            assert_eq!(actual["message"], expected["message"], "{line}");
        }
        if shown.starts_with("Total: ") {
            assert!(answer.starts_with("Total: "), "{line}: {answer}");
            for row in shown.lines().skip(1) {
                let function = row.split_whitespace().last().unwrap();
                assert!(answer.contains(&format!("% {function}\n")), "{line}: {function} is not in\n{answer}");
            }
        }
        if command.contains("/start?") {
            // The README's next commands read the run's state and stop it; the service allocates meanwhile.
            memprof_tests::acceptance::wait_for_sampled(
                &service,
                &["service::open_session", "service::index_document"],
            );
        }
        ran += 1;
    }
    assert_eq!(ran, 8, "the README has six curl commands for the example session and two for its labels");
    assert!(std::fs::read_to_string(scratch.join("heap.svg")).unwrap().contains("service::open_session"));
}

/// The attribute refuses a `keep_runs` past the maximum the runtime brings `Options::keep_runs` within: the
/// proc-macro crate cannot depend on the runtime, so its copy of the bound is checked here.
#[test]
fn the_attribute_and_the_runtime_bound_keep_runs_alike() {
    let macros = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../memprof-macros/src/entry.rs"));
    let bound = format!("const MAX_KEEP_RUNS: u32 = {};", memprof_runtime::MAX_KEEP_RUNS);
    assert!(macros.unwrap().contains(&bound), "memprof-macros/src/entry.rs should say {bound}");
}
