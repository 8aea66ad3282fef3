// A program with its own global allocator that forgot `allocator = false`: the first error names the fix.
#[global_allocator]
static GLOBAL: std::alloc::System = std::alloc::System;

memprof::malloc_conf!();

#[memprof::main]
fn main() {}
