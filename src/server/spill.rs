//! The spill tier's async side: with `spill yes`, start the spill thread
//! (`crate::spill`) before the AOF loads and feed its results back to the
//! owner, one task per burst. A tier that cannot start (the directory
//! cannot be created or emptied) leaves the node running on RAM only, with
//! the reason in INFO spill.

use std::sync::Arc;

use super::Shared;
use crate::spill::SpillIo;

pub async fn start(shared: &Arc<Shared>) {
    let (enabled, dir, max_disk, watermark) = shared
        .call(|node, _| {
            (
                node.config.spill,
                node.config.spill_dir(),
                node.config.spill_max_disk,
                node.config.spill_watermark,
            )
        })
        .await;
    if !enabled {
        return;
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let sink = Box::new(move |done| {
        let _ = tx.send(done);
    });
    let started = {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || {
            let io = SpillIo::start(dir.clone(), sink)?;
            Ok::<_, crate::spill::SegmentError>((io, crate::spill::segment::filesystem_bytes(&dir)))
        })
        .await
    };
    match started {
        Ok(Ok((io, fs_bytes))) => {
            let budget = max_disk.bytes(fs_bytes);
            tracing::info!(
                dir = %dir.display(),
                max_disk = budget,
                watermark,
                "Spill tier on: queue tails past their head window may move to disk."
            );
            shared
                .call(move |node, _| {
                    node.engine.set_spill(true, budget, watermark);
                    let whole = node.config.spill_whole_jobs;
                    node.engine.set_spill_whole_jobs(whole);
                    node.spill.io = Some(io);
                })
                .await;
            let shared = shared.clone();
            tokio::spawn(async move {
                while let Some(done) = rx.recv().await {
                    shared
                        .call(move |node, now| node.engine.spill_done(done, now))
                        .await;
                }
            });
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "Spill tier off: running on RAM only.");
            let msg = e.to_string();
            shared
                .call(move |node, _| node.spill.error = Some(msg))
                .await;
        }
        Err(e) => {
            tracing::warn!(error = %e, "Spill tier off: running on RAM only.");
            let msg = e.to_string();
            shared
                .call(move |node, _| node.spill.error = Some(msg))
                .await;
        }
    }
}
