//! Fuzz target: `memprof_runtime::__fuzzing::request_head` must return for any bytes, never panic or hang.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    memprof_runtime::__fuzzing::request_head(data);
});
