//! The timer task: calls `Engine::tick` at the configured `hz`, and sooner
//! when the engine's next deadline is nearer (a GETJOB TIMEOUT of 10 ms
//! fires after ~10 ms, not after the next 100 ms tick). Also samples the
//! instantaneous stats. And the nodes.conf saver, woken when the node
//! table changes, whose writes and fsyncs run on a blocking thread.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::Shared;
use crate::support::clock::unix_ms;

pub async fn run(shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown_rx();
    loop {
        let sh = shared.clone();
        let (next, period) = shared
            .call(move |node, now| {
                node.engine.tick(now);
                sample_stats(node, now);
                let period = 1000 / u64::from(node.config.hz.clamp(1, 500));
                let mut next = now + period;
                if let Some(d) = node.engine.next_deadline() {
                    next = next.min(d.max(now + 1));
                }
                // Stored on the owner, so the end of this very turn already
                // compares new deadlines against it.
                sh.next_tick.store(next, Ordering::Relaxed);
                (next, period)
            })
            .await;
        let wait = next.saturating_sub(unix_ms()).min(period);
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
            _ = shared.tick_notify.notified() => {}
            _ = shutdown.changed() => return,
        }
    }
}

fn sample_stats(node: &mut crate::node::Node, now: u64) {
    let s = &mut node.stats;
    let elapsed = now.saturating_sub(s.ops_sample_time);
    if elapsed >= 1000 {
        if s.ops_sample_time != 0 {
            let secs = elapsed as f64 / 1000.0;
            s.ops_per_sec = ((s.total_commands - s.ops_sample_count) as f64 / secs) as u64;
            s.in_kbps = (s.net_input - s.in_sample) as f64 / secs / 1024.0;
            s.out_kbps = (s.net_output - s.out_sample) as f64 / secs / 1024.0;
        }
        s.ops_sample_time = now;
        s.ops_sample_count = s.total_commands;
        s.in_sample = s.net_input;
        s.out_sample = s.net_output;
    }
}

/// Saves nodes.conf whenever the owner's end of turn finds the table changed
/// (notifications coalesce while a save is running). A failed save (full
/// disk, I/O error) is logged and retried every second with the newest
/// table until it succeeds; the old file stays intact meanwhile.
pub async fn nodes_conf_saver(shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown_rx();
    let mut failed: Option<Table> = None;
    loop {
        let retry = failed.is_some();
        tokio::select! {
            _ = shared.save_notify.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)), if retry => {}
            _ = shutdown.changed() => return,
        }
        failed = save_nodes_conf_or(&shared, failed.take()).await;
    }
}

/// Persist the node table if it changed: the text is taken on the owner
/// thread, the write and its two fsyncs run on a blocking thread.
pub async fn save_nodes_conf(shared: &Arc<Shared>) {
    save_nodes_conf_or(shared, None).await;
}

/// A nodes.conf text and its generation: tables are numbered on the owner
/// as they are taken, so a save never replaces a newer one on disk.
type Table = (u64, String);

/// Save the newest table, or `previous` (a failed save's text) when the
/// table has not changed since. Returns the table when the save failed.
async fn save_nodes_conf_or(shared: &Arc<Shared>, previous: Option<Table>) -> Option<Table> {
    let counter = shared.clone();
    let (generation, text) = shared
        .call(move |node, _| {
            let text = node.engine.take_nodes_conf()?;
            Some((
                counter.nodes_conf_taken.fetch_add(1, Ordering::Relaxed) + 1,
                text,
            ))
        })
        .await
        .or(previous)?;
    let shared = shared.clone();
    let save = tokio::task::spawn_blocking(move || {
        let mut guard = shared.nodes_conf.lock().unwrap_or_else(|e| e.into_inner());
        let nc = guard.as_mut()?;
        match nc.save(generation, &text) {
            Ok(()) => None,
            Err(e) => {
                tracing::warn!(path = %nc.path, error = %e, "Could not save the cluster configuration, retrying in 1 second.");
                Some((generation, text))
            }
        }
    });
    match save.await {
        Ok(failed) => failed,
        Err(e) => {
            tracing::warn!(error = %e, "The cluster configuration save task failed.");
            None
        }
    }
}
