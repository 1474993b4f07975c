//! Semantics of each config-file directive (conf/disque.conf): argument count,
//! validation, and the error message shown in the FATAL banner.
//!
//! Messages copy the original where it had one; where the original was
//! silent (it used `atoi`, which maps garbage to 0) we reject the value with
//! a message of the same style instead of guessing.

use super::DirectiveError;
use std::path::PathBuf;

use super::defaults as d;
use super::values::{parse_bool, parse_i64, parse_memory, parse_u64};
use super::ConfigIoError;
use super::{AppendFsync, Config, LogLevel, MaxmemoryPolicy, SyslogFacility};

const BAD: &str = "Bad directive or wrong number of arguments";
const YES_NO: &str = "argument must be 'yes' or 'no'";

/// Apply one directive (`name` already lower-cased, `args` without it).
/// `include` is handled by the caller because it recurses into the parser.
pub(crate) fn apply_directive(
    cfg: &mut Config,
    name: &str,
    args: &[String],
) -> Result<(), DirectiveError> {
    if let Some(r) = super::security::apply_directive(cfg, name, args) {
        return r;
    }
    if let Some(r) = super::deploy::apply_directive(cfg, name, args) {
        return r;
    }
    if let Some(r) = super::extensions::apply_directive(cfg, name, args) {
        return r;
    }
    if let Some(r) = super::observe::apply_directive(cfg, name, args) {
        return r;
    }
    if let Some(r) = super::acl::apply_directive(cfg, name, args) {
        return r;
    }
    // Variable-arity directives first; everything else takes exactly one
    // argument, checked once below.
    match (name, args.len()) {
        ("bind", n) if n >= 1 => {
            if n > d::BINDADDR_MAX {
                return Err("Too many bind addresses specified".into());
            }
            cfg.bind = args.to_vec();
            return Ok(());
        }
        ("rename-command", 2) => {
            cfg.rename_commands.push((args[0].clone(), args[1].clone()));
            return Ok(());
        }
        ("client-output-buffer-limit", 4) => return client_obuf(cfg, args),
        (_, 1) => {}
        _ => return Err(BAD.into()),
    }
    let v = args[0].as_str();
    match name {
        "port" => {
            // Port 0 is our extension ("pick a free port"); the upper bound
            // leaves room for the cluster bus at port + 10000.
            cfg.port = parse_u64(v)
                .and_then(|p| u16::try_from(p).ok())
                .filter(|&p| p <= d::PORT_MAX)
                .ok_or("Invalid port")?;
        }
        "tcp-backlog" => cfg.tcp_backlog = num(v, "Invalid backlog value")?,
        "unixsocket" => cfg.unixsocket = Some(v.to_string()),
        "unixsocketperm" => {
            cfg.unixsocketperm = u32::from_str_radix(v, 8)
                .ok()
                .filter(|&p| p <= 0o777)
                .ok_or("Invalid socket file permissions")?;
        }
        "timeout" => cfg.timeout = num(v, "Invalid timeout value")?,
        "tcp-keepalive" => cfg.tcp_keepalive = num(v, "Invalid tcp-keepalive value")?,
        "dir" => {
            cfg.dir = change_dir(v).map_err(|source| ConfigIoError::Chdir {
                path: v.to_string(),
                source,
            })?
        }
        "loglevel" => {
            cfg.loglevel = LogLevel::parse(v)
                .ok_or("Invalid log level. Must be one of debug, verbose, notice, warning")?;
        }
        "logfile" => {
            if !v.is_empty() {
                // Like the original, fail at startup rather than losing the
                // log later: the server could not report the problem then.
                std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(v)
                    .map_err(|source| ConfigIoError::LogFile {
                        path: v.to_string(),
                        source,
                    })?;
            }
            cfg.logfile = v.to_string();
        }
        "syslog-enabled" => cfg.syslog_enabled = yes_no(v)?,
        "syslog-ident" => cfg.syslog_ident = v.to_string(),
        "syslog-facility" => {
            cfg.syslog_facility = SyslogFacility::parse(v)
                .ok_or("Invalid log facility. Must be one of USER or between LOCAL0-LOCAL7")?;
        }
        "daemonize" => cfg.daemonize = yes_no(v)?,
        "pidfile" => cfg.pidfile = v.to_string(),
        "databases" => {
            cfg.databases = num::<u32>(v, "Invalid number of databases")
                .ok()
                .filter(|&n| n >= 1)
                .ok_or("Invalid number of databases")?;
        }
        "maxclients" => {
            cfg.maxclients = parse_u64(v)
                .filter(|&n| n >= 1)
                .ok_or("Invalid max clients limit")?;
        }
        "maxmemory" => {
            cfg.maxmemory = parse_memory(v)
                .filter(|&n| n > 0)
                .ok_or("You need to specify a memory limit greater than zero")?;
            cfg.maxmemory_set = true;
        }
        "maxmemory-policy" => {
            cfg.maxmemory_policy = MaxmemoryPolicy::parse(v).ok_or("Invalid maxmemory policy")?;
        }
        "maxmemory-samples" => {
            cfg.maxmemory_samples = parse_u64(v)
                .filter(|&n| n >= 1)
                .ok_or("maxmemory-samples must be 1 or greater")?;
        }
        "activerehashing" => cfg.activerehashing = yes_no(v)?,
        "hz" => {
            let hz = parse_i64(v).ok_or("Invalid hz value")?;
            // Clamped rather than rejected, as in the original; the bounds
            // fit in u32 so the conversion cannot fail.
            cfg.hz = u32::try_from(hz.clamp(d::HZ_MIN, d::HZ_MAX)).unwrap_or(d::HZ);
        }
        "appendonly" => cfg.appendonly = yes_no(v)?,
        "appendfilename" => {
            // The AOF always lives in `dir`; a path would escape it.
            if v.is_empty() || v.contains('/') {
                return Err("appendfilename can't be a path, just a filename".into());
            }
            cfg.appendfilename = v.to_string();
        }
        "appendfsync" => {
            cfg.appendfsync =
                AppendFsync::parse(v).ok_or("argument must be 'no', 'always' or 'everysec'")?;
        }
        "no-appendfsync-on-rewrite" => cfg.no_appendfsync_on_rewrite = yes_no(v)?,
        "auto-aof-rewrite-percentage" => {
            cfg.auto_aof_rewrite_percentage =
                num(v, "Invalid negative percentage for AOF auto rewrite")?;
        }
        "auto-aof-rewrite-min-size" => {
            cfg.auto_aof_rewrite_min_size =
                parse_memory(v).ok_or("Invalid auto-aof-rewrite-min-size value")?;
        }
        "aof-rewrite-incremental-fsync" => cfg.aof_rewrite_incremental_fsync = yes_no(v)?,
        "aof-load-truncated" => cfg.aof_load_truncated = yes_no(v)?,
        "aof-enqueue-jobs-once" => cfg.aof_enqueue_jobs_once = yes_no(v)?,
        "requirepass" => {
            if v.len() > d::AUTHPASS_MAX_LEN {
                return Err("Password is longer than DISQUE_AUTHPASS_MAX_LEN".into());
            }
            // An empty password would make AUTH demand "", which nobody
            // means; treat it as "no password" like CONFIG SET does.
            cfg.requirepass = (!v.is_empty()).then(|| v.to_string());
        }
        "cluster-config-file" => cfg.cluster_config_file = v.to_string(),
        "cluster-secret" => cfg.cluster_secret = (!v.is_empty()).then(|| v.to_string()),
        "cluster-node-timeout" => {
            cfg.cluster_node_timeout = parse_u64(v)
                .filter(|&n| n >= 1)
                .ok_or("cluster node timeout must be 1 or greater")?;
        }
        "slowlog-log-slower-than" => {
            cfg.slowlog_log_slower_than =
                parse_i64(v).ok_or("Invalid slowlog-log-slower-than value")?;
        }
        "slowlog-max-len" => cfg.slowlog_max_len = num(v, "Invalid slowlog-max-len value")?,
        "latency-monitor-threshold" => {
            cfg.latency_monitor_threshold = num(v, "The latency threshold can't be negative")?;
        }
        _ => return Err(BAD.into()),
    }
    Ok(())
}

/// Parse a non-negative integer of type `T`, or fail with `msg`.
fn num<T: TryFrom<u64>>(v: &str, msg: &'static str) -> Result<T, DirectiveError> {
    parse_u64(v)
        .and_then(|n| T::try_from(n).ok())
        .ok_or(DirectiveError::Invalid(msg))
}

fn yes_no(v: &str) -> Result<bool, DirectiveError> {
    parse_bool(v).ok_or(DirectiveError::Invalid(YES_NO))
}

/// `client-output-buffer-limit <class> <hard> <soft> <soft-seconds>`.
fn client_obuf(cfg: &mut Config, args: &[String]) -> Result<(), DirectiveError> {
    if !args[0].eq_ignore_ascii_case("normal") {
        return Err("Unrecognized client limit class".into());
    }
    let hard = parse_memory(&args[1]).ok_or("Invalid hard limit in client-output-buffer-limit")?;
    let soft = parse_memory(&args[2]).ok_or("Invalid soft limit in client-output-buffer-limit")?;
    let secs = parse_i64(&args[3]).ok_or("Invalid number of seconds in soft limit")?;
    let soft_seconds =
        u64::try_from(secs).map_err(|_| "Negative number of seconds in soft limit is invalid")?;
    cfg.client_output_buffer_limit = super::ClientOutputBufferLimit {
        hard,
        soft,
        soft_seconds,
    };
    Ok(())
}

/// chdir to `path` and return the new absolute cwd (what CONFIG GET dir and
/// CONFIG REWRITE report).
pub(crate) fn change_dir(path: &str) -> std::io::Result<PathBuf> {
    std::env::set_current_dir(path)?;
    std::env::current_dir()
}
