//! Sets the `profiling` cfg where the profiler is compiled in: the `enabled` feature on Linux, the one
//! platform memprof profiles on. Elsewhere the facade is its compiled-out stand-ins, whatever the features.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(profiling)");
    let enabled = std::env::var_os("CARGO_FEATURE_ENABLED").is_some();
    if enabled && std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux") {
        println!("cargo::rustc-cfg=profiling");
    }
}
