//! The node table as the engine sees it: this node (always index 0) and
//! every peer ever learned. Entries are never removed from the vector so
//! that `NodeIdx` values held by jobs stay valid; forgotten nodes are only
//! marked deleted. Membership protocol logic builds on this table.

use crate::job::NodeIdx;

pub const FLAG_PFAIL: u16 = 1;
pub const FLAG_FAIL: u16 = 2;
pub const FLAG_MYSELF: u16 = 4;
pub const FLAG_HANDSHAKE: u16 = 8;
pub const FLAG_NOADDR: u16 = 16;
pub const FLAG_MEET: u16 = 32;
pub const FLAG_DELETED: u16 = 64;
pub const FLAG_LEAVING: u16 = 128;

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
        }
    }
    pub fn has(&self, f: u16) -> bool {
        self.flags & f != 0
    }
    pub fn flags_string(&self) -> String {
        let names = [
            (FLAG_MYSELF, "myself"),
            (FLAG_PFAIL, "fail?"),
            (FLAG_FAIL, "fail"),
            (FLAG_HANDSHAKE, "handshake"),
            (FLAG_NOADDR, "noaddr"),
            (FLAG_LEAVING, "leaving"),
        ];
        let parts: Vec<&str> = names
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
    /// Reachable set (WIRE 8.6), recomputed by `refresh_reachable`.
    pub reachable: Vec<NodeIdx>,
    /// Node IDs that gossip may not re-add, until the given unix ms.
    pub blacklist: Vec<([u8; 40], u64)>,
    /// nodes.conf must be rewritten.
    pub dirty: bool,
    pub stats_sent: u64,
    pub stats_received: u64,
    pub node_timeout: u64,
    pub last_ping_round: u64,
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
    /// handshake (broadcast targets, WIRE 8.5).
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
        out
    }
}
