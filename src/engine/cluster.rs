//! The node table as the engine sees it: this node (always index 0) and
//! every peer ever learned. Entries are never removed from the vector so
//! that `NodeIdx` values held by jobs stay valid; forgotten nodes are only
//! marked deleted. Membership protocol logic builds on this table.

use crate::domain::job::NodeIdx;

pub const FLAG_PFAIL: u16 = 1;
pub const FLAG_FAIL: u16 = 2;
pub const FLAG_MYSELF: u16 = 4;
pub const FLAG_HANDSHAKE: u16 = 8;
pub const FLAG_NOADDR: u16 = 16;
pub const FLAG_MEET: u16 = 32;
pub const FLAG_DELETED: u16 = 64;
/// Also the sender flag on the bus (the header carries these bits as they
/// are): the one LEAVING constant.
pub const FLAG_LEAVING: u16 = 0x80;

/// Flag names in CLUSTER NODES and nodes.conf, in Disque's order.
const FLAG_NAMES: [(u16, &str); 6] = [
    (FLAG_MYSELF, "myself"),
    (FLAG_PFAIL, "fail?"),
    (FLAG_FAIL, "fail"),
    (FLAG_HANDSHAKE, "handshake"),
    (FLAG_NOADDR, "noaddr"),
    (FLAG_LEAVING, "leaving"),
];

#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub id: [u8; 40],
    pub ip: String,
    pub port: u16,
    pub flags: u16,
    pub ping_sent: u64,
    pub pong_received: u64,
    /// True when an outbound bus link is established.
    pub link: bool,
    /// A connect attempt is in flight.
    pub connecting: bool,
    /// When the current link was established (ms).
    pub link_time: u64,
    pub ctime: u64,
    /// Failure reports: (reporter, unix ms).
    pub fail_reports: Vec<(NodeIdx, u64)>,
    /// No connect attempt before this time (ms): reconnect back-off.
    pub reconnect_at: u64,
    /// Current back-off step in ms (0 after a successful link).
    pub backoff: u64,
    /// Bus port the node announced (0: client port + 10000).
    pub bus_port: u16,
}

impl NodeInfo {
    pub fn new(id: [u8; 40], ip: String, port: u16, flags: u16, now: u64) -> NodeInfo {
        NodeInfo {
            id,
            ip,
            port,
            flags,
            ping_sent: 0,
            pong_received: 0,
            link: false,
            connecting: false,
            link_time: 0,
            ctime: now,
            fail_reports: Vec::new(),
            reconnect_at: 0,
            backoff: 0,
            bus_port: 0,
        }
    }
    pub fn has(&self, f: u16) -> bool {
        self.flags & f != 0
    }
    pub fn flags_string(&self) -> String {
        let parts: Vec<&str> = FLAG_NAMES
            .iter()
            .filter(|(f, _)| self.flags & f != 0)
            .map(|(_, n)| *n)
            .collect();
        if parts.is_empty() {
            "noflags".to_string()
        } else {
            parts.join(",")
        }
    }
}

/// Generate a random 40-char lowercase hex node ID.
pub fn random_node_id(rng: &mut impl rand::RngCore) -> [u8; 40] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut id = [0u8; 40];
    let mut raw = [0u8; 20];
    rng.fill_bytes(&mut raw);
    for (i, b) in raw.iter().enumerate() {
        id[i * 2] = HEX[(b >> 4) as usize];
        id[i * 2 + 1] = HEX[(b & 15) as usize];
    }
    id
}

pub struct Cluster {
    pub nodes: Vec<NodeInfo>,
    /// Reachable set (other nodes neither in handshake, leaving nor
    /// failing), recomputed by `refresh_reachable`.
    pub reachable: Vec<NodeIdx>,
    /// Node IDs that gossip may not re-add, until the given unix ms.
    pub blacklist: Vec<([u8; 40], u64)>,
    /// nodes.conf must be rewritten.
    pub dirty: bool,
    pub stats_sent: u64,
    pub stats_received: u64,
    pub node_timeout: u64,
    pub last_ping_round: u64,
    /// `cluster-announce-*`: the address peers should use for this node.
    pub announce: Announced,
}

/// This node's announced address (all unset = what the peers see).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Announced {
    pub ip: Option<std::net::IpAddr>,
    /// 0: the bound client port.
    pub port: u16,
    /// 0: client port + 10000.
    pub bus_port: u16,
}

impl Cluster {
    pub fn new(myself: [u8; 40], port: u16, now: u64) -> Cluster {
        Cluster {
            nodes: vec![NodeInfo::new(myself, String::new(), port, FLAG_MYSELF, now)],
            reachable: Vec::new(),
            blacklist: Vec::new(),
            dirty: true,
            stats_sent: 0,
            stats_received: 0,
            node_timeout: 15_000,
            last_ping_round: 0,
            announce: Announced::default(),
        }
    }

    pub fn myself(&self) -> &NodeInfo {
        &self.nodes[0]
    }

    pub fn myself_mut(&mut self) -> &mut NodeInfo {
        &mut self.nodes[0]
    }

    pub fn my_id(&self) -> [u8; 40] {
        self.nodes[0].id
    }

    pub fn leaving(&self) -> bool {
        self.nodes[0].has(FLAG_LEAVING)
    }

    /// Live entries (not deleted), self included.
    pub fn live(&self) -> impl Iterator<Item = (NodeIdx, &NodeInfo)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.has(FLAG_DELETED))
            .map(|(i, n)| (i as NodeIdx, n))
    }

    /// Known non-handshake nodes including self (ADDJOB default REPLICATE, GC).
    pub fn size(&self) -> usize {
        self.live().filter(|(_, n)| !n.has(FLAG_HANDSHAKE)).count()
    }

    pub fn known(&self) -> usize {
        self.live().count()
    }

    pub fn refresh_reachable(&mut self) {
        self.reachable = self
            .live()
            .filter(|(i, n)| {
                *i != 0 && !n.has(FLAG_HANDSHAKE | FLAG_LEAVING | FLAG_PFAIL | FLAG_FAIL)
            })
            .map(|(i, _)| i)
            .collect();
    }

    pub fn find(&self, id: &[u8]) -> Option<NodeIdx> {
        self.live()
            .find(|(_, n)| n.id.as_slice() == id)
            .map(|(i, _)| i)
    }

    pub fn get(&self, idx: NodeIdx) -> Option<&NodeInfo> {
        self.nodes.get(idx as usize)
    }
}

impl Cluster {
    /// Peers that messages can be sent to now: linked, not self, not in
    /// handshake (broadcast targets).
    pub fn linked_peers(&self) -> Vec<NodeIdx> {
        self.live()
            .filter(|(i, n)| *i != 0 && n.link && !n.has(FLAG_HANDSHAKE))
            .map(|(i, _)| i)
            .collect()
    }

    /// CLUSTER NODES text (`with_handshakes`) or nodes.conf text (without),
    /// one line per live node.
    pub fn nodes_text(&self, with_handshakes: bool) -> String {
        let mut out = String::new();
        for (i, n) in self.live() {
            if !with_handshakes && n.has(FLAG_HANDSHAKE) {
                continue;
            }
            let addr = if n.has(FLAG_NOADDR) {
                ":0".to_string()
            } else {
                format!("{}:{}", n.ip, n.port)
            };
            let connected = if i == 0 || n.link {
                "connected"
            } else {
                "disconnected"
            };
            out.push_str(&format!(
                "{} {} {} {} {} {}\n",
                String::from_utf8_lossy(&n.id),
                addr,
                n.flags_string(),
                n.ping_sent,
                n.pong_received,
                connected
            ));
        }
        if !with_handshakes {
            // Older builds skip every `vars` line, so the version line
            // does not stop them from reading a newer file.
            out.push_str(&format!("vars nodes-conf-version {NODES_CONF_VERSION}\n"));
        }
        out
    }
}

/// The nodes.conf format this build writes (a `vars nodes-conf-version N`
/// line) and the newest it reads. A file without the line (written before
/// it existed) is version 1. Bump it only when an older build would
/// misread the node lines; `vars` keys a build does not know are ignored.
pub const NODES_CONF_VERSION: u32 = 1;

#[derive(Debug)]
pub struct Loaded {
    /// Index 0 is this node.
    pub nodes: Vec<NodeInfo>,
    /// The queue limits (`qlimit` lines, engine::limits).
    pub limits: Vec<(bytes::Bytes, super::limits::QueueLimit)>,
}

/// Why nodes.conf text does not parse (the engine's own type: the server
/// wraps it with the file's path).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodesConfError {
    /// Line `line` (1-based), whose text is `text`, is malformed.
    #[error("nodes.conf line {line}: {fault}: '{text}'")]
    Line {
        line: usize,
        fault: LineFault,
        text: String,
    },
    /// Nodes are listed but none is this node.
    #[error("nodes.conf has no 'myself' line")]
    NoMyself,
    /// A newer build wrote the file (its `nodes-conf-version` is above
    /// [`NODES_CONF_VERSION`]).
    #[error(
        "nodes.conf format version {found} is newer than this server reads (up to \
         {NODES_CONF_VERSION}): start a newer disque-server on it"
    )]
    Version { found: u32 },
}

/// What is wrong with one nodes.conf line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineFault {
    #[error("expected 6 fields")]
    Fields,
    #[error("node ID must be 40 characters")]
    IdLength,
    #[error("bad port")]
    Port,
    #[error("bad address")]
    Address,
    #[error("unknown node flag '{0}'")]
    UnknownFlag(String),
    #[error("more than one 'myself' line")]
    TwoMyself,
    #[error("malformed qlimit line")]
    Limit,
    #[error("nodes-conf-version is not a version number")]
    Version,
}

/// Check a `vars k v k v ...` line: only `nodes-conf-version` matters
/// here; other keys are a newer build's and are skipped.
/// `bad` names the line for a malformed value.
fn check_vars(line: &str, bad: impl Fn(LineFault) -> NodesConfError) -> Result<(), NodesConfError> {
    let words: Vec<&str> = line.split_whitespace().skip(1).collect();
    for kv in words.chunks(2) {
        if kv[0] != "nodes-conf-version" {
            continue;
        }
        let found: u32 = match kv.get(1).map(|v| v.parse()) {
            Some(Ok(v)) if v > 0 => v,
            _ => return Err(bad(LineFault::Version)),
        };
        if found > NODES_CONF_VERSION {
            return Err(NodesConfError::Version { found });
        }
    }
    Ok(())
}

fn parse_flags(s: &str) -> Result<u16, LineFault> {
    let mut f = 0;
    for w in s.split(',') {
        if w == "noflags" {
            continue;
        }
        match FLAG_NAMES.iter().find(|(_, n)| *n == w) {
            Some((bit, _)) => f |= bit,
            None => return Err(LineFault::UnknownFlag(w.to_string())),
        }
    }
    Ok(f)
}

/// Parse nodes.conf text. Ok(None) when there is no node in it.
pub fn parse_nodes_conf(text: &str, now: u64) -> Result<Option<Loaded>, NodesConfError> {
    let mut myself: Option<NodeInfo> = None;
    let mut others = Vec::new();
    let mut limits = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        let bad = |fault: LineFault| NodesConfError::Line {
            line: i + 1,
            fault,
            text: line.to_string(),
        };
        if line.starts_with("vars") {
            check_vars(line, bad)?;
            continue;
        }
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(' ').collect();
        if f[0] == "qlimit" {
            limits.push(super::limits::parse_conf_line(line).ok_or_else(|| bad(LineFault::Limit))?);
            continue;
        }
        if f.len() != 6 {
            return Err(bad(LineFault::Fields));
        }
        let idb = f[0].as_bytes();
        if idb.len() != 40 {
            return Err(bad(LineFault::IdLength));
        }
        let mut id = [0u8; 40];
        id.copy_from_slice(idb);
        let (ip, port) = match f[1].rsplit_once(':') {
            Some((ip, p)) => (
                ip.to_string(),
                p.parse::<u16>().map_err(|_| bad(LineFault::Port))?,
            ),
            None => return Err(bad(LineFault::Address)),
        };
        let flags = parse_flags(f[2]).map_err(bad)?;
        let mut n = NodeInfo::new(id, ip, port, flags & !FLAG_HANDSHAKE, now);
        n.ping_sent = if f[3] != "0" { now } else { 0 };
        n.pong_received = if f[4] != "0" { now } else { 0 };
        if flags & FLAG_MYSELF != 0 {
            if myself.is_some() {
                return Err(bad(LineFault::TwoMyself));
            }
            n.ping_sent = 0;
            n.pong_received = 0;
            myself = Some(n);
        } else {
            others.push(n);
        }
    }
    match myself {
        None if others.is_empty() => Ok(None),
        None => Err(NodesConfError::NoMyself),
        Some(me) => {
            let mut nodes = vec![me];
            nodes.extend(others);
            Ok(Some(Loaded { nodes, limits }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_wire_example() {
        let text = "8bcfb920b68a04e6d1c7e6aab5ee4878e4d743f4 127.0.0.1:7791 noflags 0 1795953481022 connected\n\
67d78e936368c0fc75d22f83d328e5c163e896b1 127.0.0.1:7792 myself 0 0 connected\n\
ad249f8c9b2240cd45f72fd233bd3d5a42a6709d 127.0.0.1:7790 leaving,fail? 0 1795953480721 connected\n";
        let l = parse_nodes_conf(text, 5).unwrap().unwrap();
        assert_eq!(&l.nodes[0].id[..8], b"67d78e93");
        assert_eq!(l.nodes.len(), 3);
        assert_eq!(l.nodes[2].flags, FLAG_LEAVING | FLAG_PFAIL);
        assert_eq!(l.nodes[1].pong_received, 5);
    }

    #[test]
    fn rejects_bad_files() {
        assert_eq!(
            parse_nodes_conf("abc 1:2 myself 0 0 connected\n", 0)
                .unwrap_err()
                .to_string(),
            "nodes.conf line 1: node ID must be 40 characters: 'abc 1:2 myself 0 0 connected'"
        );
        assert!(parse_nodes_conf(
            "67d78e936368c0fc75d22f83d328e5c163e896b1 1:2 bogus 0 0 connected\n",
            0
        )
        .is_err());
        assert!(parse_nodes_conf(
            "67d78e936368c0fc75d22f83d328e5c163e896b1 1:2 noflags 0 0 connected\n",
            0
        )
        .is_err());
        assert!(parse_nodes_conf("\n\nvars x\n", 0).unwrap().is_none());
    }

    #[test]
    fn format_version_line() {
        let me = "67d78e936368c0fc75d22f83d328e5c163e896b1 127.0.0.1:7792 myself 0 0 connected\n";
        // Written by this build: the line is there and reads back.
        let c = Cluster::new([b'a'; 40], 7711, 0);
        let text = c.nodes_text(false);
        assert!(text.ends_with(&format!("vars nodes-conf-version {NODES_CONF_VERSION}\n")));
        assert!(!c.nodes_text(true).contains("vars"));
        assert!(parse_nodes_conf(&text, 0).unwrap().is_some());
        // Older files (no line), the current version, unknown vars: fine.
        assert!(parse_nodes_conf(me, 0).unwrap().is_some());
        let with = format!("{me}vars nodes-conf-version 1 someday-key x\n");
        assert!(parse_nodes_conf(&with, 0).unwrap().is_some());
        // A newer file is refused with the version in the message.
        let newer = format!("{me}vars nodes-conf-version 2\n");
        assert_eq!(
            parse_nodes_conf(&newer, 0).unwrap_err(),
            NodesConfError::Version { found: 2 }
        );
        assert!(parse_nodes_conf(&newer, 0)
            .unwrap_err()
            .to_string()
            .starts_with("nodes.conf format version 2 is newer than this server reads"));
        // A malformed version names the line.
        let bad = format!("{me}vars nodes-conf-version x\n");
        assert_eq!(
            parse_nodes_conf(&bad, 0).unwrap_err().to_string(),
            "nodes.conf line 2: nodes-conf-version is not a version number: \
             'vars nodes-conf-version x'"
        );
    }
}
