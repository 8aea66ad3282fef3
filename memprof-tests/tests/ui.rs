//! Compile errors for every misuse of `#[memprof::main]`, with their spans (`tests/ui/*.stderr`).
//! Refresh the expected output with `TRYBUILD=overwrite cargo test -p memprof-tests --test ui`.

#[test]
fn misuse_of_the_attribute_is_a_precise_compile_error() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
