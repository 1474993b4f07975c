//! Redis-style string helpers, shared by the RESP parser (inline
//! requests, lengths), the config file and CONFIG SET/REWRITE, the
//! commands and MONITOR: `sdssplitargs`, `sdscatrepr`, `string2ll`. They
//! follow the C originals byte for byte (clients and config files written
//! for Disque must read the same), which is why they are hand-written.

/// Redis `string2ll`: strict decimal, optional leading `-`, no `+`, no
/// spaces, no leading zeros, no `-0`, no overflow.
pub fn string2ll(s: &[u8]) -> Option<i64> {
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some(_) => (false, s),
        None => return None,
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        if v > i64::MIN.unsigned_abs() {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

/// C `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Split a line into arguments with Redis `sdssplitargs` rules; `None` when
/// quotes are unbalanced (or a closing quote is glued to the next word).
///
/// Whitespace separates words; `"..."` understands `\n \r \t \b \a \\ \"`
/// and `\xHH` (any other escaped char stands for itself); `'...'` is literal
/// except `\'`. A quote may start mid-word (`a"b c"` is one word `ab c`).
/// Since the original works on a C string, a NUL byte ends the line.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let line = match line.iter().position(|&b| b == 0) {
        Some(i) => &line[..i],
        None => line,
    };
    // Reading past the end yields 0, mirroring the C string terminator the
    // original algorithm relies on.
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut out = Vec::new();
    let mut p = 0;
    loop {
        while p < line.len() && is_c_space(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return Some(out);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        let mut done = false;
        while !done {
            let c = at(p);
            if in_dq {
                let hex = (hex_val(at(p + 2)), hex_val(at(p + 3)));
                if let (b'\\', b'x', (Some(hi), Some(lo))) = (c, at(p + 1), hex) {
                    cur.push(hi * 16 + lo);
                    p += 3;
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    cur.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    let next = at(p + 1);
                    if next != 0 && !is_c_space(next) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    cur.push(c);
                }
            } else if in_sq {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    let next = at(p + 1);
                    if next != 0 && !is_c_space(next) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    cur.push(c);
                }
            } else {
                // Only these end an unquoted word (not \v or \f), as in Redis.
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    _ => cur.push(c),
                }
            }
            if p < line.len() {
                p += 1;
            }
        }
        out.push(cur);
    }
}

/// Quote bytes the way Redis `sdscatrepr` does (MONITOR lines, CONFIG
/// REWRITE strings): printable ASCII as is, `\\ \" \n \r \t \a \b`
/// escaped, anything else `\xHH`. `split_args` reads it back byte for byte.
pub fn repr(s: &[u8]) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for &b in s {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

/// A config-file integer: optional '-', then digits (leading zeros
/// allowed). Stricter than the original's `atoi` (which turned garbage
/// into 0) on purpose, so typos are reported instead of becoming 0.
pub fn digits_i64(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A non-negative config-file integer.
pub fn digits_u64(s: &str) -> Option<u64> {
    digits_i64(s).and_then(|v| u64::try_from(v).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_args_rules() {
        let v = |s: &[u8]| split_args(s);
        let w = |list: &[&[u8]]| Some(list.iter().map(|x| x.to_vec()).collect::<Vec<_>>());
        assert_eq!(v(b""), w(&[]));
        assert_eq!(v(b"   "), w(&[]));
        assert_eq!(v(b"a b  c"), w(&[b"a", b"b", b"c"]));
        assert_eq!(v(b"  port 7711  "), w(&[b"port", b"7711"]));
        assert_eq!(v(b"\"\""), w(&[b""]));
        assert_eq!(v(b"''"), w(&[b""]));
        assert_eq!(v(b"a\"b c\"d"), None);
        assert_eq!(v(b"a\"b c\" d"), w(&[b"ab c", b"d"]));
        assert_eq!(v(b"\"\\x4"), None);
        assert_eq!(v(b"\"\\x4\""), w(&[b"x4"]));
        assert_eq!(v(b"\"\\xff\\x00\""), w(&[b"\xff\x00"]));
        assert_eq!(v(b"'a\\b'"), w(&[b"a\\b"]));
        assert_eq!(v(b"\"a\"\t"), w(&[b"a"]));
        assert_eq!(v(b"\"a\"\x0bb"), w(&[b"a", b"b"]));
        // \v does not end an unquoted word, but is skipped as a separator.
        assert_eq!(v(b"a\x0bb"), w(&[b"a\x0bb"]));
        assert_eq!(v(b"\x0ba"), w(&[b"a"]));
        // NUL ends the line, as in the C original.
        assert_eq!(v(b"a b\0c d"), w(&[b"a", b"b"]));
        assert_eq!(v(b"\"a\0\""), None);
        assert_eq!(v(b"\""), None);
        assert_eq!(v(b"'"), None);
        assert_eq!(v(b"\"\\"), None);
        assert_eq!(v(b"a\\ b"), w(&[b"a\\", b"b"]));
    }

    #[test]
    fn string2ll_matches_redis() {
        assert_eq!(string2ll(b"0"), Some(0));
        assert_eq!(string2ll(b"-1"), Some(-1));
        assert_eq!(string2ll(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"00",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"1a",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"184467440737095516160",
        ] {
            assert_eq!(string2ll(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn repr_round_trips_through_split_args() {
        let raw = b"a \"b\"\\\n\r\t\x07\x08\x00\xff\xc3\xa9";
        let quoted = repr(raw);
        assert_eq!(
            quoted,
            "\"a \\\"b\\\"\\\\\\n\\r\\t\\a\\b\\x00\\xff\\xc3\\xa9\""
        );
        assert_eq!(split_args(quoted.as_bytes()), Some(vec![raw.to_vec()]));
    }

    #[test]
    fn config_integers_allow_leading_zeros() {
        assert_eq!(digits_i64("007"), Some(7));
        assert_eq!(digits_i64("-0"), Some(0));
        assert_eq!(digits_i64("+1"), None);
        assert_eq!(digits_i64("1k"), None);
        assert_eq!(digits_u64("-1"), None);
    }
}
