//! Readiness, defined once: the node can do useful work. `/readyz` on the
//! HTTP endpoint, `INFO readiness` and `disque-server --healthcheck` (the
//! container image's probe, which reads that INFO section) all answer
//! from `Node::readiness`.

use super::Node;
use crate::aof::AofError;

/// Why the node is not ready; the text is `/readyz`'s and
/// `INFO readiness`'s `not_ready_reason`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    #[error("loading the AOF ({loaded_bytes} of {total_bytes} bytes)")]
    Loading { loaded_bytes: u64, total_bytes: u64 },
    #[error("AOF write error: {0}")]
    AofWrite(#[source] AofError),
    #[error("joining: no cluster-join seed reached yet")]
    Joining,
    #[error("none of {known} known peers is reachable")]
    NoPeerReachable { known: usize },
}

/// The HTTP API shows the reason as its text.
impl serde::Serialize for NotReady {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl Node {
    /// Why the node is not ready, if it is not: its AOF is loading or its
    /// last AOF write failed; `cluster-join` names seeds and no node has
    /// been met yet; or (with `readyz-require-peer yes`, the default) it
    /// knows other nodes and reaches none of them.
    pub fn readiness(&self) -> Result<(), NotReady> {
        if let Some(l) = &self.aof.loading {
            return Err(NotReady::Loading {
                loaded_bytes: l.loaded_bytes,
                total_bytes: l.total_bytes,
            });
        }
        if let Some(e) = self.aof_write_error() {
            return Err(NotReady::AofWrite(e.clone()));
        }
        let peers = self.engine.peer_stats();
        let others = peers
            .iter()
            .filter(|p| !p.myself && !p.flags.contains("handshake"))
            .count();
        if others == 0 && !self.config.deploy.join.is_empty() {
            return Err(NotReady::Joining);
        }
        if self.config.readyz_require_peer {
            let reachable = peers.iter().filter(|p| !p.myself && p.reachable).count();
            if others > 0 && reachable == 0 {
                return Err(NotReady::NoPeerReachable { known: others });
            }
        }
        Ok(())
    }
}
