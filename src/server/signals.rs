//! Process signals other than the shutdown ones: SIGHUP reopens the log
//! file (logrotate's `postrotate` sends it) instead of killing the node,
//! which is the default action of an unhandled SIGHUP.

use tokio::signal::unix::{signal, SignalKind};

/// Install the SIGHUP handler for the life of the process.
pub fn spawn_hangup_handler() {
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "Cannot handle SIGHUP: it will terminate the node.");
            return;
        }
    };
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            match crate::observe::logging::reopen() {
                Ok(()) => tracing::info!("Received SIGHUP: log file reopened."),
                Err(e) => {
                    tracing::warn!(error = %e, "Received SIGHUP: cannot reopen the log file.")
                }
            }
        }
    });
}
