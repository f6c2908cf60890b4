//! Errors that any layer may return and the command line maps to exit
//! status 2.

/// A command line that cannot work (bad name, bad reference, missing file);
/// `halobox` exits with status 2 for it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
