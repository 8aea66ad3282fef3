//! memprof's integration and acceptance tests, one test binary: each module is a subject (its file says
//! what it checks), and the tests of every subject run side by side, so a test that waits on a real
//! program or peer leaves the cores to the others instead of holding the rest back. `budgets.rs` is a test
//! crate of its own: memprof's allocator is its global one, as in a user's tests.
//!
//! ```text
//! cargo test -p memprof-tests --test main labels::
//! ```

mod adoption;
mod analysis;
mod automatic_dumps;
mod binutils;
mod budget;
mod cli;
mod compile_out;
mod configuration;
mod continuous;
mod controls;
mod dashboard;
mod debug_pprof;
mod dependencies;
mod documentation;
mod endpoints;
mod engines;
mod evidence;
mod explain;
mod faults;
mod floods;
mod growth;
mod hostile;
mod labels;
mod lifecycle;
mod load;
mod metrics;
mod offline;
mod otlp_push;
mod platforms;
mod profile_root;
mod scope;
mod security;
mod stacks;
mod storage;
mod ui;
