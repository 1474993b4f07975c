//! The argument cursor every command parses with (in the manner of
//! mini-redis's `Parse`): one position that only moves forward over the
//! request, so no handler counts indexes by hand. Its errors are Disque's
//! (`WireError`); the caller decides which one a bad value gets, because
//! Disque's texts differ by option.

use std::ops::RangeInclusive;

use super::eq_ic;
use crate::domain::job::JobId;
use crate::errors::WireError;
use crate::support::strings::string2ll;

/// What a missing argument reads as where arity checks guarantee one.
static EMPTY: &[u8] = &[];

/// A keyword argument (a subcommand, or an option's word value), compared
/// ignoring case.
#[derive(Clone, Copy)]
pub struct Word<'a>(&'a [u8]);

impl<'a> Word<'a> {
    /// True when this is `word` (any case).
    pub fn is(self, word: &str) -> bool {
        eq_ic(self.0, word)
    }

    /// The argument as sent.
    pub fn bytes(self) -> &'a [u8] {
        self.0
    }

    /// The argument as text for a reply or an error (invalid UTF-8 replaced).
    pub fn text(self) -> String {
        String::from_utf8_lossy(self.0).into_owned()
    }
}

/// A request's arguments after the command name.
#[derive(Clone, Copy)]
pub struct Args<'a> {
    argv: &'a [&'a [u8]],
    pos: usize,
}

impl<'a> Args<'a> {
    /// The arguments of `argv`, whose first element is the command name.
    pub fn new(argv: &'a [&'a [u8]]) -> Self {
        Args {
            argv,
            pos: 1.min(argv.len()),
        }
    }

    /// The next argument, consumed.
    #[allow(clippy::should_implement_trait)] // borrowed items; no collect() wanted
    pub fn next(&mut self) -> Option<&'a [u8]> {
        let a = self.argv.get(self.pos)?;
        self.pos += 1;
        Some(*a)
    }

    /// The next argument, left in place.
    pub fn peek(&self) -> Option<&'a [u8]> {
        self.argv.get(self.pos).copied()
    }

    /// Every argument not consumed yet, consumed.
    pub fn rest(&mut self) -> &'a [&'a [u8]] {
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

    /// The next argument where the command's arity guarantees one,
    /// consumed; a missing one reads as empty (which no check accepts).
    pub fn arg(&mut self) -> &'a [u8] {
        self.next().unwrap_or(EMPTY)
    }

    /// The next argument as a keyword (a subcommand name, say), consumed;
    /// a missing one reads as empty, which is no keyword.
    pub fn word(&mut self) -> Word<'a> {
        Word(self.arg())
    }

    /// The value of an option that takes one: a syntax error when the
    /// option was the last argument.
    pub fn value(&mut self) -> Result<&'a [u8], WireError> {
        self.next().ok_or(WireError::Syntax)
    }

    /// The next argument as an integer: `bad` when it is not one (or when
    /// it is missing, which arity checks make the caller's concern).
    pub fn int(&mut self, bad: WireError) -> Result<i64, WireError> {
        self.next().and_then(string2ll).ok_or(bad)
    }

    /// The value of an option as an integer in `range`: a syntax error when
    /// it is missing (as `value`), `bad` when it is not an integer or out
    /// of range.
    pub fn int_in(&mut self, range: RangeInclusive<i64>, bad: WireError) -> Result<i64, WireError> {
        match string2ll(self.value()?) {
            Some(n) if range.contains(&n) => Ok(n),
            _ => Err(bad),
        }
    }

    /// A timeout in milliseconds, with Disque's errors for one that is not
    /// an integer and for a negative one; a syntax error when missing.
    pub fn timeout(&mut self) -> Result<u64, WireError> {
        match string2ll(self.value()?) {
            None => Err(WireError::TimeoutNotInteger),
            Some(t) if t < 0 => Err(WireError::TimeoutNegative),
            Some(t) => Ok(t as u64),
        }
    }

    /// The next argument as a job ID: Disque's bad-ID error otherwise.
    pub fn id(&mut self) -> Result<JobId, WireError> {
        self.next().and_then(JobId::parse).ok_or(WireError::BadId)
    }

    /// An option given as the last two arguments (`<word> <value>`, as
    /// NACK's DELAY after its IDs): cut off the end, so the rest reads as a
    /// plain list, and returned as a cursor at its value.
    pub fn cut_last(&mut self, word: &str) -> Option<Args<'a>> {
        let at = self.argv.len().checked_sub(2)?;
        if at < self.pos || !eq_ic(self.argv[at], word) {
            return None;
        }
        let value = Args {
            argv: self.argv,
            pos: at + 1,
        };
        self.argv = &self.argv[..at];
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv<'a>(words: &[&'a str]) -> Vec<&'a [u8]> {
        words.iter().map(|w| w.as_bytes()).collect()
    }

    #[test]
    fn walks_forward_once() {
        let v = argv(&["cmd", "COUNT", "5", "x"]);
        let mut a = Args::new(&v);
        assert_eq!(a.remaining(), 3);
        assert!(!a.eat("nohang"));
        assert!(a.eat("count"));
        assert_eq!(a.int(WireError::NotInteger), Ok(5));
        assert_eq!(a.peek(), Some(&b"x"[..]));
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

    #[test]
    fn words_and_guaranteed_arguments() {
        let v = argv(&["cmd", "FlushAll", "x"]);
        let mut a = Args::new(&v);
        let sub = a.word();
        assert!(sub.is("flushall") && !sub.is("flush"));
        assert_eq!(sub.text(), "FlushAll");
        assert_eq!(a.arg(), b"x");
        // Past the end: empty, matching no keyword.
        assert!(a.arg().is_empty());
        assert!(!a.word().is("x"));
        assert_eq!(a.word().text(), "");
    }

    #[test]
    fn ranged_integers() {
        let v = argv(&["cmd", "0", "7", "x"]);
        let mut a = Args::new(&v);
        let bad = || WireError::CountRange;
        assert_eq!(a.int_in(1..=10, bad()), Err(bad()));
        assert_eq!(a.int_in(1..=10, bad()), Ok(7));
        assert_eq!(a.int_in(1..=10, bad()), Err(bad()));
        assert_eq!(a.int_in(1..=10, bad()), Err(WireError::Syntax));
    }

    #[test]
    fn timeouts_get_disques_errors() {
        let v = argv(&["cmd", "250", "-1", "soon"]);
        let mut a = Args::new(&v);
        assert_eq!(a.timeout(), Ok(250));
        assert_eq!(a.timeout(), Err(WireError::TimeoutNegative));
        assert_eq!(a.timeout(), Err(WireError::TimeoutNotInteger));
        assert_eq!(a.timeout(), Err(WireError::Syntax));
    }

    #[test]
    fn job_ids() {
        let id = "D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1";
        let v = argv(&["cmd", id, "nope"]);
        let mut a = Args::new(&v);
        assert_eq!(a.id().map(|j| j.0.to_vec()), Ok(id.as_bytes().to_vec()));
        assert_eq!(a.id().map(|j| j.0.to_vec()), Err(WireError::BadId));
        assert_eq!(a.id().map(|j| j.0.to_vec()), Err(WireError::BadId));
    }

    #[test]
    fn a_trailing_option_is_cut_off() {
        let v = argv(&["nack", "a", "b", "DELAY", "5"]);
        let mut a = Args::new(&v);
        assert!(a.cut_last("timeout").is_none());
        let mut delay = a.cut_last("delay").expect("DELAY is last");
        assert_eq!(delay.int(WireError::NotInteger), Ok(5));
        assert!(delay.is_done());
        assert_eq!(a.rest().len(), 2);
        // The word must be second to last, and after the cursor.
        let v = argv(&["nack", "delay", "5", "x"]);
        assert!(Args::new(&v).cut_last("delay").is_none());
        let v = argv(&["nack", "delay"]);
        assert!(Args::new(&v).cut_last("delay").is_none());
        let v = argv(&["nack", "delay", "5"]);
        let mut a = Args::new(&v);
        assert!(a.cut_last("delay").is_some());
        assert!(a.is_done());
    }
}
