//! A generic RESP client library (the `redis` crate) in RESP2 and RESP3
//! mode drives Disque commands and gets usable replies.

use redis::Value;

use crate::harness::Server;

fn client(port: u16, resp3: bool) -> redis::Connection {
    let url = if resp3 {
        format!("redis://127.0.0.1:{port}/?protocol=resp3")
    } else {
        format!("redis://127.0.0.1:{port}/")
    };
    let client = redis::Client::open(url).unwrap();
    client
        .get_connection_with_timeout(std::time::Duration::from_secs(5))
        .unwrap()
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        other => panic!("not a string: {other:?}"),
    }
}

/// Key/value pairs from a flat array (RESP2) or a map (RESP3).
fn pairs(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Array(a) => a
            .chunks(2)
            .map(|kv| (text(&kv[0]), kv[1].clone()))
            .collect(),
        Value::Map(m) => m.iter().map(|(k, v)| (text(k), v.clone())).collect(),
        other => panic!("not map-like: {other:?}"),
    }
}

fn get(v: &Value, key: &str) -> Value {
    pairs(v)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no {key} in {v:?}"))
}

fn drive(resp3: bool) {
    let s = Server::start_default();
    let mut con = client(s.port(), resp3);
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");

    let id: String = redis::cmd("ADDJOB")
        .arg("libq")
        .arg(b"body\0bytes".as_slice())
        .arg(0)
        .arg("RETRY")
        .arg(30)
        .query(&mut con)
        .unwrap();
    assert_eq!(id.len(), 40);
    let len: i64 = redis::cmd("QLEN").arg("libq").query(&mut con).unwrap();
    assert_eq!(len, 1);

    let show: Value = redis::cmd("SHOW").arg(&id).query(&mut con).unwrap();
    let fields = pairs(&show);
    assert_eq!(fields.len(), 15);
    assert_eq!(text(&get(&show, "state")), "queued");
    assert_eq!(get(&show, "retry"), Value::Int(30));
    assert_eq!(
        get(&show, "body"),
        Value::BulkString(b"body\0bytes".to_vec())
    );

    let qstat: Value = redis::cmd("QSTAT").arg("libq").query(&mut con).unwrap();
    assert_eq!(pairs(&qstat).len(), 10);
    assert_eq!(get(&qstat, "len"), Value::Int(1));

    let jobs: Vec<(String, String, Vec<u8>)> = redis::cmd("GETJOB")
        .arg("FROM")
        .arg("libq")
        .query(&mut con)
        .unwrap();
    assert_eq!(
        jobs,
        vec![("libq".to_string(), id.clone(), b"body\0bytes".to_vec())]
    );

    let none: Option<Vec<Value>> = redis::cmd("GETJOB")
        .arg("NOHANG")
        .arg("FROM")
        .arg("libq")
        .query(&mut con)
        .unwrap();
    assert_eq!(none, None);
    let missing: Value = redis::cmd("SHOW")
        .arg("D-00000000-000000000000000000000000-0001")
        .query(&mut con)
        .unwrap();
    assert_eq!(missing, Value::Nil);

    let acked: i64 = redis::cmd("ACKJOB").arg(&id).query(&mut con).unwrap();
    assert_eq!(acked, 1);

    let info: String = redis::cmd("INFO").arg("jobs").query(&mut con).unwrap();
    assert!(info.starts_with("# Jobs\r\nregistered_jobs:"), "{info}");

    let err = redis::cmd("SHOW")
        .arg("bad")
        .query::<Value>(&mut con)
        .unwrap_err();
    assert_eq!(err.code(), Some("BADID"), "{err:?}");

    let hello: Value = redis::cmd("HELLO").query(&mut con).unwrap();
    let Value::Array(h) = hello else {
        panic!("HELLO: {hello:?}");
    };
    assert_eq!(h[0], Value::Int(1));
}

#[test]
fn redis_crate_resp2() {
    drive(false);
}

#[test]
fn redis_crate_resp3() {
    drive(true);
}
