//! The frame-pointer walk against libgcc's, and the maps reader, on this process.

use super::maps::MapsRange;
use super::*;

#[inline(never)]
fn walk_from_here() -> Vec<usize> {
    FrameWalk::here().expect("a Rust thread's stack is known").take(32).collect()
}

#[test]
fn this_build_keeps_frame_pointers_and_both_walks_agree() {
    // The workspace builds with `-C force-frame-pointers=yes` (.cargo/config.toml), unless RUSTFLAGS in
    // the environment replaces the flags of that file (cargo takes one or the other, not both).
    let agreed = frame_pointers_agree_with_libgcc();
    if let (Err(why), Ok(flags)) = (&agreed, std::env::var("RUSTFLAGS"))
        && !flags.contains("force-frame-pointers=yes")
    {
        panic!(
            "{why}: RUSTFLAGS={flags:?} replaces the workspace's rustflags (.cargo/config.toml), so this build \
             may lack frame pointers; add -C force-frame-pointers=yes to RUSTFLAGS"
        );
    }
    assert_eq!(agreed, Ok(()));
}

#[test]
fn a_walk_that_skips_or_starts_elsewhere_disagrees() {
    let libgcc = [0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80];
    assert_eq!(agree(&[0x30, 0x40, 0x50, 0x60, 0x70, 0x80], &libgcc), Ok(()));
    // A function without a frame record: its caller's return address is missing.
    assert!(agree(&[0x30, 0x50, 0x60, 0x70, 0x80], &libgcc).unwrap_err().contains("skip frames"));
    // The frame pointer is a frame far up (code built without frame pointers leaves it alone).
    assert!(agree(&[0x60, 0x70, 0x80], &libgcc).is_err());
    assert!(agree(&[0x70, 0x80], &libgcc).unwrap_err().contains("lead nowhere"));
}

#[test]
fn the_walk_stops_within_the_stack_on_every_thread() {
    let (_, stack_pointer) = registers().unwrap();
    let (bottom, top) = this_thread_stack(stack_pointer).unwrap();
    assert!(bottom <= stack_pointer && stack_pointer < top);
    let addresses = std::thread::spawn(walk_from_here).join().unwrap();
    assert!(addresses.len() >= 3, "{addresses:x?}");
    assert!(addresses.iter().all(|&address| address > 4096), "{addresses:x?}");
}

#[test]
fn a_walk_from_a_frame_outside_the_stack_yields_nothing() {
    let (_, top) = this_thread_stack(registers().unwrap().1).unwrap();
    let outside = FrameWalk { frame: top + 4096, low: top - 4096, high: top };
    assert_eq!(outside.count(), 0);
    let unaligned = FrameWalk { frame: top - 4095, low: top - 8192, high: top };
    assert_eq!(unaligned.count(), 0);
}

#[test]
fn maps_lines_give_their_ranges_and_odd_lines_none() {
    let maps = "55c07626b000-55c076459000 r--p 00000000 fe:00 10016534    /usr/bin/x y-z 1-2\n\
                7ffd1a2b3000-7ffd1a2d4000 rw-p 00000000 00:00 0                          [stack]\n\
                ffffffffffffffffff-1 r--p\n\
                garbage\n";
    let mut range = MapsRange::default();
    let ranges: Vec<_> = maps.bytes().filter_map(|byte| range.push(byte)).collect();
    assert_eq!(ranges, [(0x55c0_7626_b000, 0x55c0_7645_9000), (0x7ffd_1a2b_3000, 0x7ffd_1a2d_4000)]);
}

#[test]
fn the_mapping_of_a_local_holds_it_and_no_mapping_holds_address_zero() {
    let local = 7u64;
    let address = &local as *const u64 as usize;
    let (start, end) = mapping_containing(address).unwrap();
    assert!(start <= address && address < end);
    assert_eq!(mapping_containing(0), None);
}

#[test]
fn the_programs_own_unwinder_walks_as_libgcc_does_and_within_its_buffer() {
    let mut frames = [std::ptr::null_mut::<c_void>(); 16];
    let mut len: c_uint = 0;
    // SAFETY: `frames` has room for 16 pointers; `len` is writable.
    unsafe { unwind_backtrace(frames.as_mut_ptr(), &mut len, 16) };
    let by_frame_pointers = walk_from_here();
    assert!(len >= 6, "{len} frames");
    // The unwinder starts in its own function, then returns into this one; the frame-pointer walk starts
    // at the return into this one's caller: from there the two agree.
    let walked: Vec<usize> = frames[2..6].iter().map(|frame| *frame as usize).collect();
    assert_eq!(walked, by_frame_pointers[1..5]);
    let mut short = [std::ptr::null_mut::<c_void>(); 2];
    // SAFETY: as above, with room for 2.
    unsafe { unwind_backtrace(short.as_mut_ptr(), &mut len, 2) };
    assert_eq!(len, 2);
}
