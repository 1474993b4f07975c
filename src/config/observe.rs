//! Directives of the observability extensions (docs/COMPATIBILITY.md):
//! the HTTP endpoint (`http-port`, `http-bind`), the metrics series bound
//! (`metrics-max-queues`), readiness policy (`readyz-require-peer`) and
//! the log line format (`log-format`). None of them changes what a Disque
//! 1.0 client sees; they are accepted in the config file and on the
//! command line.

use super::values::{parse_bool, parse_u64};
use super::Config;
use super::DirectiveError;

/// Log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogFormat {
    Text,
    /// One JSON object per line (timestamp, level, target, fields, spans).
    Json,
}

impl LogFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
    }

    pub fn parse(s: &str) -> Option<LogFormat> {
        match s.to_ascii_lowercase().as_str() {
            "text" => Some(LogFormat::Text),
            "json" => Some(LogFormat::Json),
            _ => None,
        }
    }
}

pub(crate) mod defaults {
    pub const METRICS_MAX_QUEUES: u64 = 50;
}

/// Apply one of our directives; None when `name` is not one of them.
pub(crate) fn apply_directive(
    cfg: &mut Config,
    name: &str,
    args: &[String],
) -> Option<Result<(), DirectiveError>> {
    let r = match (name, args) {
        ("http-bind", a) if !a.is_empty() => {
            if a.len() > super::defaults::BINDADDR_MAX {
                Err("Too many bind addresses specified".into())
            } else {
                cfg.http_bind = a.to_vec();
                Ok(())
            }
        }
        // `auto` picks a free port (reported on the ready line); 0 is off.
        ("http-port", [v]) if v.eq_ignore_ascii_case("auto") => {
            cfg.http_port = Some(0);
            Ok(())
        }
        ("http-port", [v]) => parse_u64(v)
            .and_then(|p| u16::try_from(p).ok())
            .map(|p| cfg.http_port = (p != 0).then_some(p))
            .ok_or(DirectiveError::Invalid("Invalid http-port")),
        ("metrics-max-queues", [v]) => parse_u64(v)
            .map(|n| cfg.metrics_max_queues = n)
            .ok_or(DirectiveError::Invalid("Invalid metrics-max-queues value")),
        ("readyz-require-peer", [v]) => parse_bool(v)
            .map(|b| cfg.readyz_require_peer = b)
            .ok_or(DirectiveError::Invalid("argument must be 'yes' or 'no'")),
        ("log-format", [v]) => {
            LogFormat::parse(v)
                .map(|f| cfg.log_format = f)
                .ok_or(DirectiveError::Invalid(
                    "Invalid log format. Must be one of text, json",
                ))
        }
        (
            "http-bind" | "http-port" | "metrics-max-queues" | "readyz-require-peer" | "log-format",
            _,
        ) => Err("Bad directive or wrong number of arguments".into()),
        _ => return None,
    };
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(name: &str, args: &[&str]) -> Option<Result<(), DirectiveError>> {
        let mut c = Config::default();
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        apply_directive(&mut c, name, &args)
    }

    #[test]
    fn parses_and_validates() {
        let mut c = Config::default();
        assert_eq!(c.http_port, None);
        assert_eq!(c.log_format, LogFormat::Text);
        apply_directive(&mut c, "http-port", &["8080".into()]);
        apply_directive(&mut c, "http-bind", &["127.0.0.1".into(), "::1".into()]);
        apply_directive(&mut c, "log-format", &["JSON".into()]);
        apply_directive(&mut c, "metrics-max-queues", &["7".into()]);
        apply_directive(&mut c, "readyz-require-peer", &["no".into()]);
        assert_eq!(c.http_port, Some(8080));
        apply_directive(&mut c, "http-port", &["auto".into()]);
        assert_eq!(c.http_port, Some(0));
        apply_directive(&mut c, "http-port", &["0".into()]);
        assert_eq!(c.http_port, None);
        assert_eq!(c.http_bind, vec!["127.0.0.1", "::1"]);
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(c.metrics_max_queues, 7);
        assert!(!c.readyz_require_peer);
        assert_eq!(
            apply("http-port", &["70000"]).map(|r| r.map_err(|e| e.to_string())),
            Some(Err("Invalid http-port".into()))
        );
        assert_eq!(
            apply("log-format", &["xml"]).map(|r| r.map_err(|e| e.to_string())),
            Some(Err("Invalid log format. Must be one of text, json".into()))
        );
        assert!(matches!(apply("http-port", &[]), Some(Err(_))));
        assert!(apply("port", &["1"]).is_none());
    }
}
