//! The process memprof runs in: memprof's own threads and their pools ([`threads`]), the executable
//! ([`executable`]), the environment variables memprof reads ([`environment`]), the cgroup's memory limit
//! ([`cgroup`]), messages to the operator ([`messages`]), the opt-in end on SIGTERM and SIGINT ([`signals`]) and the thread that
//! waits for them and for new arenas ([`watch`]),
//! which process memprof belongs to, for the children of `fork` ([`lineage`]), what OpenTelemetry's
//! resources say of it ([`resource`]), and what the kernel accounts of a thread's life ([`thread_times`]).

pub(crate) mod cgroup;
pub mod environment;
pub(crate) mod executable;
pub(crate) mod lineage;
pub(crate) mod messages;
pub(crate) mod resource;
pub(crate) mod signals;
pub(crate) mod thread_times;
pub(crate) mod threads;
pub(crate) mod watch;
