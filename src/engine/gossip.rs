//! Cluster membership: links coming and going, MEET/PING/PONG
//! with gossip sections, handshakes, PFAIL/FAIL failure detection and the
//! cron that drives them. Frames are produced into `out.frames`; the shell
//! owns the sockets and reports link events back.

use rand::seq::SliceRandom;

use super::cluster::{
    FLAG_DELETED, FLAG_FAIL, FLAG_HANDSHAKE, FLAG_LEAVING, FLAG_MEET, FLAG_NOADDR, FLAG_PFAIL,
};
use super::Engine;
use crate::domain::job::NodeIdx;
use crate::protocol::bus::message::{Body, GossipEntry, Header, Message};

/// Where a bus message arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    /// On our outbound link to this node.
    Outbound(NodeIdx),
    /// On a connection the peer opened to us.
    Inbound,
}

/// Bus port offset from the client port.
pub const BUS_OFFSET: u16 = 10000;

impl Engine {
    pub fn header(&self, mflags: u8) -> Header {
        let me = self.cluster.myself();
        let a = self.cluster.announce;
        Header {
            sender: me.id,
            port: if a.port != 0 { a.port } else { me.port },
            announce: (a.ip.is_some() || a.bus_port != 0).then_some(
                crate::protocol::bus::message::Announce {
                    ip: a.ip,
                    bus_port: a.bus_port,
                },
            ),
            // HFLAG_ACL: this node understands ACL frames (acl::sync).
            flags: if me.has(FLAG_LEAVING) {
                FLAG_LEAVING
            } else {
                0
            } | crate::protocol::bus::message::HFLAG_ACL,
            mflags,
        }
    }

    fn gossip_section(&mut self, exclude: NodeIdx) -> Vec<GossipEntry> {
        let mut cands: Vec<NodeIdx> = self
            .cluster
            .live()
            // Link-less nodes are included: Disque's gossip skips nodes
            // without a link object, but it recreates one every cron, so a
            // dead peer is normally gossiped, which spreads failure reports.
            .filter(|(i, n)| *i != 0 && *i != exclude && !n.has(FLAG_HANDSHAKE | FLAG_NOADDR))
            .map(|(i, _)| i)
            .collect();
        let known = self.cluster.known();
        let wanted = (known / 10).max(3).min(known.saturating_sub(2));
        // Failing nodes first so failure reports spread quickly.
        cands.shuffle(&mut self.rng);
        cands.sort_by_key(|&i| {
            self.cluster
                .get(i)
                .map_or(1, |n| u8::from(!n.has(FLAG_PFAIL | FLAG_FAIL)))
        });
        cands
            .into_iter()
            .take(wanted)
            .filter_map(|i| self.cluster.get(i))
            .map(|n| GossipEntry {
                node_id: n.id,
                ping_sent: n.ping_sent as u32,
                pong_received: n.pong_received as u32,
                ip: n.ip.clone(),
                port: n.port,
                flags: n.flags & (FLAG_PFAIL | FLAG_FAIL | FLAG_LEAVING | FLAG_NOADDR),
            })
            .collect()
    }

    fn ping_frame(&mut self, to: NodeIdx, kind: u8) -> Message {
        let gossip = self.gossip_section(to);
        let body = match kind {
            0 => Body::Ping(gossip),
            1 => Body::Pong(gossip),
            _ => Body::Meet(gossip),
        };
        Message::new(self.header(0), body)
    }

    /// Queue a PING (or MEET when the node has the MEET flag) on its link.
    pub fn send_ping(&mut self, idx: NodeIdx, now: u64) {
        let meet = self.cluster.get(idx).is_some_and(|n| n.has(FLAG_MEET));
        let frame = self.ping_frame(idx, if meet { 2 } else { 0 });
        if let Some(n) = self.cluster.nodes.get_mut(idx as usize) {
            // MEET stays set until the handshake completes: if the MEET was
            // lost with its link, the next link sends MEET again, not a PING
            // the peer would ignore.
            if n.ping_sent == 0 {
                n.ping_sent = now;
            }
        }
        self.cluster.stats_sent += 1;
        self.out.frames.push((idx, frame));
    }

    /// The shell established our outbound link to `idx`.
    pub fn on_link_up(&mut self, idx: NodeIdx, now: u64) {
        let Some(n) = self.cluster.nodes.get_mut(idx as usize) else {
            return;
        };
        if n.has(FLAG_DELETED) {
            self.out.disconnect.push(idx);
            return;
        }
        n.link = true;
        n.connecting = false;
        n.link_time = now;
        n.backoff = 0;
        self.send_ping(idx, now);
        self.dedup_sync_to(idx, now);
        self.schedule_sync_to(idx, now);
        self.batch_sync_to(idx);
    }

    /// Our outbound link to `idx` failed or closed.
    pub fn on_link_down(&mut self, idx: NodeIdx, now: u64) {
        let Some(n) = self.cluster.nodes.get_mut(idx as usize) else {
            return;
        };
        n.link = false;
        n.connecting = false;
        // Back off reconnects to a dead peer: 100 ms doubling up to 1 s, so
        // it is still probed several times within any node timeout.
        n.backoff = (n.backoff * 2).clamp(100, 1000);
        n.reconnect_at = now + n.backoff;
        // An unreachable node must still time out into PFAIL.
        if n.ping_sent == 0 {
            n.ping_sent = now;
        }
    }

    /// Handle one membership frame. Returns a reply to send back on the
    /// same connection (PONG to PING/MEET).
    pub fn on_membership(
        &mut self,
        link: LinkKind,
        local_ip: &str,
        peer_ip: &str,
        msg: &Message,
        now: u64,
    ) -> Option<Message> {
        let h = &msg.header;
        let sender = self.cluster.find(&h.sender);
        let gossip = match &msg.body {
            Body::Ping(g) | Body::Pong(g) | Body::Meet(g) => g,
            Body::Fail { node } => {
                if let Some(s) = sender {
                    self.mark_seen(s, h);
                    if let Some(x) = self.cluster.find(node) {
                        if x != 0 {
                            if let Some(n) = self.cluster.nodes.get_mut(x as usize) {
                                n.flags |= FLAG_FAIL;
                                n.flags &= !FLAG_PFAIL;
                            }
                            self.cluster.dirty = true;
                        }
                    }
                }
                return None;
            }
            _ => return None,
        };
        let is_meet = matches!(msg.body, Body::Meet(_));
        let is_ping = matches!(msg.body, Body::Ping(_)) || is_meet;
        // A node behind NAT says where it can be reached; its own
        // announced IP is never replaced by a socket address.
        let announced_ip = h.announce.and_then(|a| a.ip).map(|i| i.to_string());
        let peer_ip = announced_ip.as_deref().unwrap_or(peer_ip);
        let bus_port = h.announce.map_or(0, |a| a.bus_port);
        if is_ping
            && self.cluster.announce.ip.is_none()
            && (is_meet || self.cluster.myself().ip.is_empty())
            && !local_ip.is_empty()
        {
            let me = self.cluster.myself_mut();
            if me.ip != local_ip {
                me.ip = local_ip.to_string();
                self.cluster.dirty = true;
            }
        }
        if is_meet && sender.is_none() {
            let id = crate::engine::cluster::random_node_id(&mut self.rng);
            let mut n =
                super::cluster::NodeInfo::new(id, peer_ip.to_string(), h.port, FLAG_HANDSHAKE, now);
            n.bus_port = bus_port;
            self.cluster.nodes.push(n);
            self.cluster.dirty = true;
            self.process_gossip(None, gossip, now);
        }
        if matches!(msg.body, Body::Pong(_)) {
            if let LinkKind::Outbound(idx) = link {
                self.on_pong(idx, h, now);
            }
        }
        let sender = self.cluster.find(&h.sender);
        if let Some(s) = sender {
            if is_ping {
                // A known node talking from a new address moved.
                if let Some(n) = self.cluster.nodes.get_mut(s as usize) {
                    let moved = n.ip != peer_ip || n.port != h.port || n.bus_port != bus_port;
                    if !peer_ip.is_empty() && moved && s != 0 {
                        n.ip = peer_ip.to_string();
                        n.port = h.port;
                        n.bus_port = bus_port;
                        n.flags &= !FLAG_NOADDR;
                        self.cluster.dirty = true;
                        if n.link {
                            n.link = false;
                            self.out.disconnect.push(s);
                        }
                    }
                    // It reaches us again: reconnect at the next cron, not
                    // after the back-off, so the acknowledgements and queued
                    // jobs it missed are exchanged before its consumers
                    // take stale copies (engine::ack::resync_holder).
                    if s != 0 && !n.link && !n.connecting {
                        n.reconnect_at = now;
                    }
                }
            }
            self.mark_seen(s, h);
            self.process_gossip(Some(s), gossip, now);
        }
        if is_ping {
            self.cluster.stats_sent += 1;
            return Some(self.ping_frame(sender.unwrap_or(0), 1));
        }
        None
    }

    /// Copy the LEAVING bit from a header (the only flag peers trust).
    fn mark_seen(&mut self, s: NodeIdx, h: &Header) {
        if s == 0 {
            return;
        }
        if let Some(n) = self.cluster.nodes.get_mut(s as usize) {
            let leaving = h.flags & FLAG_LEAVING != 0;
            if leaving != n.has(FLAG_LEAVING) {
                if leaving {
                    n.flags |= FLAG_LEAVING;
                } else {
                    n.flags &= !FLAG_LEAVING;
                }
                self.cluster.dirty = true;
                self.cluster.refresh_reachable();
            }
        }
    }

    fn on_pong(&mut self, idx: NodeIdx, h: &Header, now: u64) {
        let Some(n) = self.cluster.get(idx) else {
            return;
        };
        if n.has(FLAG_HANDSHAKE) {
            match self.cluster.find(&h.sender) {
                Some(known) if known != idx => {
                    // Already known under its real ID: refresh it, drop the placeholder.
                    let (ip, port) = (n.ip.clone(), n.port);
                    if let Some(k) = self.cluster.nodes.get_mut(known as usize) {
                        if k.ip != ip || k.port != port {
                            k.ip = ip;
                            k.port = port;
                            k.flags &= !FLAG_NOADDR;
                        }
                    }
                    self.delete_node(idx);
                }
                _ if self.is_blacklisted(&h.sender, now) || h.sender == self.cluster.my_id() => {
                    self.delete_node(idx);
                }
                _ => {
                    if let Some(n) = self.cluster.nodes.get_mut(idx as usize) {
                        n.id = h.sender;
                        n.flags &= !(FLAG_HANDSHAKE | FLAG_MEET);
                        n.ping_sent = 0;
                        n.pong_received = now;
                    }
                    tracing::info!(node = %String::from_utf8_lossy(&h.sender), "Node joined the cluster.");
                }
            }
            self.cluster.dirty = true;
            self.cluster.refresh_reachable();
            return;
        }
        if n.id != h.sender {
            if let Some(n) = self.cluster.nodes.get_mut(idx as usize) {
                n.flags |= FLAG_NOADDR;
                n.ip.clear();
                n.port = 0;
                n.link = false;
            }
            self.out.disconnect.push(idx);
            self.cluster.dirty = true;
            self.cluster.refresh_reachable();
            return;
        }
        let mut back = false;
        if let Some(n) = self.cluster.nodes.get_mut(idx as usize) {
            n.ping_sent = 0;
            n.pong_received = now;
            if n.has(FLAG_PFAIL | FLAG_FAIL) {
                n.flags &= !(FLAG_PFAIL | FLAG_FAIL);
                self.cluster.dirty = true;
                back = true;
            }
        }
        self.cluster.refresh_reachable();
        if back {
            self.resync_holder(idx);
        }
    }

    fn is_blacklisted(&self, id: &[u8; 40], now: u64) -> bool {
        self.cluster
            .blacklist
            .iter()
            .any(|(b, until)| b == id && *until > now)
    }

    /// Remove a node from the table for good (placeholders, handshakes).
    fn delete_node(&mut self, idx: NodeIdx) {
        if let Some(n) = self.cluster.nodes.get_mut(idx as usize) {
            n.flags |= FLAG_DELETED;
            if n.link || n.connecting {
                self.out.disconnect.push(idx);
            }
            n.link = false;
        }
    }

    fn process_gossip(&mut self, sender: Option<NodeIdx>, gossip: &[GossipEntry], now: u64) {
        for g in gossip {
            match self.cluster.find(&g.node_id) {
                Some(0) => {}
                Some(x) => {
                    let Some(s) = sender else { continue };
                    let failing = g.flags & (FLAG_PFAIL | FLAG_FAIL) != 0;
                    if let Some(n) = self.cluster.nodes.get_mut(x as usize) {
                        n.fail_reports.retain(|(r, _)| *r != s);
                        if failing {
                            n.fail_reports.push((s, now));
                        }
                        let differs = g.ip.parse::<std::net::IpAddr>().is_ok()
                            && g.port != 0
                            && (n.ip != g.ip || n.port != g.port);
                        if n.has(FLAG_PFAIL | FLAG_FAIL) && differs && g.flags & FLAG_NOADDR == 0 {
                            let (ip, port) = (g.ip.clone(), g.port);
                            self.cluster_meet(ip, port, now);
                        }
                    }
                }
                None => {
                    // Only numeric addresses: a peer must not make us
                    // resolve host names, and port 0 is no address.
                    if sender.is_some()
                        && g.flags & FLAG_NOADDR == 0
                        && g.port != 0
                        && g.ip.parse::<std::net::IpAddr>().is_ok()
                        && !self.is_blacklisted(&g.node_id, now)
                    {
                        self.cluster_meet_plain(g.ip.clone(), g.port, now);
                    }
                }
            }
        }
    }

    /// A handshake without the MEET flag (discovered through gossip).
    fn cluster_meet_plain(&mut self, ip: String, port: u16, now: u64) {
        let before = self.cluster.nodes.len();
        self.cluster_meet(ip, port, now);
        if self.cluster.nodes.len() > before {
            if let Some(n) = self.cluster.nodes.last_mut() {
                n.flags &= !FLAG_MEET;
            }
        }
    }

    /// Every ~100 ms: links, pings, timeouts, PFAIL/FAIL, handshakes.
    pub fn cluster_cron(&mut self, now: u64) {
        let timeout = self.cluster.node_timeout.max(1);
        let handshake_timeout = timeout.max(1000);
        let mut changed = false;
        for i in 1..self.cluster.nodes.len() {
            let idx = i as NodeIdx;
            let n = &mut self.cluster.nodes[i];
            if n.has(FLAG_DELETED) {
                continue;
            }
            if n.has(FLAG_HANDSHAKE) && now.saturating_sub(n.ctime) > handshake_timeout {
                self.delete_node(idx);
                changed = true;
                continue;
            }
            let n = &mut self.cluster.nodes[i];
            if !n.link
                && !n.connecting
                && !n.has(FLAG_NOADDR)
                && n.port != 0
                && now >= n.reconnect_at
            {
                n.connecting = true;
                let port = if n.bus_port != 0 {
                    n.bus_port
                } else {
                    n.port.saturating_add(BUS_OFFSET)
                };
                self.out.connect.push((idx, n.ip.clone(), port));
            }
            let n = &mut self.cluster.nodes[i];
            // A link that stays silent past the timeout is rebuilt.
            if n.link
                && now.saturating_sub(n.link_time) > timeout
                && n.ping_sent != 0
                && now.saturating_sub(n.ping_sent) > timeout / 2
            {
                n.link = false;
                self.out.disconnect.push(idx);
                continue;
            }
            if n.link && n.ping_sent == 0 && now.saturating_sub(n.pong_received) > timeout / 2 {
                self.send_ping(idx, now);
            }
            let n = &mut self.cluster.nodes[i];
            if n.ping_sent != 0
                && now.saturating_sub(n.ping_sent) > timeout
                && !n.has(FLAG_PFAIL | FLAG_FAIL)
            {
                n.flags |= FLAG_PFAIL;
                changed = true;
            }
            n.fail_reports
                .retain(|(_, t)| now.saturating_sub(*t) <= timeout * 2);
        }
        if now.saturating_sub(self.cluster.last_ping_round) >= 1000 {
            self.cluster.last_ping_round = now;
            let mut cands: Vec<NodeIdx> = self
                .cluster
                .live()
                .filter(|(i, n)| *i != 0 && n.link && n.ping_sent == 0 && !n.has(FLAG_HANDSHAKE))
                .map(|(i, _)| i)
                .collect();
            cands.shuffle(&mut self.rng);
            cands.truncate(5);
            if let Some(&oldest) = cands
                .iter()
                .min_by_key(|&&i| self.cluster.get(i).map_or(0, |n| n.pong_received))
            {
                self.send_ping(oldest, now);
            }
        }
        changed |= self.promote_failures();
        self.cluster.blacklist.retain(|(_, until)| *until > now);
        if changed {
            self.cluster.dirty = true;
        }
        self.cluster.refresh_reachable();
    }

    /// PFAIL + failure reports (ours included) from a majority of the
    /// cluster => FAIL, broadcast.
    fn promote_failures(&mut self) -> bool {
        let size = self.cluster.size();
        let needed = size / 2 + 1;
        let mut failed = Vec::new();
        for (i, n) in self.cluster.live() {
            if i != 0
                && n.has(FLAG_PFAIL)
                && !n.has(FLAG_FAIL)
                && n.fail_reports.len() + 1 >= needed
                && size > 2
            {
                failed.push(i);
            }
        }
        for &i in &failed {
            let id = self.cluster.nodes[i as usize].id;
            self.cluster.nodes[i as usize].flags |= FLAG_FAIL;
            self.cluster.nodes[i as usize].flags &= !FLAG_PFAIL;
            tracing::warn!(node = %String::from_utf8_lossy(&id), "Node marked as failing.");
            for t in self.cluster.linked_peers() {
                let frame = Message::new(self.header(0), Body::Fail { node: id });
                self.out.frames.push((t, frame));
            }
        }
        !failed.is_empty()
    }
}
