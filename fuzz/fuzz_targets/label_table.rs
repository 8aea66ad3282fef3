//! Fuzz target: `memprof_runtime::__fuzzing::label_table` must return for any input, never panic or hang,
//! and what parses must read back the same once written.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        memprof_runtime::__fuzzing::label_table(text);
    }
});
