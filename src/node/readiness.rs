//! Readiness, defined once: the node can do useful work. `/readyz` on the
//! HTTP endpoint, `INFO readiness` and `disque-server --healthcheck` (the
//! container image's probe, which reads that INFO section) all answer
//! from `Node::readiness`.

use super::Node;

impl Node {
    /// Why the node is not ready, if it is not: its AOF is loading or its
    /// last AOF write failed; `cluster-join` names seeds and no node has
    /// been met yet; or (with `readyz-require-peer yes`, the default) it
    /// knows other nodes and reaches none of them.
    pub fn readiness(&self) -> Result<(), String> {
        if let Some(l) = &self.aof.loading {
            return Err(format!(
                "loading the AOF ({} of {} bytes)",
                l.loaded_bytes, l.total_bytes
            ));
        }
        if let Some(e) = self.aof_write_error() {
            return Err(format!("AOF write error: {e}"));
        }
        let peers = self.engine.peer_stats();
        let others = peers
            .iter()
            .filter(|p| !p.myself && !p.flags.contains("handshake"))
            .count();
        if others == 0 && !self.config.deploy.join.is_empty() {
            return Err("joining: no cluster-join seed reached yet".into());
        }
        if self.config.readyz_require_peer {
            let reachable = peers.iter().filter(|p| !p.myself && p.reachable).count();
            if others > 0 && reachable == 0 {
                return Err(format!("none of {others} known peers is reachable"));
            }
        }
        Ok(())
    }
}
