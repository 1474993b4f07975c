//! The AOF task and the AOF's part of a graceful shutdown: the async side
//! of `node::persistence`, which does the work on the owner thread.

use std::sync::Arc;
use std::time::Duration;

use super::Shared;
use crate::node::persistence;

/// Runs `persistence::cron` every 100 ms, and without pause while a
/// snapshot is being taken (yielding between chunks so clients interleave,
/// pausing while the writer is behind).
pub async fn run_task(shared: Arc<Shared>) {
    let Some(kick) = shared.call(move |node, _| persistence::kick(node)).await else {
        return;
    };
    let mut shutdown = shared.shutdown_rx();
    loop {
        match shared.call(persistence::cron).await {
            persistence::Snapshot::More => {
                tokio::task::yield_now().await;
                continue;
            }
            persistence::Snapshot::WriterBehind => {
                tokio::time::sleep(Duration::from_millis(2)).await;
                continue;
            }
            persistence::Snapshot::Idle => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = kick.notified() => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// Graceful shutdown: hand over what is pending, then flush, fsync and stop
/// the writer off the owner thread (on a blocking thread, bounded).
pub async fn shutdown(shared: &Shared) {
    let writer = shared.call(persistence::take_writer).await;
    let Some(writer) = writer else { return };
    let stop = tokio::task::spawn_blocking(move || writer.stop(Duration::from_secs(30)));
    match stop.await {
        Ok(Ok(_)) => tracing::info!("AOF flushed and fsynced."),
        Ok(Err(e)) => tracing::warn!(error = %e, "Error flushing the AOF on shutdown."),
        Err(e) => tracing::warn!(error = %e, "AOF shutdown task failed."),
    }
}
