//! The import graph between the crate's top-level modules, checked: it
//! must have no cycle, and the layers of docs/ARCHITECTURE.md must hold
//! (the engine never reaches up into the node, the commands or the shell).
//! And the engine stays wire-free and clock-free: no file under
//! `src/engine/` (its tests and simulation included) names the RESP
//! replies, the async runtime or a clock. Read from the source text, so a
//! new path is checked the moment it is written.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Folders that only group modules: their members are the graph's nodes.
const GROUPS: &[&str] = &["domain", "observe", "os", "protocol", "support"];

/// The graph node a path names: the top-level module, or `group::member`
/// for a grouping folder.
fn node_of<'a>(mut segments: impl Iterator<Item = &'a str>) -> String {
    let first = segments.next().unwrap_or_default().trim_end_matches(".rs");
    if GROUPS.contains(&first) {
        match segments.next().map(|s| s.trim_end_matches(".rs")) {
            Some(m) if m != "mod" && !m.is_empty() => return format!("{first}::{m}"),
            _ => {}
        }
    }
    first.to_string()
}

/// `module -> modules it names as crate::<m>`, for every file under src/
/// except the binaries.
fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut g = Graph::new();
    for f in files {
        let Ok(rel) = f.strip_prefix(&src) else {
            continue;
        };
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let module = node_of(parts.iter().map(String::as_str));
        if module == "bin" || module == "main" || module == "lib" || module == "layering" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        let deps = g.entry(module.clone()).or_default();
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            let path: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let name = node_of(path.split("::"));
            if !name.is_empty() && name != module {
                deps.insert(name);
            }
        }
    }
    g
}

/// A cycle as a path of module names, if there is one.
fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        n: &str,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(2) => return None,
            Some(1) => {
                let start = path.iter().position(|p| p == n).unwrap_or(0);
                let mut c = path[start..].to_vec();
                c.push(n.to_string());
                return Some(c);
            }
            _ => {}
        }
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(g, d, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if let Some(c) = visit(g, n, &mut state, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

#[test]
fn module_graph_has_no_cycle() {
    let g = graph();
    assert!(
        g.contains_key("engine") && g.contains_key("server") && g.contains_key("protocol::resp"),
        "{g:?}"
    );
    if let Some(c) = find_cycle(&g) {
        panic!("import cycle: {}", c.join(" -> "));
    }
}

#[test]
fn lower_layers_never_reach_up() {
    let g = graph();
    // Each module and what it must never import.
    let rules: &[(&str, &[&str])] = &[
        (
            "engine",
            &[
                "node",
                "commands",
                "server",
                "aof",
                "config",
                "protocol::resp",
                "support::clock",
                "spill",
            ],
        ),
        ("aof", &["node", "commands", "server"]),
        ("spill", &["node", "commands", "server", "aof", "config"]),
        ("spill", &["node", "commands", "server", "aof", "config"]),
        ("node", &["commands", "server"]),
        ("acl", &["node", "commands", "server", "aof"]),
        ("commands", &["server"]),
        ("protocol::bus", &["engine", "node", "commands", "server"]),
        (
            "protocol::resp",
            &["engine", "node", "commands", "server", "errors"],
        ),
        (
            "domain::job",
            &["engine", "node", "commands", "server", "aof"],
        ),
        (
            "domain::queue",
            &["engine", "node", "commands", "server", "aof"],
        ),
        ("config", &["engine", "node", "commands", "server", "aof"]),
    ];
    for (m, forbidden) in rules {
        for f in *forbidden {
            let deps = g.get(*m).cloned().unwrap_or_default();
            assert!(!deps.contains(*f), "{m} must not import {f}: {deps:?}");
        }
    }
}

#[test]
fn finds_a_planted_cycle() {
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(
        find_cycle(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    g.entry("c".into()).or_default().clear();
    assert_eq!(find_cycle(&g), None);
}

/// What no engine file may name: replies are encoded by the commands,
/// blocked clients are answered by the shell (the engine hands out domain
/// wakes), and time comes in as `now`.
const ENGINE_FORBIDDEN: &[&str] = &[
    "crate::protocol::resp",
    "tokio",
    "Instant::now",
    "SystemTime::now",
];

/// The forbidden names a source text contains.
fn engine_violations(text: &str) -> Vec<&'static str> {
    ENGINE_FORBIDDEN
        .iter()
        .copied()
        .filter(|needle| text.contains(needle))
        .collect()
}

#[test]
fn engine_names_no_wire_runtime_or_clock() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join("engine");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    assert!(files.len() > 10, "engine sources not found in {dir:?}");
    let mut found = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for needle in engine_violations(&text) {
            found.push(format!("{} names {needle}", f.display()));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn finds_a_planted_engine_violation() {
    assert_eq!(
        engine_violations("use tokio::sync::oneshot;\nlet t = std::time::Instant::now();"),
        vec!["tokio", "Instant::now"]
    );
    assert_eq!(
        engine_violations("fn f() -> crate::protocol::resp::Reply { SystemTime::now() }"),
        vec!["crate::protocol::resp", "SystemTime::now"]
    );
    assert!(engine_violations("pub fn tick(&mut self, now: u64) {}").is_empty());
}
