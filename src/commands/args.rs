//! The argument cursor every command parses with (in the manner of
//! mini-redis's `Parse`): one position that only moves forward over the
//! request, so no handler counts indexes by hand. Its errors are Disque's
//! (`WireError`); the caller decides which one a bad value gets, because
//! Disque's texts differ by option.

use bytes::Bytes;

use super::eq_ic;
use crate::errors::WireError;
use crate::support::strings::string2ll;

/// A request's arguments after the command name.
#[derive(Clone, Copy)]
pub struct Args<'a> {
    argv: &'a [Bytes],
    pos: usize,
}

impl<'a> Args<'a> {
    /// The arguments of `argv`, whose first element is the command name.
    pub fn new(argv: &'a [Bytes]) -> Self {
        Args {
            argv,
            pos: 1.min(argv.len()),
        }
    }

    /// The next argument, consumed.
    #[allow(clippy::should_implement_trait)] // borrowed items; no collect() wanted
    pub fn next(&mut self) -> Option<&'a Bytes> {
        let a = self.argv.get(self.pos)?;
        self.pos += 1;
        Some(a)
    }

    /// The next argument, left in place.
    pub fn peek(&self) -> Option<&'a Bytes> {
        self.argv.get(self.pos)
    }

    /// Every argument not consumed yet, consumed.
    pub fn rest(&mut self) -> &'a [Bytes] {
        let r = &self.argv[self.pos..];
        self.pos = self.argv.len();
        r
    }

    /// How many arguments are left.
    pub fn remaining(&self) -> usize {
        self.argv.len() - self.pos
    }

    /// True when every argument was consumed.
    pub fn is_done(&self) -> bool {
        self.pos >= self.argv.len()
    }

    /// Consume the next argument when it is `word` (any case).
    pub fn eat(&mut self, word: &str) -> bool {
        match self.peek() {
            Some(a) if eq_ic(a, word) => {
                self.pos += 1;
                true
            }
            _ => false,
        }
    }

    /// The value of an option that takes one: a syntax error when the
    /// option was the last argument.
    #[allow(dead_code)] // the option parsers of ADDJOB and GETJOB are next
    pub fn value(&mut self) -> Result<&'a Bytes, WireError> {
        self.next().ok_or(WireError::Syntax)
    }

    /// The next argument as an integer: `bad` when it is not one (or when
    /// it is missing, which arity checks make the caller's concern).
    pub fn int(&mut self, bad: WireError) -> Result<i64, WireError> {
        self.next().and_then(|v| string2ll(v)).ok_or(bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    #[test]
    fn walks_forward_once() {
        let v = argv(&["cmd", "COUNT", "5", "x"]);
        let mut a = Args::new(&v);
        assert_eq!(a.remaining(), 3);
        assert!(!a.eat("nohang"));
        assert!(a.eat("count"));
        assert_eq!(a.int(WireError::NotInteger), Ok(5));
        assert_eq!(a.peek().map(|b| &b[..]), Some(&b"x"[..]));
        assert_eq!(a.rest().len(), 1);
        assert!(a.is_done());
        assert_eq!(a.value(), Err(WireError::Syntax));
        assert_eq!(a.int(WireError::NotInteger), Err(WireError::NotInteger));
    }

    #[test]
    fn bad_numbers_get_the_callers_error() {
        let v = argv(&["cmd", "12x"]);
        assert_eq!(
            Args::new(&v).int(WireError::TtlRange),
            Err(WireError::TtlRange)
        );
        assert!(Args::new(&[]).is_done());
    }
}
