//! One ACL user and its rules in Redis 6/7 syntax: the rule parser
//! (`ACL SETUSER` modifiers, `user` lines), the permission matcher and the
//! canonical description that ACL LIST, the aclfile and the cluster bus
//! carry. Queue patterns play the role of Redis's key patterns.

use sha2::{Digest, Sha256};

use super::categories;
use super::names::COMMANDS;
use crate::config::glob_match;

/// A SHA-256 password hash (passwords are never stored in clear).
pub type PassHash = [u8; 32];

/// Why a modifier was refused; the texts are Redis's
/// (`ACLSetUserStringError`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    Syntax,
    UnknownName,
    KeyAfterAll,
    ChannelAfterAll,
    NoSuchPassword,
    BadHash,
}

impl RuleError {
    pub fn text(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::UnknownName => "Unknown command or category name in ACL",
            RuleError::KeyAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
        }
    }
}

/// Command-table index of a command name.
pub fn command_index(name: &str) -> Option<usize> {
    super::names::index(name)
}

/// A user. Starts (`Default`) as Redis's new user: off, no password, no
/// command, no queue, no channel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    pub enabled: bool,
    pub nopass: bool,
    /// In the order they were added, without duplicates.
    pub passwords: Vec<PassHash>,
    /// Bit i = `COMMANDS[i]` may run (subcommand exceptions aside).
    allowed: u64,
    /// Redis's "future commands" bit: set only by `+@all`/`allcommands`,
    /// cleared only by `-@all`/`nocommands`; it decides whether the
    /// description starts with `+@all` or `-@all`.
    all_commands: bool,
    /// (command index, lower-case first argument, allowed): exceptions to
    /// `allowed` for one subcommand. Last rule wins.
    subs: Vec<(usize, String, bool)>,
    /// The command rules after the base, in order, as Redis 7 keeps them
    /// (`+addjob`, `-@admin`, `+config|get`), a later rule for the same
    /// name replacing the earlier one.
    rules: Vec<String>,
    pub allkeys: bool,
    pub keys: Vec<Vec<u8>>,
    pub allchannels: bool,
    pub channels: Vec<Vec<u8>>,
}

/// Bits of every command in the table.
fn all_bits() -> u64 {
    if COMMANDS.len() >= 64 {
        u64::MAX
    } else {
        (1u64 << COMMANDS.len()) - 1
    }
}

pub fn hash_password(pw: &[u8]) -> PassHash {
    Sha256::digest(pw).into()
}

fn to_hex(h: &PassHash) -> String {
    let mut s = String::with_capacity(64);
    for b in h {
        s.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        s.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    s
}

/// `#<hash>` / `!<hash>`: exactly 64 lower-case hex digits, as Redis wants.
fn parse_hex(h: &[u8]) -> Result<PassHash, RuleError> {
    if h.len() != 64 {
        return Err(RuleError::BadHash);
    }
    let nib = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        _ => Err(RuleError::BadHash),
    };
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = nib(h[2 * i])? << 4 | nib(h[2 * i + 1])?;
    }
    Ok(out)
}

impl User {
    /// Redis's `default` user: `on nopass ~* &* +@all`.
    pub fn default_user() -> User {
        let mut u = User::default();
        for op in ["on", "nopass", "~*", "&*", "+@all"] {
            // Constant, valid rules.
            let _ = u.apply(op.as_bytes());
        }
        u
    }

    /// A user from a sequence of modifiers, all or nothing.
    pub fn from_rules<'a>(
        rules: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<User, (String, RuleError)> {
        let mut u = User::default();
        u.apply_all(rules)?;
        Ok(u)
    }

    /// Apply modifiers in order; on error `self` is left unchanged and the
    /// offending modifier is returned (ACL SETUSER is atomic).
    pub fn apply_all<'a>(
        &mut self,
        rules: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<(), (String, RuleError)> {
        let mut next = self.clone();
        for r in rules {
            next.apply(r)
                .map_err(|e| (String::from_utf8_lossy(r).into_owned(), e))?;
        }
        *self = next;
        Ok(())
    }

    /// Apply one modifier.
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let lower = op.to_ascii_lowercase();
        match lower.as_slice() {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            // Redis 7's DUMP payload flags: nothing to sanitize here, but
            // aclfiles written by Redis carry them.
            b"skip-sanitize-payload" | b"sanitize-payload" | b"clearselectors" => {}
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"allkeys" | b"~*" => {
                self.allkeys = true;
                self.keys.clear();
            }
            b"resetkeys" => {
                self.allkeys = false;
                self.keys.clear();
            }
            b"allchannels" | b"&*" => {
                self.allchannels = true;
                self.channels.clear();
            }
            b"resetchannels" => {
                self.allchannels = false;
                self.channels.clear();
            }
            b"allcommands" | b"+@all" => {
                self.allowed = all_bits();
                self.all_commands = true;
                self.subs.clear();
                self.rules.clear();
            }
            b"nocommands" | b"-@all" => {
                self.allowed = 0;
                self.all_commands = false;
                self.subs.clear();
                self.rules.clear();
            }
            // resetpass resetkeys resetchannels off -@all.
            b"reset" => *self = User::default(),
            _ => return self.apply_prefixed(op),
        }
        Ok(())
    }

    fn apply_prefixed(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let (first, rest) = op.split_first().ok_or(RuleError::Syntax)?;
        match first {
            b'>' => {
                self.add_hash(hash_password(rest));
                self.nopass = false;
            }
            b'#' => {
                self.add_hash(parse_hex(rest)?);
                self.nopass = false;
            }
            b'<' => self.remove_hash(&hash_password(rest))?,
            b'!' => self.remove_hash(&parse_hex(rest)?)?,
            b'~' => {
                if self.allkeys {
                    return Err(RuleError::KeyAfterAll);
                }
                if !self.keys.iter().any(|k| k == rest) {
                    self.keys.push(rest.to_vec());
                }
            }
            b'%' => {
                // Redis 7's `%R~` / `%W~` / `%RW~`: a queue is read and
                // written by the same commands, so only `%RW~` (= `~`)
                // has a meaning here.
                let p = rest.strip_prefix(b"RW~").ok_or(RuleError::Syntax)?;
                return self.apply_prefixed(&[b"~", p].concat());
            }
            b'&' => {
                if self.allchannels {
                    return Err(RuleError::ChannelAfterAll);
                }
                if !self.channels.iter().any(|k| k == rest) {
                    self.channels.push(rest.to_vec());
                }
            }
            b'+' | b'-' => self.apply_command_rule(*first == b'+', rest)?,
            _ => return Err(RuleError::Syntax),
        }
        Ok(())
    }

    fn add_hash(&mut self, h: PassHash) {
        if !self.passwords.contains(&h) {
            self.passwords.push(h);
        }
    }

    fn remove_hash(&mut self, h: &PassHash) -> Result<(), RuleError> {
        let before = self.passwords.len();
        self.passwords.retain(|p| p != h);
        if self.passwords.len() == before {
            return Err(RuleError::NoSuchPassword);
        }
        Ok(())
    }

    fn apply_command_rule(&mut self, allow: bool, name: &[u8]) -> Result<(), RuleError> {
        let name = std::str::from_utf8(name)
            .map_err(|_| RuleError::UnknownName)?
            .to_ascii_lowercase();
        if let Some(cat) = name.strip_prefix('@') {
            let members = categories::members(cat).ok_or(RuleError::UnknownName)?;
            for m in members {
                self.set_entry(allow, m)?;
            }
        } else {
            if name.is_empty() || name.contains(' ') {
                return Err(RuleError::Syntax);
            }
            self.set_entry(allow, &name)?;
        }
        let rule = format!("{}{name}", if allow { '+' } else { '-' });
        let key = &rule[1..];
        self.rules.retain(|r| &r[1..] != key);
        self.rules.push(rule);
        Ok(())
    }

    /// `cmd` or `cmd|sub` allowed or denied.
    fn set_entry(&mut self, allow: bool, entry: &str) -> Result<(), RuleError> {
        let (cmd, sub) = match entry.split_once('|') {
            Some((c, s)) if !s.is_empty() && !s.contains('|') => (c, Some(s)),
            Some(_) => return Err(RuleError::Syntax),
            None => (entry, None),
        };
        let idx = command_index(cmd).ok_or(RuleError::UnknownName)?;
        match sub {
            None => {
                if allow {
                    self.allowed |= 1 << idx;
                } else {
                    self.allowed &= !(1 << idx);
                }
                self.subs.retain(|(i, _, _)| *i != idx);
            }
            Some(sub) => {
                self.subs.retain(|(i, s, _)| !(*i == idx && s == sub));
                // An exception only where it differs from the command's bit.
                if allow != (self.allowed & (1 << idx) != 0) {
                    self.subs.push((idx, sub.to_string(), allow));
                }
            }
        }
        Ok(())
    }

    /// Whether the user may run `COMMANDS[idx]` whose first argument is
    /// `first` (consulted only when subcommand rules exist).
    pub fn can_run(&self, idx: usize, first: Option<&[u8]>) -> bool {
        if !self.subs.is_empty() {
            if let Some(f) = first {
                let hit = self
                    .subs
                    .iter()
                    .rev()
                    .find(|(i, s, _)| *i == idx && s.as_bytes().eq_ignore_ascii_case(f));
                if let Some(&(_, _, allow)) = hit {
                    return allow;
                }
            }
        }
        idx < 64 && self.allowed & (1 << idx) != 0
    }

    /// Whether `queue` matches one of the user's patterns.
    pub fn can_access(&self, queue: &[u8]) -> bool {
        self.allkeys || self.keys.iter().any(|p| glob_match(p, queue, false))
    }

    /// Every command and every queue: the check is skipped for such a user.
    pub fn unrestricted(&self) -> bool {
        self.allkeys && self.allowed == all_bits() && self.subs.iter().all(|s| s.2)
    }

    /// Whether `pw` is one of the passwords (or none is needed). Every
    /// stored hash is compared in constant time (`subtle`), so the reply
    /// time tells nothing about how close a guess was.
    pub fn password_ok(&self, pw: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        if self.nopass {
            return true;
        }
        let h = hash_password(pw);
        let mut ok = subtle::Choice::from(0);
        for p in &self.passwords {
            ok |= p.ct_eq(&h);
        }
        bool::from(ok)
    }

    /// ACL GETUSER `flags`.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        f
    }

    pub fn password_hexes(&self) -> Vec<String> {
        self.passwords.iter().map(to_hex).collect()
    }

    /// `+@all -debug` / `-@all +@produce`.
    pub fn commands_text(&self) -> String {
        let mut s = String::from(if self.all_commands { "+@all" } else { "-@all" });
        for r in &self.rules {
            s.push(' ');
            s.push_str(r);
        }
        s
    }

    /// `~*` / `~orders:* ~emails:*` / "".
    pub fn keys_text(&self) -> String {
        if self.allkeys {
            return "~*".into();
        }
        patterns_text('~', &self.keys)
    }

    /// `&*` / `&a &b` / "" (Redis prints `resetchannels` in ACL LIST then).
    pub fn channels_text(&self) -> String {
        if self.allchannels {
            return "&*".into();
        }
        patterns_text('&', &self.channels)
    }

    /// The rules after `user <name>` in ACL LIST and the aclfile: flags,
    /// passwords, keys, channels, commands (Redis 7's order), which
    /// rebuild this user exactly.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.flags().iter().map(|f| f.to_string()).collect();
        for p in &self.passwords {
            parts.push(format!("#{}", to_hex(p)));
        }
        let keys = self.keys_text();
        if !keys.is_empty() {
            parts.push(keys);
        }
        let ch = self.channels_text();
        parts.push(if ch.is_empty() {
            "resetchannels".into()
        } else {
            ch
        });
        parts.push(self.commands_text());
        parts.join(" ")
    }
}

fn patterns_text(prefix: char, pats: &[Vec<u8>]) -> String {
    pats.iter()
        .map(|p| format!("{prefix}{}", String::from_utf8_lossy(p)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A user name may go anywhere a word goes in the aclfile and on the bus.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.len() <= 256 && name.iter().all(|&c| c.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn user(rules: &str) -> User {
        User::from_rules(rules.split_whitespace().map(str::as_bytes)).unwrap()
    }

    fn idx(n: &str) -> usize {
        command_index(n).unwrap()
    }

    #[test]
    fn default_user_is_unrestricted() {
        let d = User::default_user();
        assert!(d.unrestricted() && d.enabled && d.nopass);
        assert_eq!(d.describe(), "on nopass ~* &* +@all");
        assert!(d.password_ok(b"anything"));
        let fresh = User::default();
        assert_eq!(fresh.describe(), "off resetchannels -@all");
        assert!(!fresh.password_ok(b""));
    }

    #[test]
    fn commands_categories_and_subcommands() {
        let u = user("on >pw ~emails:* +@consume -nack +config|get");
        assert!(u.can_run(idx("getjob"), None));
        assert!(u.can_run(idx("ackjob"), Some(b"x")));
        assert!(!u.can_run(idx("nack"), None));
        assert!(!u.can_run(idx("addjob"), None));
        assert!(u.can_run(idx("config"), Some(b"GET")));
        assert!(!u.can_run(idx("config"), Some(b"set")));
        assert!(!u.can_run(idx("config"), None));
        assert!(!u.unrestricted());
        assert_eq!(u.commands_text(), "-@all +@consume -nack +config|get");
        let a = user("+@all -@dangerous +config|get -debug");
        assert!(a.can_run(idx("addjob"), None));
        assert!(!a.can_run(idx("debug"), Some(b"segfault")));
        assert!(a.can_run(idx("config"), Some(b"get")));
        assert!(!a.can_run(idx("config"), Some(b"set")));
        assert_eq!(a.commands_text(), "+@all -@dangerous +config|get -debug");
        // A later rule for the same name replaces the earlier one.
        let r = user("+addjob -addjob +addjob");
        assert_eq!(r.commands_text(), "-@all +addjob");
        // -cmd|sub under an allowed command.
        let s = user("+@all -cluster|reset");
        assert!(!s.can_run(idx("cluster"), Some(b"RESET")));
        assert!(s.can_run(idx("cluster"), Some(b"info")));
        assert!(!s.unrestricted());
        assert!(user("+@all allkeys").unrestricted());
        assert!(user("allcommands ~*").unrestricted());
        assert!(!user("nocommands ~*").unrestricted());
    }

    #[test]
    fn queue_patterns() {
        let u = user("~emails:* ~audit");
        assert!(u.can_access(b"emails:welcome"));
        assert!(u.can_access(b"audit"));
        assert!(!u.can_access(b"orders"));
        assert!(!u.can_access(b"audit2"));
        assert_eq!(u.keys_text(), "~emails:* ~audit");
        assert!(user("allkeys").can_access(b"anything"));
        assert!(user("%RW~a*").can_access(b"ab"));
        assert_eq!(
            User::from_rules([&b"~*"[..], b"~x"]).unwrap_err().1,
            RuleError::KeyAfterAll
        );
        assert!(!user("~* resetkeys").can_access(b"x"));
    }

    #[test]
    fn passwords() {
        let u = user(">one >two");
        assert!(u.password_ok(b"one") && u.password_ok(b"two"));
        assert!(!u.password_ok(b"three") && !u.password_ok(b""));
        let h = to_hex(&hash_password(b"one"));
        let v = User::from_rules([format!("#{h}").as_bytes()]).unwrap();
        assert!(v.password_ok(b"one"));
        assert_eq!(v.password_hexes(), vec![h.clone()]);
        let mut w = user(">one >two");
        w.apply(b"<one").unwrap();
        assert!(!w.password_ok(b"one"));
        assert_eq!(w.apply(b"<one"), Err(RuleError::NoSuchPassword));
        w.apply(format!("!{}", to_hex(&hash_password(b"two"))).as_bytes())
            .unwrap();
        assert!(w.passwords.is_empty());
        assert_eq!(w.apply(b"#ABC"), Err(RuleError::BadHash));
        let upper = format!("#{}", h.to_uppercase());
        assert_eq!(w.apply(upper.as_bytes()), Err(RuleError::BadHash));
        let n = user(">x nopass");
        assert!(n.nopass && n.passwords.is_empty() && n.password_ok(b"y"));
        let r = user("nopass resetpass");
        assert!(!r.password_ok(b""));
    }

    #[test]
    fn describe_round_trips() {
        for rules in [
            "on >secret ~orders:* +@produce",
            "off #0000000000000000000000000000000000000000000000000000000000000000 allkeys &ch* +@all -@dangerous +config|get",
            "on nopass resetkeys -@all +qlen +cluster|info",
            "reset on",
        ] {
            let u = user(rules);
            let again = user(&u.describe());
            assert_eq!(u.describe(), again.describe(), "{rules}");
            for (i, c) in COMMANDS.iter().enumerate() {
                for sub in [None, Some(&b"get"[..]), Some(b"info")] {
                    assert_eq!(u.can_run(i, sub), again.can_run(i, sub), "{} {rules}", c.0);
                }
            }
        }
    }

    #[test]
    fn errors_and_atomicity() {
        let mut u = user("on >pw +addjob");
        let before = u.clone();
        let e = u
            .apply_all([&b"+getjob"[..], b"+nosuchcommand"])
            .unwrap_err();
        assert_eq!(e, ("+nosuchcommand".into(), RuleError::UnknownName));
        assert_eq!(u, before, "nothing applied");
        assert_eq!(u.apply(b"+@nosuch"), Err(RuleError::UnknownName));
        assert_eq!(u.apply(b"bogus"), Err(RuleError::Syntax));
        assert_eq!(u.apply(b"+config|"), Err(RuleError::Syntax));
        assert_eq!(u.apply(b""), Err(RuleError::Syntax));
        assert_eq!(u.apply(b"%R~x"), Err(RuleError::Syntax));
        assert!(valid_name(b"alice") && !valid_name(b"a b") && !valid_name(b""));
        assert!(COMMANDS.len() < 64, "the command bitset is a u64");
    }
}
