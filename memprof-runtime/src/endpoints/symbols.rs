//! pprof's remote symbol protocol, which `jeprof` and `pprof` use to symbolize against a live process:
//! `GET .../pprof/symbol` answers `num_symbols: 1`; `POST` with `0xADDR+0xADDR...` answers one
//! `0xADDR function` line per address it knows (a label frame as `memprof label tenant=acme`). And `pprof/cmdline`, where jeprof reads the program name.
//!
//! ```text
//! jeprof --text http://127.0.0.1:5050/memory-profiler/pprof/heap
//! ```

use std::fmt::Write as _;

use super::context::Context;
use super::jobs::Permit;
use crate::http::{HttpError, Query, Reply, Request};
use crate::profile_root::untrusted::printable;

/// The most addresses one lookup takes.
const MAX_ADDRESSES: usize = 1 << 16;

/// How many addresses are named at once.
const ADDRESSES_AT_ONCE: usize = 4096;

/// The longest answer: 65,536 distinct addresses with names of some 110 bytes (a Rust program's average is
/// half that). An address asked many times is answered once (jeprof reads the answer into a map), so only
/// distinct long names reach it. It bounds what an answer holds until written: its own place among the
/// jobs, and no more than this.
const MAX_ANSWER_BYTES: usize = 8 << 20;

/// `pprof/symbol`.
pub(super) fn symbol(context: &Context, _: &Query, request: &Request) -> Result<Reply, HttpError> {
    let body = std::str::from_utf8(&request.body)
        .map_err(|_| HttpError::bad_request("The addresses must be text: 0x-prefixed hexadecimal joined by '+'"))?;
    let body = body.trim();
    if body.is_empty() {
        return Ok(text("num_symbols: 1\n".to_owned()));
    }
    let addresses = body
        .split('+')
        .map(|address| {
            let digits = address.trim().trim_start_matches("0x").trim_start_matches("0X");
            u64::from_str_radix(digits, 16)
                .map_err(|_| HttpError::bad_request(format!("'{address}' is not a hexadecimal address")))
        })
        .collect::<Result<Vec<u64>, HttpError>>()?;
    if addresses.len() > MAX_ADDRESSES {
        return Err(HttpError::new(413, format!("At most {MAX_ADDRESSES} addresses can be looked up at once")));
    }
    // Each distinct address once: 65,536 copies of one address cost one name, not 65,536.
    let mut addresses = addresses;
    addresses.sort_unstable();
    addresses.dedup();
    let permit = Permit::or_busy()?;
    // One lookup names addresses at a time (the other job may render): two would double what naming costs.
    let Some(_naming) = context.naming.try_lock() else {
        return Err(HttpError::busy("Another symbol lookup is being answered; try again in a second", 1));
    };
    let mut pieces = Vec::new();
    let mut answered = 0;
    // A chunk of addresses at a time (sorted, so each falls in few of the binary's units): what naming them
    // costs is bounded by a chunk, and only the answer grows, a piece of the exact size for each chunk.
    for chunk in addresses.chunks(ADDRESSES_AT_ONCE) {
        let names = memprof_analysis::function_names_in_this_process(chunk)
            .map_err(|error| HttpError::internal(format!("Cannot read /proc/self/maps ({error})")))?;
        let labels = crate::labels::frame_names(chunk);
        let named: Vec<(u64, String)> = chunk
            .iter()
            .zip(names.into_iter().zip(labels))
            // A label's value is whatever the program passed: a newline in it must not add a line (a forged
            // name for another address), nor an escape sequence reach the terminal jeprof prints to.
            .filter_map(|(address, (name, label))| Some((*address, printable(&name.or(label)?))))
            .collect();
        let size: usize = named.iter().map(|(_, name)| LINE_BYTES + name.len()).sum();
        answered += size;
        if answered > MAX_ANSWER_BYTES {
            return Err(HttpError::new(
                413,
                format!("The names of these addresses exceed {MAX_ANSWER_BYTES} bytes; ask for fewer at once"),
            ));
        }
        let mut piece = String::with_capacity(size);
        for (address, name) in named {
            // Writing to a String cannot fail.
            let _ = writeln!(piece, "{address:#018x} {name}");
        }
        pieces.push(piece.into_bytes());
    }
    // The answer holds the job's place until it is written: clients that do not read cannot pile up answers.
    Ok(Reply::pieces(TEXT, pieces).holding(permit.into_place()))
}

/// What a line of the answer takes besides the name: the address (`0x` and 16 digits), a space, a newline.
const LINE_BYTES: usize = 20;

/// `pprof/cmdline`: the program's arguments, one per line (jeprof takes the first for the program).
pub(super) fn command_line(_: &Context, _: &Query) -> Result<Reply, HttpError> {
    let arguments: String = std::env::args_os().map(|argument| format!("{}\n", argument.to_string_lossy())).collect();
    Ok(text(arguments))
}

const TEXT: &str = "text/plain; charset=utf-8";

fn text(body: String) -> Reply {
    Reply::bytes(TEXT, body.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lookup_while_another_names_its_addresses_is_refused_with_503() {
        let request = Request::new("POST", "/debug/pprof/symbol", b"0x1+0x2".to_vec());
        let naming = super::super::context::context().naming.lock();
        let error = symbol(super::super::context::context(), &Query::default(), &request).err().unwrap();
        assert_eq!(
            (error.status, error.message.as_str()),
            (503, "Another symbol lookup is being answered; try again in a second")
        );
        drop(naming);
        assert!(symbol(super::super::context::context(), &Query::default(), &request).is_ok());
    }

    #[test]
    fn a_label_value_cannot_add_a_line_to_the_answer() {
        let id = crate::labels::with(&[("tenant", "acme\n0x1 forged\u{1b}[2J")], crate::labels::current);
        let address = memprof_analysis::label_address(id);
        let request = Request::new("POST", "/debug/pprof/symbol", format!("{address:#x}").into_bytes());
        // Another test may hold the lookup or the job places a moment: 503 is asked again.
        let reply = crate::testing::wait_until("the lookup answered", || {
            match symbol(super::super::context::context(), &Query::default(), &request) {
                Err(error) if error.status == 503 => Err(error.message),
                answered => Ok(answered.unwrap()),
            }
        });
        let mut written = Vec::new();
        reply.into_response().write_to(&mut written, crate::http::Framing::CLOSE).unwrap();
        let written = String::from_utf8(written).unwrap();
        let body = written.split_once("\r\n\r\n").unwrap().1;
        assert_eq!(body, format!("{address:#018x} memprof label tenant=acme\\n0x1 forged\\u{{1b}}[2J\n"));
    }
}
