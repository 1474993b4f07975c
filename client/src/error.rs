//! The crate's error type: Disque's error codes apart from connection,
//! protocol and usage errors, so callers can switch on what happened.

use std::time::Duration;

/// The code word at the start of an error reply (`-NOJOB ...`).
///
/// ```
/// use disque_client::ErrorCode;
///
/// assert_eq!(ErrorCode::parse("NOJOB"), ErrorCode::NoJob);
/// assert_eq!(ErrorCode::parse("SOMETHINGNEW"), ErrorCode::Other("SOMETHINGNEW".into()));
/// assert_eq!(ErrorCode::NoRepl.as_str(), "NOREPL");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `ERR`: a generic error (syntax, arguments, unknown command).
    Err,
    /// `NOREPL`: not enough nodes reachable to replicate the job, or the
    /// ADDJOB timeout elapsed first.
    NoRepl,
    /// `PAUSED`: the queue is paused for input.
    Paused,
    /// `NOJOB`: the job is not known to this node.
    NoJob,
    /// `BADID`: malformed job ID.
    BadId,
    /// `MAXLEN`: the queue already holds MAXLEN jobs.
    MaxLen,
    /// `LEAVING`: the node is leaving the cluster; use another one.
    Leaving,
    /// `LOADING`: the node is still loading its AOF.
    Loading,
    /// `MISCONF`: the node cannot write its AOF.
    Misconf,
    /// `NOAUTH`: authentication required.
    NoAuth,
    /// `WRONGPASS`: wrong user name or password.
    WrongPass,
    /// `TOOLATE`: WORKING refused, half the job's TTL has elapsed.
    TooLate,
    /// `OOM`: the node is out of memory.
    Oom,
    /// `NOPROTO`: HELLO asked for an unsupported protocol version.
    NoProto,
    /// `DENIED`: protected mode refused this client.
    Denied,
    /// Any other code word.
    Other(String),
}

impl ErrorCode {
    /// The code for a code word.
    ///
    /// ```
    /// use disque_client::ErrorCode;
    /// assert_eq!(ErrorCode::parse("TOOLATE"), ErrorCode::TooLate);
    /// ```
    pub fn parse(word: &str) -> ErrorCode {
        match word {
            "ERR" => ErrorCode::Err,
            "NOREPL" => ErrorCode::NoRepl,
            "PAUSED" => ErrorCode::Paused,
            "NOJOB" => ErrorCode::NoJob,
            "BADID" => ErrorCode::BadId,
            "MAXLEN" => ErrorCode::MaxLen,
            "LEAVING" => ErrorCode::Leaving,
            "LOADING" => ErrorCode::Loading,
            "MISCONF" => ErrorCode::Misconf,
            "NOAUTH" => ErrorCode::NoAuth,
            "WRONGPASS" => ErrorCode::WrongPass,
            "TOOLATE" => ErrorCode::TooLate,
            "OOM" => ErrorCode::Oom,
            "NOPROTO" => ErrorCode::NoProto,
            "DENIED" => ErrorCode::Denied,
            other => ErrorCode::Other(other.to_string()),
        }
    }

    /// The code word as the server spells it.
    ///
    /// ```
    /// assert_eq!(disque_client::ErrorCode::BadId.as_str(), "BADID");
    /// ```
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::Err => "ERR",
            ErrorCode::NoRepl => "NOREPL",
            ErrorCode::Paused => "PAUSED",
            ErrorCode::NoJob => "NOJOB",
            ErrorCode::BadId => "BADID",
            ErrorCode::MaxLen => "MAXLEN",
            ErrorCode::Leaving => "LEAVING",
            ErrorCode::Loading => "LOADING",
            ErrorCode::Misconf => "MISCONF",
            ErrorCode::NoAuth => "NOAUTH",
            ErrorCode::WrongPass => "WRONGPASS",
            ErrorCode::TooLate => "TOOLATE",
            ErrorCode::Oom => "OOM",
            ErrorCode::NoProto => "NOPROTO",
            ErrorCode::Denied => "DENIED",
            ErrorCode::Other(s) => s,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything that can go wrong.
///
/// ```no_run
/// use disque_client::{AddJob, Client, Error, ErrorCode};
///
/// # async fn run() -> Result<(), Error> {
/// let mut client = Client::connect(&["127.0.0.1:7711"]).await?;
/// match client.add_job(&AddJob::new("orders", "x").max_len(10)).await {
///     Ok(id) => println!("added {id}"),
///     Err(e) if e.code() == Some(&ErrorCode::MaxLen) => println!("queue full, try later"),
///     Err(e) if e.is_connection_error() => println!("no node answered: {e}"),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server replied with an error.
    #[error("{code} {message}")]
    Server {
        /// The code word.
        code: ErrorCode,
        /// The rest of the error line.
        message: String,
    },
    /// A socket operation failed.
    #[error("I/O error talking to {addr}: {source}")]
    Io {
        /// The node's address.
        addr: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The server closed the connection.
    #[error("connection to {addr} closed by the server")]
    ConnectionClosed {
        /// The node's address.
        addr: String,
    },
    /// No reply (or no connection) within the configured time.
    #[error("{what} on {addr} timed out after {after:?}")]
    Timeout {
        /// What was being waited for (`connect`, a command name).
        what: String,
        /// The node's address.
        addr: String,
        /// The time allowed.
        after: Duration,
    },
    /// None of the nodes could be connected to.
    #[error("no Disque node reachable ({})", .attempts.join("; "))]
    NoNodeReachable {
        /// One `address: reason` per node tried.
        attempts: Vec<String>,
    },
    /// The server sent bytes that are not RESP.
    #[error("protocol error from {addr}: {message}")]
    Protocol {
        /// The node's address.
        addr: String,
        /// What was wrong.
        message: String,
    },
    /// A well-formed reply of a shape the command does not produce.
    #[error("unexpected reply to {command}: {reply}")]
    UnexpectedReply {
        /// The command name.
        command: String,
        /// The reply, debug-formatted.
        reply: String,
    },
    /// TLS set-up failed (certificates, keys, server name).
    #[error("TLS: {0}")]
    Tls(String),
    /// A builder was given unusable settings.
    #[error("invalid configuration: {0}")]
    Config(String),
}

impl Error {
    /// The Disque error code, for [`Error::Server`].
    ///
    /// ```
    /// # async fn run(client: &mut disque_client::Client, id: disque_client::JobId) {
    /// use disque_client::ErrorCode;
    /// if let Err(e) = client.working(&id).await {
    ///     if e.code() == Some(&ErrorCode::TooLate) {
    ///         println!("too late to postpone {id}");
    ///     }
    /// }
    /// # }
    /// ```
    pub fn code(&self) -> Option<&ErrorCode> {
        match self {
            Error::Server { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether the connection failed (I/O, closed, timed out, no node
    /// reachable): the next command reconnects, possibly to another node.
    ///
    /// ```
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// match client.qlen("orders").await {
    ///     Ok(n) => println!("{n}"),
    ///     // The next command reconnects, possibly to another node.
    ///     Err(e) if e.is_connection_error() => println!("retry later: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_connection_error(&self) -> bool {
        matches!(
            self,
            Error::Io { .. }
                | Error::ConnectionClosed { .. }
                | Error::Timeout { .. }
                | Error::NoNodeReachable { .. }
                | Error::Protocol { .. }
        )
    }

    /// An error reply line (without the `-`) as an [`Error::Server`].
    pub(crate) fn from_reply(line: &str) -> Error {
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        Error::Server {
            code: ErrorCode::parse(word),
            message: rest.to_string(),
        }
    }

    pub(crate) fn unexpected(command: &str, reply: &crate::Value) -> Error {
        Error::UnexpectedReply {
            command: command.to_string(),
            reply: format!("{reply:?}"),
        }
    }
}

/// `Result` with this crate's [`Error`].
///
/// ```
/// fn first_node(nodes: &[&str]) -> disque_client::Result<String> {
///     nodes
///         .first()
///         .map(|n| n.to_string())
///         .ok_or_else(|| disque_client::Error::Config("no node".into()))
/// }
/// assert!(first_node(&[]).is_err());
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_code_and_message() {
        let e = Error::from_reply("NOJOB Job not known in the context of this node.");
        assert_eq!(e.code(), Some(&ErrorCode::NoJob));
        assert_eq!(
            e.to_string(),
            "NOJOB Job not known in the context of this node."
        );
        let e = Error::from_reply("WRONGPASS invalid username-password pair or user is disabled.");
        assert_eq!(e.code(), Some(&ErrorCode::WrongPass));
        assert!(!e.is_connection_error());
    }
}
