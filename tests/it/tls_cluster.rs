//! The cluster bus over mutual TLS (`tls-cluster yes`): a 3-node cluster
//! replicates, federates and propagates acks; peers whose certificate comes
//! from another CA, or that speak plain text, never join and are logged.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::harness::{wait_until, Client, Reply, ReplyExt, Server, ServerOpts};
use crate::pki::{tls_args, Ca, Pair};
use crate::tls::TempDir;

const WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(50);

fn tls_bus_node(ca: &Ca, pair: &Pair) -> Server {
    let mut args: Vec<String> = ["--cluster-node-timeout", "2000", "--tls-cluster", "yes"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(tls_args(&ca.cert, pair));
    Server::start(ServerOpts {
        args,
        ..Default::default()
    })
}

fn reachable(c: &mut Client) -> i64 {
    let text = c.cmd(&["CLUSTER", "INFO"]).text();
    text.lines()
        .find_map(|l| l.trim_end().strip_prefix("cluster_reachable_nodes:"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

fn meet(from: &Server, to: &Server) {
    let r = from
        .client()
        .cmd(&["CLUSTER", "MEET", "127.0.0.1", &to.port().to_string()]);
    assert_eq!(r, Reply::Status("OK".into()));
}

fn wait_mesh(nodes: &[&Server]) {
    for s in nodes {
        let mut c = s.client();
        assert!(
            wait_until(WAIT, POLL, || reachable(&mut c) == nodes.len() as i64 - 1),
            "node {} never reached its peers: {}",
            s.port(),
            c.cmd(&["CLUSTER", "NODES"]).text()
        );
    }
}

fn id_of(r: Reply) -> String {
    match r {
        Reply::Status(id) => id,
        other => panic!("ADDJOB failed: {other:?}"),
    }
}

#[test]
fn three_nodes_over_mutual_tls_replicate_federate_and_ack() {
    let d = TempDir::new("tls-bus");
    let ca = Ca::new(&d.0, "cluster-ca");
    let nodes: Vec<Server> = (0..3)
        .map(|i| tls_bus_node(&ca, &ca.issue(&format!("node{i}"))))
        .collect();
    meet(&nodes[0], &nodes[1]);
    meet(&nodes[0], &nodes[2]);
    wait_mesh(&nodes.iter().collect::<Vec<_>>());
    // REPLICATE 3: every node holds a copy.
    let mut c0 = nodes[0].client();
    let id = id_of(c0.cmd(&[
        "ADDJOB",
        "q",
        "over mtls",
        "5000",
        "REPLICATE",
        "3",
        "RETRY",
        "60",
    ]));
    for s in &nodes[1..] {
        let r = s.client().cmd(&["SHOW", &id]);
        assert_eq!(r.field("body").text(), "over mtls");
        assert_eq!(r.field("nodes-delivered").array().len(), 3);
    }
    // The ack given on another node reaches every holder, which then
    // forgets the job.
    assert_eq!(nodes[2].client().cmd(&["ACKJOB", &id]), Reply::Int(1));
    for s in &nodes {
        let mut c = s.client();
        assert!(
            wait_until(WAIT, POLL, || c.cmd(&["SHOW", &id]).is_nil()),
            "node {} still has the acked job",
            s.port()
        );
    }
    // Federation: jobs produced on nodes 1 and 2 reach a consumer on node 0.
    let mut produced = HashSet::new();
    for s in &nodes[1..] {
        let mut c = s.client();
        for k in 0..3 {
            produced.insert(id_of(c.cmd(&[
                "ADDJOB",
                "fq",
                &format!("j{k}"),
                "0",
                "REPLICATE",
                "1",
            ])));
        }
    }
    let mut got = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < produced.len() && Instant::now() < deadline {
        let r = c0.cmd(&["GETJOB", "TIMEOUT", "2000", "COUNT", "10", "FROM", "fq"]);
        if let Some(jobs) = r.as_array() {
            for j in jobs {
                let id = j.array()[1].text();
                c0.cmd(&["ACKJOB", &id]);
                got.insert(id);
            }
        }
    }
    assert_eq!(got, produced);
}

#[test]
fn peers_without_a_cluster_ca_certificate_are_refused_and_logged() {
    let d = TempDir::new("tls-bus");
    let ca = Ca::new(&d.0, "cluster-ca");
    let other = Ca::new(&d.0.join("other"), "other-ca");
    let a = tls_bus_node(&ca, &ca.issue("a"));
    let b = tls_bus_node(&ca, &ca.issue("b"));
    meet(&a, &b);
    wait_mesh(&[&a, &b]);
    // A node whose certificate (and CA) is another one, and a node with a
    // plain-text bus: both try to join, from both directions.
    let intruder = tls_bus_node(&other, &other.issue("intruder"));
    let plain = Server::start(ServerOpts::with_args(&["--cluster-node-timeout", "2000"]));
    for outsider in [&intruder, &plain] {
        meet(&a, outsider);
        meet(outsider, &b);
    }
    // The attempts are refused during the handshake and logged by the
    // accepting side, with the peer address.
    assert!(
        wait_until(WAIT, POLL, || {
            let out = a.output() + &b.output();
            out.matches("Refused a bus connection: TLS handshake failed")
                .count()
                >= 2
        }),
        "no refusal logged:\n{}\n{}",
        a.output(),
        b.output()
    );
    assert!(wait_until(Duration::from_secs(10), POLL, || {
        a.output().contains("peer=127.0.0.1:") || b.output().contains("peer=127.0.0.1:")
    }));
    // Bounded negative check: nobody got in within several handshakes.
    let joined = wait_until(Duration::from_secs(4), POLL, || {
        reachable(&mut a.client()) > 1
            || reachable(&mut intruder.client()) > 0
            || reachable(&mut plain.client()) > 0
    });
    assert!(!joined, "{}", a.client().cmd(&["CLUSTER", "NODES"]).text());
    assert_eq!(reachable(&mut b.client()), 1);
}
