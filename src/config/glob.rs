//! Redis `stringmatchlen` glob matching, used by CONFIG GET (and reusable
//! by any other pattern-taking command). Supports `*`, `?`, `[abc]`, `[^a]`,
//! `[a-z]` and `\x` escapes with the original's edge-case behaviour
//! (e.g. an unterminated `[` class matches as if closed at the end).

/// Whether `string` matches the glob `pattern`; `nocase` folds ASCII case.
pub fn glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    let mut p = 0usize;
    let mut s = 0usize;
    // Byte at an index, 0 past the end: mirrors reading the C string's NUL.
    let at = |v: &[u8], i: usize| v.get(i).copied().unwrap_or(0);
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };

    while p < pattern.len() && s < string.len() {
        match pattern[p] {
            b'*' => {
                // Collapse runs of '*' so "a**b" costs the same as "a*b".
                while p + 1 < pattern.len() && pattern[p + 1] == b'*' {
                    p += 1;
                }
                if p + 1 == pattern.len() {
                    return true;
                }
                while s < string.len() {
                    if glob_match(&pattern[p + 1..], &string[s..], nocase) {
                        return true;
                    }
                    s += 1;
                }
                return false;
            }
            b'?' => s += 1,
            b'[' => {
                p += 1;
                let not = at(pattern, p) == b'^';
                if not {
                    p += 1;
                }
                let c = string[s];
                let mut matched = false;
                loop {
                    let remaining = pattern.len().saturating_sub(p);
                    if at(pattern, p) == b'\\' && remaining >= 2 {
                        p += 1;
                        if pattern[p] == c {
                            matched = true;
                        }
                    } else if at(pattern, p) == b']' {
                        break;
                    } else if remaining == 0 {
                        // Unterminated class: step back so the shared
                        // "advance pattern" below lands exactly at the end.
                        p -= 1;
                        break;
                    } else if remaining >= 3 && pattern[p + 1] == b'-' {
                        let (mut start, mut end) = (pattern[p], pattern[p + 2]);
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        let mut ch = c;
                        if nocase {
                            start = start.to_ascii_lowercase();
                            end = end.to_ascii_lowercase();
                            ch = ch.to_ascii_lowercase();
                        }
                        p += 2;
                        if ch >= start && ch <= end {
                            matched = true;
                        }
                    } else if eq(pattern[p], c) {
                        matched = true;
                    }
                    p += 1;
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                s += 1;
            }
            b'\\' => {
                if pattern.len() - p >= 2 {
                    p += 1;
                }
                if !eq(pattern[p], string[s]) {
                    return false;
                }
                s += 1;
            }
            other => {
                if !eq(other, string[s]) {
                    return false;
                }
                s += 1;
            }
        }
        p += 1;
        if s == string.len() {
            while at(pattern, p) == b'*' {
                p += 1;
            }
            break;
        }
    }
    p >= pattern.len() && s == string.len()
}
