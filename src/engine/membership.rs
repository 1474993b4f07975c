//! Membership changes driven by commands: MEET, FORGET, RESET. The gossip
//! protocol that completes handshakes lives with the bus handlers.

use super::cluster::{random_node_id, NodeInfo, FLAG_DELETED, FLAG_HANDSHAKE, FLAG_MEET};
use super::Engine;
use crate::domain::job::NodeIdx;

impl Engine {
    /// Start a handshake with ip:port unless one is already pending.
    pub fn cluster_meet(&mut self, ip: String, port: u16, now: u64) {
        let pending = self
            .cluster
            .live()
            .any(|(_, n)| n.has(FLAG_HANDSHAKE) && n.ip == ip && n.port == port);
        if pending {
            return;
        }
        let id = random_node_id(&mut self.rng);
        self.cluster
            .nodes
            .push(NodeInfo::new(id, ip, port, FLAG_HANDSHAKE | FLAG_MEET, now));
        self.cluster.dirty = true;
    }

    /// Remove a node from every listing; gossip may not re-add it for 60 s.
    pub fn cluster_forget(&mut self, idx: NodeIdx, now: u64) {
        if let Some(n) = self.cluster.nodes.get_mut(idx as usize) {
            n.flags |= FLAG_DELETED;
            n.link = false;
            let id = n.id;
            self.cluster.blacklist.push((id, now + 60_000));
        }
        self.cluster.refresh_reachable();
        self.cluster.dirty = true;
    }

    /// Forget every other node, optionally take a new ID, flush all data.
    pub fn cluster_reset(&mut self, hard: bool, now: u64) {
        for n in self.cluster.nodes.iter_mut().skip(1) {
            n.flags |= FLAG_DELETED;
            n.link = false;
        }
        if hard {
            let id = random_node_id(&mut self.rng);
            self.cluster.myself_mut().id = id;
        }
        self.flushall(now);
        self.cluster.refresh_reachable();
        self.cluster.dirty = true;
    }
}
