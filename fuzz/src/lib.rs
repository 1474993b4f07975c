//! Shared setup for the fuzz targets (not a target itself).

use disque::engine::cluster::parse_nodes_conf;
use disque::engine::Engine;

/// A fixed "now" (ms): 2026-01-01, so expire times in seeds are meaningful.
pub const NOW: u64 = 1_767_225_600_000;

/// Node IDs of the engine's table: index 0 is us, 1..=3 are peers. Seed
/// frames use these as senders so they reach the job-message handlers
/// (frames from unknown senders are mostly ignored).
pub const NODES_CONF: &str = "\
67d78e936368c0fc75d22f83d328e5c163e896b1 127.0.0.1:7711 myself 0 0 connected
8bcfb920b68a04e6d1c7e6aab5ee4878e4d743f4 127.0.0.1:7712 noflags 0 1 connected
ad249f8c9b2240cd45f72fd233bd3d5a42a6709d 127.0.0.1:7713 noflags 0 1 connected
c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00 127.0.0.2:7714 noflags 0 1 connected
";

/// An engine that knows three peers, as after a restart with nodes.conf.
pub fn engine_with_peers() -> Engine {
    let loaded = match parse_nodes_conf(NODES_CONF, NOW) {
        Ok(Some(l)) => l,
        other => panic!("the fixed nodes.conf must parse: {other:?}"),
    };
    let me = loaded.nodes[0].id;
    let mut e = Engine::new(me, 7711, 1, NOW);
    e.restore_nodes(loaded.nodes);
    e
}
