//! `shutdown-drain-timeout`: on SIGTERM, before the clean shutdown, the
//! node marks itself leaving (new jobs are replicated to other nodes,
//! consumers are sent elsewhere, peers stop choosing it) and waits until
//! federation has moved its queued jobs to nodes whose consumers ask for
//! them, or until the timeout. Jobs still here at the timeout stay in the
//! AOF and are served again when the node comes back.

use std::time::Duration;

use super::Shared;

/// How often the queues are checked while draining.
const POLL: Duration = Duration::from_millis(200);

/// Run the drain if it is configured; returns when it is over.
pub async fn drain(shared: &Shared) {
    let (secs, was_leaving) = shared
        .call(|node, _| {
            (
                node.config.deploy.shutdown_drain_timeout,
                node.engine.cluster().leaving(),
            )
        })
        .await;
    if secs == 0 {
        return;
    }
    shared
        .call(move |node, _| node.engine.set_leaving(true))
        .await;
    let queued = || {
        shared.call(|node, _| {
            node.engine
                .queues()
                .iter()
                .map(|(_, q)| q.len())
                .sum::<usize>()
        })
    };
    tracing::info!(
        timeout_secs = secs,
        queued = queued().await,
        "Draining before shutdown: leaving the cluster, letting queued jobs move to other nodes."
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let left = queued().await;
        if left == 0 {
            tracing::info!("Drained: no job left in the queues.");
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                queued = left,
                "Drain timeout: shutting down with jobs still queued (they stay in the AOF)."
            );
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = tokio::signal::ctrl_c() => {
                tracing::info!("Received SIGINT: drain cut short.");
                break;
            }
        }
    }
    // The flag was the drain's, not an operator's CLUSTER LEAVING: the
    // node comes back as a full member after the restart.
    if !was_leaving {
        shared
            .call(move |node, _| node.engine.set_leaving(false))
            .await;
    }
}
