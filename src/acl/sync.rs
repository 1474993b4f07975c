//! Replication of the user table over the cluster bus (message type ACL,
//! sent only to peers that announce `HFLAG_ACL`).
//!
//! Two kinds of ACL frame:
//!
//! * DIGEST (kind 1): SHA-256 of the sender's table. Sent to a capable
//!   peer when a frame of it arrives and the last digest sent to it is
//!   older than `DIGEST_EVERY_MS` (so a node that just linked up gets one
//!   at once). A receiver whose table differs answers with its TABLE.
//! * TABLE (kind 2): every entry but the default user's, tombstones
//!   included. The receiver keeps the newer of each pair (version, then
//!   node ID) and, when its table still differs from the one received,
//!   sends its own TABLE back; both sides then hold the same table, and
//!   the exchange stops because the digests agree.
//!
//! A local change (ACL SETUSER, DELUSER, LOAD) sends the TABLE to every
//! linked capable peer at once. TABLE body: u32 count, then per entry u64
//! version, origin[40], u16 name length, name, u8 live, u32 rules length,
//! rules (ACL LIST syntax). All big-endian; a payload that does not parse
//! is logged and ignored (the link is kept).

use sha2::{Digest, Sha256};

use super::{Acl, Entry, User, DEFAULT_USER};
use crate::engine::Engine;
use crate::protocol::bus::message::{Body, Message, HFLAG_ACL};

const KIND_DIGEST: u8 = 1;
const KIND_TABLE: u8 = 2;
/// Anti-entropy period per peer: a lost TABLE is repaired within this.
const DIGEST_EVERY_MS: u64 = 5_000;

/// The replicated entries (everything but `default`), sorted by name.
fn replicated(acl: &Acl) -> impl Iterator<Item = (&str, &Entry)> {
    acl.entries().filter(|(n, _)| *n != DEFAULT_USER)
}

fn encode_entries<'a>(entries: impl Iterator<Item = (&'a str, &'a Entry)>) -> Vec<u8> {
    let mut body = Vec::new();
    let mut count: u32 = 0;
    for (name, e) in entries {
        count += 1;
        body.extend_from_slice(&e.version.to_be_bytes());
        body.extend_from_slice(&e.origin);
        // Names are at most 256 bytes (`user::valid_name`).
        body.extend_from_slice(&(name.len() as u16).to_be_bytes());
        body.extend_from_slice(name.as_bytes());
        let rules = e.user.as_ref().map(User::describe).unwrap_or_default();
        body.push(u8::from(e.user.is_some()));
        body.extend_from_slice(&(rules.len() as u32).to_be_bytes());
        body.extend_from_slice(rules.as_bytes());
    }
    let mut out = count.to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

/// SHA-256 of the replicated table.
pub fn digest(acl: &Acl) -> [u8; 32] {
    Sha256::digest(encode_entries(replicated(acl))).into()
}

fn table_payload(acl: &Acl) -> Vec<u8> {
    let mut p = vec![KIND_TABLE];
    p.extend_from_slice(&encode_entries(replicated(acl)));
    p
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.0.len() < n {
            return Err("ACL table truncated");
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u16(&mut self) -> Result<u16, &'static str> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, &'static str> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, &'static str> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(a))
    }
}

/// Parse a TABLE body (after the kind byte). Every entry is validated:
/// names as ACL SETUSER wants them, rules through the rule parser.
pub fn decode_table(p: &[u8]) -> Result<Vec<(String, Entry)>, &'static str> {
    let mut c = Cursor(p);
    let n = c.u32()?;
    // No with_capacity(n): n is the peer's word; every entry takes at
    // least 55 bytes, so the Vec stays bounded by the payload.
    let mut out = Vec::new();
    for _ in 0..n {
        let version = c.u64()?;
        let mut origin = [0u8; 40];
        origin.copy_from_slice(c.take(40)?);
        let nlen = c.u16()? as usize;
        let name = c.take(nlen)?;
        if !super::user::valid_name(name) {
            return Err("ACL table: bad user name");
        }
        let name = String::from_utf8_lossy(name).into_owned();
        let live = match c.take(1)?[0] {
            0 => false,
            1 => true,
            _ => return Err("ACL table: bad live flag"),
        };
        let rlen = c.u32()? as usize;
        let rules = std::str::from_utf8(c.take(rlen)?).map_err(|_| "ACL table: rules not UTF-8")?;
        let user = if live {
            Some(
                User::from_rules(rules.split_whitespace().map(str::as_bytes))
                    .map_err(|_| "ACL table: bad rules")?,
            )
        } else {
            None
        };
        out.push((
            name,
            Entry {
                user,
                version,
                origin,
            },
        ));
    }
    if !c.0.is_empty() {
        return Err("ACL table: trailing bytes");
    }
    Ok(out)
}

fn send(engine: &mut Engine, to: crate::domain::job::NodeIdx, payload: Vec<u8>) {
    engine.send_body(
        to,
        Body::Acl {
            data: payload.into(),
        },
    );
}

/// After a local change: the TABLE to every linked peer that speaks ACL.
pub fn broadcast(acl: &Acl, engine: &mut Engine) {
    let payload = table_payload(acl);
    let targets: Vec<crate::domain::job::NodeIdx> = engine
        .cluster()
        .linked_peers()
        .into_iter()
        .filter(|&i| {
            engine
                .cluster()
                .get(i)
                .is_some_and(|n| acl.peers.contains_key(&n.id))
        })
        .collect();
    for t in targets {
        send(engine, t, payload.clone());
    }
}

/// Every bus frame passes here before the engine: note which peers speak
/// ACL, keep their tables in step, and consume ACL frames (true). A
/// table that changed ours is persisted here.
pub fn on_bus_message(acl: &mut Acl, engine: &mut Engine, msg: &Message, now: u64) -> bool {
    let from = engine
        .cluster()
        .find(&msg.header.sender)
        .filter(|&s| s != 0);
    if let Some(idx) = from {
        if msg.header.flags & HFLAG_ACL != 0 {
            let last = acl.peers.entry(msg.header.sender).or_insert(0);
            if now.saturating_sub(*last) >= DIGEST_EVERY_MS {
                *last = now;
                let mut p = vec![KIND_DIGEST];
                p.extend_from_slice(&digest(acl));
                send(engine, idx, p);
            }
        }
    }
    let Body::Acl { data } = &msg.body else {
        return false;
    };
    // Tables only from nodes of the cluster (an authenticated bus when
    // cluster-secret or TLS is on).
    let Some(idx) = from else {
        return true;
    };
    match data.split_first() {
        Some((&KIND_DIGEST, d)) => {
            if d != digest(acl) {
                send(engine, idx, table_payload(acl));
            }
        }
        Some((&KIND_TABLE, body)) => match decode_table(body) {
            Ok(entries) => {
                let theirs = Sha256::digest(body);
                if acl.merge(entries) {
                    tracing::info!(
                        peer = %String::from_utf8_lossy(&msg.header.sender),
                        "ACL users updated from a peer."
                    );
                    super::store::save(acl);
                }
                if theirs[..] != digest(acl)[..] {
                    send(engine, idx, table_payload(acl));
                }
            }
            Err(why) => tracing::warn!(
                peer = %String::from_utf8_lossy(&msg.header.sender),
                error = why,
                "Ignoring a bad ACL frame."
            ),
        },
        _ => tracing::warn!(
            peer = %String::from_utf8_lossy(&msg.header.sender),
            "Ignoring an ACL frame of unknown kind."
        ),
    }
    true
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn table_round_trips_and_digests_agree() {
        let mut a = Acl::default();
        a.set_me([b'a'; 40]);
        a.set_user("alice", &[b"on", b">pw", b"~orders:*", b"+@produce"])
            .unwrap();
        a.set_user("bob", &[b"on"]).unwrap();
        a.del_user("bob");
        let p = table_payload(&a);
        assert_eq!(p[0], KIND_TABLE);
        let entries = decode_table(&p[1..]).unwrap();
        assert_eq!(entries.len(), 2);
        let mut b = Acl::default();
        b.set_me([b'b'; 40]);
        assert!(b.merge(entries));
        assert_eq!(digest(&a), digest(&b));
        assert!(b.get("alice").unwrap().password_ok(b"pw"));
        assert!(b.get("bob").is_none());
        // Digest of the received body equals the sender's digest.
        assert_eq!(Sha256::digest(&p[1..])[..], digest(&a)[..]);
        // Garbage is refused, never panics.
        for bad in [&p[1..p.len() - 1], &[0, 0, 0, 9][..], &[][..]] {
            assert!(decode_table(bad).is_err());
        }
        let mut junk = p[1..].to_vec();
        junk.push(0);
        assert!(decode_table(&junk).is_err());
    }
}
