//! Fuzz target: `memprof_runtime::__fuzzing::heap_profile` must return for any input, never panic or hang.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        memprof_runtime::__fuzzing::heap_profile(text);
    }
});
