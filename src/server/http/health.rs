//! Probes: `/healthz` answers while the process serves HTTP at all;
//! `/readyz` answers 200 only when the node can do useful work, as
//! `Node::readiness` defines it (the same answer as `INFO readiness`),
//! and also says 503 before startup is over and while shutting down,
//! states the node itself does not hold. Both stay open without
//! `requirepass`: they reveal nothing and probes rarely carry credentials.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::AppState;

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
    match st.shared.call(move |node, _| node.readiness()).await {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        )
            .into_response(),
    }
}
