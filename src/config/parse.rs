//! Config text parsing: line splitting, comments, error reporting with line
//! numbers, and `include` of further files. The per-directive semantics live
//! in `directives.rs`.

use std::path::Path;

use super::directives::apply_directive;
use super::values::split_args;
use super::ConfigIoError;
use super::{Config, ConfigError};

/// Guards against `include` cycles, which would otherwise recurse forever.
const MAX_INCLUDE_DEPTH: usize = 16;

/// Parse config text on top of `base` and return the resulting config.
///
/// Later lines win. `dir` directives chdir immediately (so later relative
/// paths, including `include` and `logfile`, resolve against the new dir);
/// a failing chdir is fatal like any other error.
pub fn parse_str(text: &str, base: Config) -> Result<Config, ConfigError> {
    let mut cfg = base;
    parse_into(text, &mut cfg, 0)?;
    Ok(cfg)
}

/// Parse `text` into `cfg`; `depth` counts nested includes.
pub(crate) fn parse_into(text: &str, cfg: &mut Config, depth: usize) -> Result<(), ConfigError> {
    for (idx, raw) in text.split('\n').enumerate() {
        let line_no = idx + 1;
        let line = raw.trim_matches(|c| matches!(c, ' ' | '\t' | '\r' | '\n'));
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(argv) = split_args(line) else {
            return Err(ConfigError::at(
                line_no,
                line,
                "Unbalanced quotes in configuration line",
            ));
        };
        if argv.is_empty() {
            continue;
        }
        let name = argv[0].to_ascii_lowercase();
        if name == "include" && argv.len() == 2 {
            if depth >= MAX_INCLUDE_DEPTH {
                return Err(ConfigError::at(
                    line_no,
                    line,
                    "Too many nested include directives (include loop?)",
                ));
            }
            let content = read_config_file(Path::new(&argv[1]))
                .map_err(|e| ConfigError::at(line_no, line, e.message))?;
            // Errors inside the included file carry its own line numbers,
            // as in the original, which simply recursed into the loader.
            parse_into(&content, cfg, depth + 1)?;
            continue;
        }
        apply_directive(cfg, &name, &argv[1..])
            .map_err(|m| ConfigError::at(line_no, line, m.to_string()))?;
    }
    Ok(())
}

/// Read a whole config file, or stdin for "-". The error is a plain
/// (line-less) ConfigError naming the path and the OS error.
pub(crate) fn read_config_file(path: &Path) -> Result<String, ConfigError> {
    let bytes = if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)
            .map_err(|source| ConfigIoError::ReadStdin { source })?;
        buf
    } else {
        std::fs::read(path).map_err(|source| ConfigIoError::Open {
            path: path.to_path_buf(),
            source,
        })?
    };
    // Non-UTF-8 bytes can only matter inside quoted values; replacing them
    // keeps the parser on &str without rejecting otherwise valid files.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
