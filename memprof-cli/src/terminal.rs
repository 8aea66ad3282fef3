//! What reaches the operator's terminal: text from a service or a dump is a claim, and a control character
//! in it could rewrite the screen (an escape sequence that overwrites the real error line, say). Every such
//! text is printed through [`for_terminal`]; profiles written to a terminal go through it too, and binary
//! ones (pprof, raw dumps) are not written to a terminal unless asked for (`-o -`), as curl does.

use std::fmt::Write;
use std::io::IsTerminal;

/// `text` with its control characters (but newlines and tabs) and Unicode direction overrides shown as
/// escapes (`\x1b`, `\u{202e}`), so that nothing but text reaches the terminal.
///
/// ```ignore
/// assert_eq!(for_terminal("ok\x1b[2K\rall good"), "ok\\x1b[2K\\rall good");
/// ```
pub(crate) fn for_terminal(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '\n' | '\t' => shown.push(character),
            '\r' => shown.push_str("\\r"),
            _ if character.is_control() && u32::from(character) < 0x100 => {
                let _ = write!(shown, "\\x{:02x}", u32::from(character));
            }
            '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
                let _ = write!(shown, "\\u{{{:x}}}", u32::from(character));
            }
            _ => shown.push(character),
        }
    }
    shown
}

/// One field of a service's answer (a message, a frame, a class, a caption) on the line it is printed on:
/// as [`for_terminal`], with newlines and tabs escaped too, so that a service cannot add a line of its own
/// making to what the operator reads.
///
/// ```ignore
/// assert_eq!(one_line("purged\nrun 7 stopped"), "purged\\nrun 7 stopped");
/// ```
pub(crate) fn one_line(text: &str) -> String {
    for_terminal(text).replace('\n', "\\n").replace('\t', "\\t")
}

/// Whether standard output is a terminal.
pub(crate) fn stdout_is_terminal() -> bool {
    std::io::stdout().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_direction_overrides_are_shown_not_obeyed() {
        assert_eq!(for_terminal("run 7\n\tok"), "run 7\n\tok");
        assert_eq!(for_terminal("bad\x1b[1A\x1b[2K\rall good"), "bad\\x1b[1A\\x1b[2K\\rall good");
        assert_eq!(for_terminal("\u{7}\u{9b}31m"), "\\x07\\x9b31m");
        assert_eq!(for_terminal("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(for_terminal("service::open_session µs"), "service::open_session µs");
        assert_eq!(one_line("Returned 0 MiB\nRun 7 stopped\t\x1b[2K"), "Returned 0 MiB\\nRun 7 stopped\\t\\x1b[2K");
    }
}
