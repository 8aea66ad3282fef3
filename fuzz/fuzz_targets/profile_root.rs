//! Fuzz target: what a start-up reads in a dead process's directory (an owner line, a profile's record, a
//! last-seen record) must parse or be refused, never panic (`memprof_runtime::__fuzzing::profile_root_files`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    memprof_runtime::__fuzzing::profile_root_files(data);
});
