//! The code blocks of README.md and docs/*.md, and what each says of itself: every `sh`, `console`, `toml`,
//! `rust`, `text`, `yaml` and `alloy` block is preceded by a line saying which test checks it or why it is illustrative:
//!
//! ```text
//! <!-- checked by memprof-tests/tests/documentation.rs: the_readmes_curl_session_runs_against_the_example -->
//! <!-- illustrative: a log line, as the program prints it -->
//! ```
//!
//! A test asks for the blocks that name it ([`checked_by`]), so the mark and the check cannot drift apart.

use std::path::{Path, PathBuf};

/// The languages whose blocks must be checked or say why not.
pub const CHECKED_LANGUAGES: &[&str] = &["sh", "console", "toml", "rust", "text", "yaml", "alloy"];

/// One fenced code block.
#[derive(Debug, Clone)]
pub struct Block {
    /// The Markdown file, relative to the workspace.
    pub file: PathBuf,
    /// The line of its opening fence (from 1).
    pub line: usize,
    /// The fence's language (`sh`, `console`, ...; empty when none).
    pub language: String,
    /// What the line before it says of it.
    pub mark: Mark,
    /// Its text, with a newline after each line.
    pub text: String,
}

/// What a block says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// `<!-- checked by FILE: TEST -->`: the test named checks it.
    CheckedBy {
        /// The test's file, relative to the workspace.
        file: String,
        /// The test function.
        test: String,
    },
    /// `<!-- illustrative: WHY -->`.
    Illustrative(String),
    /// Nothing.
    None,
}

impl Block {
    /// Where the block is, for messages: `README.md:42`.
    pub fn place(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }
}

/// The workspace's root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Every Markdown file the blocks are read from: README.md and docs/*.md.
pub fn documents() -> Vec<PathBuf> {
    let mut documents = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(workspace().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "md"))
        .map(|path| path.strip_prefix(workspace()).unwrap().to_path_buf())
        .collect();
    docs.sort();
    documents.extend(docs);
    documents
}

/// Every fenced block of every document.
///
/// ```no_run
/// for block in memprof_tests::docs::blocks() {
///     println!("{} {}", block.place(), block.language);
/// }
/// ```
pub fn blocks() -> Vec<Block> {
    documents()
        .into_iter()
        .flat_map(|file| parse(&file, &std::fs::read_to_string(workspace().join(&file)).unwrap()))
        .collect()
}

/// Asserts that each of `blocks` is code the program `source` (a path in the workspace) runs: every line
/// of a block but comments stands, as written, among the source's lines.
///
/// ```no_run
/// use memprof_tests::docs;
///
/// let blocks = docs::checked_by("a_tonic_servers_calls_are_labelled_per_tenant_by_the_tower_layer");
/// docs::assert_blocks_are_in(&blocks, "memprof-tests/src/bin/tenants_grpc.rs");
/// ```
pub fn assert_blocks_are_in(blocks: &[Block], source: &str) {
    let text = std::fs::read_to_string(workspace().join(source)).unwrap();
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    for block in blocks {
        for line in block.text.lines().map(str::trim).filter(|line| !line.is_empty() && !line.starts_with("//")) {
            assert!(lines.contains(&line), "{}: {line:?} is not a line of {source}", block.place());
        }
    }
}

/// The blocks marked as checked by the test `test`; panics when there are none (a test that checks no
/// block).
///
/// ```no_run
/// let session = memprof_tests::docs::checked_by("the_readmes_curl_session_runs_against_the_example");
/// assert!(session[0].text.starts_with("$ curl"));
/// ```
pub fn checked_by(test: &str) -> Vec<Block> {
    let blocks: Vec<Block> = blocks()
        .into_iter()
        .filter(|block| matches!(&block.mark, Mark::CheckedBy { test: named, .. } if named == test))
        .collect();
    assert!(!blocks.is_empty(), "no block of README.md or docs/ is marked as checked by {test}");
    blocks
}

/// The fenced blocks of the Markdown `text` of `file`.
pub fn parse(file: &Path, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let Some(language) = lines[index].strip_prefix("```") else {
            index += 1;
            continue;
        };
        let end = (index + 1..lines.len()).find(|&end| lines[end].starts_with("```")).unwrap_or(lines.len());
        let mark = index.checked_sub(1).map_or(Mark::None, |before| mark(lines[before]));
        let text: String = lines[index + 1..end].iter().map(|line| format!("{line}\n")).collect();
        blocks.push(Block {
            file: file.to_path_buf(),
            line: index + 1,
            language: language.trim().to_owned(),
            mark,
            text,
        });
        index = end + 1;
    }
    blocks
}

fn mark(line: &str) -> Mark {
    let Some(inside) = line.trim().strip_prefix("<!--").and_then(|rest| rest.strip_suffix("-->")) else {
        return Mark::None;
    };
    let inside = inside.trim();
    if let Some(why) = inside.strip_prefix("illustrative:") {
        return Mark::Illustrative(why.trim().to_owned());
    }
    match inside.strip_prefix("checked by").and_then(|rest| rest.trim().split_once(':')) {
        Some((file, test)) => Mark::CheckedBy { file: file.trim().to_owned(), test: test.trim().to_owned() },
        None => Mark::None,
    }
}

/// The command lines the examples give in their doc comments (`//!` text blocks) and their Cargo.toml
/// comments (indented `#   ` lines), as blocks of their own.
///
/// ```no_run
/// for block in memprof_tests::docs::example_commands() {
///     assert!(!block.text.is_empty(), "{}", block.place());
/// }
/// ```
pub fn example_commands() -> Vec<Block> {
    let sources = [
        "examples/service.rs",
        "examples/scope.rs",
        "examples/axum-service/src/main.rs",
        "examples/axum-service/src/bin/nested.rs",
    ];
    let mut blocks = Vec::new();
    for source in sources {
        let text = std::fs::read_to_string(workspace().join(source)).unwrap();
        let comment: String = text
            .lines()
            .map_while(|line| line.strip_prefix("//!"))
            .map(|line| format!("{}\n", line.trim_start()))
            .collect();
        blocks.extend(parse(Path::new(source), &comment).into_iter().filter(|block| block.language == "text"));
    }
    let manifest = "examples/axum-service/Cargo.toml";
    let text = std::fs::read_to_string(workspace().join(manifest)).unwrap();
    let commands: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter_map(|(index, line)| Some((index + 1, line.strip_prefix("#   ")?.trim())))
        .collect();
    if let Some((line, _)) = commands.first() {
        let text = commands.iter().map(|(_, command)| format!("{command}\n")).collect();
        blocks.push(Block {
            file: PathBuf::from(manifest),
            line: *line,
            language: "text".to_owned(),
            mark: Mark::None,
            text,
        });
    }
    blocks
}

/// Checks that what `command` (one shell command of `block`) names exists once built: `cargo ... --example
/// X` is an example, `target/<profile>/examples/X` its binary, `cargo install --path P` a package with the
/// `memprof` binary, `cd D` a directory, `memprof ...` a command line the tool takes, and `curl` a path
/// memprof serves or a route the block's own program names. The error says what is wrong.
pub fn check_command(block: &Block, command: &str) -> Result<(), String> {
    let workspace = workspace();
    let place = block.place();
    let words: Vec<&str> =
        command.split_whitespace().filter(|word| !word.contains('=') || word.starts_with('\'')).collect();
    let after = |flag: &str| words.iter().position(|word| *word == flag).and_then(|at| words.get(at + 1).copied());
    let is_example = |name: &str| workspace.join(format!("examples/{name}.rs")).is_file();
    match words.first().copied() {
        Some("cargo") => {
            if !matches!(words.get(1), Some(&("run" | "build" | "test" | "install" | "bench"))) {
                return Err(format!("{place}: `{command}` is not a cargo command the docs use"));
            }
            if let Some(example) = after("--example").filter(|example| !is_example(example)) {
                return Err(format!("{place}: there is no example {example}"));
            }
            if let Some(package) = after("--path") {
                let manifest = std::fs::read_to_string(workspace.join(package).join("Cargo.toml")).unwrap_or_default();
                if !manifest.contains("name = \"memprof\"") {
                    return Err(format!("{place}: {package} builds no `memprof` binary"));
                }
            }
        }
        Some("cd") if !workspace.join(words.get(1).copied().unwrap_or("")).is_dir() => {
            return Err(format!("{place}: there is no directory {}", words[1]));
        }
        Some("memprof") => memprof_cli::check_command_line(shell_words(command))
            .map_err(|error| format!("{place}: `{command}` is not a memprof command line:\n{error}"))?,
        Some("curl") => {
            let url = words
                .iter()
                .rev()
                .find(|word| word.contains("127.0.0.1:"))
                .ok_or(format!("{place}: `{command}` names no address"))?;
            let path = url
                .trim_matches('\'')
                .split_once('/')
                .map_or("/", |(_, path)| path)
                .split('?')
                .next()
                .unwrap_or_default();
            let path = format!("/{path}");
            // memprof's own paths, or a route the block's own program names (`"/sessions"`, or the `"/admin"` it
            // nests memprof's routers under).
            let first_segment = path.split('/').nth(1).unwrap_or_default();
            let own_route = std::fs::read_to_string(workspace.join(&block.file))
                .is_ok_and(|source| source.contains(&format!("\"/{first_segment}\"")));
            let served = path.starts_with(memprof_wire::paths::PREFIX)
                || path.starts_with("/debug/pprof/")
                || path == memprof_wire::paths::METRICS
                || own_route;
            if !served {
                return Err(format!("{place}: nothing serves {path}"));
            }
        }
        _ => {}
    }
    for path in words.iter().filter(|word| word.starts_with("target/")) {
        let example =
            path.strip_prefix("target/release/examples/").or_else(|| path.strip_prefix("target/debug/examples/"));
        if !example.is_some_and(is_example) {
            return Err(format!("{place}: {path} is not an example's binary"));
        }
    }
    Ok(())
}

/// The shell commands of a block of command lines: comments dropped, `&&` and `;` split.
pub fn commands(block: &Block) -> Vec<String> {
    block
        .text
        .lines()
        .map(|line| line.trim_start_matches("$ ").split("  #").next().unwrap().trim())
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .flat_map(|line| line.split(" && ").flat_map(|part| part.split("; ")).map(str::to_owned).collect::<Vec<_>>())
        .collect()
}

/// A command line split as the shell would for the simple quoting documentation uses; what follows a `|`
/// and the placeholder `...` are dropped.
fn shell_words(command: &str) -> Vec<String> {
    let command = command.split(" | ").next().unwrap_or_default();
    let mut words = vec![String::new()];
    let mut quoted = false;
    for character in command.chars() {
        match character {
            '\'' => quoted = !quoted,
            ' ' if !quoted => words.push(String::new()),
            other => words.last_mut().unwrap().push(other),
        }
    }
    words.retain(|word| !word.is_empty() && word != "...");
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_read_the_line_before_them() {
        let text = "intro\n<!-- checked by a/b.rs: c_d -->\n```sh\nls\n```\n\n<!-- illustrative: a log -->\n```text\nx\ny\n```\n```\nz\n```\n";
        let blocks = parse(Path::new("README.md"), text);
        assert_eq!(blocks.len(), 3);
        assert_eq!(blocks[0].mark, Mark::CheckedBy { file: "a/b.rs".to_owned(), test: "c_d".to_owned() });
        assert_eq!((blocks[0].line, blocks[0].language.as_str(), blocks[0].text.as_str()), (3, "sh", "ls\n"));
        assert_eq!(blocks[1].mark, Mark::Illustrative("a log".to_owned()));
        assert_eq!(blocks[1].text, "x\ny\n");
        assert_eq!((blocks[2].language.as_str(), &blocks[2].mark), ("", &Mark::None));
    }
}
