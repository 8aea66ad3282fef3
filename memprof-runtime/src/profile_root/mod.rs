//! The profile root: the directory memprof keeps its profiles in (`$TMPDIR/memprof.XXXXXX`, or
//! `MEMPROF_DIR`), and what processes that ended without cleaning up left there. The profile store
//! ([`storage`]); who owns a directory and whether that owner provably ended ([`stale`]); what is kept of
//! ended processes, swept at start ([`evidence`]); each process's last-seen note ([`last_seen`]); the
//! caption of what an earlier process's profiles show of its end ([`end_caption`]); and the rule that every
//! file read there is untrusted input, every number in it range-checked ([`untrusted`]).

pub(crate) mod end_caption;
pub(crate) mod evidence;
pub(crate) mod files;
pub(crate) mod last_seen;
pub(crate) mod stale;
pub(crate) mod storage;
pub(crate) mod untrusted;
