//! Where users survive restarts, and where they come from at startup.
//!
//! * The **state file** (`<cluster-config-file without .conf>.users`,
//!   e.g. `nodes.users`, next to nodes.conf and under its lock) holds the
//!   whole table with its versions and tombstones, and the local
//!   definitions last applied. Written, atomically, after every change
//!   once the node has users (a node that never had any writes none).
//! * The **aclfile** (`aclfile` directive, Redis's format: `user <name>
//!   <rules>` lines) is rewritten with every live user after every change
//!   as well, so it always holds what the node enforces.
//!
//! At startup the local definitions (the aclfile, or the `user` lines of
//! the config file, plus `requirepass` for the default user) are applied
//! only where they differ from what was last applied or written: an
//! operator's edit takes effect (and spreads to the cluster), while
//! changes made at runtime, here or on another node, are not undone by a
//! restart.

use std::collections::BTreeMap;

/// Why the user table could not be loaded. The texts are what Redis
/// prints for the same cases.
#[derive(Debug, thiserror::Error)]
pub enum AclLoadError {
    /// A definition that does not parse (an aclfile line, a config `user`
    /// line or a state-file line), named with its origin and line.
    #[error("{0}")]
    Definition(String),
    /// Users in the config file and an aclfile at once.
    #[error("Configuring Disque with users defined in the configuration file and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your configuration file.")]
    UsersAndAclfile,
    /// ACL LOAD without an aclfile.
    #[error("{NO_ACLFILE}")]
    NoAclfile,
    /// The aclfile cannot be opened.
    #[error("Error loading ACLs, opening file '{}': {}", path.display(), crate::errors::strerror(source))]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// ACL LOAD and the aclfile is gone.
    #[error("Error loading ACLs, opening file '{}': No such file or directory", .0.display())]
    Missing(PathBuf),
    /// The replicated state file cannot be read.
    #[error("Can't read the ACL state file {}: {source}", path.display())]
    ReadState {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The table changed at startup and could not be written back.
    #[error("Writing the ACL files: {0}")]
    Write(#[source] std::io::Error),
}

use std::path::{Path, PathBuf};

use super::{Acl, Entry, User, DEFAULT_USER};
use crate::config::Config;

const STATE_HEADER: &str = "# disque-server ACL state: users with their cluster versions (docs/SECURITY.md). Written by the server: change users with ACL SETUSER or the aclfile, not here.";

#[derive(Clone, Debug)]
pub struct Files {
    /// `aclfile`, relative to `dir` (the working directory).
    pub aclfile: Option<PathBuf>,
    pub state: PathBuf,
}

impl Files {
    pub fn from_config(c: &Config) -> Files {
        let nodes = c.cluster_config_file.as_str();
        let base = nodes.strip_suffix(".conf").unwrap_or(nodes);
        Files {
            aclfile: c
                .aclfile
                .as_ref()
                .filter(|p| !p.is_empty())
                .map(PathBuf::from),
            state: PathBuf::from(format!("{base}.users")),
        }
    }
}

/// Parse `user <name> <rules...>` lines (the aclfile, config `user`
/// directives): users in order. Errors name the line, as Redis does.
pub fn parse_user_lines<'a>(
    lines: impl IntoIterator<Item = (usize, &'a str)>,
    origin: &str,
) -> Result<Vec<(String, User)>, AclLoadError> {
    let mut out: Vec<(String, User)> = Vec::new();
    for (n, line) in lines {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(args) = crate::config::split_args(line) else {
            return Err(AclLoadError::Definition(format!(
                "{origin}:{n}: unbalanced quotes in the line."
            )));
        };
        if args.len() < 2 || args[0] != "user" {
            return Err(AclLoadError::Definition(format!(
                "{origin}:{n} should start with user keyword."
            )));
        }
        let name = &args[1];
        if !super::user::valid_name(name.as_bytes()) {
            return Err(AclLoadError::Definition(format!(
                "{origin}:{n}: Usernames can't contain spaces or null characters."
            )));
        }
        if out.iter().any(|(u, _)| u == name) {
            return Err(AclLoadError::Definition(format!(
                "{origin}:{n}: Duplicate user '{name}' found. A user can only be defined once in config files."
            )));
        }
        let user =
            User::from_rules(args[2..].iter().map(|a| a.as_bytes())).map_err(|(op, e)| {
                AclLoadError::Definition(format!(
                    "{origin}:{n}: Error in user declaration '{op}': {}",
                    e.text()
                ))
            })?;
        out.push((name.clone(), user));
    }
    Ok(out)
}

/// The aclfile's users; a missing file is empty (it is created on the
/// first change), anything unreadable or invalid is an error.
fn read_aclfile(path: &Path) -> Result<Option<Vec<(String, User)>>, AclLoadError> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_user_lines(
            text.lines().enumerate().map(|(i, l)| (i + 1, l)),
            &path.display().to_string(),
        )
        .map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(AclLoadError::Open {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The local definitions: aclfile or config `user` lines, then
/// `requirepass` on the default user.
fn local_definitions(c: &Config, files: &Files) -> Result<BTreeMap<String, User>, AclLoadError> {
    let list = match &files.aclfile {
        Some(p) => {
            if !c.users.is_empty() {
                return Err(AclLoadError::UsersAndAclfile);
            }
            read_aclfile(p)?.unwrap_or_else(|| {
                tracing::warn!(path = %p.display(), "The aclfile does not exist yet: starting with the default user only; it is written on the first change.");
                Vec::new()
            })
        }
        None => parse_user_lines(
            c.users.iter().enumerate().map(|(i, l)| (i + 1, l.as_str())),
            "user directive",
        )?,
    };
    let mut map: BTreeMap<String, User> = list.into_iter().collect();
    let mut default = map.remove(DEFAULT_USER).unwrap_or_else(User::default_user);
    if let Some(pw) = c.requirepass.as_deref().filter(|p| !p.is_empty()) {
        let _ = default.apply(b"resetpass");
        let _ = default.apply(&[b">", pw.as_bytes()].concat());
    }
    map.insert(DEFAULT_USER.to_string(), default);
    Ok(map)
}

/// Build the node's table at startup (before it serves anyone); `me` is
/// the node's ID.
pub fn startup(acl: &mut Acl, config: &Config, me: [u8; 40]) -> Result<(), AclLoadError> {
    acl.set_me(me);
    let files = Files::from_config(config);
    let had_state = load_state(acl, &files.state)?;
    let local = local_definitions(config, &files)?;
    let mut changed = false;
    for (name, def) in &local {
        let text = def.describe();
        if acl.sources.get(name) != Some(&text) {
            acl.put_local(name, Some(def.clone()));
            acl.sources.insert(name.clone(), text);
            changed = true;
        }
    }
    // A user that was defined locally and no longer is was deleted by
    // the operator.
    let gone: Vec<String> = acl
        .sources
        .keys()
        .filter(|n| !local.contains_key(*n))
        .cloned()
        .collect();
    for name in gone {
        acl.sources.remove(&name);
        acl.del_user(&name);
        changed = true;
    }
    acl.files = Some(files);
    let only_default = acl.entries().all(|(n, _)| n == DEFAULT_USER);
    if changed && (had_state || !only_default) {
        write_all(acl).map_err(AclLoadError::Write)?;
    }
    let users = acl.users().count();
    if users > 1 {
        tracing::info!(users, "ACL users loaded.");
    }
    Ok(())
}

/// Persist after a change (ACL SETUSER / DELUSER / LOAD, or a table from
/// a peer). A failure is logged: the change is in force, and the next
/// successful write carries it.
pub fn save(acl: &mut Acl) {
    if let Err(e) = write_all(acl) {
        tracing::warn!(error = %e, "Could not persist the ACL users.");
    }
}

/// ACL SAVE: the aclfile only exists to be written when configured.
pub fn write_all(acl: &mut Acl) -> std::io::Result<()> {
    let Some(files) = acl.files.clone() else {
        return Ok(());
    };
    if let Some(path) = &files.aclfile {
        let mut text = String::new();
        let mut sources = BTreeMap::new();
        for (name, u) in acl.users() {
            let rules = u.describe();
            text.push_str(&format!("user {name} {rules}\n"));
            sources.insert(name.to_string(), rules);
        }
        write_atomically(path, text.as_bytes())?;
        // What the file now says is the local definition.
        acl.sources = sources;
    }
    write_atomically(&files.state, state_text(acl).as_bytes())
}

/// ACL LOAD: the aclfile replaces the users (all or nothing); changed
/// users get new versions (the caller sends them to the other nodes).
pub fn load(acl: &mut Acl) -> Result<(), AclLoadError> {
    let Some(path) = acl.files.as_ref().and_then(|f| f.aclfile.clone()) else {
        return Err(AclLoadError::NoAclfile);
    };
    let list = read_aclfile(&path)?.ok_or(AclLoadError::Missing(path))?;
    let mut map: BTreeMap<String, User> = list.into_iter().collect();
    map.entry(DEFAULT_USER.to_string())
        .or_insert_with(User::default_user);
    for (name, u) in &map {
        if acl.get(name) != Some(u) {
            acl.put_local(name, Some(u.clone()));
        }
    }
    let gone: Vec<String> = acl
        .users()
        .map(|(n, _)| n.to_string())
        .filter(|n| !map.contains_key(n))
        .collect();
    for n in gone {
        acl.del_user(&n);
    }
    save(acl);
    Ok(())
}

/// CONFIG SET requirepass: the default user's password, here only (the
/// default user is not replicated), and not persisted: like any CONFIG
/// SET it lasts until restart unless CONFIG REWRITE keeps it.
pub fn set_requirepass(acl: &mut Acl, config: &Config) {
    let mut d = acl
        .get(DEFAULT_USER)
        .cloned()
        .unwrap_or_else(User::default_user);
    let _ = d.apply(b"resetpass");
    match config.requirepass.as_deref().filter(|p| !p.is_empty()) {
        Some(pw) => {
            let _ = d.apply(&[b">", pw.as_bytes()].concat());
        }
        None => {
            let _ = d.apply(b"nopass");
        }
    }
    acl.put_local(DEFAULT_USER, Some(d));
}

pub const NO_ACLFILE: &str = "This Disque instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Disque configuration file set) in order to store users in the Disque configuration.";

fn state_text(acl: &Acl) -> String {
    let mut s = format!("{STATE_HEADER}\nclock {}\n", acl.clock());
    for (name, e) in acl.entries() {
        let origin = String::from_utf8_lossy(&e.origin);
        match &e.user {
            Some(u) => s.push_str(&format!(
                "user {} {origin} {name} {}\n",
                e.version,
                u.describe()
            )),
            None => s.push_str(&format!("deleted {} {origin} {name}\n", e.version)),
        }
    }
    for (name, text) in &acl.sources {
        s.push_str(&format!("source {name} {text}\n"));
    }
    s
}

/// Read the state file into `acl`; false when there is none.
fn load_state(acl: &mut Acl, path: &Path) -> Result<bool, AclLoadError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(source) => {
            return Err(AclLoadError::ReadState {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let bad = |n: usize, why: &str| {
        AclLoadError::Definition(format!("ACL state file {}:{n}: {why}", path.display()))
    };
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [] => {}
            [w, ..] if w.starts_with('#') => {}
            ["clock", v] => acl.raise_clock(v.parse().map_err(|_| bad(n, "bad clock"))?),
            [kind @ ("user" | "deleted"), version, origin, name, rules @ ..] => {
                let version: u64 = version.parse().map_err(|_| bad(n, "bad version"))?;
                let origin: [u8; 40] = origin
                    .as_bytes()
                    .try_into()
                    .map_err(|_| bad(n, "bad node ID"))?;
                if !super::user::valid_name(name.as_bytes()) {
                    return Err(bad(n, "bad user name"));
                }
                let user = if *kind == "user" {
                    Some(
                        User::from_rules(rules.iter().map(|r| r.as_bytes()))
                            .map_err(|(op, e)| bad(n, &format!("'{op}': {}", e.text())))?,
                    )
                } else {
                    None
                };
                acl.put_loaded(
                    name,
                    Entry {
                        user,
                        version,
                        origin,
                    },
                );
            }
            ["source", name, rules @ ..] => {
                acl.sources.insert(name.to_string(), rules.join(" "));
            }
            _ => return Err(bad(n, "unrecognized line")),
        }
    }
    Ok(true)
}

/// The ACL files hold password hashes: new ones are private to the
/// node's user.
fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    crate::config::rewrite::write_atomically(path, data, 0o600)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn user_lines_parse_with_precise_errors() {
        let ok = parse_user_lines(
            [
                (1, "user alice on >secret ~orders:* +@produce"),
                (2, ""),
                (3, "# comment"),
                (4, "user bob off"),
            ],
            "f",
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
        assert!(ok[0].1.password_ok(b"secret"));
        for (line, want) in [
            ("usr alice on", "f:1 should start with user keyword."),
            (
                "user alice +nosuch",
                "f:1: Error in user declaration '+nosuch': Unknown command or category name in ACL",
            ),
        ] {
            assert_eq!(
                parse_user_lines([(1, line)], "f").unwrap_err().to_string(),
                want
            );
        }
        let dup = parse_user_lines([(1, "user a on"), (2, "user a off")], "f").unwrap_err();
        assert!(dup.to_string().contains("Duplicate user 'a'"), "{dup}");
    }

    #[test]
    fn state_round_trips() {
        let dir = crate::support::temp_dir::TempDir::new("acl-state");
        let path = dir.join("nodes.users");
        let mut a = Acl::default();
        a.set_me([b'a'; 40]);
        a.set_user("alice", &[b"on", b">pw", b"~q*", b"+@consume"])
            .unwrap();
        a.set_user("bob", &[b"on"]).unwrap();
        a.del_user("bob");
        a.sources.insert("alice".into(), "on".into());
        a.files = Some(Files {
            aclfile: Some(dir.join("users.acl")),
            state: path.clone(),
        });
        write_all(&mut a).unwrap();
        let mut b = Acl::default();
        assert!(load_state(&mut b, &path).unwrap());
        assert_eq!(b.clock(), a.clock());
        assert_eq!(
            b.entries().collect::<Vec<_>>(),
            a.entries().collect::<Vec<_>>()
        );
        assert_eq!(b.sources, a.sources);
        let acl = std::fs::read_to_string(dir.join("users.acl")).unwrap();
        assert!(acl.contains("user alice on #"), "{acl}");
        assert!(acl.contains("user default on nopass ~* &* +@all"), "{acl}");
        std::fs::write(&path, "clock x\n").unwrap();
        assert!(load_state(&mut Acl::default(), &path).is_err());
    }
}
