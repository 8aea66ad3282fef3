//! Builds `c/allocate.c`, the C function the windows program allocates through (tests/stacks.rs), as C
//! libraries are built: optimized, without frame pointers.

fn main() {
    println!("cargo:rerun-if-changed=c/allocate.c");
    cc::Build::new()
        .file("c/allocate.c")
        .opt_level(2)
        .force_frame_pointer(false)
        .flag("-fomit-frame-pointer")
        // The call to malloc stays a call (a tail call would restore the register first).
        .flag("-fno-optimize-sibling-calls")
        // Linked by the program that calls it (`#[link]` in src/bin/windows.rs), not by every target.
        .cargo_metadata(false)
        .compile("memprof_test_c");
    println!("cargo:rustc-link-search=native={}", std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
}
