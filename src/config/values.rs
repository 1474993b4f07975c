//! Value-level helpers shared by the parser, CONFIG SET and CONFIG REWRITE:
//! Redis-compatible argument splitting and quoting, memory units, and
//! strict integer / boolean parsing.

/// Split a config line like Redis `sdssplitargs`.
///
/// Tokens are separated by whitespace. `"double quotes"` understand
/// `\n \r \t \b \a \\ \" \xHH`; `'single quotes'` are literal except `\'`.
/// Quotes may start in the middle of a token (`a"b c"` is one token), but a
/// closing quote must be followed by whitespace or the end of the line.
/// Returns `None` for unbalanced quotes or a misplaced closing quote.
/// Bytes produced by `\xHH` that are not valid UTF-8 are replaced lossily.
pub fn split_args(line: &str) -> Option<Vec<String>> {
    let p = line.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    loop {
        while i < p.len() && is_space(p[i]) {
            i += 1;
        }
        if i >= p.len() {
            return Some(out);
        }
        let mut cur: Vec<u8> = Vec::new();
        let (mut inq, mut insq) = (false, false);
        loop {
            let c = p.get(i).copied();
            if inq {
                match c {
                    None => return None,
                    Some(b'\\')
                        if p.get(i + 1) == Some(&b'x')
                            && hex_val(p.get(i + 2)).is_some()
                            && hex_val(p.get(i + 3)).is_some() =>
                    {
                        let hi = hex_val(p.get(i + 2)).unwrap_or(0);
                        let lo = hex_val(p.get(i + 3)).unwrap_or(0);
                        cur.push(hi * 16 + lo);
                        i += 3;
                    }
                    Some(b'\\') if i + 1 < p.len() => {
                        i += 1;
                        cur.push(match p[i] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 8,
                            b'a' => 7,
                            other => other,
                        });
                    }
                    Some(b'"') => {
                        if p.get(i + 1).is_some_and(|&n| !is_space(n)) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    Some(other) => cur.push(other),
                }
            } else if insq {
                match c {
                    None => return None,
                    Some(b'\\') if p.get(i + 1) == Some(&b'\'') => {
                        i += 1;
                        cur.push(b'\'');
                    }
                    Some(b'\'') => {
                        if p.get(i + 1).is_some_and(|&n| !is_space(n)) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    Some(other) => cur.push(other),
                }
            } else {
                match c {
                    None => break,
                    Some(b) if is_space(b) => break,
                    Some(b'"') => inq = true,
                    Some(b'\'') => insq = true,
                    Some(other) => cur.push(other),
                }
            }
            i += 1;
        }
        out.push(String::from_utf8_lossy(&cur).into_owned());
    }
}

/// C `isspace` on ASCII.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn hex_val(b: Option<&u8>) -> Option<u8> {
    match b? {
        c @ b'0'..=b'9' => Some(c - b'0'),
        c @ b'a'..=b'f' => Some(c - b'a' + 10),
        c @ b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Quote a string the way Redis `sdscatrepr` does, so that `split_args`
/// reads it back byte-for-byte: used for string options in CONFIG REWRITE.
pub(crate) fn repr(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for &b in s.as_bytes() {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            0x20..=0x7e => out.push(b as char),
            // Non-printable and non-ASCII bytes are hex-escaped; split_args
            // then reassembles the UTF-8 sequence byte by byte.
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
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

/// Strict signed integer: optional '-', digits only. Stricter than the
/// original's `atoi` (which turned garbage into 0) on purpose, so typos are
/// reported instead of silently becoming 0.
pub(crate) fn parse_i64(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Strict non-negative integer.
pub(crate) fn parse_u64(s: &str) -> Option<u64> {
    parse_i64(s).and_then(|v| u64::try_from(v).ok())
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
