//! The simulation's network: engines on seeded in-memory links with
//! loss (a lost message breaks its link, as with TCP), duplication, delay,
//! reordering, partitions and crash/restart. Scenarios live in `super`.
//! The harness also plays the shell for blocked clients: it collects every
//! engine's wakes as the clients' answers.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::domain::job::NodeIdx;
use crate::engine::cluster::NodeInfo;
use crate::engine::gossip::LinkKind;
use crate::engine::qlen_cluster::PeerTotals;
use crate::engine::{ClientId, Engine, Wake};
use crate::protocol::bus::message::Message;

pub(super) const START: u64 = 1_700_000_000_000;
pub(super) const STEP: u64 = 10;

pub(super) struct Faults {
    pub(super) drop: f64,
    pub(super) dup: f64,
    pub(super) max_delay: u64,
    /// TCP-style packet loss: each lost transmission of a message costs a
    /// retransmission timeout (200 ms, doubling); after five losses in a
    /// row the connection gives up (the message is lost, the link breaks).
    pub(super) retrans: f64,
}

impl Faults {
    /// The lossy network most scenarios use: 2% of messages lost, 1%
    /// duplicated, up to 40 steps of delay.
    pub(super) fn lossy() -> Faults {
        Faults {
            drop: 0.02,
            dup: 0.01,
            max_delay: 40,
            retrans: 0.0,
        }
    }

    /// Duplication and delay without loss: for scenarios where a lost
    /// message would only delay what they check.
    pub(super) fn duplicating() -> Faults {
        Faults {
            drop: 0.0,
            dup: 0.02,
            max_delay: 40,
            retrans: 0.0,
        }
    }

    /// A healthy network: no loss or duplication, up to 5 steps of delay.
    pub(super) fn calm() -> Faults {
        Faults {
            drop: 0.0,
            dup: 0.0,
            max_delay: 5,
            retrans: 0.0,
        }
    }
}

pub(super) struct InFlight {
    pub(super) to: usize,
    pub(super) from: usize,
    /// Some(idx): a reply arriving on the receiver's outbound link idx.
    pub(super) reply_link: Option<NodeIdx>,
    /// For inbound delivery: the sender's link index, so replies can return.
    pub(super) sender_link: NodeIdx,
    pub(super) msg: Message,
}

pub(super) struct Sim {
    pub(super) rng: SmallRng,
    pub(super) now: u64,
    pub(super) nodes: Vec<Option<Engine>>,
    pub(super) ids: Vec<[u8; 40]>,
    /// (a, a's node idx) -> b
    pub(super) links: BTreeMap<(usize, NodeIdx), usize>,
    pub(super) queue: BTreeMap<(u64, u64), InFlight>,
    pub(super) seq: u64,
    pub(super) faults: Faults,
    /// Pairs that cannot talk.
    pub(super) cut: BTreeSet<(usize, usize)>,
    /// Per-node clock offset (ms): node i reads `now + skew[i]`.
    pub(super) skew: Vec<i64>,
    pub(super) next_client: u64,
    /// Blocked clients, by the node they wait on.
    waiting: BTreeMap<ClientId, usize>,
    /// What blocked clients got: their wake, or None when their node
    /// crashed (the connection broke).
    answers: HashMap<ClientId, Option<Wake>>,
    /// Dashboard totals by (node, request number).
    totals: HashMap<(usize, u32), PeerTotals>,
    /// A digest of every message delivered (time, sender, receiver,
    /// bytes): equal for two runs of a seed exactly when they went the
    /// same way.
    pub(super) trace: u64,
    /// Each node's spill disk, when the run spills (`super::spill`).
    pub(super) spill: Option<super::spill::SimDisks>,
}

pub(super) fn ip(i: usize) -> String {
    format!("10.0.0.{}", i + 1)
}

pub(super) fn port(i: usize) -> u16 {
    7000 + i as u16
}

impl Sim {
    pub(super) fn new(n: usize, seed: u64, faults: Faults) -> Sim {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut nodes = Vec::new();
        let mut ids = Vec::new();
        for i in 0..n {
            let id = crate::engine::cluster::random_node_id(&mut rng);
            let mut e = Engine::new(id, port(i), rng.gen(), START);
            e.cluster.node_timeout = 3000;
            nodes.push(Some(e));
            ids.push(id);
        }
        Sim {
            rng,
            now: START,
            nodes,
            ids,
            links: BTreeMap::new(),
            queue: BTreeMap::new(),
            seq: 0,
            faults,
            cut: BTreeSet::new(),
            skew: vec![0; n],
            next_client: 1,
            waiting: BTreeMap::new(),
            answers: HashMap::new(),
            totals: HashMap::new(),
            trace: 0,
            spill: None,
        }
    }

    /// Node i's wall clock.
    pub(super) fn clock(&self, i: usize) -> u64 {
        crate::engine::add_ms(self.now, self.skew.get(i).copied().unwrap_or(0))
    }

    pub(super) fn blocked(&self, a: usize, b: usize) -> bool {
        self.cut.contains(&(a.min(b), a.max(b)))
            || self.nodes[a].is_none()
            || self.nodes[b].is_none()
    }

    /// Queue a message. A lost message breaks the link it travelled on, as
    /// with TCP, where loss only happens when a connection dies.
    pub(super) fn send(
        &mut self,
        from: usize,
        to: usize,
        reply_link: Option<NodeIdx>,
        sender_link: NodeIdx,
        msg: Message,
    ) {
        if self.rng.gen_bool(self.faults.drop) {
            self.break_link(from, to, reply_link, sender_link);
            return;
        }
        let mut late = 0;
        let mut rto = 200;
        while self.faults.retrans > 0.0 && self.rng.gen_bool(self.faults.retrans) {
            if rto > 200 << 4 {
                self.break_link(from, to, reply_link, sender_link);
                return;
            }
            late += rto;
            rto *= 2;
        }
        let copies = if self.rng.gen_bool(self.faults.dup) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = self.now + late + self.rng.gen_range(1..=self.faults.max_delay.max(1));
            self.seq += 1;
            self.queue.insert(
                (at, self.seq),
                InFlight {
                    to,
                    from,
                    reply_link,
                    sender_link,
                    msg: msg.clone(),
                },
            );
        }
    }

    /// The link a lost message travelled on breaks.
    fn break_link(
        &mut self,
        from: usize,
        to: usize,
        reply_link: Option<NodeIdx>,
        sender_link: NodeIdx,
    ) {
        let (owner, idx) = match reply_link {
            Some(idx) => (to, idx),
            None => (from, sender_link),
        };
        if self.links.remove(&(owner, idx)).is_some() {
            if let Some(e) = self.nodes[owner].as_mut() {
                e.on_link_down(idx, self.now);
            }
        }
    }

    /// Collect effects of node `a`: frames onto links, connect/disconnect.
    pub(super) fn flush(&mut self, a: usize) {
        let now = self.clock(a);
        let Some(e) = self.nodes[a].as_mut() else {
            return;
        };
        for (client, wake) in e.take_wakes() {
            self.waiting.remove(&client);
            self.answers.insert(client, Some(wake));
        }
        for (req, totals) in e.take_totals() {
            self.totals.insert((a, req), totals);
        }
        let frames = e.take_messages(now);
        if let Some(d) = &mut self.spill {
            d.issued(a, e.take_spill_ops());
        }
        let connects: Vec<_> = e.out.connect.drain(..).collect();
        let disconnects: Vec<_> = e.out.disconnect.drain(..).collect();
        e.out.aof.clear();
        for idx in disconnects {
            self.links.remove(&(a, idx));
        }
        for (idx, frame) in frames {
            if let Some(&b) = self.links.get(&(a, idx)) {
                if !self.blocked(a, b) {
                    self.send(a, b, None, idx, frame);
                }
            }
        }
        for (idx, host, bus_port) in connects {
            let target =
                (0..self.nodes.len()).find(|&b| ip(b) == host && port(b) + 10000 == bus_port);
            let ok = target.is_some_and(|b| !self.blocked(a, b));
            if let (true, Some(b)) = (ok, target) {
                self.links.insert((a, idx), b);
                if let Some(e) = self.nodes[a].as_mut() {
                    e.on_link_up(idx, now);
                }
            } else if let Some(e) = self.nodes[a].as_mut() {
                e.on_link_down(idx, now);
            }
            self.flush(a);
        }
    }

    pub(super) fn deliver(&mut self, f: InFlight) {
        let now = self.clock(f.to);
        if self.blocked(f.from, f.to) {
            return;
        }
        let (b, a) = (f.to, f.from);
        self.trace = std::hash::BuildHasher::hash_one(
            &crate::engine::HashState::default(),
            (self.trace, now, a, b, f.msg.to_bytes()),
        );
        let kind = match f.reply_link {
            Some(idx) => {
                // Arrives on b's outbound link; ignore if that link is gone.
                if self.links.get(&(b, idx)) != Some(&a) {
                    return;
                }
                LinkKind::Outbound(idx)
            }
            None => LinkKind::Inbound,
        };
        let Some(e) = self.nodes[b].as_mut() else {
            return;
        };
        let reply = e.on_bus_message(kind, &ip(b), &ip(a), f.msg, now);
        if let Some(r) = reply {
            if f.reply_link.is_none() {
                self.send(b, a, Some(f.sender_link), 0, r);
            }
        }
        self.flush(b);
    }

    pub(super) fn step(&mut self) {
        self.now += STEP;
        while let Some((&k, _)) = self.queue.first_key_value() {
            if k.0 > self.now {
                break;
            }
            let Some(f) = self.queue.remove(&k) else {
                break;
            };
            self.deliver(f);
        }
        // Links across a partition break.
        let broken: Vec<(usize, NodeIdx)> = self
            .links
            .iter()
            .filter(|(&(a, _), &b)| self.blocked(a, b))
            .map(|(&k, _)| k)
            .collect();
        for (a, idx) in broken {
            self.links.remove(&(a, idx));
            if let Some(e) = self.nodes[a].as_mut() {
                e.on_link_down(idx, self.now);
            }
        }
        self.complete_spill();
        for a in 0..self.nodes.len() {
            let now = self.clock(a);
            if let Some(e) = self.nodes[a].as_mut() {
                e.tick(now);
            }
            self.flush(a);
        }
    }

    pub(super) fn run_for(&mut self, ms: u64) {
        for _ in 0..ms / STEP {
            self.step();
        }
    }

    /// MEET everyone from node 0, repeating like an operator script would
    /// when a lossy network ate the handshake.
    pub(super) fn join_all(&mut self) {
        for round in 0..2000 {
            if round % 300 == 0 {
                let now = self.now;
                for b in 1..self.nodes.len() {
                    let known = self.nodes[0]
                        .as_ref()
                        .is_some_and(|e| e.cluster.find(&self.ids[b]).is_some());
                    if !known {
                        if let Some(e) = self.nodes[0].as_mut() {
                            e.cluster_meet(ip(b), port(b), now);
                        }
                    }
                }
                self.flush(0);
            }
            self.step();
            let full = self
                .nodes
                .iter()
                .flatten()
                .all(|e| e.cluster.reachable.len() + 1 == self.nodes.len());
            if full {
                return;
            }
        }
        for (i, e) in self.nodes.iter().enumerate() {
            if let Some(e) = e {
                eprintln!(
                    "node {i} reachable {}:\n{}",
                    e.cluster.reachable.len(),
                    e.cluster.nodes_text(true)
                );
            }
        }
        panic!("cluster did not converge");
    }

    /// Crash node `i` and return its node table, which `restart` takes
    /// back as nodes.conf would keep it.
    pub(super) fn crash(&mut self, i: usize) -> Vec<NodeInfo> {
        let table = self.nodes[i]
            .take()
            .map(|e| e.cluster.nodes)
            .unwrap_or_default();
        self.crash_links(i);
        table
    }

    /// Node `i` is gone: its clients get no answer, its links are dropped.
    fn crash_links(&mut self, i: usize) {
        let gone: Vec<ClientId> = self
            .waiting
            .iter()
            .filter(|&(_, &n)| n == i)
            .map(|(&c, _)| c)
            .collect();
        for c in gone {
            self.waiting.remove(&c);
            self.answers.insert(c, None);
        }
        self.links.retain(|&(a, _), &mut b| a != i && b != i);
    }

    /// Stop node `i` as SIGTERM does with the AOF on: its peers see its
    /// links close; the engine comes back with `start_again`.
    pub(super) fn stop(&mut self, i: usize) -> Option<Engine> {
        let e = self.nodes[i].take()?;
        let peers: Vec<(usize, NodeIdx)> = self
            .links
            .iter()
            .filter(|(&(a, _), &b)| b == i && a != i)
            .map(|(&k, _)| k)
            .collect();
        self.crash_links(i);
        for (a, idx) in peers {
            if let Some(p) = self.nodes[a].as_mut() {
                p.on_link_down(idx, self.now);
            }
            self.flush(a);
        }
        Some(e)
    }

    /// Node `i` back from `stop` with what its AOF kept (jobs, DEDUP keys,
    /// schedule definitions) and nothing else: no links, no pending ticks.
    pub(super) fn start_again(&mut self, i: usize, mut e: Engine) {
        let now = self.clock(i);
        for n in e.cluster.nodes.iter_mut() {
            n.link = false;
            n.connecting = false;
        }
        e.out = Default::default();
        e.schedule_reload(now);
        self.nodes[i] = Some(e);
        self.flush(i);
    }

    /// Restart with the same ID and node table (nodes.conf) but no jobs.
    pub(super) fn restart(&mut self, i: usize, table: Vec<NodeInfo>) {
        let mut e = Engine::new(self.ids[i], port(i), self.rng.gen(), self.now);
        e.cluster.node_timeout = 3000;
        e.cluster.nodes = table
            .into_iter()
            .map(|mut n| {
                n.link = false;
                n.connecting = false;
                n
            })
            .collect();
        self.nodes[i] = Some(e);
        self.flush(i);
    }

    /// The fault schedule the scenarios share: node 0 cut off from 1 and 2
    /// at t=400, healed at t=700; `crash_node` crashed at t=900 (its node
    /// table kept in `table`, as nodes.conf would) and restarted at t=1100.
    pub(super) fn partition_then_crash(
        &mut self,
        t: u64,
        crash_node: usize,
        table: &mut Vec<NodeInfo>,
    ) {
        match t {
            400 => {
                self.cut.insert((0, 1));
                self.cut.insert((0, 2));
            }
            700 => self.cut.clear(),
            900 => *table = self.crash(crash_node),
            1100 => self.restart(crash_node, table.clone()),
            _ => {}
        }
    }

    pub(super) fn client(&mut self) -> u64 {
        self.next_client += 1;
        self.next_client
    }

    /// `client` blocked on `node`: its answer is collected from now on.
    pub(super) fn blocked_on(&mut self, client: ClientId, node: usize) {
        self.waiting.insert(client, node);
    }

    /// A blocked client's answer, once: None while it still waits,
    /// Some(None) when its node crashed first.
    pub(super) fn answer(&mut self, client: ClientId) -> Option<Option<Wake>> {
        self.answers.remove(&client)
    }

    /// The answer to a dashboard totals request, once.
    pub(super) fn totals_of(&mut self, node: usize, req: u32) -> Option<PeerTotals> {
        self.totals.remove(&(node, req))
    }
}
