//! Logging setup: `tracing` events to `logfile` (or stdout) filtered by
//! `loglevel`, which CONFIG SET can change while the node runs.

use std::sync::atomic::{AtomicU8, Ordering};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

use crate::config::{Config, LogLevel};

/// The most verbose level currently emitted (tracing's order: 0 = ERROR).
static MAX_LEVEL: AtomicU8 = AtomicU8::new(2);

fn rank(l: &tracing::Level) -> u8 {
    match *l {
        tracing::Level::ERROR => 0,
        tracing::Level::WARN => 1,
        tracing::Level::INFO => 2,
        tracing::Level::DEBUG => 3,
        tracing::Level::TRACE => 4,
    }
}

/// Map Disque's levels: debug/verbose -> DEBUG, notice -> INFO, warning -> WARN.
pub fn set_level(level: LogLevel) {
    let r = match level {
        LogLevel::Debug | LogLevel::Verbose => 3,
        LogLevel::Notice => 2,
        LogLevel::Warning => 1,
    };
    MAX_LEVEL.store(r, Ordering::Relaxed);
}

/// Install the global subscriber. Call once, before the runtime starts.
pub fn init(cfg: &Config) -> Result<(), String> {
    set_level(cfg.loglevel);
    // Evaluated per event (events are lifecycle-level, never per job), so
    // a CONFIG SET loglevel applies at once.
    let filter = tracing_subscriber::filter::filter_fn(|meta| {
        rank(meta.level()) <= MAX_LEVEL.load(Ordering::Relaxed)
    });
    let layer = tracing_subscriber::fmt::layer().with_target(false);
    if cfg.logfile.is_empty() {
        tracing_subscriber::registry()
            .with(
                layer
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
                    .with_writer(std::io::stdout)
                    .with_filter(filter),
            )
            .init();
    } else {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&cfg.logfile)
            .map_err(|e| format!("Can't open the log file {}: {e}", cfg.logfile))?;
        tracing_subscriber::registry()
            .with(
                layer
                    .with_ansi(false)
                    .with_writer(std::sync::Mutex::new(file))
                    .with_filter(filter),
            )
            .init();
    }
    Ok(())
}
