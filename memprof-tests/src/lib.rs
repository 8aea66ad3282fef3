//! Helpers for memprof's acceptance tests: spawn a real binary, talk real HTTP to it, read real dumps.
#![warn(missing_docs)]

pub mod acceptance;
pub mod adopters;
pub mod binutils;
pub mod blocks;
pub mod collector;
pub mod docs;
pub mod estimates;
pub mod explained;
pub mod heap;
pub mod http;
pub mod platforms;
pub mod process;
pub mod sockets;
pub mod tools;
pub mod waiting;
