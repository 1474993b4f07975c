//! Directives of our job-semantics extensions (docs/COMPATIBILITY.md):
//! `dedup-window`, the seconds an ADDJOB DEDUP key is remembered (default
//! 300); `job-max-body-size`, the largest ADDJOB body accepted (default
//! 0: only the protocol's bulk limit), and Redis's `proto-max-bulk-len`,
//! the largest bulk argument of any request (default 512mb, at least 1mb);
//! `auto-aof-rewrite-min-reclaim`, the share of the AOF an automatic
//! rewrite must be expected to drop (default 0: Disque's rule alone);
//! and the spill tier (docs/PERSISTENCE.md#9-spill-tiers): `spill`,
//! `spill-dir`, `spill-max-disk`, `spill-watermark`, `spill-whole-jobs`
//! (read at startup, so
//! CONFIG GET shows them and CONFIG SET does not take them). Parsing,
//! CONFIG GET / SET and CONFIG REWRITE live here so the rest
//! of the config module needs one hook each, as for `security`.

use super::values::parse_u64;
use super::Config;
use super::DirectiveError;

/// Default `dedup-window` in seconds.
pub const DEFAULT_DEDUP_WINDOW: u64 = 300;
/// Default and largest `proto-max-bulk-len`: the protocol's own limit.
pub const DEFAULT_PROTO_MAX_BULK_LEN: u64 = crate::protocol::resp::parse::MAX_BULK as u64;
/// Smallest `proto-max-bulk-len` (Redis's minimum).
const MIN_PROTO_MAX_BULK_LEN: u64 = 1024 * 1024;
/// Largest `dedup-window`: 30 days (keys are kept in memory and the AOF).
pub const MAX_DEDUP_WINDOW: u64 = 30 * 86400;

/// CONFIG GET order, after Disque's parameters and the security ones.
pub(crate) const GET_NAMES: [&str; 9] = [
    "dedup-window",
    "job-max-body-size",
    "proto-max-bulk-len",
    "auto-aof-rewrite-min-reclaim",
    "spill",
    "spill-dir",
    "spill-max-disk",
    "spill-watermark",
    "spill-whole-jobs",
];

/// Default `spill-max-disk`: this share of the spill directory's file system.
pub const DEFAULT_SPILL_MAX_DISK: SpillDisk = SpillDisk::Percent(90);
/// Default `spill-watermark`: percent of maxmemory where spilling starts.
pub const DEFAULT_SPILL_WATERMARK: u64 = 60;

/// `spill-max-disk`: bytes, or a percentage of the file system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpillDisk {
    Bytes(u64),
    Percent(u8),
}

impl SpillDisk {
    fn parse(v: &str) -> Option<SpillDisk> {
        if let Some(p) = v.strip_suffix('%') {
            return p
                .parse::<u8>()
                .ok()
                .filter(|p| (1..=100).contains(p))
                .map(SpillDisk::Percent);
        }
        super::values::parse_memory(v).map(SpillDisk::Bytes)
    }

    /// The byte budget for a file system of `fs_bytes` (0 = no limit).
    pub fn bytes(self, fs_bytes: Option<u64>) -> u64 {
        match self {
            SpillDisk::Bytes(b) => b,
            SpillDisk::Percent(p) => fs_bytes.map_or(0, |fs| fs / 100 * u64::from(p)),
        }
    }
}

impl std::fmt::Display for SpillDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpillDisk::Bytes(b) => write!(f, "{b}"),
            SpillDisk::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// CONFIG SET takes only these (the spill directives are read at startup).
pub(crate) const SET_NAMES: [&str; 4] = [
    "dedup-window",
    "job-max-body-size",
    "proto-max-bulk-len",
    "auto-aof-rewrite-min-reclaim",
];

/// Config-file directive; None when `name` is not one of ours.
pub(crate) fn apply_directive(
    cfg: &mut Config,
    name: &str,
    args: &[String],
) -> Option<Result<(), DirectiveError>> {
    if !GET_NAMES.contains(&name) {
        return None;
    }
    if args.len() != 1 {
        return Some(Err("Bad directive or wrong number of arguments".into()));
    }
    Some(set_value(cfg, name, &args[0]))
}

/// Validate and store one value (file, command line or CONFIG SET).
pub(crate) fn set_value(cfg: &mut Config, name: &str, v: &str) -> Result<(), DirectiveError> {
    match name {
        "dedup-window" => {
            cfg.dedup_window = parse_u64(v)
                .filter(|&n| (1..=MAX_DEDUP_WINDOW).contains(&n))
                .ok_or("dedup-window must be between 1 and 2592000 seconds")?;
        }
        "auto-aof-rewrite-min-reclaim" => {
            cfg.auto_aof_rewrite_min_reclaim = parse_u64(v)
                .filter(|&n| n <= 100)
                .ok_or("auto-aof-rewrite-min-reclaim must be a percentage from 0 to 100")?;
        }
        "spill" => {
            cfg.spill = super::values::parse_bool(v).ok_or("argument must be 'yes' or 'no'")?
        }
        "spill-dir" => {
            if v.is_empty() {
                return Err("spill-dir must not be empty".into());
            }
            cfg.spill_dir = Some(v.to_string());
        }
        "spill-max-disk" => {
            cfg.spill_max_disk = SpillDisk::parse(v).ok_or(
                "spill-max-disk must be a size in bytes (with an optional unit) or a percentage from 1% to 100%",
            )?;
        }
        "spill-watermark" => {
            cfg.spill_watermark = parse_u64(v)
                .filter(|&n| n <= 100)
                .ok_or("spill-watermark must be a percentage from 0 to 100")?;
        }
        "spill-whole-jobs" => {
            cfg.spill_whole_jobs =
                super::values::parse_bool(v).ok_or("argument must be 'yes' or 'no'")?
        }
        "job-max-body-size" => {
            cfg.job_max_body_size = super::values::parse_memory(v)
                .ok_or("job-max-body-size must be a size in bytes (units k, kb, m, mb, g, gb)")?;
        }
        "proto-max-bulk-len" => {
            cfg.proto_max_bulk_len = super::values::parse_memory(v)
                .filter(|n| (MIN_PROTO_MAX_BULK_LEN..=DEFAULT_PROTO_MAX_BULK_LEN).contains(n))
                .ok_or("proto-max-bulk-len must be between 1mb and 512mb")?;
        }
        _ => return Err("Bad directive or wrong number of arguments".into()),
    }
    Ok(())
}

/// CONFIG GET value of one of our parameters.
pub(crate) fn get_value(c: &Config, name: &str) -> String {
    match name {
        "dedup-window" => c.dedup_window.to_string(),
        "auto-aof-rewrite-min-reclaim" => c.auto_aof_rewrite_min_reclaim.to_string(),
        "spill" => super::values::yes_no(c.spill).to_string(),
        "spill-dir" => c.spill_dir().to_string_lossy().into_owned(),
        "spill-max-disk" => c.spill_max_disk.to_string(),
        "spill-watermark" => c.spill_watermark.to_string(),
        "spill-whole-jobs" => super::values::yes_no(c.spill_whole_jobs).to_string(),
        "job-max-body-size" => c.job_max_body_size.to_string(),
        "proto-max-bulk-len" => c.proto_max_bulk_len.to_string(),
        _ => String::new(),
    }
}

/// (option, line, differs from default) for CONFIG REWRITE.
pub(crate) fn rewrite_lines(c: &Config) -> Vec<(&'static str, String, bool)> {
    vec![
        (
            "dedup-window",
            format!("dedup-window {}", c.dedup_window),
            c.dedup_window != DEFAULT_DEDUP_WINDOW,
        ),
        (
            "auto-aof-rewrite-min-reclaim",
            format!(
                "auto-aof-rewrite-min-reclaim {}",
                c.auto_aof_rewrite_min_reclaim
            ),
            c.auto_aof_rewrite_min_reclaim != 0,
        ),
        (
            "spill",
            format!("spill {}", super::values::yes_no(c.spill)),
            c.spill,
        ),
        (
            "spill-dir",
            format!(
                "spill-dir {}",
                crate::support::strings::repr(
                    c.spill_dir.as_deref().unwrap_or_default().as_bytes()
                )
            ),
            c.spill_dir.is_some(),
        ),
        (
            "spill-max-disk",
            format!("spill-max-disk {}", c.spill_max_disk),
            c.spill_max_disk != DEFAULT_SPILL_MAX_DISK,
        ),
        (
            "spill-watermark",
            format!("spill-watermark {}", c.spill_watermark),
            c.spill_watermark != DEFAULT_SPILL_WATERMARK,
        ),
        (
            "spill-whole-jobs",
            format!(
                "spill-whole-jobs {}",
                super::values::yes_no(c.spill_whole_jobs)
            ),
            c.spill_whole_jobs,
        ),
        (
            "job-max-body-size",
            format!(
                "job-max-body-size {}",
                super::values::format_memory(c.job_max_body_size)
            ),
            c.job_max_body_size != 0,
        ),
        (
            "proto-max-bulk-len",
            format!(
                "proto-max-bulk-len {}",
                super::values::format_memory(c.proto_max_bulk_len)
            ),
            c.proto_max_bulk_len != DEFAULT_PROTO_MAX_BULK_LEN,
        ),
    ]
}
