//! Directives of our job-semantics extensions (docs/COMPATIBILITY.md):
//! `dedup-window`, the seconds an ADDJOB DEDUP key is remembered (default
//! 300), and `job-max-body-size`, the largest ADDJOB body accepted (default
//! 0: only the protocol's bulk limit), and Redis's `proto-max-bulk-len`,
//! the largest bulk argument of any request (default 512mb, at least 1mb). Parsing, CONFIG GET / SET and CONFIG REWRITE live here so the rest
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
pub(crate) const GET_NAMES: [&str; 3] = ["dedup-window", "job-max-body-size", "proto-max-bulk-len"];
/// CONFIG SET accepts all of them.
pub(crate) const SET_NAMES: [&str; 3] = ["dedup-window", "job-max-body-size", "proto-max-bulk-len"];

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
