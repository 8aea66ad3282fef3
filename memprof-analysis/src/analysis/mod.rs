//! A heap profile made readable: every address symbolized (function, file, line, inlined frames), the
//! allocator's own frames trimmed, the counts unbiased. The renderers in [`crate::render`] read this.
//!
//! ```no_run
//! use memprof_analysis::{Analysis, Binaries, HeapProfile};
//!
//! let dump = std::fs::read_to_string("memprof.1795354618996.heap")?;
//! let profile = HeapProfile::parse(&dump)?;
//! // Offline, for a stripped production binary: symbolize with the unstripped build of it.
//! let analysis = Analysis::new(&profile, &Binaries::replacing(["target/release/service"]));
//! let (_, bytes) = analysis.total();
//! println!("{:.1} MB live, {} stacks", bytes / 1048576.0, analysis.samples.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod binaries;
mod build;
mod debug_file;
#[cfg(all(feature = "debuginfod", target_os = "linux"))]
mod debuginfod;
mod derived;
mod mapped;
mod model;
mod module;
mod plumbing;
mod symbolized;
mod symbolizer;
mod this_process;
mod user_code;

pub use binaries::Binaries;
pub(crate) use model::without_control_characters;
pub use model::{Analysis, Frame, Location, Measure, Sample};
pub use module::Module;
pub use plumbing::is_plumbing as is_allocation_plumbing;
pub use this_process::{forget_cached_symbols, function_names_in_this_process};
