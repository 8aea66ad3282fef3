//! Where a process listens, read from `/proc`: for a program under test that prints no address.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};

/// The IPv4 address of a TCP socket process `pid` listens on: an inode among its descriptors
/// (`/proc/PID/fd/N -> socket:[INODE]`) in state LISTEN (`0A`) in its network namespace's table
/// (`/proc/PID/net/tcp`); `None` while it has none.
///
/// ```no_run
/// let address = memprof_tests::sockets::listening_address(std::process::id());
/// assert!(address.is_none(), "a test process listens nowhere");
/// ```
pub fn listening_address(pid: u32) -> Option<SocketAddr> {
    let inodes: BTreeSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .filter_map(|entry| {
            let target = std::fs::read_link(entry.ok()?.path()).ok()?;
            Some(target.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).ok()?;
    table.lines().skip(1).find_map(|row| {
        let fields: Vec<&str> = row.split_whitespace().collect();
        let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
        if *state != "0A" || !inodes.contains(*inode) {
            return None;
        }
        let (ip, port) = local.split_once(':')?;
        // The kernel prints the address as the u32 it stores, in network order: 127.0.0.1 is 0100007F.
        let ip = Ipv4Addr::from(u32::from_str_radix(ip, 16).ok()?.to_le_bytes());
        Some(SocketAddr::from((ip, u16::from_str_radix(port, 16).ok()?)))
    })
}
