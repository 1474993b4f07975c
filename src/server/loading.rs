//! Loading the AOF while clients are already accepted: records are applied
//! in batches, each in one short owner task, so that connections
//! get `-LOADING` (and INFO says `loading:1`) instead of a silent wait
//! until the dataset is in memory. The bus and the timer start after it.

use std::time::{Duration, Instant};

use super::Shared;
use crate::node::persistence::{begin_load, finish_load, loads_aof, LoadingStatus};

/// Records applied per owner task.
const BATCH: usize = 1024;

/// At most this many 1 ms waits for the spill disk per batch: a stuck
/// disk slows the load, never stops it (its write fault pauses spilling).
const SPILL_WAIT_POLLS: usize = 1000;

/// Test hook (docs/COMPATIBILITY.md): wait this many ms after opening the
/// AOF before replaying it, so tests can observe the loading state.
const DELAY_ENV: &str = "DISQUE_DEBUG_LOADING_DELAY_MS";

/// Before the client listeners start: if an AOF is to be loaded, clients
/// get -LOADING from their first command (`load` sets the file's sizes
/// and clears it), never answers from a dataset not loaded yet.
pub async fn mark(shared: &Shared) {
    shared
        .call(|node, now| {
            if loads_aof(node) {
                node.aof.loading = Some(LoadingStatus {
                    start_time: now / 1000,
                    total_bytes: 0,
                    loaded_bytes: 0,
                });
            }
        })
        .await;
}

/// Load the AOF (if the configuration has one), then start its writer.
/// An error means the node must not start.
pub async fn load(shared: &Shared) -> Result<(), crate::aof::AofError> {
    let started = Instant::now();
    let begun = shared
        .call(|node, now| {
            let load = begin_load(node)?;
            if let Some(l) = &load {
                node.aof.loading = Some(LoadingStatus {
                    start_time: now / 1000,
                    total_bytes: l.total_bytes,
                    loaded_bytes: 0,
                });
            }
            Ok::<_, crate::aof::AofError>(load)
        })
        .await?;
    let loaded = match begun {
        None => None,
        Some(mut load) => {
            if let Some(ms) = std::env::var(DELAY_ENV)
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
            {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            loop {
                // The load travels to the owner and back with each batch,
                // so connections' tasks (answered -LOADING) run between.
                let (back, r, backlogged) = shared
                    .call(move |node, now| {
                        let r = load.step(&mut node.engine, now, BATCH);
                        node.engine.spill_replay_backfill(now);
                        if let Some(s) = &mut node.aof.loading {
                            s.loaded_bytes = load.offset();
                        }
                        (load, r, node.engine.spill_backlogged())
                    })
                    .await;
                load = back;
                if r? {
                    break;
                }
                if backlogged {
                    // A replay faster than the spill disk would hold the
                    // bodies waiting for it in RAM: let the writes land.
                    wait_spill(shared).await;
                }
            }
            Some(shared.call(move |node, _| load.finish(&node.engine)).await)
        }
    };
    shared
        .call(move |node, _| {
            node.aof.loading = None;
            finish_load(node, loaded, started)
        })
        .await
}

/// Wait (bounded) until the spill tier's writes in flight are under their
/// cap again; its completions reach the owner meanwhile.
async fn wait_spill(shared: &Shared) {
    for _ in 0..SPILL_WAIT_POLLS {
        tokio::time::sleep(Duration::from_millis(1)).await;
        if !shared.call(|node, _| node.engine.spill_backlogged()).await {
            return;
        }
    }
}
