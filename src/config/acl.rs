//! ACL and protection directives (Redis 6/7's names and meanings):
//! `user` lines, `aclfile`, `enable-debug-command` and
//! `enable-protected-configs`. All are fixed at start, as in Redis:
//! CONFIG GET shows them, CONFIG SET refuses them, CONFIG REWRITE keeps
//! them (the `user` lines verbatim; users changed at runtime persist in
//! the aclfile or the state file, `acl::store`).

use super::Config;
use super::DirectiveError;

/// `no` | `local` | `yes`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Gate {
    No,
    #[default]
    Local,
    Yes,
}

impl Gate {
    pub fn parse(v: &str) -> Option<Gate> {
        match v.to_ascii_lowercase().as_str() {
            "no" => Some(Gate::No),
            "local" => Some(Gate::Local),
            "yes" => Some(Gate::Yes),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Gate::No => "no",
            Gate::Local => "local",
            Gate::Yes => "yes",
        }
    }

    /// Redis's `allowProtectedAction`.
    pub fn allows(self, local: bool) -> bool {
        match self {
            Gate::Yes => true,
            Gate::Local => local,
            Gate::No => false,
        }
    }
}

/// CONFIG GET order, after the other extensions.
pub(crate) const GET_NAMES: [&str; 3] = [
    "aclfile",
    "enable-debug-command",
    "enable-protected-configs",
];

const BAD: &str = "Bad directive or wrong number of arguments";

/// Config-file directive; None when `name` is not one of ours.
pub(crate) fn apply_directive(
    cfg: &mut Config,
    name: &str,
    args: &[String],
) -> Option<Result<(), DirectiveError>> {
    match name {
        "user" => Some(add_user_line(cfg, args)),
        "aclfile" | "enable-debug-command" | "enable-protected-configs" => {
            if args.len() != 1 {
                return Some(Err(BAD.into()));
            }
            Some(set_value(cfg, name, &args[0]))
        }
        _ => None,
    }
}

/// `user <name> <rules...>`: kept as a line; the rules are checked when
/// the node builds its user table (`acl::store::startup`), which refuses
/// to start on a bad one and names it.
fn add_user_line(cfg: &mut Config, args: &[String]) -> Result<(), DirectiveError> {
    if args.is_empty() {
        return Err(BAD.into());
    }
    let line = std::iter::once("user".to_string())
        .chain(args.iter().map(|a| {
            let plain = !a.is_empty()
                && a.bytes()
                    .all(|c| c.is_ascii_graphic() && c != b'"' && c != b'\'');
            if plain {
                a.clone()
            } else {
                super::values::repr(a)
            }
        }))
        .collect::<Vec<_>>()
        .join(" ");
    cfg.users.push(line);
    Ok(())
}

/// Validate and store one value (file or command line).
pub(crate) fn set_value(cfg: &mut Config, name: &str, v: &str) -> Result<(), DirectiveError> {
    let gate = |v: &str| Gate::parse(v).ok_or("argument must be 'yes', 'no' or 'local'");
    match name {
        "aclfile" => cfg.aclfile = (!v.is_empty()).then(|| v.to_string()),
        "enable-debug-command" => cfg.enable_debug_command = gate(v)?,
        "enable-protected-configs" => cfg.enable_protected_configs = gate(v)?,
        _ => return Err(BAD.into()),
    }
    Ok(())
}

/// CONFIG GET value of one of our parameters.
pub(crate) fn get_value(c: &Config, name: &str) -> String {
    match name {
        "aclfile" => c.aclfile.clone().unwrap_or_default(),
        "enable-debug-command" => c.enable_debug_command.as_str().to_string(),
        "enable-protected-configs" => c.enable_protected_configs.as_str().to_string(),
        _ => String::new(),
    }
}

/// (option, line, differs from default) for CONFIG REWRITE.
pub(crate) fn rewrite_lines(c: &Config) -> Vec<(&'static str, String, bool)> {
    let q = super::values::repr;
    let mut out = Vec::new();
    if let Some(f) = &c.aclfile {
        out.push(("aclfile", format!("aclfile {}", q(f)), true));
    }
    for (name, g) in [
        ("enable-debug-command", c.enable_debug_command),
        ("enable-protected-configs", c.enable_protected_configs),
    ] {
        out.push((name, format!("{name} {}", g.as_str()), g != Gate::Local));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn directives_parse_get_and_rewrite() {
        let _g = super::super::tests::cwd_guard();
        let text = "user alice on >secret ~orders:* +@produce\n\
                    user \"bob\" off\n\
                    enable-debug-command yes\nenable-protected-configs no\n";
        let c = super::super::parse_str(text, Config::default()).unwrap();
        assert_eq!(
            c.users,
            ["user alice on >secret ~orders:* +@produce", "user bob off"]
        );
        assert_eq!(c.enable_debug_command, Gate::Yes);
        assert_eq!(c.enable_protected_configs, Gate::No);
        assert_eq!(get_value(&c, "enable-debug-command"), "yes");
        let again = super::super::parse_str(&c.rewrite_content(""), Config::default()).unwrap();
        assert_eq!(again.enable_debug_command, Gate::Yes);
        assert_eq!(again.enable_protected_configs, Gate::No);
        let d = Config::default();
        assert_eq!(d.enable_debug_command, Gate::Local);
        assert!(!d.rewrite_content("").contains("enable-"));
        for bad in ["user", "enable-debug-command maybe"] {
            let e = super::super::parse_str(bad, Config::default()).unwrap_err();
            assert!(e.line_no > 0, "{bad}: {e}");
        }
        assert_eq!(Gate::parse("LOCAL"), Some(Gate::Local));
        assert_eq!(Gate::parse("maybe"), None);
        let mut c = Config::default();
        assert!(
            c.set("enable-debug-command", b"yes").is_err(),
            "fixed at start"
        );
        assert!(c.set("aclfile", b"/tmp/x").is_err(), "fixed at start");
    }
}
