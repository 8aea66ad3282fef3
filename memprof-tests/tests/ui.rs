//! Compile errors for every misuse of `#[memprof::main]`, with their spans (`tests/ui/*.stderr`), and the
//! macro shapes that must build and run (`tests/ui/pass/`).
//! Refresh the expected output with `TRYBUILD=overwrite cargo test -p memprof-tests --test ui`.

#[test]
fn misuse_of_the_attribute_is_a_precise_compile_error_and_the_other_shapes_run() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
    cases.pass("tests/ui/pass/*.rs");
}
