//! The kernel's view of the process's memory, mapping by mapping: `/proc/self/smaps`, read as a stream (a
//! process may have tens of thousands of mappings), and `/proc/self/status`'s totals.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};

/// What a mapping is, from its path in `smaps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// No path (or an `[anon:...]` name): anonymous memory.
    Anonymous,
    /// `[heap]`: the program break (`brk`), anonymous memory grown by `sbrk`.
    Brk,
    /// `[stack]`: the main thread's stack.
    MainStack,
    /// `[vdso]`, `[vvar]`, `[vsyscall]`: code the kernel maps into every process.
    KernelCode,
    /// A file (device and inode), including shared memory (`/memfd:...`, `/SYSV...`, `/dev/zero`).
    File { device: (u32, u32), inode: u64 },
    /// Anything else the kernel names in brackets.
    Unknown,
}

/// One mapping of `/proc/self/smaps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mapping {
    /// First address.
    pub(crate) start: usize,
    /// One past the last address.
    pub(crate) end: usize,
    /// `r`, `w`, `x` and `p`/`s`, as the kernel prints them.
    pub(crate) perms: [u8; 4],
    /// What it maps.
    pub(crate) kind: Kind,
    /// Resident bytes (`Rss`).
    pub(crate) rss: u64,
}

impl Mapping {
    /// Whether its pages are executable.
    pub(crate) fn executable(&self) -> bool {
        self.perms[2] == b'x'
    }

    /// Whether it is private, readable and writable (`rw-p`), as stacks and heaps are.
    pub(crate) fn private_writable(&self) -> bool {
        &self.perms == b"rw-p"
    }

    /// Whether no access is allowed (`---p`): a guard.
    pub(crate) fn guard(&self) -> bool {
        &self.perms[..3] == b"---"
    }
}

/// The longest line read: a path is at most `PATH_MAX` (4096) bytes, and a line of `smaps` is its header.
const LONGEST_LINE: u64 = 8192;

/// Reads `/proc/self/smaps`.
pub(crate) fn read() -> io::Result<Vec<Mapping>> {
    parse(BufReader::with_capacity(64 * 1024, File::open("/proc/self/smaps")?))
}

/// Parses the text of an `smaps` file: a header line per mapping, then its `Name: value kB` fields.
pub(crate) fn parse(mut text: impl BufRead) -> io::Result<Vec<Mapping>> {
    let mut mappings = Vec::new();
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        if (&mut text).take(LONGEST_LINE).read_until(b'\n', &mut line)? == 0 {
            return Ok(mappings);
        }
        if let Some(mapping) = header(&line) {
            mappings.push(mapping);
        } else if let (Some(rss), Some(last)) = (line.strip_prefix(b"Rss:"), mappings.last_mut()) {
            last.rss = kilobytes(rss).ok_or_else(|| bad("an Rss field", &line))?;
        }
    }
}

fn bad(what: &str, line: &[u8]) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("smaps: {what} is not understood: {}", line.escape_ascii()))
}

/// `   184 kB` -> 188416.
fn kilobytes(field: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(field).ok()?.trim();
    text.strip_suffix("kB")?.trim().parse::<u64>().ok()?.checked_mul(1024)
}

/// A mapping's header: `start-end perms offset major:minor inode [path]`; `None` for a field line.
fn header(line: &[u8]) -> Option<Mapping> {
    let text = std::str::from_utf8(line).ok()?.trim_end_matches('\n');
    let mut fields = text.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let perms: [u8; 4] = fields.next()?.as_bytes().try_into().ok()?;
    let _offset = fields.next()?;
    let (major, minor) = fields.next()?.split_once(':')?;
    let device = (u32::from_str_radix(major, 16).ok()?, u32::from_str_radix(minor, 16).ok()?);
    let inode = fields.next()?.parse::<u64>().ok()?;
    let path = fields.next().unwrap_or("").trim_start();
    let kind = match path {
        "" => Kind::Anonymous,
        "[heap]" => Kind::Brk,
        "[stack]" => Kind::MainStack,
        "[vdso]" | "[vvar]" | "[vvar_vclock]" | "[vsyscall]" => Kind::KernelCode,
        _ if path.starts_with("[anon:") => Kind::Anonymous,
        _ if path.starts_with('[') => Kind::Unknown,
        _ => Kind::File { device, inode },
    };
    Some(Mapping { start, end, perms, kind, rss: 0 })
}

/// The totals of `/proc/self/status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Status {
    /// `VmRSS`, in bytes.
    pub(crate) rss: u64,
    /// `RssAnon`, in bytes.
    pub(crate) anonymous: u64,
    /// `Threads`.
    pub(crate) threads: u64,
}

/// Reads `/proc/self/status`.
pub(crate) fn status() -> io::Result<Status> {
    let mut text = String::with_capacity(2048);
    File::open("/proc/self/status")?.take(64 * 1024).read_to_string(&mut text)?;
    Ok(parse_status(&text))
}

/// Parses the text of a `status` file (fields missing read 0).
pub(crate) fn parse_status(text: &str) -> Status {
    let mut status = Status::default();
    for line in text.lines() {
        let Some((name, value)) = line.split_once(':') else { continue };
        match name {
            "VmRSS" => status.rss = kilobytes(value.as_bytes()).unwrap_or(0),
            "RssAnon" => status.anonymous = kilobytes(value.as_bytes()).unwrap_or(0),
            "Threads" => status.threads = value.trim().parse().unwrap_or(0),
            _ => {}
        }
    }
    status
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Recorded from a memprof-tests program (paths shortened).
    pub(crate) const RECORDED: &str = "\
5601c1a00000-5601c1a2e000 r--p 00000000 fd:01 1316 /work/target/release/explained
Rss:                 184 kB
Anonymous:             0 kB
5601c1a2e000-5601c1c90000 r-xp 0002e000 fd:01 1316 /work/target/release/explained
Rss:                1600 kB
5601c1c90000-5601c1ca0000 rw-p 00290000 fd:01 1316 /work/target/release/explained
Rss:                  64 kB
5601c2a3b000-5601c2a5c000 rw-p 00000000 00:00 0 [heap]
Rss:                   8 kB
7f3c00000000-7f3c10000000 rw-p 00000000 00:00 0 
Rss:              262144 kB
7f3c2bdff000-7f3c2be00000 ---p 00000000 00:00 0 
Rss:                   0 kB
7f3c2be00000-7f3c2c600000 rw-p 00000000 00:00 0 
Rss:                1028 kB
7f3c2c800000-7f3c2c9d6000 r-xp 00028000 fd:01 2270 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                1200 kB
7f3c2cb00000-7f3c2cb10000 r--s 00000000 fd:01 777 /var/data/table (deleted)
Rss:                  64 kB
7ffd5b1e9000-7ffd5b20a000 rw-p 00000000 00:00 0 [stack]
Rss:                 132 kB
7ffd5b3cd000-7ffd5b3cf000 r-xp 00000000 00:00 0 [vdso]
Rss:                   8 kB
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]
Rss:                   0 kB
VmFlags: rd ex
";

    #[test]
    fn every_mapping_is_read_with_its_kind_and_resident_bytes() {
        let mappings = parse(RECORDED.as_bytes()).unwrap();
        assert_eq!(mappings.len(), 12);
        let executable = Kind::File { device: (0xfd, 1), inode: 1316 };
        assert_eq!(
            mappings[1],
            Mapping { start: 0x5601c1a2e000, end: 0x5601c1c90000, perms: *b"r-xp", kind: executable, rss: 1600 << 10 }
        );
        assert!(mappings[1].executable());
        assert_eq!(mappings[3].kind, Kind::Brk);
        assert_eq!((mappings[4].kind, mappings[4].rss), (Kind::Anonymous, 256 << 20));
        assert!(mappings[5].guard() && mappings[6].private_writable());
        assert_eq!(mappings[8].kind, Kind::File { device: (0xfd, 1), inode: 777 });
        assert_eq!(mappings[9].kind, Kind::MainStack);
        assert_eq!(mappings[10].kind, Kind::KernelCode);
        assert_eq!(mappings.iter().map(|mapping| mapping.rss).sum::<u64>(), 266_432 << 10);
    }

    #[test]
    fn a_field_that_is_not_understood_is_an_error_not_a_guess() {
        let error = parse("7f00-7f10 rw-p 0 00:00 0\nRss: lots\n".as_bytes()).unwrap_err();
        assert!(error.to_string().contains("Rss: lots"), "{error}");
    }

    #[test]
    fn status_gives_rss_anonymous_rss_and_threads() {
        let text = "Name:\texplained\nVmRSS:\t  412340 kB\nRssAnon:\t  400000 kB\nThreads:\t67\n";
        assert_eq!(parse_status(text), Status { rss: 412_340 << 10, anonymous: 400_000 << 10, threads: 67 });
    }
}
