//! The HTTP endpoint (`--http-port`): exact counter moves in /metrics
//! under known workloads, a full parse of the exposition, the bounded
//! per-queue series, INFO jobstats, basic auth and the CSRF header,
//! /readyz (and the same answer from `--healthcheck`) across joining and
//! losing the only peer, the dashboard's JSON actions and cluster view
//! (every node's queue totals), the cluster metrics (replication latency,
//! federation imports, reconnects per peer), JSON log lines naming the
//! client or bus link they concern, and the Grafana dashboard querying
//! only exported names, and the sampled history behind the charts.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::harness::{wait_until, Reply, ReplyExt, Server, ServerOpts};
use crate::util::{addjob, POLL, WAIT};

/// One HTTP/1.1 exchange on a fresh connection: (status, body).
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the HTTP port");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.set_write_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).expect("send request");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read response");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad HTTP response: {text}"));
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    (
        status,
        if chunked {
            dechunk(rest)
        } else {
            rest.to_string()
        },
    )
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

pub(crate) fn get(port: u16, path: &str) -> (u16, String) {
    http(port, "GET", path, &[], "")
}

pub(crate) fn http_node(extra: &[&str]) -> Server {
    let mut args = vec!["--http-port", "auto", "--http-bind", "127.0.0.1"];
    args.extend_from_slice(extra);
    Server::start(ServerOpts::with_args(&args))
}

/// The whole exposition, parsed by a Prometheus text-format parser.
pub(crate) fn scrape(port: u16) -> prometheus_parse::Scrape {
    let (status, body) = get(port, "/metrics");
    assert_eq!(status, 200, "{body}");
    let lines = body.lines().map(|l| Ok(l.to_string()));
    prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text format")
}

/// Value of the sample `name` whose labels include `labels`.
pub(crate) fn value(
    s: &prometheus_parse::Scrape,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    s.samples
        .iter()
        .filter(|x| x.metric == name)
        .find(|x| labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .map(|x| match &x.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => *v,
            prometheus_parse::Value::Histogram(h) => h.last().map_or(0.0, |b| b.count),
            prometheus_parse::Value::Summary(_) => f64::NAN,
        })
}

fn counter(s: &prometheus_parse::Scrape, name: &str) -> f64 {
    value(s, name, &[]).unwrap_or_else(|| panic!("no sample {name}"))
}

fn get_ids(c: &mut crate::harness::Client, queue: &str, n: usize) -> Vec<String> {
    let r = c.cmd(&["GETJOB", "NOHANG", "COUNT", &n.to_string(), "FROM", queue]);
    r.array().iter().map(|j| j.array()[1].text()).collect()
}

#[test]
fn http_endpoint_is_off_by_default() {
    let s = Server::start_default();
    assert!(!s.has_http(), "{}", s.output());
}

#[test]
fn job_counters_move_exactly_with_the_workload() {
    let s = http_node(&[]);
    let port = s.http_port();
    let before = scrape(port);
    for name in [
        "disque_jobs_added_total",
        "disque_jobs_delivered_total",
        "disque_jobs_acked_total",
        "disque_jobs_nacked_total",
    ] {
        assert_eq!(counter(&before, name), 0.0, "{name}");
    }
    let mut c = s.client();
    for i in 0..100 {
        addjob(&mut c, "work", &format!("job{i}"), &[]);
    }
    let after_add = scrape(port);
    assert_eq!(counter(&after_add, "disque_jobs_added_total"), 100.0);
    assert_eq!(
        value(&after_add, "disque_queue_length", &[("queue", "work")]),
        Some(100.0)
    );
    assert_eq!(
        value(
            &after_add,
            "disque_queue_jobs_in_total",
            &[("queue", "work")]
        ),
        Some(100.0)
    );
    assert_eq!(counter(&after_add, "disque_queued_jobs"), 100.0);

    let got = get_ids(&mut c, "work", 50);
    assert_eq!(got.len(), 50);
    let mut ack = vec!["ACKJOB"];
    ack.extend(got[..30].iter().map(String::as_str));
    assert_eq!(c.cmd(&ack), Reply::Int(30));
    let mut nack = vec!["NACK"];
    nack.extend(got[30..40].iter().map(String::as_str));
    assert_eq!(c.cmd(&nack), Reply::Int(10));

    let m = scrape(port);
    assert_eq!(counter(&m, "disque_jobs_added_total"), 100.0);
    assert_eq!(counter(&m, "disque_jobs_delivered_total"), 50.0);
    assert_eq!(counter(&m, "disque_jobs_acked_total"), 30.0);
    assert_eq!(counter(&m, "disque_jobs_nacked_total"), 10.0);
    assert_eq!(
        value(&m, "disque_queue_length", &[("queue", "work")]),
        Some(60.0)
    );
    assert_eq!(
        value(&m, "disque_queue_jobs_out_total", &[("queue", "work")]),
        Some(50.0)
    );
    // Every command ran once per call: the histogram counts them.
    assert_eq!(
        value(
            &m,
            "disque_command_duration_seconds",
            &[("command", "addjob")]
        ),
        Some(100.0)
    );
    assert_eq!(
        value(
            &m,
            "disque_command_duration_seconds",
            &[("command", "ackjob")]
        ),
        Some(1.0)
    );
    // The oldest queued job has an age, and nothing is paused.
    assert!(value(
        &m,
        "disque_queue_oldest_job_age_seconds",
        &[("queue", "work")]
    )
    .is_some());
    assert_eq!(
        value(
            &m,
            "disque_queue_paused",
            &[("queue", "work"), ("direction", "in")]
        ),
        Some(0.0)
    );
    // Every family carries HELP text.
    for sample in &m.samples {
        let family = sample
            .metric
            .trim_end_matches("_bucket")
            .trim_end_matches("_count")
            .trim_end_matches("_sum");
        assert!(
            m.docs.contains_key(family) || m.docs.contains_key(&sample.metric),
            "no HELP for {}",
            sample.metric
        );
    }

    // The same totals in INFO jobstats, which the default INFO leaves out.
    let info = c.cmd(&["INFO", "jobstats"]).text();
    for line in [
        "jobs_added:100",
        "jobs_delivered:50",
        "jobs_acked:30",
        "jobs_nacked:10",
    ] {
        assert!(info.contains(&format!("{line}\r\n")), "{info}");
    }
    assert!(!c.cmd(&["INFO"]).text().contains("jobs_added"));
    assert!(c.cmd(&["INFO", "all"]).text().contains("# Jobstats"));
}

#[test]
fn retry_requeues_and_ttl_expiry_are_counted() {
    let s = http_node(&[]);
    let mut c = s.client();
    addjob(&mut c, "r", "x", &["RETRY", "1"]);
    addjob(
        &mut c,
        "t",
        "y",
        &["TTL", "1", "RETRY", "0", "REPLICATE", "1"],
    );
    assert_eq!(get_ids(&mut c, "r", 1).len(), 1);
    assert!(wait_until(WAIT, POLL, || {
        let m = scrape(s.http_port());
        counter(&m, "disque_jobs_requeued_total") >= 1.0
            && counter(&m, "disque_jobs_expired_total") == 1.0
    }));
    let info = c.cmd(&["INFO", "jobstats"]).text();
    assert!(info.contains("jobs_expired:1\r\n"), "{info}");
}

#[test]
fn per_queue_series_are_bounded_to_the_busiest() {
    let s = http_node(&["--metrics-max-queues", "2"]);
    let mut c = s.client();
    for (q, n) in [("a", 1), ("b", 5), ("c", 3), ("d", 2), ("e", 4)] {
        for _ in 0..n {
            addjob(&mut c, q, "x", &[]);
        }
    }
    let m = scrape(s.http_port());
    let mut queues: Vec<String> = m
        .samples
        .iter()
        .filter(|x| x.metric == "disque_queue_length")
        .filter_map(|x| x.labels.get("queue").map(str::to_string))
        .collect();
    queues.sort();
    assert_eq!(queues, vec!["b", "e"]);
    assert_eq!(counter(&m, "disque_queue_series_omitted"), 3.0);
    assert_eq!(counter(&m, "disque_queues"), 5.0);
    assert_eq!(counter(&m, "disque_queued_jobs"), 15.0);
}

#[test]
fn requirepass_protects_everything_but_the_probes() {
    let s = http_node(&["--requirepass", "s3cret"]);
    let p = s.http_port();
    assert_eq!(get(p, "/healthz"), (200, "ok\n".to_string()));
    assert_eq!(get(p, "/readyz").0, 200);
    for path in ["/metrics", "/", "/api/overview", "/api/queues"] {
        assert_eq!(get(p, path).0, 401, "{path}");
    }
    // base64("default:s3cret") and base64("admin:s3cret").
    let good = [("Authorization", "Basic ZGVmYXVsdDpzM2NyZXQ=")];
    let wrong_user = [("Authorization", "Basic YWRtaW46czNjcmV0")];
    assert_eq!(http(p, "GET", "/metrics", &wrong_user, "").0, 401);
    let (st, body) = http(p, "GET", "/metrics", &good, "");
    assert_eq!(st, 200);
    assert!(body.contains("disque_jobs_added_total"));
    // A POST without the action header is refused even with credentials.
    let pause = r#"{"mode":"in"}"#;
    let json = ("Content-Type", "application/json");
    assert_eq!(
        http(p, "POST", "/api/queues/q/pause", &[good[0], json], pause).0,
        403
    );
    let with_action = [good[0], json, ("X-Disque-Action", "1")];
    assert_eq!(
        http(p, "POST", "/api/queues/q/pause", &with_action, pause).0,
        200
    );
    assert_eq!(
        http(
            p,
            "POST",
            "/api/queues/q/pause",
            &[json, ("X-Disque-Action", "1")],
            pause
        )
        .0,
        401
    );
}

#[test]
fn dashboard_actions_pause_queues_and_delete_jobs() {
    let s = http_node(&[]);
    let p = s.http_port();
    let mut c = s.client();
    let id = addjob(&mut c, "jobs", "payload", &[]);
    let (st, page) = get(p, "/");
    assert_eq!(st, 200);
    assert!(page.contains("<title>Disque"), "{page}");
    assert_eq!(get(p, "/assets/app.js").0, 200);
    assert_eq!(get(p, "/assets/nope.js").0, 404);

    let (st, list) = get(p, "/api/queues");
    assert_eq!(st, 200);
    let list: serde_json::Value = serde_json::from_str(&list).expect("json");
    assert_eq!(list["total"], 1);
    assert_eq!(list["queues"][0]["name"], "jobs");
    assert_eq!(list["queues"][0]["len"], 1);

    let headers = [
        ("Content-Type", "application/json"),
        ("X-Disque-Action", "1"),
    ];
    let (st, _) = http(
        p,
        "POST",
        "/api/queues/jobs/pause",
        &headers,
        r#"{"mode":"in"}"#,
    );
    assert_eq!(st, 200);
    match c.cmd(&["ADDJOB", "jobs", "x", "0"]) {
        Reply::Error(e) => assert!(e.starts_with("PAUSED"), "{e}"),
        other => panic!("ADDJOB on a paused queue: {other:?}"),
    }
    let (st, body) = http(
        p,
        "POST",
        "/api/queues/jobs/pause",
        &headers,
        r#"{"mode":"bogus"}"#,
    );
    assert_eq!(st, 400, "{body}");
    http(
        p,
        "POST",
        "/api/queues/jobs/pause",
        &headers,
        r#"{"mode":"none"}"#,
    );
    addjob(&mut c, "jobs", "x", &[]);

    let (st, jobs) = get(p, "/api/queues/jobs/jobs?count=10");
    assert_eq!(st, 200, "{jobs}");
    assert!(jobs.contains(&id), "{jobs}");
    // Job IDs may hold '/' and '+': the dashboard percent-encodes them.
    let path_id = id.replace('+', "%2B").replace('/', "%2F");
    let (st, shown) = get(p, &format!("/api/jobs/{path_id}"));
    assert_eq!(st, 200, "{shown}");
    let shown: serde_json::Value = serde_json::from_str(&shown).expect("json");
    assert_eq!(shown["result"]["queue"], "jobs");
    let (st, _) = http(
        p,
        "POST",
        &format!("/api/jobs/{path_id}/delete"),
        &headers,
        "",
    );
    assert_eq!(st, 200);
    assert!(c.cmd(&["SHOW", &id]).is_nil());
    assert_eq!(get(p, "/api/jobs/not-an-id").0, 400);
}

#[test]
fn readyz_needs_a_reachable_peer_once_in_a_cluster() {
    let a = http_node(&["--cluster-node-timeout", "500"]);
    let mut b = Server::start(ServerOpts::with_args(&["--cluster-node-timeout", "500"]));
    assert_eq!(get(a.http_port(), "/readyz").0, 200);
    let mut c = a.client();
    c.cmd(&["CLUSTER", "MEET", "127.0.0.1", &b.port().to_string()]);
    assert!(wait_until(WAIT, POLL, || {
        let m = scrape(a.http_port());
        value(&m, "disque_cluster_reachable_peers", &[]) == Some(1.0)
            && m.samples.iter().any(|x| {
                x.metric == "disque_bus_link_up"
                    && matches!(x.value, prometheus_parse::Value::Gauge(v) if v == 1.0)
            })
    }));
    assert_eq!(get(a.http_port(), "/readyz").0, 200);
    let m = scrape(a.http_port());
    assert_eq!(
        value(&m, "disque_bus_messages_sent_total", &[("type", "meet")]),
        Some(1.0)
    );
    assert!(value(
        &m,
        "disque_bus_messages_received_total",
        &[("type", "pong")]
    )
    .is_some_and(|v| v >= 1.0));
    b.kill9();
    assert!(
        wait_until(WAIT, POLL, || get(a.http_port(), "/readyz").0 == 503),
        "readyz stayed ready after the only peer died"
    );
    let (_, why) = get(a.http_port(), "/readyz");
    assert!(why.contains("reachable"), "{why}");
}

#[test]
fn readyz_is_unavailable_while_the_aof_loads() {
    let dir = std::env::temp_dir().join(format!(
        "disque-it-observe-loading-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut s = Server::start(ServerOpts {
        dir: Some(dir.clone()),
        ..ServerOpts::with_args(&["--appendonly", "yes"])
    });
    let mut c = s.client();
    for i in 0..20 {
        addjob(&mut c, "q", &format!("job{i}"), &[]);
    }
    s.sigterm();
    assert!(s.wait_exit(WAIT).is_some_and(|st| st.success()));
    drop(s);

    let mut child = std::process::Command::new(crate::harness::SERVER_BIN)
        .args(["--port", "0", "--appendonly", "yes", "--http-port", "auto"])
        .args(["--http-bind", "127.0.0.1", "--dir"])
        .arg(&dir)
        .current_dir(&dir)
        .env("DISQUE_DEBUG_LOADING_DELAY_MS", "1500")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn disque-server");
    let (tx, rx) = std::sync::mpsc::channel();
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || {
            use std::io::BufRead;
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
    }
    let loading = loop {
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(l) if l.starts_with("disque-server loading ") => break l,
            Ok(_) => {}
            Err(e) => {
                let _ = child.kill();
                panic!("no loading line: {e}");
            }
        }
    };
    let port: u16 = loading
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no http= on {loading}"));
    assert_eq!(get(port, "/healthz").0, 200);
    let (st, why) = get(port, "/readyz");
    assert_eq!(st, 503, "{why}");
    assert!(why.contains("loading"), "{why}");
    let ready = wait_until(WAIT, POLL, || get(port, "/readyz").0 == 200);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ready, "never became ready after loading");
}

#[test]
fn dead_letters_are_counted_and_redriven_through_the_api() {
    let s = http_node(&[]);
    let p = s.http_port();
    let mut c = s.client();
    let id = addjob(&mut c, "work", "b", &["RETRY", "60", "MAXDELIVERIES", "1"]);
    assert_eq!(get_ids(&mut c, "work", 1), vec![id.clone()]);
    assert_eq!(c.cmd(&["NACK", &id]), Reply::Int(1));
    assert_eq!(c.cmd(&["QLEN", "work:dead"]), Reply::Int(1));
    let m = scrape(p);
    assert_eq!(counter(&m, "disque_jobs_dead_lettered_total"), 1.0);
    let (_, o) = get(p, "/api/overview");
    let o: serde_json::Value = serde_json::from_str(&o).expect("json");
    assert_eq!(o["features"]["redrive"], true);
    assert_eq!(o["counters"]["dead_lettered"], 1);
    let headers = [
        ("Content-Type", "application/json"),
        ("X-Disque-Action", "1"),
    ];
    let (st, body) = http(p, "POST", "/api/queues/work:dead/redrive", &headers, "");
    assert_eq!(st, 200, "{body}");
    assert!(body.contains(r#""result":1"#), "{body}");
    assert_eq!(c.cmd(&["QLEN", "work"]), Reply::Int(1));
    assert!(c
        .cmd(&["INFO", "jobstats"])
        .text()
        .contains("jobs_dead_lettered:1\r\n"));
}

#[test]
fn json_logs_parse_line_by_line_and_name_the_client() {
    let s = Server::start(ServerOpts::with_args(&[
        "--log-format",
        "json",
        "--logfile",
        "disque.log",
        "--requirepass",
        "pw",
    ]));
    let mut c = s.client();
    let me = c.stream().local_addr().expect("local addr").to_string();
    assert!(c.cmd(&["AUTH", "default", "wrong"]).is_error());
    let log = s.dir().join("disque.log");
    let mut text = String::new();
    assert!(
        wait_until(WAIT, POLL, || {
            text = std::fs::read_to_string(&log).unwrap_or_default();
            text.contains("Failed authentication")
        }),
        "no authentication failure logged: {text}"
    );
    let mut saw_client_span = false;
    for line in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        for key in ["timestamp", "level", "target", "message"] {
            assert!(v.get(key).is_some(), "no {key} in {line}");
        }
        if v["message"] == "Failed authentication attempt." {
            assert_eq!(v["span"]["name"], "client", "{line}");
            assert_eq!(v["span"]["peer"], me.as_str(), "{line}");
            saw_client_span = true;
        }
    }
    assert!(saw_client_span, "{text}");
}

#[test]
fn json_logs_name_the_bus_link_a_line_is_about() {
    let a = Server::start(ServerOpts::with_args(&[
        "--log-format",
        "json",
        "--logfile",
        "disque.log",
    ]));
    let b = Server::start_default();
    a.client()
        .cmd(&["CLUSTER", "MEET", "127.0.0.1", &b.port().to_string()]);
    let log = a.dir().join("disque.log");
    let mut text = String::new();
    assert!(
        wait_until(WAIT, POLL, || {
            text = std::fs::read_to_string(&log).unwrap_or_default();
            text.contains("Node joined the cluster.")
        }),
        "no join logged: {text}"
    );
    let joined: serde_json::Value = text
        .lines()
        .filter(|l| l.contains("Node joined the cluster."))
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("join line is not JSON: {text}"));
    assert_eq!(joined["span"]["name"], "bus", "{joined}");
    assert_eq!(
        joined["span"]["peer"],
        format!("127.0.0.1:{}", b.bus_port()).as_str(),
        "{joined}"
    );
}

#[test]
fn the_endpoint_speaks_https_when_tls_is_configured() {
    use crate::pki::{tls_args, Ca, TlsClient};
    let dir = crate::tls::TempDir::new("observe-https");
    let ca = Ca::new(&dir.0, "ca");
    let server = ca.issue("server");
    let mut args = vec!["--tls-port".to_string(), "0".to_string()];
    args.extend(tls_args(&ca.cert, &server));
    for a in [
        "--http-port",
        "auto",
        "--http-bind",
        "127.0.0.1",
        "--tls-auth-clients",
        "no",
    ] {
        args.push(a.to_string());
    }
    let s = Server::start(ServerOpts {
        args,
        ..Default::default()
    });
    let mut t = TlsClient::connect(s.http_port(), &ca.cert, None).expect("TLS handshake");
    let io = t.stream();
    io.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("send");
    let mut raw = Vec::new();
    let _ = io.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.ends_with("ok\n"), "{text}");
    // Plain HTTP on the TLS endpoint gets no HTTP answer.
    let mut plain = TcpStream::connect(("127.0.0.1", s.http_port())).expect("connect");
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let _ = plain.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut buf = Vec::new();
    let _ = plain.read_to_end(&mut buf);
    assert!(!String::from_utf8_lossy(&buf).contains("200 OK"));
}

#[test]
fn readyz_waits_for_cluster_join() {
    // The seed starts after `a`, on a port chosen before `a` started, so
    // another process can take that port (or its bus port) in between.
    // That is the environment, not the scenario: start over on a fresh
    // port pair then, a few times at most.
    for attempt in 1..=5 {
        let seed_port = free_port_pair();
        let a = http_node(&["--cluster-join", &format!("127.0.0.1:{seed_port}")]);
        let (st, why) = get(a.http_port(), "/readyz");
        assert_eq!(st, 503, "{why}");
        assert!(why.contains("joining"), "{why}");
        // The image's probe gives the same answer (one definition).
        let (ok, why) = healthcheck(a.port());
        assert!(!ok && why.contains("joining"), "{why}");
        let info = a.client().cmd(&["INFO", "readiness"]).text();
        assert!(info.contains("ready:0"), "{info}");
        let seed = std::panic::catch_unwind(|| {
            Server::start(ServerOpts {
                port: Some(seed_port),
                ..ServerOpts::default()
            })
        });
        let _seed = match seed {
            Ok(s) => s,
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                if attempt < 5 && msg.contains("in use") {
                    eprintln!("seed port {seed_port} was taken meanwhile; new port pair");
                    continue;
                }
                std::panic::resume_unwind(e);
            }
        };
        assert!(
            wait_until(WAIT, POLL, || get(a.http_port(), "/readyz").0 == 200),
            "not ready after joining: {}",
            get(a.http_port(), "/readyz").1
        );
        let (ok, why) = healthcheck(a.port());
        assert!(ok, "{why}");
        return;
    }
}

/// `disque-server --healthcheck 127.0.0.1:<port>`: (exit 0, stderr).
fn healthcheck(port: u16) -> (bool, String) {
    let out = std::process::Command::new(crate::harness::SERVER_BIN)
        .args(["--healthcheck", &format!("127.0.0.1:{port}")])
        .output()
        .expect("run --healthcheck");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A client port whose bus port (+10000) is free too, right now.
fn free_port_pair() -> u16 {
    (0..100)
        .find_map(|_| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
            let p = l.local_addr().ok()?.port();
            (p <= 55535 && std::net::TcpListener::bind(("127.0.0.1", p + 10000)).is_ok())
                .then_some(p)
        })
        .expect("a free port pair")
}

/// `/api/cluster` as JSON.
fn cluster_view(port: u16) -> serde_json::Value {
    let (st, body) = get(port, "/api/cluster");
    assert_eq!(st, 200, "{body}");
    serde_json::from_str(&body).expect("json")
}

/// (queued, jobs, queues, blocked) per node ID; None = unknown.
fn totals_by_node(v: &serde_json::Value) -> Vec<(String, Option<[u64; 4]>)> {
    v["nodes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|n| {
                    let t = &n["totals"];
                    let f = |k: &str| t[k].as_u64();
                    let totals =
                        (|| Some([f("queued")?, f("jobs")?, f("queues")?, f("blocked")?]))();
                    (n["id"].as_str().unwrap_or("").to_string(), totals)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn node_id(s: &Server) -> String {
    s.client().cmd(&["CLUSTER", "MYID"]).text()
}

#[test]
fn cluster_view_shows_every_nodes_queue_totals() {
    let nodes: Vec<Server> = (0..3)
        .map(|_| http_node(&["--cluster-node-timeout", "1000"]))
        .collect();
    let mut c0 = nodes[0].client();
    for s in &nodes[1..] {
        c0.cmd(&["CLUSTER", "MEET", "127.0.0.1", &s.port().to_string()]);
    }
    crate::cluster::wait_full_mesh(&nodes);
    let ids: Vec<String> = nodes.iter().map(node_id).collect();
    let mut clients: Vec<_> = nodes.iter().map(Server::client).collect();
    // REPLICATE 1: each job is held and queued on the node it was added to.
    for (i, (c, queues)) in clients
        .iter_mut()
        .zip([&["t:a"][..], &["t:b", "t:b2"], &["t:c"]])
        .enumerate()
    {
        for q in queues {
            for k in 0..(i + 2) {
                addjob(c, q, &format!("job {k}"), &["REPLICATE", "1"]);
            }
        }
    }
    let expect = |view: &serde_json::Value, want: &[Option<[u64; 4]>]| {
        let got = totals_by_node(view);
        ids.iter()
            .zip(want)
            .all(|(id, w)| got.iter().any(|(gid, t)| gid == id && t == w))
    };
    // Every node's dashboard shows the same per-node totals.
    let want = [Some([2, 2, 1, 0]), Some([6, 6, 2, 0]), Some([4, 4, 1, 0])];
    for s in &nodes {
        let mut last = serde_json::Value::Null;
        assert!(
            wait_until(WAIT, POLL, || {
                last = cluster_view(s.http_port());
                expect(&last, &want)
            }),
            "node {}: {last}",
            s.port()
        );
        assert_eq!(last["queued_known"], 12, "{last}");
        assert_eq!(last["nodes_unknown"], 0, "{last}");
    }
    // Consuming on node 2 moves its queued figure, not its job count
    // (delivered jobs stay held until acknowledged).
    let got = get_ids(&mut clients[2], "t:c", 3);
    assert_eq!(got.len(), 3);
    let want = [Some([2, 2, 1, 0]), Some([6, 6, 2, 0]), Some([1, 4, 1, 0])];
    let mut last = serde_json::Value::Null;
    assert!(
        wait_until(WAIT, POLL, || {
            last = cluster_view(nodes[0].http_port());
            expect(&last, &want)
        }),
        "{last}"
    );
    // A node that is gone is unknown, not zero, and the view still
    // answers within the QLEN CLUSTER wait.
    let mut nodes = nodes;
    nodes[1].kill9();
    let t0 = std::time::Instant::now();
    let v = cluster_view(nodes[0].http_port());
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert!(
        expect(&v, &[Some([2, 2, 1, 0]), None, Some([1, 4, 1, 0])]),
        "{v}"
    );
    assert_eq!(v["nodes_unknown"], 1, "{v}");
    assert_eq!(v["queued_known"], 3, "{v}");
}

/// Count of a histogram (its +Inf bucket), 0 when absent.
fn histogram_count(s: &prometheus_parse::Scrape, name: &str) -> f64 {
    value(s, name, &[]).unwrap_or(0.0)
}

/// `disque_bus_link_connects_total` for the peer with this node ID (any address).
fn link_connects(s: &prometheus_parse::Scrape, peer: &str) -> f64 {
    value(s, "disque_bus_link_connects_total", &[("peer", peer)]).unwrap_or(0.0)
}

#[test]
fn replication_latency_federation_imports_and_reconnects_are_counted() {
    let nodes: Vec<Server> = (0..2)
        .map(|_| http_node(&["--cluster-node-timeout", "1000"]))
        .collect();
    let mut a = nodes[0].client();
    a.cmd(&["CLUSTER", "MEET", "127.0.0.1", &nodes[1].port().to_string()]);
    crate::cluster::wait_full_mesh(&nodes);
    let b_id = node_id(&nodes[1]);
    let (pa, pb) = (nodes[0].http_port(), nodes[1].http_port());

    // Five synchronously replicated jobs: five replication latencies, on
    // the node that took the ADDJOBs only.
    let before = (
        histogram_count(&scrape(pa), "disque_replication_latency_seconds"),
        histogram_count(&scrape(pb), "disque_replication_latency_seconds"),
    );
    for i in 0..5 {
        addjob(&mut a, "repl", &format!("r{i}"), &["REPLICATE", "2"]);
    }
    let after = (
        histogram_count(&scrape(pa), "disque_replication_latency_seconds"),
        histogram_count(&scrape(pb), "disque_replication_latency_seconds"),
    );
    assert_eq!(after.0 - before.0, 5.0);
    assert_eq!(after.1 - before.1, 0.0);

    // Three jobs queued only on a, consumed on b: b imports exactly three.
    for i in 0..3 {
        addjob(&mut a, "fed", &format!("f{i}"), &["REPLICATE", "1"]);
    }
    let mut b = nodes[1].client();
    // A blocked consumer is what makes b ask its peers (NEEDJOBS).
    let mut got = 0;
    assert!(wait_until(WAIT, POLL, || {
        let r = b.cmd(&["GETJOB", "TIMEOUT", "1000", "COUNT", "3", "FROM", "fed"]);
        if let Reply::Array(jobs) = r {
            got += jobs.len();
        }
        got == 3
    }));
    assert_eq!(
        counter(&scrape(pb), "disque_federation_imported_jobs_total"),
        3.0
    );
    assert_eq!(
        counter(&scrape(pa), "disque_federation_imported_jobs_total"),
        0.0
    );

    // b stops answering for longer than the node timeout: a drops its
    // link and connects again, which counts as a reconnect of that peer.
    let first = link_connects(&scrape(pa), &b_id);
    assert!(first >= 1.0, "{first}");
    b.send(&["DEBUG", "SLEEP", "3"]);
    let mut last = 0.0;
    assert!(
        wait_until(WAIT, POLL, || {
            last = link_connects(&scrape(pa), &b_id);
            last > first
        }),
        "connects to b stayed at {last}"
    );
    let _ = b.read_reply();
}

#[test]
fn the_grafana_dashboard_queries_only_exported_metrics() {
    let nodes: Vec<Server> = (0..2)
        .map(|_| http_node(&["--appendonly", "yes"]))
        .collect();
    let mut a = nodes[0].client();
    a.cmd(&["CLUSTER", "MEET", "127.0.0.1", &nodes[1].port().to_string()]);
    crate::cluster::wait_full_mesh(&nodes);
    addjob(&mut a, "g", "x", &["REPLICATE", "2"]);
    get_ids(&mut a, "g", 1);
    let (st, text) = get(nodes[0].http_port(), "/metrics");
    assert_eq!(st, 200);
    // Family names as exported (`# TYPE <name> <type>`), `_total` removed.
    let exported: std::collections::BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split_whitespace().next())
        .map(|n| n.trim_end_matches("_total").to_string())
        .collect();
    let dashboard = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/grafana/disque-dashboard.json"
    ))
    .expect("read the Grafana dashboard");
    let _: serde_json::Value = serde_json::from_str(&dashboard).expect("valid JSON");
    let mut used = std::collections::BTreeSet::new();
    for (i, _) in dashboard.match_indices("disque_") {
        let name: String = dashboard[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(&name)
            .trim_end_matches("_total")
            .to_string();
        used.insert(family);
    }
    assert!(used.len() > 10, "{used:?}");
    let missing: Vec<_> = used.difference(&exported).collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries {missing:?}, not exported"
    );
}

/// `/api/history` and `/api/queues/<name>/history`: samples accumulate
/// (one per 5 s, taken by the node itself) and show the traffic.
#[test]
fn history_samples_accumulate_and_show_the_traffic() {
    let s = http_node(&[]);
    let p = s.http_port();
    let mut c = s.client();
    let json = |path: &str| -> serde_json::Value {
        let (st, body) = get(p, path);
        assert_eq!(st, 200, "{path}: {body}");
        serde_json::from_str(&body).expect("json")
    };
    let h0 = json("/api/history");
    assert_eq!(h0["interval_ms"], 5000);
    assert_eq!(h0["capacity"], 720);
    assert_eq!(h0["spilled"], serde_json::Value::Null);
    let taken0 = h0["taken"].as_u64().expect("taken");
    // Asking for a queue's history starts tracking it.
    let q0 = json("/api/queues/hist%3Aq/history");
    assert_eq!(q0["name"], "hist:q");
    assert_eq!(q0["tracked"], true);
    let slow = Duration::from_millis(200);
    // A first sample of the queue, then traffic before the next one.
    assert!(
        wait_until(Duration::from_secs(20), slow, || json(
            "/api/queues/hist%3Aq/history"
        )["samples"]
            .as_u64()
            >= Some(1)),
        "the queue was never sampled"
    );
    for i in 0..20 {
        addjob(&mut c, "hist:q", &format!("job {i}"), &[]);
    }
    let positive = |v: &serde_json::Value| {
        v.as_array()
            .is_some_and(|a| a.iter().any(|x| x.as_f64().is_some_and(|f| f > 0.0)))
    };
    let mut last = serde_json::Value::Null;
    assert!(
        wait_until(Duration::from_secs(20), slow, || {
            last = json("/api/history");
            last["taken"].as_u64() > Some(taken0) && positive(&last["added_per_s"])
        }),
        "no sample with jobs added: {last}"
    );
    let n = last["samples"].as_u64().expect("samples");
    assert_eq!(last["t"].as_array().map(Vec::len), Some(n as usize));
    assert_eq!(last["queued"].as_array().map(Vec::len), Some(n as usize));
    assert!(positive(&last["used_memory"]), "{last}");
    assert!(
        wait_until(Duration::from_secs(20), slow, || {
            last = json("/api/queues/hist%3Aq/history");
            positive(&last["in_per_s"])
                && last["len"]
                    .as_array()
                    .and_then(|a| a.last())
                    .and_then(|v| v.as_u64())
                    == Some(20)
        }),
        "queue history without the traffic: {last}"
    );
    // The sample count keeps growing.
    let before = json("/api/history")["taken"].as_u64();
    assert!(
        wait_until(Duration::from_secs(20), slow, || json("/api/history")
            ["taken"]
            .as_u64()
            > before),
        "no further samples"
    );
}
