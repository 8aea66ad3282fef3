//! Compile errors for every misuse of `#[memprof::main]`, with their spans (`tests/ui/*.stderr`), and the
//! macro shapes that must build and run: `tests/ui/pass/`, and the Rust blocks of README and docs/ that are
//! whole programs (one trybuild run: two would share its project and mistake each other's builds).
//! Refresh the expected output with `TRYBUILD=overwrite cargo test -p memprof-tests --test main ui::`.

#[test]
fn the_attributes_misuse_fails_to_compile_and_its_documented_shapes_run() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
    cases.pass("tests/ui/pass/*.rs");
    let scratch = memprof_tests::tools::Scratch::new("documented-programs");
    let documented =
        memprof_tests::docs::checked_by("the_attributes_misuse_fails_to_compile_and_its_documented_shapes_run");
    for (index, block) in documented.iter().enumerate() {
        assert_eq!(block.language, "rust", "{}", block.place());
        let program = scratch.join(&format!("documented_{index}.rs"));
        std::fs::write(&program, format!("// {}\n{}", block.place(), block.text)).unwrap();
        cases.pass(&program);
    }
    // trybuild runs the cases when `cases` is dropped, while the scratch directory still exists.
    drop(cases);
}
