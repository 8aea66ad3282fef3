//! What the operator and the program configure, resolved once.

pub(crate) mod otlp;
