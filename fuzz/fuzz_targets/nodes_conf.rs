//! nodes.conf parsing (`engine::cluster::parse_nodes_conf`, what
//! `server::nodes_conf::NodesConf::open` runs on the file's text) and the
//! restore into an engine that startup does.
//!
//! Property: a table that loads is saved (`take_nodes_conf`) as text that
//! loads again to the same nodes, and saving that gives the same text.
#![no_main]

use disque::engine::cluster::parse_nodes_conf;
use disque::engine::Engine;
use disque_fuzz_common::NOW;
use libfuzzer_sys::fuzz_target;

fn restore_and_save(l: disque::engine::cluster::Loaded) -> Option<String> {
    let me = l.nodes[0].id;
    let mut e = Engine::new(me, 7711, 1, NOW);
    e.restore_nodes(l.nodes);
    e.request_nodes_save();
    e.tick(NOW + 10);
    let _ = e.take_effects();
    e.take_nodes_conf()
}

fuzz_target!(|data: &[u8]| {
    // `NodesConf::open` reads the file with read_to_string: non-UTF-8 is
    // an error before parsing.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(Some(loaded)) = parse_nodes_conf(text, NOW) else {
        return;
    };
    let Some(saved) = restore_and_save(loaded) else {
        return;
    };
    let again = match parse_nodes_conf(&saved, NOW) {
        Ok(Some(l)) => l,
        other => panic!("saved nodes.conf does not load: {other:?}\n{saved}"),
    };
    let resaved = restore_and_save(again).unwrap_or_default();
    assert_eq!(saved, resaved, "nodes.conf not stable through save/load");
});
