//! Tests for the value helpers: glob matching, memory units and Redis-style
//! argument splitting / quoting.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default,
    clippy::type_complexity
)]

use super::*;

#[test]
fn glob_cases() {
    let m = |p: &str, s: &str| glob_match(p.as_bytes(), s.as_bytes(), false);
    assert!(m("*", "anything"));
    assert!(!m("*", ""), "Redis: '*' does not match the empty string");
    assert!(m("", ""));
    assert!(m("max*", "maxmemory"));
    assert!(m("*memory*", "maxmemory-policy"));
    assert!(m("*-*-*", "auto-aof-rewrite-percentage"));
    assert!(!m("max*", "port"));
    assert!(m("p?rt", "port"));
    assert!(!m("p?rt", "prt"));
    assert!(m("[pq]ort", "port"));
    assert!(!m("[^p]ort", "port"));
    assert!(m("[^q]ort", "port"));
    assert!(m("[a-z]ort", "port"));
    assert!(m("[z-a]ort", "port"), "reversed ranges work");
    assert!(!m("[0-9]ort", "port"));
    assert!(m("a\\*b", "a*b"));
    assert!(!m("a\\*b", "axb"));
    assert!(m("[\\]]", "]"));
    assert!(m("a**b", "axyzb"));
    assert!(m("a*", "a"), "trailing stars match nothing");
    assert!(!m("PORT", "port"), "case-sensitive");
    assert!(glob_match(b"PORT", b"port", true));
    assert!(glob_match(b"[A-Z]ORT", b"port", true));
    assert!(!m("[abc", "d"));
    assert!(m("[abc", "a"), "unterminated class acts as closed");
    assert!(!m("port", "port2"));
    assert!(!m("port2", "port"));
}

#[test]
fn memory_units() {
    let cases = [
        ("0", 0),
        ("123", 123),
        ("10b", 10),
        ("1k", 1000),
        ("1K", 1000),
        ("1kb", 1024),
        ("1KB", 1024),
        ("2m", 2_000_000),
        ("2mb", 2 << 20),
        ("3g", 3_000_000_000),
        ("3Gb", 3 << 30),
    ];
    for (s, v) in cases {
        assert_eq!(parse_memory(s), Some(v), "{s}");
    }
    for s in [
        "",
        "k",
        "-1",
        "1.5gb",
        "1tb",
        "1 kb",
        "99999999999999999999",
        "20000000000gb",
    ] {
        assert_eq!(parse_memory(s), None, "{s}");
    }
    assert_eq!(format_memory(0), "0");
    assert_eq!(format_memory(1 << 30), "1gb");
    assert_eq!(format_memory(3 << 20), "3mb");
    assert_eq!(format_memory(100 << 10), "100kb");
    assert_eq!(format_memory(1000), "1000");
    assert_eq!(format_memory(1536 << 20), "1536mb");
    for v in [0u64, 1, 1023, 1024, 5 << 30, 12345678] {
        assert_eq!(parse_memory(&format_memory(v)), Some(v));
    }
}

#[test]
fn split_args_quoting() {
    let s = |l: &str| split_args(l);
    let v = |x: &[&str]| Some(x.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(s(""), v(&[]));
    assert_eq!(s("   "), v(&[]));
    assert_eq!(s("a b\tc"), v(&["a", "b", "c"]));
    assert_eq!(s("  port   7711  "), v(&["port", "7711"]));
    assert_eq!(s("\"a b\" c"), v(&["a b", "c"]));
    assert_eq!(s("\"\""), v(&[""]));
    assert_eq!(s("''"), v(&[""]));
    assert_eq!(s(r#""\n\r\t\b\a\\\"""#), v(&["\n\r\t\u{8}\u{7}\\\""]));
    assert_eq!(s(r#""\x41\x62""#), v(&["Ab"]));
    assert_eq!(
        s(r#""\x4""#),
        v(&["x4"]),
        "incomplete hex is a plain escape"
    );
    assert_eq!(s(r#""\q""#), v(&["q"]));
    assert_eq!(s(r"'a\'b \n'"), v(&["a'b \\n"]));
    assert!(
        s("a\"b c\"d e").is_none(),
        "closing quote needs a space after"
    );
    assert_eq!(
        s("a\"b c\" e"),
        v(&["ab c", "e"]),
        "quote may start mid-token"
    );
    assert_eq!(s("\"abc"), None);
    assert_eq!(s("'abc"), None);
    assert_eq!(s("'a'b"), None);
    assert_eq!(s("\"a\\\""), None, "escaped quote does not close");
    // repr round trip for every byte class.
    for text in [
        "plain",
        "with space",
        "q\"uote",
        "back\\slash",
        "\n\t\r\u{7}\u{8}",
        "é ü",
        "\u{1}",
    ] {
        let line = format!("x {}", super::values::repr(text));
        assert_eq!(s(&line), v(&["x", text]), "{line}");
    }
}
