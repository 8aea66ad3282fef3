//! Rust function names shortened for pprof's display, keeping what binutils' name says of the type and the
//! trait: generic arguments go (`Vec<T,A>` is `Vec`, `do_call::<F, R>` is `do_call`), qualified paths stay
//! (`<Vec as SpecExtend>::spec_extend`, `<impl [T]>::to_vec`, `{closure#0}`).
//!
//! pprof displays a function's `name`; where it equals `system_name`, pprof takes it for a C++ name it
//! could not demangle and strips every `<...>` from it, type and trait included (`::push_str` for
//! `<std::sys::os_str::bytes::Buf>::push_str`). So the whole name goes to `system_name` and this one to
//! `name`, and where they would be equal (a name with no generic arguments) `system_name` is left empty.

/// `name` without its generic argument lists.
///
/// ```text
/// <alloc::vec::Vec<T,A> as alloc::vec::spec_extend::SpecExtend<&T,core::slice::iter::Iter<T>>>::spec_extend
///   -> <alloc::vec::Vec as alloc::vec::spec_extend::SpecExtend>::spec_extend
/// ```
pub(super) fn without_generic_arguments(name: &str) -> String {
    let bytes = name.as_bytes();
    let mut shortened = String::with_capacity(name.len());
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        let after_name = index > 0 && (bytes[index - 1].is_ascii_alphanumeric() || bytes[index - 1] == b'_');
        let turbofish = name[index..].starts_with("::<") && !name[index + 3..].starts_with("impl ");
        if byte == b'<' && after_name {
            index = past_closing(bytes, index);
        } else if turbofish {
            index = past_closing(bytes, index + 2);
        } else {
            let next = name[index..].chars().next().map_or(1, char::len_utf8);
            shortened.push_str(&name[index..index + next]);
            index += next;
        }
    }
    shortened
}

/// The index past the `>` that closes the `<` at `open` (the end of `bytes` if none does); the `>` of a
/// `->` closes nothing.
fn past_closing(bytes: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (index, &byte) in bytes.iter().enumerate().skip(open) {
        match byte {
            b'<' => depth += 1,
            b'>' if index > 0 && bytes[index - 1] == b'-' => {}
            b'>' => {
                depth -= 1;
                if depth == 0 {
                    return index + 1;
                }
            }
            _ => {}
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_arguments_go_types_and_traits_stay() {
        let cases = [
            (
                "<alloc::vec::Vec<T,A> as alloc::vec::spec_extend::SpecExtend<&T,core::slice::iter::Iter<T>>>::spec_extend",
                "<alloc::vec::Vec as alloc::vec::spec_extend::SpecExtend>::spec_extend",
            ),
            ("<std::sys::os_str::bytes::Buf>::push_str", "<std::sys::os_str::bytes::Buf>::push_str"),
            ("alloc::slice::<impl [T]>::to_vec", "alloc::slice::<impl [T]>::to_vec"),
            (
                "std::panicking::catch_unwind::do_call::<std::rt::lang_start_internal::{closure#0}, isize>",
                "std::panicking::catch_unwind::do_call",
            ),
            ("core::ptr::drop_in_place<alloc::string::String>", "core::ptr::drop_in_place"),
            ("app::run::<u8>::{closure#0}", "app::run::{closure#0}"),
            (
                "<&dyn core::ops::function::Fn<(), Output = i32> + core::marker::Sync as core::ops::function::FnOnce<()>>::call_once",
                "<&dyn core::ops::function::Fn + core::marker::Sync as core::ops::function::FnOnce>::call_once",
            ),
            (
                "<alloc::boxed::Box<dyn Fn() -> u8> as core::ops::Drop>::drop",
                "<alloc::boxed::Box as core::ops::Drop>::drop",
            ),
            ("service::open_session::{{closure}}", "service::open_session::{{closure}}"),
            ("malformed<never closed", "malformed"),
        ];
        for (name, shortened) in cases {
            assert_eq!(without_generic_arguments(name), shortened, "{name}");
        }
    }
}
