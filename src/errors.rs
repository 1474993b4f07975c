//! Every error a client can see, with its exact wire text.
//!
//! The texts are Disque 1.0's byte for byte (docs/COMMANDS.md lists them per
//! command): clients match on the prefix (`NOREPL`, `PAUSED`, ...) and
//! sometimes on the whole line, so they live here, once, next to each
//! other, instead of as literals at every call site. Callers build a
//! `WireError`; only `text` turns it into words. Protocol errors that close
//! the connection stay with the parser (`resp::parse::ProtocolError`).

use std::borrow::Cow;
use std::fmt;

use crate::protocol::resp::Reply;

/// A client-visible error. `text()` is the reply line without the leading
/// `-` and the trailing CRLF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    // ----- dispatch -----
    /// The command name as sent.
    UnknownCommand(String),
    /// The command's table name.
    WrongArity(&'static str),
    NoAuth,
    /// The AOF is still being loaded.
    Loading,
    Oom,
    /// The AOF writer's error text.
    Misconf(String),
    MaxClients,
    /// Protected mode refused a non-loopback client (Redis's DENIED text,
    /// naming Disque; our extension, docs/SECURITY.md).
    ProtectedMode,
    /// A protocol error text (`Protocol error: ...`), before closing.
    Protocol(String),

    // ----- shared argument errors -----
    Syntax,
    NotInteger,
    TimeoutNotInteger,
    TimeoutNegative,
    BadId,
    NoJob,

    // ----- ADDJOB / GETJOB / WORKING -----
    ReplicateRange,
    TtlRange,
    RetryRange,
    DelayRange,
    MaxlenRange,
    RetryZeroNeedsReplicateOne,
    DelayOverTtl,
    NoRepl,
    /// Not enough nodes because this node cannot hold a copy itself.
    NoReplCantHold {
        leaving: bool,
    },
    NoReplTimeout,
    NoReplExpired,
    MaxlenReached,
    PausedInput,
    InternalCreate,
    Leaving,
    CountRange,
    TooLate,
    /// A reply needed the body of a job spilled to disk and its record
    /// failed its checks or could not be read (our extension: spill).
    SpillUnreadable,

    // ----- JSCAN / QSCAN -----
    InvalidCursor,
    InvalidJobState,
    InvalidReplyType,

    // ----- CLUSTER -----
    ClusterUsage,
    /// The port argument as sent.
    InvalidPort(String),
    /// `ip:port` as sent.
    InvalidAddress(String),
    InvalidNodeId,
    ForgetMyself,
    /// The node ID as sent.
    UnknownNode(String),
    LeavingArg,

    // ----- CLIENT / HELLO / AUTH -----
    ClientUsage,
    ClientBadName,
    NoSuchClient,
    /// The type as sent.
    UnknownClientType(String),
    HelloProtoNotInteger,
    /// The option as sent.
    HelloOption(String),
    NoProto,
    WrongPass,
    HelloNoAuth,
    AuthNoPassword,
    InvalidPassword,

    // ----- admin commands -----
    ShutdownFailed,
    SlowlogUsage,
    CommandUsage,
    /// The event name as sent.
    NoLatencySamples(String),
    LoadJobFromClient,
    RewriteInProgress,
    /// `CONFIG <sub>` with the wrong number of arguments; the subcommand as sent.
    ConfigArity(String),
    ConfigUsage,
    /// Parameter name as typed by the client.
    ConfigUnsupported(String),
    /// Name and value as typed by the client.
    ConfigInvalid {
        name: String,
        value: String,
    },
    ConfigNoFile,
    /// The OS error text.
    ConfigRewrite(String),
    AofCantTurnOn,
    InvalidRestartDelay,
    /// ACL GENPASS with a bit count that is not 1 to 4096 (Redis's text).
    AclGenpassBits,
    /// CONFIG SET of a tls-* parameter whose files do not load (Redis 6's text).
    TlsReload,
    /// The subcommand as sent.
    DebugUsage(String),
    // ----- our extensions (docs/COMPATIBILITY.md) -----
    BackoffRange,
    MaxDeliveriesRange,
    DeadLetterEmpty,
    DeadLetterSameQueue,
    DeadLetterNeedsMax,
    DedupEmpty,
    WaitRange,
    WaitNeedsMaxlen,
    /// ADDJOB body above `job-max-body-size`: (body bytes, limit).
    BodyTooLarge(u64, u64),
    ExtNeedsRetry,
    NackDelayRange,
    PriorityRange,
    Cancelled,
    ProgressRange,
    ProgressDescTooLong,
    ProgressDataTooLarge,
    ScheduleUsage,
    NoSchedule,
    ScheduleNameEmpty,
    ScheduleEvery,
    /// croner's explanation.
    ScheduleCron(String),
    /// The zone as sent.
    ScheduleTz(String),
    ScheduleTzNeedsCron,
    ScheduleSpec,
    ScheduleCatchup,
    ScheduleGrace,
    LimitRateRange,
    LimitInflightRange,
    BatchUsage,
    NoBatch,
    BatchExists,
    BatchClosed,
    BatchId,
    BatchQueueEmpty,
    BatchEmpty,
    BatchFull,
    AfterEmpty,
    AfterTooMany,
    OnFailPolicy,
    OnFailNeedsAfter,

    /// Any other error; the text follows `ERR `.
    Other(String),
    /// DEBUG ERROR: the client's own text, verbatim.
    Verbatim(String),
}

impl WireError {
    /// The reply line without the leading `-` and the trailing CRLF.
    pub fn text(&self) -> Cow<'static, str> {
        use WireError::*;
        let s: &'static str = match self {
            UnknownCommand(name) => return format!("ERR unknown command '{name}'").into(),
            BodyTooLarge(len, max) => {
                return format!(
                    "ERR job body too large ({len} bytes, job-max-body-size is {max})"
                )
                .into()
            }
            WrongArity(cmd) => {
                return format!("ERR wrong number of arguments for '{cmd}' command").into()
            }
            NoAuth => "NOAUTH Authentication required.",
            Loading => "LOADING Disque is loading the dataset in memory",
            Oom => "OOM command not allowed when used memory > 'maxmemory'.",
            Misconf(e) => return format!("MISCONF Errors writing to the AOF file: {e}").into(),
            MaxClients => "ERR max number of clients reached",
            ProtectedMode => concat!(
                "DENIED Disque is running in protected mode because protected mode is enabled, ",
                "no bind address was specified, no authentication password is requested to ",
                "clients. In this mode connections are only accepted from the loopback ",
                "interface. If you want to connect from external computers to Disque you may ",
                "adopt one of the following solutions: 1) Just disable protected mode sending ",
                "the command 'CONFIG SET protected-mode no' from the loopback interface by ",
                "connecting to Disque from the same host the server is running, however MAKE ",
                "SURE Disque is not publicly accessible from internet if you do so. Use CONFIG ",
                "REWRITE to make this change permanent. 2) Alternatively you can just disable ",
                "the protected mode by editing the Disque configuration file, and setting the ",
                "protected mode option to 'no', and then restarting the server. 3) If you ",
                "started the server manually just for testing, restart it with the ",
                "'--protected-mode no' option. 4) Setup a bind address or an authentication ",
                "password. NOTE: You only need to do one of the above things in order for the ",
                "server to start accepting connections from the outside."
            ),
            Protocol(m) => return format!("ERR {m}").into(),

            Syntax => "ERR syntax error",
            NotInteger => "ERR value is not an integer or out of range",
            TimeoutNotInteger => "ERR timeout is not an integer or out of range",
            TimeoutNegative => "ERR timeout is negative",
            BadId => "BADID Invalid Job ID format.",
            NoJob => "NOJOB Job not known in the context of this node.",

            ReplicateRange => "ERR REPLICATE must be between 1 and 65535",
            TtlRange => "ERR TTL must be a number > 0",
            RetryRange => "ERR RETRY time must be a non negative number",
            DelayRange => "ERR DELAY time must be a non negative number",
            MaxlenRange => "ERR MAXLEN must be a positive number",
            // The double space is Disque's.
            RetryZeroNeedsReplicateOne => "ERR With RETRY set to 0 please explicitly set  REPLICATE to 1 (at-most-once delivery)",
            DelayOverTtl => "ERR The specified DELAY is greater than TTL. Job refused since would never be delivered",
            NoRepl => "NOREPL Not enough reachable nodes for the requested replication level",
            NoReplCantHold { leaving: true } => "NOREPL Not enough reachable nodes for the requested replication level, since I'm unable to hold a copy of the message for the following reason: I'm leaving the cluster",
            NoReplCantHold { leaving: false } => "NOREPL Not enough reachable nodes for the requested replication level, since I'm unable to hold a copy of the message for the following reason: I'm out of memory",
            NoReplTimeout => "NOREPL Timeout reached before replicating to the requested number of nodes",
            NoReplExpired => "NOREPL job removed (expired?) before the requested replication level was achieved",
            MaxlenReached => "MAXLEN Queue is already longer than the specified MAXLEN count",
            PausedInput => "PAUSED Queue paused in input, try later",
            InternalCreate => "ERR Internal error creating the job, check server logs",
            Leaving => "LEAVING This node is leaving the cluster, please connect to a different one",
            CountRange => "ERR COUNT must be a number greater than zero",
            TooLate => "TOOLATE Half of job TTL already elapsed, you are no longer allowed to postpone the next delivery.",
            SpillUnreadable => "ERR The job body is spilled to disk and could not be read back, try later or on another node",

            InvalidCursor => "ERR invalid cursor or option name",
            InvalidJobState => "ERR Invalid job state name",
            InvalidReplyType => "ERR Invalid REPLY type, try ID or ALL",

            ClusterUsage => "ERR Wrong CLUSTER subcommand or number of arguments",
            InvalidPort(p) => return format!("ERR Invalid TCP port specified: {p}").into(),
            InvalidAddress(a) => return format!("ERR Invalid node address specified: {a}").into(),
            InvalidNodeId => "ERR Invalid node identifier",
            ForgetMyself => "ERR I tried hard but I can't forget myself...",
            UnknownNode(id) => return format!("ERR Unknown node {id}").into(),
            LeavingArg => "ERR Wrong argument for CLUSTER LEAVING. Use 'yes' or 'no'",

            ClientUsage => "ERR Syntax error, try CLIENT (LIST | KILL ip:port | GETNAME | SETNAME connection-name)",
            ClientBadName => "ERR Client names cannot contain spaces, newlines or special characters.",
            NoSuchClient => "ERR No such client",
            UnknownClientType(t) => return format!("ERR Unknown client type '{t}'").into(),
            HelloProtoNotInteger => "ERR Protocol version is not an integer or out of range",
            HelloOption(o) => return format!("ERR Syntax error in HELLO option '{o}'").into(),
            NoProto => "NOPROTO unsupported protocol version",
            WrongPass => "WRONGPASS invalid username-password pair or user is disabled.",
            HelloNoAuth => "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
            AuthNoPassword => "ERR Client sent AUTH, but no password is set",
            InvalidPassword => "ERR invalid password",

            ShutdownFailed => "ERR Errors trying to SHUTDOWN. Check logs.",
            SlowlogUsage => "ERR Unknown SLOWLOG subcommand or wrong # of args. Try GET, RESET, LEN.",
            CommandUsage => "ERR Unknown subcommand or wrong number of arguments.",
            NoLatencySamples(e) => {
                return format!("ERR No samples available for event '{e}'").into()
            }
            LoadJobFromClient => "ERR LOADJOB is a special command only processed from AOF",
            RewriteInProgress => "ERR Background append only file rewriting already in progress",
            ConfigArity(sub) => {
                return format!("ERR Wrong number of arguments for CONFIG {sub}").into()
            }
            ConfigUsage => "ERR CONFIG subcommand must be one of GET, SET, RESETSTAT, REWRITE",
            ConfigUnsupported(p) => return format!("ERR Unsupported CONFIG parameter: {p}").into(),
            ConfigInvalid { name, value } => {
                return format!("ERR Invalid argument '{value}' for CONFIG SET '{name}'").into()
            }
            ConfigNoFile => "ERR The server is running without a config file",
            ConfigRewrite(e) => return format!("ERR Rewriting config file: {e}").into(),
            AofCantTurnOn => "ERR Unable to turn on AOF. Check server logs.",
            InvalidRestartDelay => "ERR Invalid restart delay",
            AclGenpassBits => "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
            TlsReload => "ERR Unable to update TLS configuration. Check server logs.",
            DebugUsage(sub) => {
                return format!(
                    "ERR Unknown DEBUG subcommand or wrong number of arguments for '{sub}'"
                )
                .into()
            }
            BackoffRange => "ERR BACKOFF must be a positive number of seconds",
            MaxDeliveriesRange => "ERR MAXDELIVERIES must be between 1 and 65535",
            DeadLetterEmpty => "ERR DEADLETTER queue name must not be empty",
            DeadLetterSameQueue => "ERR DEADLETTER queue must differ from the job's queue",
            DeadLetterNeedsMax => "ERR DEADLETTER requires MAXDELIVERIES",
            DedupEmpty => "ERR DEDUP key must not be empty",
            WaitRange => "ERR WAIT must be 0 (wait forever) or a positive number of milliseconds",
            WaitNeedsMaxlen => "ERR WAIT requires MAXLEN (the queue length to wait below)",
            ExtNeedsRetry => "ERR BACKOFF and MAXDELIVERIES need RETRY > 0 (at-least-once delivery)",
            NackDelayRange => "ERR NACK DELAY must be a non negative number of seconds",
            PriorityRange => "ERR PRIORITY must be between 1 (lowest) and 9 (highest)",
            LimitRateRange => "ERR RATE needs a count between 1 and 1000000 and an interval between 1 and 86400000 ms",
            LimitInflightRange => "ERR INFLIGHT must be between 1 and 1000000",
            Cancelled => "CANCELLED The job was cancelled: stop working on it.",
            ProgressRange => "ERR PROGRESS must be between 0 and 100",
            ProgressDescTooLong => "ERR DESC must be at most 256 bytes",
            ProgressDataTooLarge => "ERR DATA must be at most 4096 bytes",
            ScheduleUsage => "ERR Unknown SCHEDULE subcommand, try ADD, DEL, PAUSE, RESUME, SHOW or LIST",
            NoSchedule => "NOSCHEDULE No such schedule",
            ScheduleNameEmpty => "ERR schedule name must not be empty",
            ScheduleEvery => "ERR EVERY must be a positive number of seconds",
            ScheduleCron(m) => return format!("ERR invalid CRON expression: {m}").into(),
            ScheduleTz(z) => return format!("ERR unknown time zone '{z}'").into(),
            ScheduleTzNeedsCron => "ERR TZ requires CRON",
            ScheduleSpec => "ERR exactly one of EVERY or CRON is required",
            ScheduleCatchup => "ERR CATCHUP must be a non negative number of seconds",
            ScheduleGrace => "ERR GRACE must be a positive number of milliseconds",
            BatchUsage => "ERR Unknown BATCH subcommand, try CREATE, COMMIT, CANCEL, STATUS or LIST",
            NoBatch => "NOBATCH No such batch",
            BatchExists => "BATCHEXISTS A batch with this ID already exists",
            BatchClosed => "BATCHCLOSED The batch is committed or cancelled",
            BatchId => "ERR batch ID must be 1 to 256 bytes",
            BatchQueueEmpty => "ERR callback queue must not be empty",
            BatchEmpty => "ERR BATCH ID must not be empty",
            BatchFull => "BATCHFULL The batch has the most members a batch can take (400000)",
            AfterEmpty => "ERR AFTER needs a job ID or a batch ID",
            AfterTooMany => "ERR at most 64 AFTER dependencies per job",
            OnFailPolicy => "ERR ONFAIL must be CANCEL, DEADLETTER or RUN",
            OnFailNeedsAfter => "ERR ONFAIL requires AFTER",
            Other(m) => return format!("ERR {m}").into(),
            Verbatim(m) => return m.clone().into(),
        };
        Cow::Borrowed(s)
    }

    /// The error as a reply.
    pub fn reply(&self) -> Reply {
        Reply::Error(self.text().into_owned())
    }

    /// The full wire line, `-text\r\n`, for replies written outside the
    /// encoder (before a connection has a protocol version).
    pub fn line(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(64);
        v.push(b'-');
        v.extend_from_slice(self.text().as_bytes());
        v.extend_from_slice(b"\r\n");
        v
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

impl std::error::Error for WireError {}

impl From<WireError> for Reply {
    fn from(e: WireError) -> Reply {
        e.reply()
    }
}

/// C `strerror` text for an I/O error: Rust appends " (os error N)" to the
/// OS message, which Disque's texts (copied from C: `-MISCONF`, the AOF and
/// config-file messages, CONFIG REWRITE's `-ERR`) do not have. It stays a
/// function because `io::Error`'s own `Display` cannot be told to drop the
/// suffix; the typed errors (`aof::AofError`, `config::ConfigError`, ...)
/// call it from their `Display` so the words stay libc's.
pub fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) if s.ends_with(')') => s[..i].to_string(),
        _ => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_disques() {
        assert_eq!(WireError::Syntax.text(), "ERR syntax error");
        assert_eq!(
            WireError::WrongArity("ping").text(),
            "ERR wrong number of arguments for 'ping' command"
        );
        assert_eq!(
            WireError::NoReplCantHold { leaving: true }.text(),
            "NOREPL Not enough reachable nodes for the requested replication level, since I'm unable to hold a copy of the message for the following reason: I'm leaving the cluster"
        );
        assert_eq!(
            WireError::MaxClients.line(),
            b"-ERR max number of clients reached\r\n"
        );
        assert_eq!(
            WireError::ConfigInvalid {
                name: "a".into(),
                value: "b".into()
            }
            .text(),
            "ERR Invalid argument 'b' for CONFIG SET 'a'"
        );
    }

    #[test]
    fn strerror_strips_os_suffix() {
        let e = std::io::Error::from_raw_os_error(2);
        assert_eq!(strerror(&e), "No such file or directory");
        let e = std::io::Error::other("custom");
        assert_eq!(strerror(&e), "custom");
    }
}
