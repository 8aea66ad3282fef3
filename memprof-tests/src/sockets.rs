//! Sockets seen from `/proc` (where a process listens), clients that do not read, and the symbol lookups
//! that cost a server most.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};

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

/// A symbol lookup's body (`0xA+0xB+...`): `count` addresses spread evenly over process `pid`'s executable
/// code, each in some function of the program, most of them distinct functions.
///
/// ```no_run
/// let body = memprof_tests::sockets::spread_addresses(std::process::id(), 1 << 16);
/// assert!(body.starts_with(b"0x"));
/// ```
pub fn spread_addresses(pid: u32, count: usize) -> Vec<u8> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    let (start, end) = maps
        .lines()
        .find(|line| line.contains(" r-xp ") && line.ends_with(exe.to_str().unwrap()))
        .and_then(|line| line.split(' ').next()?.split_once('-'))
        .map(|(start, end)| (u64::from_str_radix(start, 16).unwrap(), u64::from_str_radix(end, 16).unwrap()))
        .expect("the executable's code mapping");
    let step = ((end - start) / count as u64).max(1);
    let addresses: Vec<String> = (0..count as u64).map(|index| format!("{:#x}", start + index * step)).collect();
    addresses.join("+").into_bytes()
}

/// A connection to `address` whose receive buffer is as small as the kernel allows (set before it
/// connects, so the window it offers stays small): a client that never reads, whose answer the server can
/// hand to the kernel only a few KiB at a time.
///
/// ```no_run
/// let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
/// let stream = memprof_tests::sockets::connect_reading_nothing(listener.local_addr().unwrap()).unwrap();
/// assert!(stream.peer_addr().is_ok());
/// ```
pub fn connect_reading_nothing(address: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::for_address(address), socket2::Type::STREAM, None)?;
    socket.set_recv_buffer_size(4096)?;
    socket.connect(&address.into())?;
    Ok(socket.into())
}
