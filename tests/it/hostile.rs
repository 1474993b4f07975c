//! Hostile and slow clients against one real node: a consumer that never
//! reads its replies, a client pipelining a million commands without
//! reading, huge bulk lengths followed by trickled bytes, thousands of
//! idle connections and a connection storm. Each checks that the node's
//! memory stays bounded, that another client keeps its latency, that the
//! offender is closed (with a log line) where a limit applies, and that
//! no job is lost.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::harness::{encode_cmd, wait_until, Client, Reply, ReplyExt, Server, ServerOpts};
use crate::util::env_u64;

const WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(20);
/// What a PING from a well-behaved client may take while others misbehave
/// (generous: the test machine is shared and the build is unoptimised).
const LATENCY: Duration = Duration::from_millis(750);

/// Resident set size of a process in bytes (Linux /proc).
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Time of one PING round trip on a fresh-enough client.
fn ping_time(c: &mut Client) -> Duration {
    let t = Instant::now();
    assert_eq!(c.cmd(&["PING"]), Reply::Status("PONG".into()));
    t.elapsed()
}

/// Raise this process's open-file soft limit to its hard limit (many
/// client sockets); returns the soft limit now in force.
fn raise_nofile() -> u64 {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid rlimit struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
            return 0;
        }
        rl.rlim_cur = rl.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
    }
    rl.rlim_cur
}

/// A consumer that asks for big replies and never reads them is closed
/// by the soft output-buffer limit, with the log line Redis prints; the
/// jobs it peeked at stay queued and another client is not slowed down.
#[test]
fn a_client_that_never_reads_is_closed_by_the_soft_output_limit() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 0 1mb 1"
        ]),
        Reply::Status("OK".into())
    );
    let body = "x".repeat(100 * 1024);
    for _ in 0..20 {
        let r = c.cmd(&["ADDJOB", "big", &body, "0"]);
        assert!(matches!(r, Reply::Status(_)), "{r:?}");
    }
    for _ in 0..10 {
        let r = c.cmd(&["ADDJOB", "work", "task", "0", "RETRY", "1"]);
        assert!(matches!(r, Reply::Status(_)), "{r:?}");
    }
    let mut hog = TcpStream::connect(("127.0.0.1", s.port())).unwrap();
    hog.set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // It takes jobs it will never see...
    hog.write_all(&encode_cmd(&[
        "GETJOB", "NOHANG", "COUNT", "10", "FROM", "work",
    ]))
    .unwrap();
    // ...then asks for 100 x 2 MB of replies: far more than the socket
    // buffers hold.
    let req = encode_cmd(&["QPEEK", "big", "20"]);
    let mut sent = 0;
    for _ in 0..100 {
        if hog.write_all(&req).is_err() {
            break;
        }
        sent += 1;
    }
    assert!(sent > 0);
    assert!(
        s.wait_output("Client closed for overcoming of output buffer limits", WAIT),
        "no log line; output:\n{}",
        s.output()
    );
    // The hog's connection is closed: reading drains what was sent, then EOF.
    hog.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut sink = vec![0u8; 1 << 20];
    let closed = wait_until(WAIT, Duration::ZERO, || {
        matches!(hog.read(&mut sink), Ok(0) | Err(_))
    });
    assert!(closed, "the hog was not disconnected");
    let t = ping_time(&mut c);
    assert!(t < LATENCY, "PING took {t:?}");
    assert_eq!(c.cmd(&["QLEN", "big"]).int(), 20);
    // The jobs the hog took come back with their retry: nothing lost.
    assert!(wait_until(WAIT, POLL, || c.cmd(&["QLEN", "work"]).int() == 10));
}

/// A client pipelining a million commands without reading its replies
/// blocks on TCP, not on the node's memory: the node stops reading from
/// it while its replies wait, other clients keep their latency, and once
/// it reads, every reply is there.
#[test]
fn a_million_pipelined_commands_without_reading_keep_memory_bounded() {
    const N: usize = 1_000_000;
    let s = Server::start_default();
    let pid = s.pid();
    let mut c = s.client();
    let before = rss(pid);
    let stream = TcpStream::connect(("127.0.0.1", s.port())).unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let feeder = std::thread::spawn(move || {
        let one = encode_cmd(&["PING"]);
        let chunk: Vec<u8> = one.repeat(10_000);
        for _ in 0..N / 10_000 {
            writer.write_all(&chunk)?;
        }
        Ok::<(), std::io::Error>(())
    });
    // While nobody reads: memory stays near where it was, PING is quick.
    let mut peak = before;
    let mut worst = Duration::ZERO;
    for _ in 0..20 {
        peak = peak.max(rss(pid));
        worst = worst.max(ping_time(&mut c));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        peak < before + 64 * 1024 * 1024,
        "RSS grew from {before} to {peak} bytes"
    );
    assert!(worst < LATENCY, "PING took {worst:?}");
    // Now read every reply: none lost.
    let mut reader = stream;
    reader
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let expected = N * b"+PONG\r\n".len();
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    while got < expected {
        let n = reader.read(&mut buf).expect("reading the replies");
        assert!(n > 0, "closed after {got} of {expected} bytes");
        assert!(buf[..n].iter().all(|b| b"+PONG\r\n".contains(b)));
        got += n;
    }
    assert_eq!(got, expected);
    feeder.join().unwrap().expect("the feeder's writes");
}

/// Clients announcing a huge bulk argument and then trickling its bytes
/// cost the node what they sent, not what they announced; the others are
/// not slowed down, and the node serves ADDJOB normally meanwhile.
#[test]
fn huge_bulk_lengths_trickled_do_not_reserve_what_they_announce() {
    let s = Server::start_default();
    let pid = s.pid();
    let mut c = s.client();
    let before = rss(pid);
    let mut tricklers: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut t = TcpStream::connect(("127.0.0.1", s.port())).unwrap();
            t.write_all(b"*4\r\n$6\r\nADDJOB\r\n$1\r\nq\r\n$400000000\r\n")
                .unwrap();
            t
        })
        .collect();
    for round in 0..20 {
        for t in &mut tricklers {
            t.write_all(&[b'a'; 100]).unwrap();
        }
        let t = ping_time(&mut c);
        assert!(t < LATENCY, "round {round}: PING took {t:?}");
        let r = c.cmd(&["ADDJOB", "q", "ok", "0"]);
        assert!(matches!(r, Reply::Status(_)), "{r:?}");
        std::thread::sleep(Duration::from_millis(25));
    }
    let after = rss(pid);
    assert!(
        after < before + 100 * 1024 * 1024,
        "RSS grew from {before} to {after} bytes for 20 x 2000 bytes sent"
    );
    drop(tricklers);
    assert!(wait_until(WAIT, POLL, || c.info_int("connected_clients") == 1));
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), 20);
}

/// With `proto-max-bulk-len`, a client announcing a larger bulk is
/// answered Redis's protocol error and closed at once, before any of it is
/// buffered; the others go on.
#[test]
fn proto_max_bulk_len_refuses_a_huge_bulk_at_its_header() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"]),
        Reply::Status("OK".into())
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "proto-max-bulk-len"]).array()[1].text(),
        "1048576"
    );
    assert!(c
        .cmd(&["CONFIG", "SET", "proto-max-bulk-len", "1000"])
        .is_error());
    let mut t = Client::connect(s.port());
    t.send_raw(b"*4\r\n$6\r\nADDJOB\r\n$1\r\nq\r\n$400000000\r\n");
    assert_eq!(
        String::from_utf8_lossy(&t.expect_closed()),
        "-ERR Protocol error: invalid bulk length\r\n"
    );
    assert!(s.wait_output("Closing a client after a protocol error", WAIT));
    // A bulk of exactly the limit is fine.
    let body = vec![b'x'; 1 << 20];
    let r = c.cmd(&[b"ADDJOB".as_slice(), b"q", &body, b"0"]);
    assert!(matches!(r, Reply::Status(_)), "{r:?}");
}

/// Many idle connections cost little memory each; maxclients refuses the
/// one over the limit with Redis's error; PING stays quick throughout.
#[test]
fn thousands_of_idle_connections_and_maxclients() {
    let limit = raise_nofile();
    let n =
        (env_u64("DISQUE_IDLE_CLIENTS", 10_000) as usize).min(limit.saturating_sub(200) as usize);
    let s = Server::start(ServerOpts::with_args(&[
        "--maxclients",
        &(n + 1).to_string(),
    ]));
    let pid = s.pid();
    let mut c = s.client();
    let before = rss(pid);
    let idle: Vec<TcpStream> = (0..n)
        .map(|_| TcpStream::connect(("127.0.0.1", s.port())).unwrap())
        .collect();
    assert!(
        wait_until(WAIT, POLL, || c.info_int("connected_clients")
            == (n + 1) as i64),
        "connected_clients {} of {}",
        c.info_int("connected_clients"),
        n + 1
    );
    let t = ping_time(&mut c);
    assert!(t < LATENCY, "PING took {t:?} with {n} idle clients");
    let per_client = rss(pid).saturating_sub(before) / n as u64;
    assert!(
        per_client < 64 * 1024,
        "{per_client} bytes per idle connection"
    );
    // One more: refused with Redis's error and closed.
    let mut extra = Client::connect(s.port());
    let refused = extra.expect_closed();
    assert_eq!(
        String::from_utf8_lossy(&refused),
        "-ERR max number of clients reached\r\n"
    );
    assert!(s.wait_output("max number of clients reached (maxclients)", WAIT));
    drop(idle);
    assert!(wait_until(WAIT, POLL, || c.info_int("connected_clients") == 1));
}

/// A storm of short connections (connect, one command, close) from many
/// threads: the node keeps answering a steady client quickly, and ends
/// with no connection left behind.
#[test]
fn a_connection_storm_leaves_nothing_behind() {
    raise_nofile();
    let s = Server::start_default();
    let mut c = s.client();
    let port = s.port();
    let stormers: Vec<_> = (0..16)
        .map(|_| {
            std::thread::spawn(move || {
                let mut ok = 0;
                for _ in 0..300 {
                    let Ok(mut t) = TcpStream::connect(("127.0.0.1", port)) else {
                        continue;
                    };
                    let _ = t.set_read_timeout(Some(Duration::from_secs(10)));
                    if t.write_all(&encode_cmd(&["PING"])).is_ok() {
                        let mut b = [0u8; 7];
                        if t.read_exact(&mut b).is_ok() && &b == b"+PONG\r\n" {
                            ok += 1;
                        }
                    }
                }
                ok
            })
        })
        .collect();
    let mut worst = Duration::ZERO;
    while stormers.iter().any(|t| !t.is_finished()) {
        worst = worst.max(ping_time(&mut c));
        std::thread::sleep(Duration::from_millis(10));
    }
    let served: usize = stormers.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(served, 16 * 300);
    assert!(worst < LATENCY, "PING took {worst:?} during the storm");
    assert!(wait_until(WAIT, POLL, || c.info_int("connected_clients") == 1));
}
