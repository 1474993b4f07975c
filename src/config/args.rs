//! Command-line handling: `disque-server [config-file|-] [--name value ...]`
//! plus the special `-v`, `-h`, `--test-memory` and `--check-aof` modes.

use std::path::{Path, PathBuf};

use super::parse::{parse_str, read_config_file};
use super::values::repr;
use super::ConfigIoError;
use super::{Config, ConfigError, Startup};

/// Decide what to do from argv (without the program name).
///
/// The config file path is made absolute before parsing because `dir`
/// changes the cwd while parsing, and CONFIG REWRITE / DEBUG RESTART must
/// find the same file later. `--name v1 v2` groups become `name v1 v2`
/// lines appended after the file content, so they override it.
pub fn from_args(args: &[String]) -> Result<Startup, ConfigError> {
    if let Some(first) = args.first() {
        match first.as_str() {
            "-v" | "--version" => return Ok(Startup::Version),
            "-h" | "--help" => return Ok(Startup::Help),
            "--test-memory" => {
                return match args.get(1).and_then(|n| n.parse::<u64>().ok()) {
                    Some(mb) if args.len() == 2 && mb > 0 => Ok(Startup::TestMemory(mb)),
                    _ => Err(ConfigError::plain(
                        "Please specify the amount of memory to test in megabytes.\n\
                         Example: ./disque-server --test-memory 4096",
                    )),
                };
            }
            "--check-aof" => return check_aof(&args[1..]),
            _ => {}
        }
    }

    let mut rest = args;
    let mut config_file: Option<String> = None;
    if let Some(first) = args.first().filter(|a| !a.starts_with("--")) {
        config_file = Some(first.clone());
        rest = &args[1..];
    }
    let options = options_text(rest);

    let mut base = Config::default();
    let mut text = String::new();
    if let Some(file) = &config_file {
        let path = if file == "-" {
            PathBuf::from("-")
        } else {
            absolute(Path::new(file))?
        };
        text = read_config_file(&path)?;
        // Reading stdin leaves nothing to rewrite later.
        if file != "-" {
            base.config_file = Some(path);
        }
    }
    if !options.is_empty() {
        text.push('\n');
        text.push_str(&options);
    }
    Ok(Startup::Run(Box::new(parse_str(&text, base)?)))
}

/// Turn `--name v1 v2 --other v` into "name v1 v2\nother v". Values are
/// quoted so spaces and special characters survive `split_args`.
fn options_text(args: &[String]) -> String {
    let mut out = String::new();
    for a in args {
        if let Some(name) = a.strip_prefix("--") {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(name);
        } else {
            out.push(' ');
            out.push_str(&repr(a));
        }
    }
    out
}

/// `--check-aof [--fix] <file>` (either order).
fn check_aof(args: &[String]) -> Result<Startup, ConfigError> {
    let fix = args.iter().any(|a| a == "--fix");
    let files: Vec<&String> = args.iter().filter(|a| *a != "--fix").collect();
    match files.as_slice() {
        [file] if args.len() <= 2 => Ok(Startup::CheckAof {
            file: file.to_string(),
            fix,
        }),
        _ => Err(ConfigError::plain(
            "Usage: disque-server --check-aof [--fix] <file.aof>",
        )),
    }
}

/// `path` made absolute against the current directory (not canonicalized:
/// the file is opened right after, which reports a missing file properly).
fn absolute(path: &Path) -> Result<PathBuf, ConfigError> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    let cwd = std::env::current_dir().map_err(|source| ConfigIoError::ResolvePath {
        path: path.to_path_buf(),
        source,
    })?;
    // Drop "./" components so the stored path reads naturally in logs.
    let clean: PathBuf = path
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect();
    Ok(cwd.join(clean))
}
