//! Fuzz target: a label value, whatever a program passes, must not forge a stack in folded output nor put a
//! control character in any readable format (`memprof_runtime::__fuzzing::label_split`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(value) = std::str::from_utf8(data) {
        memprof_runtime::__fuzzing::label_split(value);
    }
});
