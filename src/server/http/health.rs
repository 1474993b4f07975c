//! Probes: `/healthz` answers while the process serves HTTP at all;
//! `/readyz` answers 200 only when the node can do useful work: its AOF is
//! loaded (503 "loading" meanwhile) and writable, it is not shutting down,
//! it has met a node when `cluster-join` names seeds, and (with
//! `readyz-require-peer yes`, the default) a node that knows other nodes
//! has at least one of them reachable. Both stay open without
//! `requirepass`: they reveal nothing and probes rarely carry credentials.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::node::Node;

pub(super) async fn healthz() -> &'static str {
    "ok\n"
}

pub(super) async fn readyz(State(st): State<AppState>) -> Response {
    if *st.shared.shutdown_rx().borrow() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: shutting down\n",
        )
            .into_response();
    }
    if !st.started.load(std::sync::atomic::Ordering::Relaxed) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: starting (loading the AOF)\n",
        )
            .into_response();
    }
    match st.shared.with(|node, _| readiness(node)) {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        )
            .into_response(),
    }
}

/// Why the node is not ready, if it is not.
pub(crate) fn readiness(node: &Node) -> Result<(), String> {
    if let Some(l) = &node.aof.loading {
        return Err(format!(
            "loading the AOF ({} of {} bytes)",
            l.loaded_bytes, l.total_bytes
        ));
    }
    if let Some(e) = node.aof_write_error() {
        return Err(format!("AOF write error: {e}"));
    }
    let peers = node.engine.peer_stats();
    let others = peers
        .iter()
        .filter(|p| !p.myself && !p.flags.contains("handshake"))
        .count();
    if others == 0 && !node.config.deploy.join.is_empty() {
        return Err("joining: no cluster-join seed reached yet".into());
    }
    if node.config.readyz_require_peer {
        let reachable = peers.iter().filter(|p| !p.myself && p.reachable).count();
        if others > 0 && reachable == 0 {
            return Err(format!("none of {others} known peers is reachable"));
        }
    }
    Ok(())
}
