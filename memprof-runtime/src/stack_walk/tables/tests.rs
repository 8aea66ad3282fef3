//! The walk by unwind tables against libgcc's, on this process's threads.

use super::*;
use crate::stack_walk::dwarf::libgcc_backtrace;

/// Both walks from here: the tables' (from this function's caller) and libgcc's (from its own frame,
/// then this function's).
#[inline(never)]
fn both_walks() -> (Vec<usize>, Vec<usize>) {
    prepare().expect("this test program has unwind tables");
    let mut by_tables = Vec::with_capacity(512);
    walk(|address| {
        by_tables.push(address);
        by_tables.len() < 512
    })
    .expect("every frame of a test is in the executable or a library loaded at start");
    let by_libgcc = libgcc_backtrace(512);
    (by_tables, by_libgcc)
}

/// The same frames to the thread's start. Where the outermost caller's code has no unwind tables (musl's
/// start-up code, `_start_c`), libgcc leaves its frame out and the tables' walk keeps it: one more.
fn assert_walks_agree((by_tables, by_libgcc): (Vec<usize>, Vec<usize>)) {
    assert!(by_tables.len() >= 4, "{by_tables:x?}");
    let common = by_tables.len().min(by_libgcc.len() - 2);
    assert_eq!(by_libgcc[2..2 + common], by_tables[..common], "libgcc's walk, then the tables' walk");
    let extra = by_tables.len() - common;
    assert!(by_libgcc.len() - 2 == common && extra <= 1, "libgcc's {by_libgcc:x?}, the tables' {by_tables:x?}");
}

#[inline(never)]
fn deep(depth: usize) -> (Vec<usize>, Vec<usize>) {
    if depth == 0 { both_walks() } else { std::hint::black_box(deep(depth - 1)) }
}

#[test]
fn the_tables_walk_as_libgcc_does_on_every_thread_and_to_its_start() {
    assert_walks_agree(both_walks());
    assert_walks_agree(std::thread::spawn(both_walks).join().unwrap());
    let (by_tables, by_libgcc) = std::thread::spawn(|| deep(60)).join().unwrap();
    assert!(by_tables.len() > 60, "{} frames", by_tables.len());
    assert_walks_agree((by_tables, by_libgcc));
}

#[test]
fn code_is_known_in_the_executable_and_its_libraries_and_nowhere_else() {
    prepare().unwrap();
    let Some(Ok(known)) = KNOWN.get() else { panic!("prepared") };
    let holds_code = |address: usize| known.code_around(address).is_some();
    assert!(holds_code(both_walks as *const () as usize));
    assert!(holds_code(libc::malloc_usable_size as *const () as usize), "glibc's code, or musl's");
    let local = 0u8;
    assert!(!holds_code(&local as *const u8 as usize), "the stack");
    assert!(!holds_code(0));
}

#[test]
fn a_walk_finds_no_cache_free_when_every_one_is_taken() {
    let slots = [Slot::new(), Slot::new()];
    let nested = with_cache(&slots, |_| with_cache(&slots, |_| with_cache(&slots, |_| ())));
    assert_eq!(nested, Some(Some(None)), "two caches: a third walk at once is refused");
    assert!(slots.iter().all(|slot| !slot.busy.load(Ordering::Relaxed)), "each given back");
}

#[test]
fn the_pointer_to_eh_frame_is_read_in_its_encodings() {
    // Version 1, pc-relative signed 4 bytes (what linkers write), 0x100 past the field at 0x1004.
    let hdr = [1, 0x1b, 0x03, 0x3b, 0x00, 0x01, 0x00, 0x00];
    assert_eq!(eh_frame_address(&hdr, 0x1000), Some(0x1104));
    let backwards = [1, 0x1b, 0x03, 0x3b, 0xfc, 0xff, 0xff, 0xff];
    assert_eq!(eh_frame_address(&backwards, 0x1000), Some(0x1000));
    let absolute = [1, 0x04, 0, 0, 0x78, 0x56, 0x34, 0x12, 0, 0, 0, 0];
    assert_eq!(eh_frame_address(&absolute, 0x1000), Some(0x1234_5678));
    assert_eq!(eh_frame_address(&[2, 0x1b, 0x03, 0x3b, 0, 0, 0, 0], 0x1000), None, "another version");
    assert_eq!(eh_frame_address(&[1, 0x1b, 0x03], 0x1000), None, "cut short");
    assert_eq!(eh_frame_address(&[1, 0x30, 0x03, 0x3b, 0, 0, 0, 0], 0x1000), None, "data-relative: unknown here");
}
