//! Who may do what: Redis 6/7 ACL users (docs/SECURITY.md#users-and-permissions).
//!
//! This module owns the user table of a node: the users with their rules
//! (`user`), the categories (`categories`), the per-command check and the
//! client's cached view of its user (`check`), ACL LOG (`log`), the
//! aclfile and the state file (`store`), the replication of the table
//! over the cluster bus (`sync`), and the gates on dangerous commands
//! (`protect`). The table lives in the `Node`, beside the configuration.
//!
//! Every entry carries a version and the ID of the node that made the
//! change: a newer version wins, equal versions are ordered by node ID,
//! and a deleted user stays as a tombstone so that it does not come back
//! from a node that missed the deletion. The `default` user is the
//! exception: like `requirepass`, which sets its password, it belongs to
//! each node and is never sent to peers.

pub mod categories;
pub mod check;
pub mod log;
pub mod names;
pub mod protect;
pub mod store;
pub mod sync;
pub mod user;

use std::collections::{BTreeMap, HashMap};

pub use check::ClientAcl;
pub use user::{RuleError, User};

/// The user every connection starts as.
pub const DEFAULT_USER: &str = "default";

/// One user's replicated state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// None: deleted (a tombstone).
    pub user: Option<User>,
    /// Lamport clock value of the change.
    pub version: u64,
    /// Node that made the change (breaks ties between equal versions).
    pub origin: [u8; 40],
}

impl Entry {
    /// Whether `self` supersedes `other`.
    pub fn newer_than(&self, other: &Entry) -> bool {
        (self.version, self.origin) > (other.version, other.origin)
    }
}

pub struct Acl {
    /// Users by name, sorted (ACL USERS order, and the digest's).
    entries: BTreeMap<String, Entry>,
    /// Bumped on every change: connections compare it with the value
    /// their cached permissions were computed at (`check`).
    epoch: u64,
    /// Highest version seen, here or from peers.
    clock: u64,
    /// The default user needs a password or is disabled: new connections
    /// must AUTH first. Cached because dispatch reads it per command.
    requires_auth: bool,
    pub log: log::AclLog,
    /// This node's ID, the origin of local changes.
    me: [u8; 40],
    /// Local definitions (config `user` lines, the aclfile, requirepass)
    /// last applied or written, by user: a definition is applied at
    /// startup only where it changed since (see `store::startup`).
    pub(crate) sources: BTreeMap<String, String>,
    /// Where the table is persisted; None in unit tests and before startup.
    pub files: Option<store::Files>,
    /// Peers that announced the ACL capability, with the time we last sent
    /// them our digest.
    pub(crate) peers: HashMap<[u8; 40], u64>,
    /// Connections authenticated as a named user, so DELUSER can close them.
    sessions: HashMap<u64, String>,
}

impl Default for Acl {
    fn default() -> Self {
        let mut entries = BTreeMap::new();
        entries.insert(
            DEFAULT_USER.to_string(),
            Entry {
                user: Some(User::default_user()),
                version: 0,
                origin: [b'0'; 40],
            },
        );
        Acl {
            entries,
            epoch: 1,
            clock: 0,
            requires_auth: false,
            log: log::AclLog::default(),
            me: [b'0'; 40],
            sources: BTreeMap::new(),
            files: None,
            peers: HashMap::new(),
            sessions: HashMap::new(),
        }
    }
}

impl Acl {
    pub fn set_me(&mut self, me: [u8; 40]) {
        self.me = me;
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// New connections must authenticate (the default user has a password
    /// or is off).
    #[inline]
    pub fn requires_auth(&self) -> bool {
        self.requires_auth
    }

    /// A live user.
    pub fn get(&self, name: &str) -> Option<&User> {
        self.entries.get(name).and_then(|e| e.user.as_ref())
    }

    /// Live users, sorted by name.
    pub fn users(&self) -> impl Iterator<Item = (&str, &User)> {
        self.entries
            .iter()
            .filter_map(|(n, e)| e.user.as_ref().map(|u| (n.as_str(), u)))
    }

    /// Every entry, tombstones included.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.entries.iter().map(|(n, e)| (n.as_str(), e))
    }

    pub fn clock(&self) -> u64 {
        self.clock
    }

    fn touched(&mut self) {
        self.epoch += 1;
        self.requires_auth = self
            .get(DEFAULT_USER)
            .is_none_or(|d| !d.nopass || !d.enabled);
    }

    /// Record a local change to `name` (None deletes it).
    pub fn put_local(&mut self, name: &str, user: Option<User>) {
        self.clock += 1;
        let e = Entry {
            user,
            version: self.clock,
            origin: self.me,
        };
        self.entries.insert(name.to_string(), e);
        self.touched();
    }

    /// Put an entry as it was persisted (startup).
    pub(crate) fn put_loaded(&mut self, name: &str, e: Entry) {
        self.clock = self.clock.max(e.version);
        self.entries.insert(name.to_string(), e);
        self.touched();
    }

    pub(crate) fn raise_clock(&mut self, to: u64) {
        self.clock = self.clock.max(to);
    }

    /// Merge entries from a peer: each one replaces ours when newer. The
    /// default user is never replicated. True when something changed.
    pub fn merge(&mut self, incoming: Vec<(String, Entry)>) -> bool {
        let mut changed = false;
        for (name, e) in incoming {
            if name == DEFAULT_USER {
                continue;
            }
            self.clock = self.clock.max(e.version);
            let take = self.entries.get(&name).is_none_or(|cur| e.newer_than(cur));
            if take {
                self.entries.insert(name, e);
                changed = true;
            }
        }
        if changed {
            self.touched();
        }
        changed
    }

    /// ACL SETUSER: apply `rules` to `name` (created if missing), all or
    /// nothing.
    pub fn set_user(&mut self, name: &str, rules: &[&[u8]]) -> Result<(), (String, RuleError)> {
        let mut u = self.get(name).cloned().unwrap_or_default();
        u.apply_all(rules.iter().copied())?;
        self.put_local(name, Some(u));
        Ok(())
    }

    /// ACL DELUSER of one user: whether it existed. The caller refuses
    /// `default`.
    pub fn del_user(&mut self, name: &str) -> bool {
        if self.get(name).is_none() {
            return false;
        }
        self.put_local(name, None);
        true
    }

    /// A connection authenticated as `user`.
    pub fn session(&mut self, client: u64, user: &str, live: impl Fn(u64) -> bool) {
        if user == DEFAULT_USER {
            self.sessions.remove(&client);
        } else {
            self.sessions.insert(client, user.to_string());
        }
        // Connections that ended are dropped here, not on disconnect:
        // bounded by twice the live ones.
        if self.sessions.len() > 64 {
            self.sessions.retain(|id, _| live(*id));
        }
    }

    /// Connections authenticated as `user` (DELUSER closes them).
    pub fn sessions_of(&self, user: &str) -> Vec<u64> {
        self.sessions
            .iter()
            .filter(|(_, u)| u.as_str() == user)
            .map(|(id, _)| *id)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn entry(rules: &str, version: u64, origin: u8) -> Entry {
        Entry {
            user: Some(User::from_rules(rules.split_whitespace().map(str::as_bytes)).unwrap()),
            version,
            origin: [origin; 40],
        }
    }

    #[test]
    fn newest_wins_ties_by_node_id_and_tombstones_stick() {
        let mut a = Acl::default();
        assert!(!a.requires_auth());
        let e1 = entry("on >a", 3, b'a');
        let e2 = entry("on >b", 3, b'b');
        assert!(a.merge(vec![("u".into(), e1.clone())]));
        assert!(a.merge(vec![("u".into(), e2.clone())]));
        assert!(!a.merge(vec![("u".into(), e1)]), "older tie loses");
        assert!(a.get("u").unwrap().password_ok(b"b"));
        let dead = Entry {
            user: None,
            version: 4,
            origin: [b'a'; 40],
        };
        assert!(a.merge(vec![("u".into(), dead)]));
        assert!(a.get("u").is_none());
        assert!(!a.merge(vec![("u".into(), e2)]), "no resurrection");
        assert_eq!(a.clock(), 4);
        // A local change after a merge gets a newer version.
        a.set_user("u", &[b"on"]).unwrap();
        assert!(a.entries().any(|(n, e)| n == "u" && e.version == 5));
        // The default user never comes from a peer.
        assert!(!a.merge(vec![(DEFAULT_USER.into(), entry("off", 99, b'z'))]));
        a.set_user(DEFAULT_USER, &[b">pw"]).unwrap();
        assert!(a.requires_auth());
        assert!(a.del_user("u") && !a.del_user("u"));
    }
}
