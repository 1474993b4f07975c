//! Value-level helpers shared by the parser, CONFIG SET and CONFIG REWRITE:
//! memory units, booleans, and the config's view of the Redis-style
//! string helpers in `crate::support::strings` (splitting, quoting, integers).

/// Split a config line like Redis `sdssplitargs` (`crate::support::strings`), as
/// strings: bytes produced by `\xHH` that are not valid UTF-8 are replaced
/// lossily. `None` for unbalanced quotes or a misplaced closing quote.
pub fn split_args(line: &str) -> Option<Vec<String>> {
    let args = crate::support::strings::split_args(line.as_bytes())?;
    Some(
        args.into_iter()
            .map(|a| String::from_utf8_lossy(&a).into_owned())
            .collect(),
    )
}

/// Quote a string the way Redis `sdscatrepr` does, so that `split_args`
/// reads it back byte-for-byte: used for string options in CONFIG REWRITE.
pub(crate) fn repr(s: &str) -> String {
    crate::support::strings::repr(s.as_bytes())
}

/// Parse a memory amount: a non-negative integer optionally followed by
/// `b`, `k` (1000), `kb` (1024), `m` (10^6), `mb` (2^20), `g` (10^9) or
/// `gb` (2^30), case-insensitive. `None` on syntax error or overflow.
pub fn parse_memory(s: &str) -> Option<u64> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    if num.is_empty() {
        return None;
    }
    let mul: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}

/// Render bytes with the largest binary unit that divides them exactly
/// (`1gb`, `3mb`, `100kb`), else plain bytes; 0 stays `0`.
pub fn format_memory(bytes: u64) -> String {
    const KB: u64 = 1 << 10;
    const MB: u64 = 1 << 20;
    const GB: u64 = 1 << 30;
    if bytes == 0 {
        "0".to_string()
    } else if bytes.is_multiple_of(GB) {
        format!("{}gb", bytes / GB)
    } else if bytes.is_multiple_of(MB) {
        format!("{}mb", bytes / MB)
    } else if bytes.is_multiple_of(KB) {
        format!("{}kb", bytes / KB)
    } else {
        bytes.to_string()
    }
}

/// Strict signed integer (`crate::support::strings::digits_i64`).
pub(crate) fn parse_i64(s: &str) -> Option<i64> {
    crate::support::strings::digits_i64(s)
}

/// Strict non-negative integer.
pub(crate) fn parse_u64(s: &str) -> Option<u64> {
    crate::support::strings::digits_u64(s)
}

/// `yes` / `no`, case-insensitive.
pub(crate) fn parse_bool(s: &str) -> Option<bool> {
    if s.eq_ignore_ascii_case("yes") {
        Some(true)
    } else if s.eq_ignore_ascii_case("no") {
        Some(false)
    } else {
        None
    }
}

pub(crate) fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}
