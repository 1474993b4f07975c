//! `ConfigIoError`: the I/O failures of reading a configuration (the file
//! or stdin, resolving its path) and of the directives that touch the
//! filesystem (`dir`, `logfile`), with the path and the OS error as
//! source. Their texts are the original's (libc's wording, see
//! `errors::strerror`); they reach the user inside a `ConfigError` (file
//! level, or the FATAL banner of the directive's line) or a CONFIG SET
//! `-ERR` (`SetError`). Also `UnsupportedTlsProtocol`, which the TLS
//! layer wraps when it builds its configuration.

use std::path::PathBuf;

use crate::errors::strerror;

#[derive(Debug, thiserror::Error)]
pub enum ConfigIoError {
    #[error("Fatal error, can't read config from stdin: {}", strerror(source))]
    ReadStdin {
        #[source]
        source: std::io::Error,
    },
    #[error("Fatal error, can't open config file '{}': {}", path.display(), strerror(source))]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("Fatal error, can't resolve config file path '{}': {}", path.display(), strerror(source))]
    ResolvePath {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The `dir` directive (config file or command line).
    #[error("Can't chdir to '{path}': {}", strerror(source))]
    Chdir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// CONFIG SET dir.
    #[error("Changing directory: {}", strerror(source))]
    ChangeDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The `logfile` directive: the file must be writable at startup.
    #[error("Can't open the log file: {}", strerror(source))]
    LogFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// `tls-protocols` names a version rustls does not speak.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Unsupported TLS protocol '{0}' (TLSv1.2 and TLSv1.3 are supported)")]
pub struct UnsupportedTlsProtocol(pub String);

/// File-level errors render their text alone (no FATAL banner).
impl From<ConfigIoError> for super::ConfigError {
    fn from(e: ConfigIoError) -> Self {
        super::ConfigError::plain(e.to_string())
    }
}

/// Why one directive (a config-file line, a command-line option or a
/// CONFIG SET value) was refused. The message is what the FATAL banner or
/// the CONFIG SET error shows; filesystem failures keep their OS error.
#[derive(Debug, thiserror::Error)]
pub enum DirectiveError {
    /// A fixed message of the original's wording ("Invalid port").
    #[error("{0}")]
    Invalid(&'static str),
    /// A message naming the offending value.
    #[error("{0}")]
    Value(String),
    /// `dir`, `logfile` and the files they touch.
    #[error(transparent)]
    Io(#[from] ConfigIoError),
    /// `tls-protocols`.
    #[error(transparent)]
    Tls(#[from] UnsupportedTlsProtocol),
}

impl From<&'static str> for DirectiveError {
    fn from(m: &'static str) -> Self {
        DirectiveError::Invalid(m)
    }
}

impl From<String> for DirectiveError {
    fn from(m: String) -> Self {
        DirectiveError::Value(m)
    }
}
