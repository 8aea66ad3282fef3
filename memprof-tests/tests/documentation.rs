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
