//! Logging setup: `tracing` events to `logfile` (or stdout) filtered by
//! `loglevel`, which CONFIG SET can change while the node runs, as text
//! lines or, with `log-format json`, one JSON object per line (timestamp,
//! level, target, message, fields, and the client or bus-link span the
//! event happened in). The log file is reopened on SIGHUP (`reopen`), so
//! logrotate can move it away.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::Registry;

use crate::config::{Config, LogFormat, LogLevel};

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

/// Why logging could not be set up (startup stops with this text).
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// `logfile` (as configured) cannot be opened; `path` is the absolute path.
    #[error("Can't open the log file {logfile}: {source}")]
    Open {
        logfile: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Install the global subscriber. Call once, before the runtime starts.
pub fn init(cfg: &Config) -> Result<(), LogError> {
    set_level(cfg.loglevel);
    // Evaluated per event (events are lifecycle-level, never per job), so
    // a CONFIG SET loglevel applies at once.
    let filter = tracing_subscriber::filter::filter_fn(|meta| {
        rank(meta.level()) <= MAX_LEVEL.load(Ordering::Relaxed)
    });
    let (writer, ansi) = if cfg.logfile.is_empty() {
        (
            BoxMakeWriter::new(std::io::stdout),
            std::io::IsTerminal::is_terminal(&std::io::stdout()),
        )
    } else {
        // Absolute: `dir` is the cwd now, but the path must not depend on it.
        let path = std::env::current_dir()
            .map(|d| d.join(&cfg.logfile))
            .unwrap_or_else(|_| PathBuf::from(&cfg.logfile));
        let file = open(&path).map_err(|source| LogError::Open {
            logfile: cfg.logfile.clone(),
            path: path.clone(),
            source,
        })?;
        *log_file() = Some(LogFile { path, file });
        (BoxMakeWriter::new(|| FileWriter), false)
    };
    let layer: Box<dyn Layer<Registry> + Send + Sync> = match cfg.log_format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_target(false)
            .with_ansi(ansi)
            .with_writer(writer)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(writer)
            .boxed(),
    };
    // A global filter, not a per-layer one: with a single layer they
    // select the same events, but a per-layer filter also tracks every
    // span's enabledness per layer, which made each enter and exit of a
    // client's span (once per poll of its connection task) look the span
    // up again.
    tracing_subscriber::registry()
        .with(layer)
        .with(filter)
        .init();
    Ok(())
}

struct LogFile {
    path: PathBuf,
    file: std::fs::File,
}

static LOG_FILE: Mutex<Option<LogFile>> = Mutex::new(None);

fn log_file() -> MutexGuard<'static, Option<LogFile>> {
    LOG_FILE.lock().unwrap_or_else(|e| e.into_inner())
}

fn open(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

/// Reopen the log file at its configured path (SIGHUP). Without a log
/// file (stdout) there is nothing to do. On failure the old file is kept.
pub fn reopen() -> std::io::Result<()> {
    let mut g = log_file();
    let Some(lf) = g.as_mut() else {
        return Ok(());
    };
    lf.file = open(&lf.path)?;
    Ok(())
}

/// One event's writer: writes go to whichever file is current.
struct FileWriter;

impl Write for FileWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match log_file().as_mut() {
            Some(lf) => lf.file.write(buf),
            None => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match log_file().as_mut() {
            Some(lf) => lf.file.flush(),
            None => Ok(()),
        }
    }
}
