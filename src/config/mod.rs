//! Server configuration: the typed `Config`, its defaults, the config-file
//! parser, command-line handling, and the CONFIG GET / SET / REWRITE logic
//! (docs/COMMANDS.md#config; the directives are described in conf/disque.conf).
//!
//! The module is deliberately free of server state: `set` only validates and
//! stores, and the caller compares old and new values to apply side effects
//! (starting the AOF, running eviction, re-arming the watchdog, ...).

pub mod acl;
mod args;
pub mod deploy;
mod directives;
mod error;
pub mod extensions;
pub mod glob;
mod observe;
mod parse;
pub(crate) mod rewrite;
mod runtime;
pub mod security;
mod values;

pub use error::{ConfigIoError, DirectiveError, UnsupportedTlsProtocol};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_cli;
#[cfg(test)]
mod tests_runtime;
#[cfg(test)]
mod tests_values;

use std::fmt;
use std::path::PathBuf;

use crate::errors::WireError;

pub use args::from_args;
pub use glob::glob_match;
pub use observe::LogFormat;
pub use parse::parse_str;
pub use values::{format_memory, parse_memory, split_args};

/// Server log verbosity, ordered from most to least verbose so that
/// `level >= config.loglevel` decides whether a message is emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    Debug,
    Verbose,
    Notice,
    Warning,
}

impl LogLevel {
    /// Name used in the config file and in CONFIG GET.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Verbose => "verbose",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
        }
    }

    /// Case-insensitive parse, as the original uses strcasecmp.
    pub fn parse(s: &str) -> Option<LogLevel> {
        match s.to_ascii_lowercase().as_str() {
            "debug" => Some(LogLevel::Debug),
            "verbose" => Some(LogLevel::Verbose),
            "notice" => Some(LogLevel::Notice),
            "warning" => Some(LogLevel::Warning),
            _ => None,
        }
    }
}

/// AOF fsync policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AppendFsync {
    Always,
    EverySec,
    No,
}

impl AppendFsync {
    /// Name used in the config file and in CONFIG GET.
    pub fn as_str(self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::EverySec => "everysec",
            AppendFsync::No => "no",
        }
    }

    /// Case-insensitive parse.
    pub fn parse(s: &str) -> Option<AppendFsync> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Some(AppendFsync::Always),
            "everysec" => Some(AppendFsync::EverySec),
            "no" => Some(AppendFsync::No),
            _ => None,
        }
    }
}

/// What to do when `maxmemory` is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MaxmemoryPolicy {
    /// Evict acknowledged jobs first (the default).
    Acks,
    /// Never evict anything; refuse new jobs instead.
    NoEviction,
}

impl MaxmemoryPolicy {
    /// Name used in the config file and in CONFIG GET.
    pub fn as_str(self) -> &'static str {
        match self {
            MaxmemoryPolicy::Acks => "acks",
            MaxmemoryPolicy::NoEviction => "noeviction",
        }
    }

    /// Case-insensitive parse.
    pub fn parse(s: &str) -> Option<MaxmemoryPolicy> {
        match s.to_ascii_lowercase().as_str() {
            "acks" => Some(MaxmemoryPolicy::Acks),
            "noeviction" => Some(MaxmemoryPolicy::NoEviction),
            _ => None,
        }
    }
}

/// syslog facility; the original only accepts `user` and `local0`..`local7`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyslogFacility {
    User,
    Local0,
    Local1,
    Local2,
    Local3,
    Local4,
    Local5,
    Local6,
    Local7,
}

impl SyslogFacility {
    const ALL: [SyslogFacility; 9] = [
        SyslogFacility::User,
        SyslogFacility::Local0,
        SyslogFacility::Local1,
        SyslogFacility::Local2,
        SyslogFacility::Local3,
        SyslogFacility::Local4,
        SyslogFacility::Local5,
        SyslogFacility::Local6,
        SyslogFacility::Local7,
    ];

    /// Lower-case name used in the config file and in CONFIG GET.
    pub fn as_str(self) -> &'static str {
        match self {
            SyslogFacility::User => "user",
            SyslogFacility::Local0 => "local0",
            SyslogFacility::Local1 => "local1",
            SyslogFacility::Local2 => "local2",
            SyslogFacility::Local3 => "local3",
            SyslogFacility::Local4 => "local4",
            SyslogFacility::Local5 => "local5",
            SyslogFacility::Local6 => "local6",
            SyslogFacility::Local7 => "local7",
        }
    }

    /// Case-insensitive parse.
    pub fn parse(s: &str) -> Option<SyslogFacility> {
        Self::ALL
            .iter()
            .copied()
            .find(|f| f.as_str().eq_ignore_ascii_case(s))
    }
}

/// Output buffer limits for normal clients (the only class Disque has).
/// All zero means "no limit".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ClientOutputBufferLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_seconds: u64,
}

/// The whole server configuration. One field per directive (conf/disque.conf).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Client port; 0 means "pick a free port" (our extension).
    pub port: u16,
    /// Addresses to bind; empty means the IPv4 and IPv6 wildcards.
    pub bind: Vec<String>,
    pub tcp_backlog: u32,
    pub unixsocket: Option<String>,
    /// Permission bits of the unix socket (0 = leave the umask default).
    pub unixsocketperm: u32,
    /// Idle client timeout in seconds, 0 = never.
    pub timeout: u64,
    /// TCP keepalive period in seconds, 0 = off.
    pub tcp_keepalive: u64,
    /// Absolute working directory (the process cwd is kept equal to it).
    pub dir: PathBuf,
    pub loglevel: LogLevel,
    /// Log file path relative to `dir`; empty = stdout.
    pub logfile: String,
    pub syslog_enabled: bool,
    pub syslog_ident: String,
    pub syslog_facility: SyslogFacility,
    pub daemonize: bool,
    pub pidfile: String,
    /// Accepted for compatibility, meaningless in Disque.
    pub databases: u32,
    pub maxclients: u64,
    /// Memory limit in bytes, always > 0.
    pub maxmemory: u64,
    /// `maxmemory` was given; otherwise it may be derived from the cgroup
    /// memory limit at startup (`cgroup::size_maxmemory`).
    pub maxmemory_set: bool,
    pub maxmemory_policy: MaxmemoryPolicy,
    /// Accepted for compatibility, unused.
    pub maxmemory_samples: u64,
    pub activerehashing: bool,
    /// Cron frequency, clamped to 1..=500.
    pub hz: u32,
    pub appendonly: bool,
    /// AOF file name (no directory component), relative to `dir`.
    pub appendfilename: String,
    pub appendfsync: AppendFsync,
    pub no_appendfsync_on_rewrite: bool,
    /// Growth percentage that triggers an automatic AOF rewrite, 0 = off.
    pub auto_aof_rewrite_percentage: u64,
    /// Minimum AOF size (bytes) before an automatic rewrite is considered.
    pub auto_aof_rewrite_min_size: u64,
    /// Our extension: an automatic rewrite also needs this percentage of
    /// the file to be reclaimable (`aof::reclaim`); 0 = Disque's rule.
    pub auto_aof_rewrite_min_reclaim: u64,
    pub aof_rewrite_incremental_fsync: bool,
    pub aof_load_truncated: bool,
    pub aof_enqueue_jobs_once: bool,
    /// `None` = no AUTH required (an empty password also means none).
    pub requirepass: Option<String>,
    pub cluster_config_file: String,
    /// Our extension: nodes authenticate bus connections with this shared
    /// secret (HMAC challenge-response). None = open bus, as in Disque.
    pub cluster_secret: Option<String>,
    /// Milliseconds, always >= 1.
    pub cluster_node_timeout: u64,
    /// Microseconds; negative disables the slow log (as in Redis).
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: u64,
    /// Milliseconds, 0 = latency monitor off.
    pub latency_monitor_threshold: u64,
    pub client_output_buffer_limit: ClientOutputBufferLimit,
    /// Absolute path of the file the node started with (`None` without one,
    /// or when the configuration was read from stdin).
    pub config_file: Option<PathBuf>,
    /// `rename-command OLD NEW` pairs in file order; NEW "" removes OLD.
    /// The caller validates OLD against its command table.
    pub rename_commands: Vec<(String, String)>,
    /// Software watchdog period in ms (CONFIG SET only), 0 = disabled.
    pub watchdog_period: u64,
    /// Redis's protected mode (our extension; see `security`).
    pub protected_mode: bool,
    /// `tls-*` directives (our extension; see `security`).
    pub tls: security::TlsConfig,
    /// Deployment extensions: cluster-join, announce addresses, drain.
    pub deploy: deploy::DeployConfig,
    /// `dedup-window` seconds (our extension, `extensions`).
    pub dedup_window: u64,
    /// `spill yes|no`: queue tails may move to disk (`extensions`).
    pub spill: bool,
    /// `spill-dir`; None = `spill` under `dir`.
    pub spill_dir: Option<String>,
    /// `spill-max-disk`: the segment files' budget.
    pub spill_max_disk: extensions::SpillDisk,
    /// `spill-watermark`: percent of maxmemory where spilling starts.
    pub spill_watermark: u64,
    /// `spill-whole-jobs`: plain jobs leave RAM whole, not only their
    /// bodies (`engine::cold`).
    pub spill_whole_jobs: bool,
    /// `job-max-body-size` bytes, 0 = no limit (our extension, `extensions`).
    pub job_max_body_size: u64,
    /// Redis's `proto-max-bulk-len` bytes (`extensions`).
    pub proto_max_bulk_len: u64,
    /// Our extension: port of the HTTP endpoint (metrics, health,
    /// dashboard). None = off (`http-port 0`, the default); Some(0) =
    /// any free port (`http-port auto`).
    pub http_port: Option<u16>,
    /// Addresses the HTTP endpoint binds; empty = the same as `bind`.
    pub http_bind: Vec<String>,
    /// Most queues with their own series in /metrics (the busiest ones).
    pub metrics_max_queues: u64,
    /// /readyz needs a reachable peer when the node is in a cluster.
    pub readyz_require_peer: bool,
    pub log_format: LogFormat,
    /// `user` directives, each as a `user <name> <rules>` line (`acl`).
    pub users: Vec<String>,
    /// `aclfile`: None = users come from `user` lines (and runtime changes
    /// persist in the state file only).
    pub aclfile: Option<String>,
    /// Redis 7's `enable-debug-command`: DEBUG from where.
    pub enable_debug_command: acl::Gate,
    /// Redis 7's `enable-protected-configs`: CONFIG SET of paths from where.
    pub enable_protected_configs: acl::Gate,
}

/// Default values, shared by `Default` and by CONFIG REWRITE (which only
/// appends options that differ from these).
pub(crate) mod defaults {
    pub const PORT: u16 = 7711;
    pub const TCP_BACKLOG: u32 = 511;
    pub const UNIXSOCKETPERM: u32 = 0;
    pub const TIMEOUT: u64 = 0;
    pub const TCP_KEEPALIVE: u64 = 0;
    pub const LOGFILE: &str = "";
    pub const SYSLOG_IDENT: &str = "disque";
    pub const PIDFILE: &str = "/var/run/disque.pid";
    pub const DATABASES: u32 = 16;
    pub const MAXCLIENTS: u64 = 10000;
    pub const MAXMEMORY: u64 = 1 << 30;
    pub const MAXMEMORY_SAMPLES: u64 = 5;
    pub const HZ: u32 = 10;
    pub const APPENDFILENAME: &str = "disque.aof";
    pub const AUTO_AOF_REWRITE_PERCENTAGE: u64 = 100;
    pub const AUTO_AOF_REWRITE_MIN_SIZE: u64 = 64 << 20;
    pub const CLUSTER_CONFIG_FILE: &str = "nodes.conf";
    pub const CLUSTER_NODE_TIMEOUT: u64 = 15000;
    pub const SLOWLOG_LOG_SLOWER_THAN: i64 = 10000;
    pub const SLOWLOG_MAX_LEN: u64 = 128;
    pub const LATENCY_MONITOR_THRESHOLD: u64 = 0;
    /// Value stored when CONFIG SET tcp-keepalive yes enables keepalive
    /// from the disabled state (a 1 s probe, as the original would store,
    /// is needlessly aggressive).
    pub const TCP_KEEPALIVE_ON: u64 = 300;
    /// Longest accepted requirepass, in bytes.
    pub const AUTHPASS_MAX_LEN: usize = 512;
    /// Most addresses accepted by `bind`.
    pub const BINDADDR_MAX: usize = 16;
    /// Highest client port: the cluster bus listens on port + 10000.
    pub const PORT_MAX: u16 = 55535;
    pub const HZ_MIN: i64 = 1;
    pub const HZ_MAX: i64 = 500;
}

impl Default for Config {
    fn default() -> Self {
        use defaults as d;
        Config {
            port: d::PORT,
            bind: Vec::new(),
            tcp_backlog: d::TCP_BACKLOG,
            unixsocket: None,
            unixsocketperm: d::UNIXSOCKETPERM,
            timeout: d::TIMEOUT,
            tcp_keepalive: d::TCP_KEEPALIVE,
            // A vanished cwd is not worth failing for; "." keeps relative
            // paths working the same way.
            dir: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            loglevel: LogLevel::Notice,
            logfile: d::LOGFILE.to_string(),
            syslog_enabled: false,
            syslog_ident: d::SYSLOG_IDENT.to_string(),
            syslog_facility: SyslogFacility::Local0,
            daemonize: false,
            pidfile: d::PIDFILE.to_string(),
            databases: d::DATABASES,
            maxclients: d::MAXCLIENTS,
            maxmemory: d::MAXMEMORY,
            maxmemory_set: false,
            maxmemory_policy: MaxmemoryPolicy::Acks,
            maxmemory_samples: d::MAXMEMORY_SAMPLES,
            activerehashing: true,
            hz: d::HZ,
            appendonly: false,
            appendfilename: d::APPENDFILENAME.to_string(),
            appendfsync: AppendFsync::EverySec,
            no_appendfsync_on_rewrite: false,
            auto_aof_rewrite_percentage: d::AUTO_AOF_REWRITE_PERCENTAGE,
            auto_aof_rewrite_min_size: d::AUTO_AOF_REWRITE_MIN_SIZE,
            auto_aof_rewrite_min_reclaim: 0,
            aof_rewrite_incremental_fsync: true,
            aof_load_truncated: true,
            aof_enqueue_jobs_once: false,
            requirepass: None,
            cluster_secret: None,
            cluster_config_file: d::CLUSTER_CONFIG_FILE.to_string(),
            cluster_node_timeout: d::CLUSTER_NODE_TIMEOUT,
            slowlog_log_slower_than: d::SLOWLOG_LOG_SLOWER_THAN,
            slowlog_max_len: d::SLOWLOG_MAX_LEN,
            latency_monitor_threshold: d::LATENCY_MONITOR_THRESHOLD,
            client_output_buffer_limit: ClientOutputBufferLimit::default(),
            config_file: None,
            rename_commands: Vec::new(),
            watchdog_period: 0,
            protected_mode: true,
            tls: security::TlsConfig::default(),
            deploy: deploy::DeployConfig::default(),
            dedup_window: extensions::DEFAULT_DEDUP_WINDOW,
            spill: false,
            spill_dir: None,
            spill_max_disk: extensions::DEFAULT_SPILL_MAX_DISK,
            spill_watermark: extensions::DEFAULT_SPILL_WATERMARK,
            spill_whole_jobs: false,
            job_max_body_size: 0,
            proto_max_bulk_len: extensions::DEFAULT_PROTO_MAX_BULK_LEN,
            http_port: None,
            http_bind: Vec::new(),
            metrics_max_queues: observe::defaults::METRICS_MAX_QUEUES,
            readyz_require_peer: true,
            log_format: LogFormat::Text,
            users: Vec::new(),
            aclfile: None,
            enable_debug_command: acl::Gate::Local,
            enable_protected_configs: acl::Gate::Local,
        }
    }
}

/// What `from_args` decided the process should do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Startup {
    Run(Box<Config>),
    Version,
    Help,
    CheckAof {
        file: String,
        fix: bool,
    },
    /// `--test-memory <MB>`.
    TestMemory(u64),
}

/// A fatal startup error. With `line_no > 0` it is a config-file error and
/// renders the original's FATAL banner; with `line_no == 0` it is a
/// file-level or usage problem and renders `message` alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub line_no: usize,
    pub line: String,
    pub message: String,
}

impl Config {
    /// Where the spill segment files go: `spill-dir`, relative to `dir`
    /// unless absolute (default `spill`).
    pub fn spill_dir(&self) -> PathBuf {
        self.dir.join(self.spill_dir.as_deref().unwrap_or("spill"))
    }
}

impl ConfigError {
    pub(crate) fn at(line_no: usize, line: &str, message: impl Into<String>) -> Self {
        ConfigError {
            line_no,
            line: line.to_string(),
            message: message.into(),
        }
    }

    pub(crate) fn plain(message: impl Into<String>) -> Self {
        ConfigError {
            line_no: 0,
            line: String::new(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line_no == 0 {
            return writeln!(f, "{}", self.message);
        }
        write!(
            f,
            "\n*** FATAL CONFIG FILE ERROR ***\nReading the configuration file, at line {}\n>>> '{}'\n{}\n",
            self.line_no, self.line, self.message
        )
    }
}

impl std::error::Error for ConfigError {}

/// CONFIG SET failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetError {
    /// Parameter name as typed by the client.
    Unsupported(String),
    /// Name and value as typed by the client.
    Invalid { name: String, value: String },
    /// Any other error; the text follows "ERR ".
    Other(String),
}

impl SetError {
    /// The client-visible error.
    pub fn wire(&self) -> WireError {
        match self {
            SetError::Unsupported(p) => WireError::ConfigUnsupported(p.clone()),
            SetError::Invalid { name, value } => WireError::ConfigInvalid {
                name: name.clone(),
                value: value.clone(),
            },
            SetError::Other(m) => WireError::Other(m.clone()),
        }
    }

    /// Error reply text without the leading '-' and trailing CRLF.
    pub fn reply_text(&self) -> String {
        self.wire().text().into_owned()
    }
}

impl fmt::Display for SetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reply_text())
    }
}

impl std::error::Error for SetError {}

/// CONFIG REWRITE failure.
#[derive(Debug)]
pub enum RewriteError {
    NoConfigFile,
    Io(std::io::Error),
}

impl RewriteError {
    /// The client-visible error.
    pub fn wire(&self) -> WireError {
        match self {
            RewriteError::NoConfigFile => WireError::ConfigNoFile,
            RewriteError::Io(e) => WireError::ConfigRewrite(crate::errors::strerror(e)),
        }
    }

    /// Error reply text without the leading '-' and trailing CRLF.
    pub fn reply_text(&self) -> String {
        self.wire().text().into_owned()
    }
}

impl fmt::Display for RewriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reply_text())
    }
}

impl std::error::Error for RewriteError {}

impl From<std::io::Error> for RewriteError {
    fn from(e: std::io::Error) -> Self {
        RewriteError::Io(e)
    }
}
