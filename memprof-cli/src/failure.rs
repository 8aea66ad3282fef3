//! Why a command failed, and the exit code each kind of failure ends the tool with.

use std::fmt;

/// Why a command failed; each kind has its exit code.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The service could not be reached (exit 3).
    Unreachable(String),
    /// The service refused the request, or a file could not be read or written (exit 1).
    Refused(String),
    /// The command line asks for something that cannot be done (exit 2), as clap's own errors.
    Usage(String),
    /// Whoever read the output went away (`| head`): nothing more to do, and no error (exit 0).
    Closed,
}

impl Failure {
    /// The exit code of this failure.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Failure::Closed => 0,
            Failure::Refused(_) => 1,
            Failure::Usage(_) => 2,
            Failure::Unreachable(_) => 3,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Unreachable(message) | Failure::Refused(message) | Failure::Usage(message) => {
                formatter.write_str(message)
            }
            Failure::Closed => formatter.write_str("the output was closed"),
        }
    }
}
