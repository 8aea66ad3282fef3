//! Fuzz target: `memprof_runtime::__fuzzing::symbolized_binary` must return for any binary a dump names,
//! never panic, hang or allocate what its headers claim.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    memprof_runtime::__fuzzing::symbolized_binary(data);
});
