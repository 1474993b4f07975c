//! ns/op for the two hot paths: parsing a pipelined ADDJOB burst and
//! encoding a GETJOB reply. std only; run with `cargo bench`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use disque::resp::encode::encode;
use disque::resp::parse::RequestParser;
use disque::resp::Reply;

fn bulk(out: &mut Vec<u8>, a: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
    out.extend_from_slice(a);
    out.extend_from_slice(b"\r\n");
}

/// Run `f` repeatedly for about `budget` and return ns per call.
fn measure(budget: Duration, mut f: impl FnMut()) -> f64 {
    for _ in 0..1000 {
        f();
    }
    let mut iters: u64 = 0;
    let start = Instant::now();
    while start.elapsed() < budget {
        for _ in 0..1000 {
            f();
        }
        iters += 1000;
    }
    start.elapsed().as_nanos() as f64 / iters as f64
}

fn main() {
    let budget = Duration::from_secs(2);

    // 16 x ADDJOB <queue> <100-byte body> 0 REPLICATE 1
    let mut pipeline = Vec::new();
    for i in 0..16 {
        pipeline.extend_from_slice(b"*6\r\n");
        bulk(&mut pipeline, b"ADDJOB");
        bulk(&mut pipeline, format!("queue:{i}").as_bytes());
        bulk(&mut pipeline, &[b'x'; 100]);
        bulk(&mut pipeline, b"0");
        bulk(&mut pipeline, b"REPLICATE");
        bulk(&mut pipeline, b"1");
    }
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::with_capacity(pipeline.len());
    let copy_only = measure(budget, || {
        buf.clear();
        buf.extend_from_slice(black_box(&pipeline));
        black_box(&buf);
    });
    let parse_ns = measure(budget, || {
        buf.clear();
        buf.extend_from_slice(black_box(&pipeline));
        let mut n = 0;
        while let Ok(Some(cmd)) = parser.parse(&mut buf) {
            n += cmd.len();
            black_box(cmd);
        }
        assert_eq!(n, 16 * 6);
    });
    println!(
        "parse 16 pipelined ADDJOB ({} bytes): {:.0} ns/buffer, {:.1} ns/command (buffer refill alone {:.0} ns)",
        pipeline.len(),
        parse_ns,
        parse_ns / 16.0,
        copy_only
    );

    // GETJOB COUNT 16 WITHCOUNTERS-less reply: *16 of [queue, id, body].
    let job = |i: usize| {
        Reply::Array(vec![
            Reply::Bulk(Bytes::from(format!("queue:{i}"))),
            Reply::Bulk(Bytes::from(format!(
                "D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-{i:04x}"
            ))),
            Reply::Bulk(Bytes::from(vec![b'x'; 100])),
        ])
    };
    let reply = Reply::Array((0..16).map(job).collect());
    for proto in [2u8, 3] {
        let mut out = BytesMut::with_capacity(8192);
        let ns = measure(budget, || {
            out.clear();
            encode(black_box(&reply), proto, &mut out);
            black_box(&out);
        });
        println!(
            "encode GETJOB reply, 16 jobs x 3 fields ({} bytes, RESP{proto}): {:.0} ns/reply, {:.1} ns/job",
            out.len(),
            ns,
            ns / 16.0
        );
    }

    let mut out = BytesMut::with_capacity(64);
    let ns = measure(budget, || {
        out.clear();
        encode(&Reply::Integer(black_box(-1234567890123)), 2, &mut out);
        black_box(&out);
    });
    println!("encode Integer(-1234567890123): {ns:.1} ns/op");
}
