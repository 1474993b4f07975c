//! Client transport (docs/COMMANDS.md#protocol): inline and multibulk requests,
//! pipelining, protocol errors, QUIT, unknown commands, arity, binary
//! safety and slow readers.

use std::io::Write;
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use crate::harness::{encode_cmd, Reply, ReplyExt, Server, ServerOpts};
use crate::util::{addjob, assert_bytes, bulk, error, wait_qlen};

#[test]
fn inline_ping_with_trailing_empty_line_is_answered_once() {
    let s = Server::start_default();
    let mut c = s.client();
    c.send_raw(b"PING\r\n\n");
    assert_bytes(&c.read_reply_raw(), b"+PONG\r\n");
    // The empty line produced no reply: the next reply belongs to QLEN.
    assert_bytes(&c.cmd_raw(&["QLEN", "x"]), b":0\r\n");
}

#[test]
fn inline_commands_pipeline_and_accept_bare_lf() {
    let s = Server::start_default();
    let mut c = s.client();
    c.send_raw(b"PING\r\nqlen foo\r\n");
    assert_bytes(&c.read_reply_raw(), b"+PONG\r\n");
    assert_bytes(&c.read_reply_raw(), b":0\r\n");
    c.send_raw(b"\r\n\n   \nping hi\n");
    assert_bytes(&c.read_reply_raw(), &bulk(b"hi"));
}

#[test]
fn inline_quoted_arguments() {
    let s = Server::start_default();
    let mut c = s.client();
    c.send_raw(b"PING \"a b\"\r\n");
    assert_bytes(&c.read_reply_raw(), &bulk(b"a b"));
    c.send_raw(b"PING 'it''s'\r\n");
    // Two adjacent single-quoted strings without a space: unbalanced in Redis.
    assert_bytes(
        &c.expect_closed(),
        b"-ERR Protocol error: unbalanced quotes in request\r\n",
    );

    let mut c = s.client();
    c.send_raw(b"PING 'x \"y'\r\n");
    assert_bytes(&c.read_reply_raw(), &bulk(b"x \"y"));
    c.send_raw(b"PING \"\\x41\\n\\t\\\"\"\r\n");
    assert_bytes(&c.read_reply_raw(), &bulk(b"A\n\t\""));
    c.send_raw(b"ADDJOB \"my queue\" \"hello world\" 0\r\n");
    let r = c.read_reply_raw();
    assert!(r.starts_with(b"+D-"), "{}", String::from_utf8_lossy(&r));
    c.send_raw(b"QLEN \"my queue\"\r\n");
    assert_bytes(&c.read_reply_raw(), b":1\r\n");
}

#[test]
fn unbalanced_quotes_close_the_connection() {
    let s = Server::start_default();
    let mut c = s.client();
    c.send_raw(b"PING \"abc\r\n");
    assert_bytes(
        &c.expect_closed(),
        b"-ERR Protocol error: unbalanced quotes in request\r\n",
    );
}

#[test]
fn pipelined_multibulk_replies_come_back_in_order() {
    let s = Server::start_default();
    let mut c = s.client();
    let mut req = Vec::new();
    let n = 1000;
    for i in 0..n {
        req.extend_from_slice(&encode_cmd(&["ADDJOB", "pq", &format!("b{i}"), "0"]));
        req.extend_from_slice(&encode_cmd(&["QLEN", "pq"]));
    }
    req.extend_from_slice(&encode_cmd(&["PING", "end"]));
    c.send_raw(&req);
    for i in 0..n {
        let r = c.read_reply_raw();
        assert!(
            r.starts_with(b"+D-"),
            "reply {i}: {}",
            String::from_utf8_lossy(&r)
        );
        assert_bytes(&c.read_reply_raw(), format!(":{}\r\n", i + 1).as_bytes());
    }
    assert_bytes(&c.read_reply_raw(), &bulk(b"end"));
}

#[test]
fn requests_split_across_writes_are_reassembled() {
    let s = Server::start_default();
    let mut c = s.client();
    let req = encode_cmd(&["PING", "split-me"]);
    for b in &req {
        c.send_raw(std::slice::from_ref(b));
    }
    assert_bytes(&c.read_reply_raw(), &bulk(b"split-me"));
}

fn protocol_error_case(payload: &[u8], expected: &str) {
    let s = Server::start_default();
    let mut c = s.client();
    // A valid command first: the error must not hide earlier replies.
    let mut req = encode_cmd(&["PING"]);
    req.extend_from_slice(payload);
    // The server may close before reading everything; ignore write errors.
    let _ = c.try_send_raw(&req);
    let got = c.expect_closed();
    let mut want = b"+PONG\r\n".to_vec();
    want.extend_from_slice(&error(&format!("ERR Protocol error: {expected}")));
    assert_bytes(&got, &want);
    // The server is still fine for other clients.
    assert_bytes(&s.client().cmd_raw(&["PING"]), b"+PONG\r\n");
}

#[test]
fn protocol_error_invalid_multibulk_length() {
    protocol_error_case(b"*abc\r\n", "invalid multibulk length");
}

#[test]
fn protocol_error_multibulk_count_too_large() {
    protocol_error_case(b"*1048577\r\n", "invalid multibulk length");
}

#[test]
fn protocol_error_invalid_bulk_length() {
    protocol_error_case(b"*1\r\n$abc\r\n", "invalid bulk length");
}

#[test]
fn protocol_error_negative_bulk_length() {
    protocol_error_case(b"*1\r\n$-1\r\n", "invalid bulk length");
}

#[test]
fn protocol_error_bulk_over_512mb() {
    protocol_error_case(b"*1\r\n$536870913\r\n", "invalid bulk length");
}

#[test]
fn protocol_error_expected_dollar() {
    protocol_error_case(b"*1\r\nfoo\r\n", "expected '$', got 'f'");
}

#[test]
fn protocol_error_too_big_mbulk_count_string() {
    let mut p = b"*".to_vec();
    p.extend(std::iter::repeat_n(b'1', 70 * 1024));
    protocol_error_case(&p, "too big mbulk count string");
}

#[test]
fn protocol_error_too_big_bulk_count_string() {
    let mut p = b"*1\r\n$".to_vec();
    p.extend(std::iter::repeat_n(b'1', 70 * 1024));
    protocol_error_case(&p, "too big bulk count string");
}

#[test]
fn protocol_error_too_big_inline_request() {
    let p = vec![b'a'; 70 * 1024];
    protocol_error_case(&p, "too big inline request");
}

#[test]
fn huge_declared_lengths_do_not_allocate() {
    let s = Server::start_default();
    let mut probe = s.client();
    let base = probe.info_int("used_memory");
    // Maximum legal declarations: 1M arguments, then a 512 MB argument.
    let mut a = s.client();
    a.send_raw(b"*1048576\r\n$536870912\r\nabc");
    let mut b = s.client();
    b.send_raw(b"*2\r\n$4\r\nPING\r\n$536870912\r\nxyz");
    // Let the server see the headers (it answers other clients meanwhile).
    assert_bytes(&probe.cmd_raw(&["PING"]), b"+PONG\r\n");
    assert_bytes(&probe.cmd_raw(&["PING"]), b"+PONG\r\n");
    let used = probe.info_int("used_memory");
    assert!(
        used < base + 64 * 1024 * 1024,
        "used_memory grew from {base} to {used} for declared-but-unsent data"
    );
    drop(a);
    drop(b);
    assert_bytes(&probe.cmd_raw(&["PING"]), b"+PONG\r\n");
}

#[test]
fn quit_replies_ok_and_closes() {
    let s = Server::start_default();
    let mut c = s.client();
    c.send_raw(&encode_cmd(&["quit"]));
    assert_bytes(&c.expect_closed(), b"+OK\r\n");
    let mut c = s.client();
    // QUIT with arguments is still QUIT; later pipelined commands are not run.
    let mut req = encode_cmd(&["QUIT", "now"]);
    req.extend_from_slice(&encode_cmd(&["ADDJOB", "q", "b", "0"]));
    let _ = c.try_send_raw(&req);
    assert_bytes(&c.expect_closed(), b"+OK\r\n");
    assert_bytes(&s.client().cmd_raw(&["QLEN", "q"]), b":0\r\n");
}

#[test]
fn unknown_command_keeps_the_connection_open() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(
        &c.cmd_raw(&["FooBar", "a", "b"]),
        b"-ERR unknown command 'FooBar'\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["SET", "k", "v"]),
        b"-ERR unknown command 'SET'\r\n",
    );
    assert_bytes(&c.cmd_raw(&["PING"]), b"+PONG\r\n");
}

#[test]
fn arity_errors_use_the_lowercase_name() {
    let s = Server::start_default();
    let mut c = s.client();
    let cases: &[(&[&str], &str)] = &[
        (&["QLEN"], "qlen"),
        (&["Qlen", "a", "b"], "qlen"),
        (&["SHOW"], "show"),
        (&["ADDJOB", "q", "b"], "addjob"),
        (&["GETJOB"], "getjob"),
        (&["QPEEK", "q"], "qpeek"),
        (&["QSTAT"], "qstat"),
        (&["WORKING"], "working"),
        (&["PAUSE", "q"], "pause"),
        (&["PING", "a", "b"], "ping"),
        (&["TIME", "x"], "time"),
        (&["AUTH"], "auth"),
        (&["MONITOR", "x"], "monitor"),
        (&["CONFIG"], "config"),
        (&["DEBUG"], "debug"),
        (&["LOADJOB"], "loadjob"),
        (&["BGREWRITEAOF", "x"], "bgrewriteaof"),
    ];
    for (args, name) in cases {
        assert_bytes(
            &c.cmd_raw(args),
            format!("-ERR wrong number of arguments for '{name}' command\r\n").as_bytes(),
        );
    }
    // Arity -1 commands accept no arguments.
    for cmd in ["ACKJOB", "FASTACK", "DELJOB", "ENQUEUE", "NACK", "DEQUEUE"] {
        assert_bytes(&c.cmd_raw(&[cmd]), b":0\r\n");
    }
    assert_bytes(&c.cmd_raw(&["PING"]), b"+PONG\r\n");
}

#[test]
fn queue_names_and_bodies_are_binary_safe() {
    let s = Server::start_default();
    let mut c = s.client();
    let queue: &[u8] = b"q\0\r\nname \xff";
    let body: &[u8] = b"\0body\r\n*1\r\n$4\r\nPING\r\n\xfe";
    let r = c.cmd(&[b"ADDJOB".as_ref(), queue, body, b"0"]);
    let id = r.text();
    assert_bytes(&c.cmd_raw(&[b"QLEN".as_ref(), queue]), b":1\r\n");
    assert_bytes(&c.cmd_raw(&[b"QLEN".as_ref(), b"q"]), b":0\r\n");
    let raw = c.cmd_raw(&[b"GETJOB".as_ref(), b"FROM", queue]);
    let mut want = b"*1\r\n*3\r\n".to_vec();
    want.extend_from_slice(&bulk(queue));
    want.extend_from_slice(&bulk(id.as_bytes()));
    want.extend_from_slice(&bulk(body));
    assert_bytes(&raw, &want);
    let show = c.cmd(&["SHOW", &id]);
    assert_eq!(
        show.field("body"),
        &crate::harness::Reply::Bulk(body.to_vec())
    );
    assert_eq!(
        show.field("queue"),
        &crate::harness::Reply::Bulk(queue.to_vec())
    );
}

#[test]
fn large_body_round_trips() {
    let s = Server::start_default();
    let mut c = s.client();
    let body: Vec<u8> = (0..3 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let id = c.cmd(&[b"ADDJOB".as_ref(), b"big", &body, b"0"]).text();
    let r = c.cmd(&["GETJOB", "FROM", "big"]);
    let job = r.array()[0].array();
    assert_eq!(job[1].text(), id);
    assert!(job[2] == crate::harness::Reply::Bulk(body), "body differs");
}

/// A client that pipelines requests with big replies and never reads
/// them must not make the server buffer without bound, and other clients
/// keep being served meanwhile.
#[test]
fn client_that_never_reads_does_not_grow_server_memory() {
    let s = Server::start_default();
    let mut c = s.client();
    let body = vec![b'x'; 256 * 1024];
    c.cmd(&[b"ADDJOB".as_ref(), b"big", &body, b"0"]);
    let base = c.info_int("used_memory");

    let port = s.port();
    // 4000 QPEEKs = 1 GB of replies if the server buffered them all.
    let writer = thread::spawn(move || {
        let mut sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
        sock.set_write_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let one = encode_cmd(&["QPEEK", "big", "1"]);
        let mut sent = 0usize;
        for _ in 0..4000 {
            if sock.write_all(&one).is_err() {
                break; // the server stopped reading us: good
            }
            sent += 1;
        }
        (sock, sent)
    });
    let (sock, _sent) = writer.join().unwrap();

    // Other clients are still served promptly.
    let start = Instant::now();
    for _ in 0..20 {
        assert_bytes(&c.cmd_raw(&["PING"]), b"+PONG\r\n");
    }
    assert!(start.elapsed() < Duration::from_secs(3));
    assert!(wait_qlen(&mut c, "big", 1));
    // Let the server get as far as it can with the silent client: until
    // the processed-commands counter stops moving.
    let mut last = -1;
    assert!(crate::harness::wait_until(
        Duration::from_secs(10),
        Duration::from_millis(200),
        || {
            let now = c.info_int("total_commands_processed");
            // Our own INFO call counts as one command.
            let settled = now == last + 1;
            last = now;
            settled
        }
    ));
    let peak = c.info_int("used_memory_peak");
    assert!(
        peak < base + 16 * 1024 * 1024,
        "used_memory peaked at {peak} (base {base}) for a client that does not read"
    );
    drop(sock);
    assert_bytes(&c.cmd_raw(&["PING"]), b"+PONG\r\n");
    // The job is untouched by all this.
    let id = addjob(&mut c, "other", "x", &[]);
    assert!(!id.is_empty());
}

#[test]
fn empty_and_null_multibulks_are_ignored() {
    let s = Server::start_default();
    let mut c = s.client();
    c.send_raw(b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n");
    assert_bytes(&c.read_reply_raw(), b"+PONG\r\n");
    c.send_raw(b"nosuch  arg\r\n");
    assert_bytes(&c.read_reply_raw(), b"-ERR unknown command 'nosuch'\r\n");
    c.send_raw(b"QUIT\r\n");
    assert_bytes(&c.expect_closed(), b"+OK\r\n");
}

/// `unixsocket` serves the same protocol over a Unix domain socket.
#[test]
fn unix_socket_serves_clients() {
    use std::io::{Read, Write};
    let dir = std::env::temp_dir().join(format!("disque-unix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("disque.sock");
    let sock_s = sock.display().to_string();
    let s = Server::start(ServerOpts::with_args(&[
        "--unixsocket",
        &sock_s,
        "--unixsocketperm",
        "700",
    ]));
    let mut u = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    u.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    u.write_all(b"*4\r\n$6\r\nADDJOB\r\n$1\r\nq\r\n$4\r\nbody\r\n$1\r\n0\r\n")
        .unwrap();
    let mut buf = [0u8; 43];
    u.read_exact(&mut buf).unwrap();
    assert_eq!(buf[0], b'+', "{}", String::from_utf8_lossy(&buf));
    // Same node as the TCP port.
    let mut c = s.client();
    assert_eq!(c.cmd(&["QLEN", "q"]), Reply::Int(1));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
