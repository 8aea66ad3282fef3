//! The verdicts, the walks' questions and this program's symbols judged.

use super::*;

const A: Option<bool> = Some(true);
const P: Option<bool> = Some(false);

#[test]
fn ranges_are_looked_up_and_return_addresses_moved_into_the_call() {
    let code = AllocatorCode::judged_already(&[(0x100, 0x180), (0x200, 0x210)], &[A, A]);
    assert!(code.contains(0x100) && code.contains(0x17f) && code.contains(0x20f));
    assert!(!code.contains(0xff) && !code.contains(0x180) && !code.contains(0x210));
    assert_eq!(code.judged_at(0x180), Judged::Allocator);
    assert_eq!(code.judged_at(0x100), Judged::Program, "no function of the executable's");
}

#[test]
fn a_walk_asks_for_a_function_not_judged_and_keeps_its_frame_meanwhile() {
    let code = AllocatorCode::judged_already(&[(0x100, 0x180), (0x200, 0x210)], &[None, P]);
    assert_eq!(code.judged_at(0x101), Judged::NotYet);
    assert!(code.asked_for(0x101) && code.asked.load(Ordering::Relaxed));
    assert_eq!(code.judged_at(0x101), Judged::NotYet, "asked already");
    assert_eq!(code.judged_at(0x201), Judged::Program);
    assert_eq!(code.verdicts[1].load(Ordering::Relaxed), PROGRAM, "judged already: not asked again");
}

#[test]
fn a_profile_leaves_out_the_leading_frames_judged_the_allocators_and_keeps_one() {
    let code = AllocatorCode::judged_already(&[(0x100, 0x180), (0x200, 0x210), (0x300, 0x310)], &[A, A, P]);
    assert_eq!(code.leading_frames(&[0x101, 0x201, 0x301, 0x101]), 2);
    assert_eq!(code.leading_frames(&[0x301, 0x101]), 0);
    assert_eq!(code.leading_frames(&[0x101, 0x201]), 1, "the last frame is kept");
    assert_eq!(code.leading_frames(&[]), 0);
}

#[test]
fn names_are_demangled_only_as_far_as_the_plumbing_reaches() {
    let legacy = "_ZN5alloc7raw_vec11finish_grow17h0123456789abcdefE";
    assert_eq!(DemangledPrefix::of(legacy).as_str(), "alloc::raw_vec::finish_grow");
    let long = format!("_ZN5alloc3vec300{}E", "x".repeat(300));
    let cut = DemangledPrefix::of(&long);
    assert_eq!(cut.as_str().len(), DEMANGLED_PREFIX);
    assert!(cut.as_str().starts_with("alloc::vec::xxx"), "{}", cut.as_str());
    assert!(is_allocator_code(legacy) && is_allocator_code(&long));
    assert!(!is_allocator_code("_ZN7service12open_session17h0123456789abcdefE"));
}

#[test]
fn a_trait_method_whose_self_type_fills_the_prefix_is_judged_by_its_trait() {
    // v0: `<[service::Long..; 3] as alloc::vec::spec_from_elem::SpecFromElem>::from_elem`, the element type's
    // name 300 bytes long.
    let element = format!("NtCs3_7service300{}", "x".repeat(300));
    let trait_path = "NtNtNtCs2_5alloc3vec14spec_from_elem12SpecFromElem";
    let plumbing = format!("_RNvXCs2_5allocAINtNtCs1_4core6option6Option{element}Ej3_{trait_path}9from_elem");
    let demangled = format!("{:#}", rustc_demangle::demangle(&plumbing));
    assert!(demangled.ends_with("as alloc::vec::spec_from_elem::SpecFromElem>::from_elem"), "{demangled}");
    assert!(demangled.len() > DEMANGLED_PREFIX && DemangledPrefix::of(&plumbing).cut);
    assert!(is_allocator_code(&plumbing));
    // The same self type for a trait of the program's, in a crate named so that the mangled name may be.
    let program = format!("_RNvXCs3_7serviceAINtNtCs1_4core6option6Option{element}Ej3_NtCs4_13alloc_service4Make4make");
    assert!(may_be_allocator_code(program.as_bytes()) && DemangledPrefix::of(&program).cut);
    assert!(!is_allocator_code(&program), "{:#}", rustc_demangle::demangle(&program));
}

#[test]
fn this_programs_symbols_are_judged_alike_by_their_demangled_prefix_and_whole_name() {
    let file = File::open("/proc/self/exe").unwrap();
    // SAFETY: only read, in this test.
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
    let binary = object::File::parse(&*map).unwrap();
    let names: Vec<&str> = binary.symbols().filter_map(|symbol| symbol.name().ok()).collect();
    assert!(names.len() > 1000, "{} symbols", names.len());
    for name in names {
        let whole = memprof_analysis::is_allocation_plumbing(&format!("{:#}", rustc_demangle::demangle(name)));
        assert_eq!(is_allocator_code(name), may_be_allocator_code(name.as_bytes()) && whole, "{name}");
    }
}

#[test]
fn this_programs_allocator_is_found_when_judged() {
    let code = AllocatorCode::of_this_program();
    assert!(code.functions.len() > 1000, "{} functions", code.functions.len());
    let malloc = tikv_jemalloc_sys::malloc as *const () as usize;
    let program = ranges_are_looked_up_and_return_addresses_moved_into_the_call as *const () as usize;
    // A walk meets malloc: asked for, judged by the counters' thread's next call.
    assert_ne!(code.judged_at(malloc + 1), Judged::Program);
    code.judge_asked();
    assert!(code.contains(malloc));
    code.judge_all();
    assert!(!code.contains(program));
    let judged_allocator = code.verdicts.iter().filter(|verdict| verdict.load(Ordering::Relaxed) == ALLOCATOR).count();
    assert!(judged_allocator > 10, "{judged_allocator} functions");
}

#[test]
fn keys_sort_by_address_as_a_whole_sort_would() {
    // Addresses of every size, aliases among them, each with its position below bit 24, in order.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut keys: Vec<u64> = (0..20_000u64)
        .map(|at| {
            let address = match at % 3 {
                0 => next() >> 24,
                1 => 0x40_0000 + (next() % 5_000) * 16,
                _ => next() % 4,
            };
            (address << 24) | at
        })
        .collect();
    let mut expected = keys.clone();
    expected.sort_unstable();
    sort_by_address(&mut keys);
    assert_eq!(keys, expected);
}

#[test]
fn final_verdicts_are_remembered_by_return_address_and_a_question_is_not() {
    let code = AllocatorCode::judged_already(&[(0x100, 0x180), (0x200, 0x210)], &[None, A]);
    assert_eq!(code.judged_at(0x101), Judged::NotYet);
    assert_eq!(code.remembered.get(0x101), None, "a question is not an answer");
    code.verdicts[0].store(PROGRAM, Ordering::Relaxed);
    assert_eq!(code.judged_at(0x101), Judged::Program, "judged since");
    assert_eq!(code.remembered.get(0x101), Some(Judged::Program));
    assert_eq!(code.judged_at(0x201), Judged::Allocator);
    assert_eq!(code.remembered.get(0x201), Some(Judged::Allocator));
    assert_eq!(code.judged_at(0x5000), Judged::Program, "no function of the executable's");
    assert_eq!(code.remembered.get(0x5000), Some(Judged::Program));
    // Two addresses of one slot replace each other, and each is searched for again.
    let slot = |address: usize| code.remembered.slot(address) as *const AtomicU64;
    let other = (0x202..).find(|&address| slot(address) == slot(0x201)).unwrap();
    code.remembered.put(other, Judged::Program);
    assert_eq!(code.remembered.get(0x201), None);
    assert_eq!(code.judged_at(0x201), Judged::Allocator);
    assert_eq!(code.remembered.get(other), None);
    // No address of kernel space (nor 0) is remembered: its top bit would be lost in the slot.
    code.remembered.put(usize::MAX - 0xff, Judged::Allocator);
    code.remembered.put(0, Judged::Allocator);
    assert_eq!(code.remembered.get(usize::MAX - 0xff), None);
    assert_eq!(code.remembered.get(0), None);
}
