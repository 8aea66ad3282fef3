//! Stacks through C code built without frame pointers, as glibc's and the C libraries services link are:
//! the frame-pointer walk breaks there, and the DWARF unwinder completes the stack up to `main`.

use memprof_tests::process::Program;

/// The folded stacks (every frame) of a run in which the windows program's C function (c/allocate.c, no
/// frame pointers, the register holding data while it calls `malloc`) allocated 16 MiB, walked as
/// `MEMPROF_UNWINDER` says; the stacks through C with their bytes; and `state`'s `stack_walk`.
fn through_c(unwinder: Option<&str>) -> (String, Vec<(String, f64)>, memprof_wire::StackWalk) {
    let mut program = Program::windows().env("MALLOC_CONF", "lg_prof_sample:14");
    if let Some(unwinder) = unwinder {
        program = program.env("MEMPROF_UNWINDER", unwinder);
    }
    let program = program.spawn();
    program.wait_for_line(|line| line == "windows: ready");
    let id = program.start("").id;
    program.tell("through-c", "windows: done through-c");
    assert_eq!(program.get("/memory-profiler/stop").status, 200);
    let folded = program.get(&format!("/memory-profiler/download/collapsed?id={id}&full=true")).text();
    let through_c: Vec<(String, f64)> = folded
        .lines()
        .filter_map(|line| line.rsplit_once(' '))
        .filter(|(stack, _)| stack.ends_with(";memprof_test_c_allocate"))
        .map(|(stack, bytes)| (stack.to_owned(), bytes.parse().unwrap()))
        .collect();
    let bytes: f64 = through_c.iter().map(|(_, bytes)| bytes).sum();
    let mib = bytes / (1 << 20) as f64;
    assert!((mib - 16.0).abs() <= 16.0 * 0.06, "{mib:.2} MiB through C, expected 16:\n{folded}");
    for (stack, _) in &through_c {
        assert!(stack.contains(";windows::main;windows::allocated_through_c;"), "{stack}");
    }
    let walk = program.state().stack_walk;
    (folded, through_c, walk)
}

/// What the C function allocated reaches the Rust function that called it and `main`, in every sampled
/// stack; `state` counts the walks the unwinder completed. Without the completion each of those stacks
/// ends at the C function.
#[test]
fn a_stack_through_c_code_without_frame_pointers_reaches_main() {
    let (folded, through_c, walk) = through_c(None);
    for (stack, _) in &through_c {
        // Where the stacks whose frame chain held end: the thread's start, without the outermost frames
        // (`_start`, `__libc_start_main`) that only the unwinder sees.
        assert!(stack.starts_with("__libc_start_call_main;main;"), "reaches the thread's start: {stack}");
    }
    // Every stack of the run, through C or not, under the same root.
    let roots: std::collections::BTreeSet<&str> =
        folded.lines().filter_map(|line| line.split(';').next()).filter(|root| !root.contains(' ')).collect();
    assert_eq!(roots.into_iter().collect::<Vec<_>>(), ["__libc_start_call_main"], "{folded}");
    assert_eq!(walk.method, "frame pointers", "{walk:?}");
    let completed = walk.completed_by_unwinder;
    assert!(completed as usize >= through_c.len(), "{completed} walks completed: {walk:?}");
}

/// Walked by the unwind tables (the walk of programs built without frame pointers), the same stacks reach
/// the program's start through the C function, with nothing to complete.
#[test]
fn the_unwind_tables_walk_through_c_code_to_the_programs_start() {
    let (folded, through_c, walk) = through_c(Some("unwind-tables"));
    for (stack, _) in &through_c {
        assert!(stack.contains(";__libc_start_call_main;main;"), "reaches the thread's start: {stack}");
    }
    assert!(folded.lines().all(|line| !line.starts_with("memprof_test_c_allocate")), "{folded}");
    assert_eq!(walk.method, "unwind tables", "{walk:?}");
    assert_eq!(walk.completed_by_unwinder, 0, "{walk:?}");
}

/// A stack deeper than the walk's 128 frames is cut, and says so: its outermost frame names how many frames
/// were left out, 5,000 calls deep, instead of the stack reading as one that starts in the recursion.
#[test]
fn a_stack_cut_at_the_walks_limit_says_how_much_was_left_out() {
    let program = Program::windows().env("MALLOC_CONF", "lg_prof_sample:14").spawn();
    program.wait_for_line(|line| line == "windows: ready");
    let id = program.start("").id;
    program.tell("deep 5000", "windows: done deep 5000");
    assert_eq!(program.get("/memory-profiler/stop").status, 200);
    let folded = program.get(&format!("/memory-profiler/download/collapsed?id={id}")).text();
    let deep: Vec<&str> = folded.lines().filter(|line| line.contains("windows::allocated_deep")).collect();
    assert!(!deep.is_empty(), "{folded}");
    for line in deep {
        let root = line.split(';').next().unwrap();
        let cut: u32 = root
            .strip_prefix("[truncated: ")
            .and_then(|rest| rest.strip_suffix(" more frames]")?.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        // 5,000 recursive calls and the frames below them, less the 126 or so kept.
        assert!((4_870..=5_000).contains(&cut), "{cut}: {line}");
    }
}
