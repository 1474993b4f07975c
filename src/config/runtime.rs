//! CONFIG GET and CONFIG SET (docs/COMMANDS.md#config).
//!
//! GET walks a fixed table in the exact order of 6.9 so replies are
//! byte-identical to the reference server. SET only validates and stores;
//! the caller applies side effects by comparing old and new values.

use super::defaults as d;
use super::directives::change_dir;
use super::glob::glob_match;
use super::security;
use super::values::{parse_bool, parse_i64, parse_memory, parse_u64, yes_no};
use super::{AppendFsync, ClientOutputBufferLimit, Config, LogLevel, MaxmemoryPolicy, SetError};

/// CONFIG GET parameter names in reply order (Disque's 35, then ours).
pub(crate) const GET_ORDER: [&str; 35] = [
    "requirepass",
    "unixsocket",
    "logfile",
    "pidfile",
    "maxmemory",
    "maxmemory-samples",
    "timeout",
    "auto-aof-rewrite-percentage",
    "auto-aof-rewrite-min-size",
    "slowlog-log-slower-than",
    "latency-monitor-threshold",
    "slowlog-max-len",
    "port",
    "tcp-backlog",
    "databases",
    "maxclients",
    "watchdog-period",
    "hz",
    "cluster-node-timeout",
    "tcp-keepalive",
    "no-appendfsync-on-rewrite",
    "daemonize",
    "activerehashing",
    "aof-rewrite-incremental-fsync",
    "aof-load-truncated",
    "aof-enqueue-jobs-once",
    "maxmemory-policy",
    "loglevel",
    "appendfsync",
    "syslog-facility",
    "appendonly",
    "dir",
    "client-output-buffer-limit",
    "unixsocketperm",
    "bind",
];

impl Config {
    /// CONFIG GET: matching (name, value) pairs in 6.9 order. The pattern is
    /// a case-sensitive Redis glob, as in the original.
    pub fn get(&self, pattern: &[u8]) -> Vec<(String, String)> {
        let ours = GET_ORDER
            .iter()
            .filter(|name| glob_match(pattern, name.as_bytes(), false))
            .map(|name| (name.to_string(), self.get_value(name)));
        // Our extensions come after Disque's parameters.
        let ext = security::GET_NAMES
            .iter()
            .filter(|name| glob_match(pattern, name.as_bytes(), false))
            .map(|name| (name.to_string(), security::get_value(self, name)));
        let semantics = super::extensions::GET_NAMES
            .iter()
            .filter(|name| glob_match(pattern, name.as_bytes(), false))
            .map(|name| (name.to_string(), super::extensions::get_value(self, name)));
        let acl = super::acl::GET_NAMES
            .iter()
            .filter(|name| glob_match(pattern, name.as_bytes(), false))
            .map(|name| (name.to_string(), super::acl::get_value(self, name)));
        ours.chain(ext).chain(semantics).chain(acl).collect()
    }

    /// The CONFIG GET rendering of one parameter ("" for unknown names).
    fn get_value(&self, name: &str) -> String {
        let c = self;
        match name {
            "requirepass" => c.requirepass.clone().unwrap_or_default(),
            "unixsocket" => c.unixsocket.clone().unwrap_or_default(),
            "logfile" => c.logfile.clone(),
            "pidfile" => c.pidfile.clone(),
            "maxmemory" => c.maxmemory.to_string(),
            "maxmemory-samples" => c.maxmemory_samples.to_string(),
            "timeout" => c.timeout.to_string(),
            "auto-aof-rewrite-percentage" => c.auto_aof_rewrite_percentage.to_string(),
            "auto-aof-rewrite-min-size" => c.auto_aof_rewrite_min_size.to_string(),
            "slowlog-log-slower-than" => c.slowlog_log_slower_than.to_string(),
            "latency-monitor-threshold" => c.latency_monitor_threshold.to_string(),
            "slowlog-max-len" => c.slowlog_max_len.to_string(),
            "port" => c.port.to_string(),
            "tcp-backlog" => c.tcp_backlog.to_string(),
            "databases" => c.databases.to_string(),
            "maxclients" => c.maxclients.to_string(),
            "watchdog-period" => c.watchdog_period.to_string(),
            "hz" => c.hz.to_string(),
            "cluster-node-timeout" => c.cluster_node_timeout.to_string(),
            // Quirk of the reference server: reported as a boolean.
            "tcp-keepalive" => yes_no(c.tcp_keepalive != 0).to_string(),
            "no-appendfsync-on-rewrite" => yes_no(c.no_appendfsync_on_rewrite).to_string(),
            "daemonize" => yes_no(c.daemonize).to_string(),
            "activerehashing" => yes_no(c.activerehashing).to_string(),
            "aof-rewrite-incremental-fsync" => yes_no(c.aof_rewrite_incremental_fsync).to_string(),
            "aof-load-truncated" => yes_no(c.aof_load_truncated).to_string(),
            "aof-enqueue-jobs-once" => yes_no(c.aof_enqueue_jobs_once).to_string(),
            "maxmemory-policy" => c.maxmemory_policy.as_str().to_string(),
            "loglevel" => c.loglevel.as_str().to_string(),
            "appendfsync" => c.appendfsync.as_str().to_string(),
            "syslog-facility" => c.syslog_facility.as_str().to_string(),
            "appendonly" => yes_no(c.appendonly).to_string(),
            "dir" => c.dir.to_string_lossy().into_owned(),
            "client-output-buffer-limit" => {
                let l = &c.client_output_buffer_limit;
                format!("normal {} {} {}", l.hard, l.soft, l.soft_seconds)
            }
            "unixsocketperm" => format!("{:o}", c.unixsocketperm),
            "bind" => c.bind.join(" "),
            _ => String::new(),
        }
    }

    /// CONFIG SET: validate `value` for `name` (case-insensitive) and store
    /// it. Returns the canonical (lower-case) parameter name so the caller
    /// can dispatch side effects without re-matching the name.
    pub fn set(&mut self, name: &str, value: &[u8]) -> Result<&'static str, SetError> {
        let lname = name.to_ascii_lowercase();
        if let Some(canon) = security::SET_NAMES.iter().copied().find(|p| *p == lname) {
            let invalid = || SetError::Invalid {
                name: name.to_string(),
                value: String::from_utf8_lossy(value).into_owned(),
            };
            let v = std::str::from_utf8(value).map_err(|_| invalid())?;
            security::set_value(self, canon, v).map_err(|_| invalid())?;
            return Ok(canon);
        }
        if let Some(canon) = super::extensions::SET_NAMES
            .iter()
            .copied()
            .find(|p| *p == lname)
        {
            let invalid = || SetError::Invalid {
                name: name.to_string(),
                value: String::from_utf8_lossy(value).into_owned(),
            };
            let v = std::str::from_utf8(value).map_err(|_| invalid())?;
            super::extensions::set_value(self, canon, v).map_err(|_| invalid())?;
            return Ok(canon);
        }
        let Some(canon) = SET_PARAMS.iter().copied().find(|p| *p == lname) else {
            return Err(SetError::Unsupported(name.to_string()));
        };
        let invalid = || SetError::Invalid {
            name: name.to_string(),
            value: String::from_utf8_lossy(value).into_owned(),
        };
        // Every accepted value is text; binary garbage is simply invalid.
        let v = std::str::from_utf8(value).map_err(|_| invalid())?;
        match canon {
            "requirepass" => {
                if v.len() > d::AUTHPASS_MAX_LEN {
                    return Err(invalid());
                }
                self.requirepass = (!v.is_empty()).then(|| v.to_string());
            }
            "maxclients" => {
                self.maxclients = parse_u64(v).filter(|&n| n >= 1).ok_or_else(invalid)?
            }
            "appendonly" => self.appendonly = parse_bool(v).ok_or_else(invalid)?,
            "dir" => {
                self.dir = change_dir(v).map_err(|source| {
                    SetError::Other(
                        super::ConfigIoError::ChangeDir {
                            path: v.to_string(),
                            source,
                        }
                        .to_string(),
                    )
                })?;
            }
            "client-output-buffer-limit" => {
                self.client_output_buffer_limit =
                    parse_obuf_groups(v, self.client_output_buffer_limit).ok_or_else(invalid)?;
            }
            "aof-rewrite-incremental-fsync" => {
                self.aof_rewrite_incremental_fsync = parse_bool(v).ok_or_else(invalid)?;
            }
            "aof-load-truncated" => self.aof_load_truncated = parse_bool(v).ok_or_else(invalid)?,
            "activerehashing" => self.activerehashing = parse_bool(v).ok_or_else(invalid)?,
            "aof-enqueue-jobs-once" => {
                self.aof_enqueue_jobs_once = parse_bool(v).ok_or_else(invalid)?
            }
            "tcp-keepalive" => {
                // yes/no like the reference server; an explicit number of
                // seconds is accepted too. "yes" keeps an existing period.
                self.tcp_keepalive = match parse_bool(v) {
                    Some(false) => 0,
                    Some(true) if self.tcp_keepalive != 0 => self.tcp_keepalive,
                    Some(true) => d::TCP_KEEPALIVE_ON,
                    None => parse_u64(v).ok_or_else(invalid)?,
                };
            }
            "maxmemory-samples" => {
                self.maxmemory_samples = parse_u64(v).filter(|&n| n >= 1).ok_or_else(invalid)?;
            }
            "timeout" => self.timeout = parse_u64(v).ok_or_else(invalid)?,
            "auto-aof-rewrite-percentage" => {
                self.auto_aof_rewrite_percentage = parse_u64(v).ok_or_else(invalid)?;
            }
            "auto-aof-rewrite-min-size" => {
                self.auto_aof_rewrite_min_size = parse_memory(v).ok_or_else(invalid)?;
            }
            "slowlog-log-slower-than" => {
                self.slowlog_log_slower_than =
                    parse_i64(v).filter(|&n| n >= 0).ok_or_else(invalid)?;
            }
            "slowlog-max-len" => self.slowlog_max_len = parse_u64(v).ok_or_else(invalid)?,
            "latency-monitor-threshold" => {
                self.latency_monitor_threshold = parse_u64(v).ok_or_else(invalid)?;
            }
            "cluster-node-timeout" => {
                self.cluster_node_timeout = parse_u64(v).filter(|&n| n >= 1).ok_or_else(invalid)?;
            }
            "hz" => {
                let hz = parse_u64(v).ok_or_else(invalid)?;
                let clamped = hz.clamp(d::HZ_MIN as u64, d::HZ_MAX as u64);
                self.hz = u32::try_from(clamped).unwrap_or(d::HZ);
            }
            "watchdog-period" => self.watchdog_period = parse_u64(v).ok_or_else(invalid)?,
            "maxmemory" => {
                self.maxmemory = parse_memory(v).filter(|&n| n > 0).ok_or_else(invalid)?
            }
            "loglevel" => self.loglevel = LogLevel::parse(v).ok_or_else(invalid)?,
            "maxmemory-policy" => {
                self.maxmemory_policy = MaxmemoryPolicy::parse(v).ok_or_else(invalid)?;
            }
            "appendfsync" => self.appendfsync = AppendFsync::parse(v).ok_or_else(invalid)?,
            _ => return Err(SetError::Unsupported(name.to_string())),
        }
        Ok(canon)
    }
}

/// Parameters CONFIG SET accepts (as Disque does); anything else is
/// "Unsupported", even if CONFIG GET shows it.
pub(crate) const SET_PARAMS: [&str; 24] = [
    "requirepass",
    "maxclients",
    "appendonly",
    "dir",
    "client-output-buffer-limit",
    "aof-rewrite-incremental-fsync",
    "aof-load-truncated",
    "activerehashing",
    "tcp-keepalive",
    "aof-enqueue-jobs-once",
    "maxmemory-samples",
    "timeout",
    "auto-aof-rewrite-percentage",
    "auto-aof-rewrite-min-size",
    "slowlog-log-slower-than",
    "slowlog-max-len",
    "latency-monitor-threshold",
    "cluster-node-timeout",
    "hz",
    "watchdog-period",
    "maxmemory",
    "loglevel",
    "maxmemory-policy",
    "appendfsync",
];

/// `<class> <hard> <soft> <secs>` groups separated by single spaces, all
/// validated before anything is applied (all-or-nothing, like the original).
/// The only class is `normal`; an empty string changes nothing.
fn parse_obuf_groups(v: &str, current: ClientOutputBufferLimit) -> Option<ClientOutputBufferLimit> {
    if v.is_empty() {
        return Some(current);
    }
    let parts: Vec<&str> = v.split(' ').collect();
    if !parts.len().is_multiple_of(4) {
        return None;
    }
    let mut result = current;
    for g in parts.chunks(4) {
        if !g[0].eq_ignore_ascii_case("normal") {
            return None;
        }
        result = ClientOutputBufferLimit {
            hard: parse_memory(g[1])?,
            soft: parse_memory(g[2])?,
            soft_seconds: parse_u64(g[3])?,
        };
    }
    Some(result)
}
