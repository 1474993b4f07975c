//! Single-node views of cluster commands and of the LEAVING state
//! (docs/COMMANDS.md#cluster), plus the memory-warning
//! flavour of NOREPL. Multi-node behaviour lives in `cluster`.

use crate::harness::{wait_until, Reply, ReplyExt, Server};
use crate::util::{addjob, assert_bytes, POLL, WAIT};

#[test]
fn cluster_commands_on_a_single_node() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = c.cmd(&["CLUSTER", "MYID"]).text();
    assert_bytes(
        &c.cmd_raw(&["CLUSTER", "NODES"]),
        &crate::util::bulk(format!("{id} :{} myself 0 0 connected\n", s.port()).as_bytes()),
    );
    assert_bytes(
        &c.cmd_raw(&["CLUSTER", "INFO"]),
        &crate::util::bulk(
            b"cluster_state:ok\r\ncluster_known_nodes:1\r\ncluster_reachable_nodes:0\r\ncluster_size:1\r\ncluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\n",
        ),
    );
    assert_bytes(&c.cmd_raw(&["CLUSTER", "LEAVING"]), b"+no\r\n");
    assert_bytes(
        &c.cmd_raw(&["CLUSTER", "LEAVING", "maybe"]),
        b"-ERR Wrong argument for CLUSTER LEAVING. Use 'yes' or 'no'\r\n",
    );
    let wrong = b"-ERR Wrong CLUSTER subcommand or number of arguments\r\n";
    assert_bytes(&c.cmd_raw(&["CLUSTER", "FOO"]), wrong);
    assert_bytes(&c.cmd_raw(&["CLUSTER", "MYID", "x"]), wrong);
    assert_bytes(
        &c.cmd_raw(&["CLUSTER", "MEET", "127.0.0.1", "abc"]),
        b"-ERR Invalid TCP port specified: abc\r\n",
    );
    // Host names are resolved (our extension, tests/it/deploy.rs); what
    // is neither an address nor a name is refused as in Disque.
    assert_bytes(
        &c.cmd_raw(&["CLUSTER", "MEET", "not/a/host", "7711"]),
        b"-ERR Invalid node address specified: not/a/host:7711\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["CLUSTER", "MEET", "127.0.0.1", "55536"]),
        b"-ERR Invalid node address specified: 127.0.0.1:55536\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["CLUSTER", "FORGET", "abc"]),
        b"-ERR Invalid node identifier\r\n",
    );
    let other = "0".repeat(40);
    assert_bytes(
        &c.cmd_raw(&["CLUSTER", "FORGET", &other]),
        format!("-ERR Unknown node {other}\r\n").as_bytes(),
    );
    assert_bytes(
        &c.cmd_raw(&["CLUSTER", "FORGET", &id]),
        b"-ERR I tried hard but I can't forget myself...\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["CLUSTER", "RESET", "MEDIUM"]),
        b"-ERR syntax error\r\n",
    );
    // RESET flushes jobs like DEBUG FLUSHALL; SOFT keeps the node ID.
    addjob(&mut c, "q", "b", &[]);
    assert_bytes(&c.cmd_raw(&["CLUSTER", "RESET", "SOFT"]), b"+OK\r\n");
    assert_eq!(c.info_int("registered_jobs"), 0);
    assert_eq!(c.cmd(&["CLUSTER", "MYID"]).text(), id);
    assert_bytes(&c.cmd_raw(&["CLUSTER", "RESET", "HARD"]), b"+OK\r\n");
    assert_ne!(c.cmd(&["CLUSTER", "MYID"]).text(), id);
}

#[test]
fn leaving_node_refuses_to_block_and_to_keep_jobs() {
    let s = Server::start_default();
    let mut c = s.client();
    let queued = addjob(&mut c, "lq", "b", &[]);
    let mut blocked = s.client();
    blocked.send(&["GETJOB", "FROM", "empty"]);
    assert!(wait_until(WAIT, POLL, || c.info_int("blocked_clients") == 1));

    assert_bytes(&c.cmd_raw(&["CLUSTER", "LEAVING", "yes"]), b"+OK\r\n");
    assert_bytes(&c.cmd_raw(&["CLUSTER", "LEAVING"]), b"+yes\r\n");
    let leaving =
        b"-LEAVING This node is leaving the cluster, please connect to a different one\r\n";
    // Already blocked clients are kicked.
    assert_bytes(&blocked.read_reply_raw(), leaving);
    // Queued jobs are still served; NOHANG still gets a null.
    let r = c.cmd(&["GETJOB", "FROM", "lq"]);
    assert_eq!(r.array()[0].array()[1].text(), queued);
    assert_bytes(&c.cmd_raw(&["GETJOB", "NOHANG", "FROM", "lq"]), b"*-1\r\n");
    assert_bytes(
        &c.cmd_raw(&["GETJOB", "TIMEOUT", "100", "FROM", "lq"]),
        leaving,
    );
    // ADDJOB would need an external copy that nobody can take.
    assert_bytes(
        &c.cmd_raw(&["ADDJOB", "lq", "b", "0"]),
        b"-NOREPL Not enough reachable nodes for the requested replication level, since I'm unable to hold a copy of the message for the following reason: I'm leaving the cluster\r\n",
    );
    // HELLO shows this node with priority 100.
    let r = c.cmd(&["HELLO"]);
    assert_eq!(r.array()[2].array()[3], Reply::Bulk(b"100".to_vec()));
    assert_bytes(&c.cmd_raw(&["CLUSTER", "LEAVING", "no"]), b"+OK\r\n");
    assert_bytes(&c.cmd_raw(&["CLUSTER", "LEAVING"]), b"+no\r\n");
    addjob(&mut c, "lq", "b", &[]);
    assert_bytes(
        &c.cmd_raw(&["GETJOB", "TIMEOUT", "50", "FROM", "none"]),
        b"*-1\r\n",
    );
}

#[test]
fn memory_warning_level_makes_addjob_replicate_externally() {
    let s = Server::start_default();
    let mut c = s.client();
    // Put used memory at about 85% of maxmemory: warning level 1, no OOM.
    // Usage moves a little between measuring and ADDJOB, so retry a few
    // times if it landed outside the 75%..95% band.
    let want = b"-NOREPL Not enough reachable nodes for the requested replication level, since I'm unable to hold a copy of the message for the following reason: I'm out of memory\r\n";
    let mut last = Vec::new();
    for _ in 0..5 {
        let used = c.info_int("used_memory");
        let max = used * 100 / 85;
        assert_bytes(
            &c.cmd_raw(&["CONFIG", "SET", "maxmemory", &max.to_string()]),
            b"+OK\r\n",
        );
        last = c.cmd_raw(&["ADDJOB", "q", "b", "0"]);
        c.cmd(&["CONFIG", "SET", "maxmemory", "1gb"]);
        if last == want {
            break;
        }
        c.cmd(&["DEBUG", "FLUSHALL"]);
    }
    assert_bytes(&last, want);
    addjob(&mut c, "q", "b", &[]);
}
