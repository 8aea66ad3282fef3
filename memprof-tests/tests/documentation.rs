//! README.md and docs/ say what the code does: every code block is checked by a test or says why it is
//! illustrative (`memprof_tests::docs`), the commands name what the build makes, the
//! dependency and profile blocks are this workspace's, the `curl` session runs against the example, and the
//! table of environment variables lists exactly the variables memprof reads.

use std::collections::BTreeSet;

use memprof_tests::docs::{self, Block, CHECKED_LANGUAGES, Mark};
use memprof_tests::tools;

#[test]
fn every_block_is_checked_by_a_test_or_says_why_not() {
    let mut problems = Vec::new();
    for block in docs::blocks().iter().filter(|block| CHECKED_LANGUAGES.contains(&block.language.as_str())) {
        match &block.mark {
            Mark::CheckedBy { file, test } => {
                let source = std::fs::read_to_string(docs::workspace().join(file)).unwrap_or_default();
                if !source.contains(&format!("fn {test}(")) || !source.contains(&format!("checked_by(\"{test}\")")) {
                    problems.push(format!("{}: {file} has no test {test} that reads its blocks", block.place()));
                }
            }
            Mark::Illustrative(why) if why.len() >= 10 => {}
            Mark::Illustrative(_) => problems.push(format!("{}: say why the block is illustrative", block.place())),
            Mark::None => problems.push(format!(
                "{}: a {} block needs `<!-- checked by FILE: TEST -->` or `<!-- illustrative: WHY -->` before it",
                block.place(),
                block.language
            )),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// What the commands of README and docs/ name exists once built (`docs::check_command`: examples, their
/// binaries, packages, directories, `memprof` command lines, served paths).
#[test]
fn the_commands_name_what_the_build_makes() {
    let blocks = docs::checked_by("the_commands_name_what_the_build_makes");
    assert_commands_hold(&blocks);
    assert!(blocks.iter().map(|block| docs::commands(block).len()).sum::<usize>() >= 15);
}

/// The same for the commands the examples give in their doc comments and Cargo.toml comments.
#[test]
fn the_examples_commands_name_what_the_build_makes() {
    let blocks = docs::example_commands();
    assert_eq!(blocks.len(), 5, "service.rs, scope.rs, axum-service's main.rs, nested.rs and Cargo.toml");
    assert_commands_hold(&blocks);
}

/// Every command of `blocks` passes `docs::check_command`; the failures are listed together.
fn assert_commands_hold(blocks: &[Block]) {
    let problems: Vec<String> = blocks
        .iter()
        .flat_map(|block| docs::commands(block).into_iter().map(move |command| docs::check_command(block, &command)))
        .filter_map(Result::err)
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// What the dependency blocks and the manifests say of a dependency: a version, or a table with one and
/// features.
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
enum Dependency {
    Version(String),
    Detailed {
        version: Option<String>,
        #[serde(default)]
        features: Vec<String>,
    },
}

impl Dependency {
    fn version(&self) -> &str {
        match self {
            Dependency::Version(version) => version,
            Dependency::Detailed { version, .. } => version.as_deref().unwrap_or_default(),
        }
    }

    fn features(&self) -> &[String] {
        match self {
            Dependency::Version(_) => &[],
            Dependency::Detailed { features, .. } => features,
        }
    }
}

/// The dependencies this test reads: memprof and the allocator.
#[derive(Debug, Default, serde::Deserialize)]
struct Dependencies {
    memprof: Option<Dependency>,
    #[serde(rename = "tikv-jemallocator")]
    jemallocator: Option<Dependency>,
}

/// A manifest, or a documented block of one (which may be its dependencies alone).
#[derive(Debug, serde::Deserialize)]
struct Manifest {
    workspace: Option<WorkspaceTable>,
    #[serde(default)]
    features: std::collections::BTreeMap<String, toml::Value>,
    dependencies: Option<Dependencies>,
    #[serde(rename = "dev-dependencies")]
    dev_dependencies: Option<Dependencies>,
    /// A block that is only dependencies, without their table's header.
    #[serde(flatten)]
    bare: Dependencies,
}

#[derive(Debug, serde::Deserialize)]
struct WorkspaceTable {
    package: PackageTable,
}

#[derive(Debug, serde::Deserialize)]
struct PackageTable {
    version: String,
}

/// The dependency blocks name crates of this workspace with its version, features it has, and the
/// allocator version memprof links.
#[test]
fn the_dependency_blocks_name_this_workspaces_crates() {
    let workspace = docs::workspace();
    let read =
        |path: &str| -> Manifest { toml::from_str(&std::fs::read_to_string(workspace.join(path)).unwrap()).unwrap() };
    let manifest = read("Cargo.toml");
    let version = &manifest.workspace.as_ref().expect("a workspace").package.version;
    let runtime = read("memprof-runtime/Cargo.toml");
    let jemallocator = runtime.dependencies.and_then(|dependencies| dependencies.jemallocator).expect("the allocator");
    for block in docs::checked_by("the_dependency_blocks_name_this_workspaces_crates") {
        let parsed: Manifest = toml::from_str(&block.text).unwrap_or_else(|error| panic!("{}: {error}", block.place()));
        let dependencies = parsed.dependencies.or(parsed.dev_dependencies).unwrap_or(parsed.bare);
        let memprof = dependencies.memprof.unwrap_or_else(|| panic!("{}: no memprof", block.place()));
        let wanted = memprof.version();
        assert!(version.starts_with(wanted), "{}: memprof {wanted} is not {version}", block.place());
        for feature in memprof.features() {
            assert!(manifest.features.contains_key(feature), "{}: no feature {feature}", block.place());
        }
        if let Some(allocator) = dependencies.jemallocator {
            assert!(
                jemallocator.version().starts_with(allocator.version()),
                "{}: memprof links {}",
                block.place(),
                jemallocator.version()
            );
        }
    }
}

/// The build advice is what this workspace builds with: its release profile and its `.cargo/config.toml`.
#[test]
fn the_release_profile_advice_is_this_workspaces() {
    let workspace = docs::workspace();
    let manifest: toml::Table = std::fs::read_to_string(workspace.join("Cargo.toml")).unwrap().parse().unwrap();
    let config: toml::Table = std::fs::read_to_string(workspace.join(".cargo/config.toml")).unwrap().parse().unwrap();
    for block in docs::checked_by("the_release_profile_advice_is_this_workspaces") {
        let advice: toml::Table = block.text.parse().unwrap_or_else(|error| panic!("{}: {error}", block.place()));
        let ours = if block.text.starts_with("# .cargo/config.toml") { &config } else { &manifest };
        for (section, values) in &advice {
            for (key, value) in values.as_table().unwrap() {
                let built = section.split('.').try_fold(ours, |table, part| table.get(part)?.as_table());
                assert_eq!(built.and_then(|table| table.get(key)), Some(value), "{}: [{section}] {key}", block.place());
            }
        }
    }
}

#[test]
fn the_configuration_lists_every_environment_variable_and_no_other() {
    let configuration = std::fs::read_to_string(docs::workspace().join("docs/configuration.md")).unwrap();
    let section = configuration.split("## Environment variables").nth(1).expect("the section");
    let table = section.lines().skip_while(|line| !line.starts_with('|')).take_while(|line| line.starts_with('|'));
    let documented: BTreeSet<&str> = table
        .skip(2)
        .filter_map(|row| row.trim_start_matches('|').trim_start().strip_prefix('`')?.split('`').next())
        .collect();
    let read: BTreeSet<&str> = memprof_runtime::environment::ALL.iter().map(|variable| variable.name).collect();
    assert_eq!(documented, read);
}

/// The table at the head of docs/configuration.md has a row for each of the attribute's arguments, and
/// none for an argument it does not take (rows of variables are in it too: they are not arguments).
#[test]
fn the_configuration_lists_every_attribute_argument_and_no_other() {
    let configuration = std::fs::read_to_string(docs::workspace().join("docs/configuration.md")).unwrap();
    let table =
        configuration.lines().skip_while(|line| !line.starts_with('|')).take_while(|line| line.starts_with('|'));
    let documented: BTreeSet<&str> = table
        .skip(2)
        .filter_map(|row| row.trim_start_matches('|').trim_start().strip_prefix('`')?.split([' ', '`']).next())
        .filter(|key| key.chars().all(|character| character.is_ascii_lowercase() || character == '_'))
        .collect();
    let taken: BTreeSet<&str> = memprof_macros::__attribute_arguments!().into_iter().collect();
    assert_eq!(documented, taken);
}

/// The Parca and Grafana Alloy blocks point at what memprof serves: their target is the example's
/// address, each enabled profile's path answers a gzip pprof profile with Go's allocation sample types from
/// the example sampled continuously, and every profile type memprof does not serve is switched off.
#[test]
fn the_scrapers_configurations_point_at_memprofs_paths() {
    let blocks = docs::checked_by("the_scrapers_configurations_point_at_memprofs_paths");
    let languages: Vec<&str> = blocks.iter().map(|block| block.language.as_str()).collect();
    assert_eq!(languages, ["yaml", "alloy"]);
    let service = memprof_tests::process::Program::service().env("MEMPROF_SAMPLING", "continuous").spawn();
    memprof_tests::acceptance::wait_for_sampled(&service, &["service::open_session"]);
    for block in &blocks {
        assert!(block.text.contains("\"127.0.0.1:5050\""), "{}: the example's address", block.place());
        // A profile's settings: its name's line, then `enabled` and `path` (YAML `key: value`, Alloy `key = value`).
        let mut profile = String::new();
        let mut enabled = Vec::new();
        let mut paths = 0;
        for line in block.text.lines().map(str::trim) {
            let setting = line.split_once(": ").or_else(|| line.split_once(" = "));
            match setting.map(|(key, value)| (key.trim(), value.trim())) {
                Some(("enabled", value)) => enabled.push((profile.clone(), value == "true")),
                Some(("path", value)) => {
                    let path = value.trim_matches('"');
                    paths += 1;
                    assert_eq!(enabled.last(), Some(&(profile.clone(), true)), "{}: {path} is scraped", block.place());
                    let response = service.get(path);
                    assert_eq!(response.status, 200, "{}: {path}: {}", block.place(), response.text());
                    assert_eq!(response.body[..2], [0x1f, 0x8b], "{}: {path} answers gzip", block.place());
                    if let Some(top) = tools::pprof_top(&response.body, "alloc_space") {
                        assert!(top.contains("service::"), "{}: {path}:\n{top}", block.place());
                    }
                }
                _ => profile = line.trim_end_matches([':', '{', ' ']).to_owned(),
            }
        }
        assert_eq!(paths, 1, "{}: the allocations path", block.place());
        let scraped: Vec<&str> = enabled.iter().filter(|(_, on)| *on).map(|(name, _)| name.as_str()).collect();
        assert!(scraped.len() == 1 && scraped[0].ends_with("memory"), "{}: only memory: {enabled:?}", block.place());
        assert!(enabled.len() >= 5, "{}: Go's other profile types are switched off: {enabled:?}", block.place());
    }
}

/// The `curl` sessions against the example service (`127.0.0.1:5050`), run in order against the real
/// example with curl, the example run's id in place of the documented one: each succeeds, and what is shown
/// of an answer is what comes back (the JSON fields and message of `start`, the text table's functions).
#[test]
fn the_readmes_curl_session_runs_against_the_example() {
    const EXAMPLE_ID: &str = "1795354618996";
    let Some(curl) = memprof_tests::tools::find("curl", "curl") else { return };
    let sessions: String = docs::checked_by("the_readmes_curl_session_runs_against_the_example")
        .iter()
        .map(|block: &Block| block.text.clone() + "\n")
        .collect();
    let service = memprof_tests::process::Program::service().spawn();
    let scratch = memprof_tests::tools::Scratch::new("readme");
    let mut id = EXAMPLE_ID.to_owned();
    let lines: Vec<&str> = sessions.lines().collect();
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
    assert_eq!(ran, 8, "six curl commands for the example session, two for its labels");
    assert!(std::fs::read_to_string(scratch.join("heap.svg")).unwrap().contains("service::open_session"));
}

/// Every relative link of README and docs/ leads to a file that exists, and its `#anchor` to a heading of
/// that file (as GitHub makes anchors: lower case, spaces to `-`, punctuation dropped).
#[test]
fn every_link_leads_somewhere() {
    let anchor = |heading: &str| -> String {
        heading
            .trim_start_matches('#')
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|character| match character {
                ' ' => Some('-'),
                '-' | '_' => Some(character),
                _ if character.is_alphanumeric() => Some(character),
                _ => None,
            })
            .collect()
    };
    let mut problems = Vec::new();
    let mut links = 0;
    for document in docs::documents() {
        let text = std::fs::read_to_string(docs::workspace().join(&document)).unwrap();
        for target in text.split("](").skip(1).filter_map(|rest| rest.split(')').next()) {
            if target.starts_with("http") || target.contains(' ') {
                continue;
            }
            links += 1;
            let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
            let file = if path.is_empty() { document.clone() } else { document.parent().unwrap().join(path) };
            let Ok(linked) = std::fs::read_to_string(docs::workspace().join(&file)) else {
                if !docs::workspace().join(&file).exists() {
                    problems.push(format!("{}: {target} does not exist", document.display()));
                }
                continue;
            };
            if !fragment.is_empty()
                && !linked.lines().filter(|line| line.starts_with('#')).any(|line| anchor(line) == fragment)
            {
                problems.push(format!("{}: {target} names no heading of {}", document.display(), file.display()));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(links >= 20, "{links} links");
}

/// The alert rule on `memprof_growing_bytes` is one Prometheus accepts (`promtool check rules`), on the
/// metric memprof serves.
#[test]
fn the_leak_alert_rule_is_one_prometheus_accepts() {
    let blocks = docs::checked_by("the_leak_alert_rule_is_one_prometheus_accepts");
    assert_eq!(blocks.len(), 1);
    let rule = &blocks[0];
    assert!(rule.text.contains("memprof_growing_bytes"), "{}", rule.place());
    if let Some(checked) = tools::promtool_check_rules(&rule.text) {
        assert!(checked.is_ok(), "{}: {checked:?}", rule.place());
    }
}
