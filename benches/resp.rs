//! RESP hot paths (criterion): parsing a pipelined ADDJOB burst, encoding a
//! GETJOB reply in RESP2 and RESP3, encoding an integer, and the
//! client-side decoder the benchmark and the tests read replies with.
//! Run with `cargo bench --bench resp`; CI runs each once with
//! `cargo bench -- --test`.

#![allow(clippy::expect_used)] // benchmark fixtures are constants

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use disque::protocol::resp::encode::encode;
use disque::protocol::resp::parse::RequestParser;
use disque::protocol::resp::reply::{decode, encode_command};
use disque::protocol::resp::Reply;

/// Jobs per pipelined burst and per GETJOB reply.
const BATCH: usize = 16;

/// 16 x `ADDJOB queue:<i> <100-byte body> 0 REPLICATE 1`.
fn addjob_pipeline() -> Vec<u8> {
    let body = [b'x'; 100];
    let mut out = Vec::new();
    for i in 0..BATCH {
        let queue = format!("queue:{i}");
        let args: [&[u8]; 6] = [b"ADDJOB", queue.as_bytes(), &body, b"0", b"REPLICATE", b"1"];
        encode_command(&mut out, &args);
    }
    out
}

/// A GETJOB COUNT 16 reply: 16 x [queue, id, body].
fn getjob_reply() -> Reply {
    let job = |i: usize| {
        Reply::Array(vec![
            Reply::Bulk(Bytes::from(format!("queue:{i}"))),
            Reply::Bulk(Bytes::from(format!(
                "D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-{i:04x}"
            ))),
            Reply::Bulk(Bytes::from(vec![b'x'; 100])),
        ])
    };
    Reply::Array((0..BATCH).map(job).collect())
}

fn parse_requests(c: &mut Criterion) {
    let pipeline = addjob_pipeline();
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut buf = BytesMut::with_capacity(pipeline.len());
    // The buffer refill alone, to subtract from the parse figure.
    group.bench_function("refill_buffer_only", |b| {
        b.iter(|| {
            buf.clear();
            buf.extend_from_slice(black_box(&pipeline));
            black_box(&buf);
        })
    });
    let mut parser = RequestParser::new();
    group.bench_function("16_pipelined_addjob", |b| {
        b.iter(|| {
            buf.clear();
            buf.extend_from_slice(black_box(&pipeline));
            let mut n = 0;
            while let Ok(Some(cmd)) = parser.parse(&mut buf) {
                n += cmd.len();
                black_box(cmd);
            }
            assert_eq!(n, BATCH * 6);
        })
    });
    group.finish();
}

fn encode_replies(c: &mut Criterion) {
    let reply = getjob_reply();
    let mut group = c.benchmark_group("encode");
    group.throughput(Throughput::Elements(BATCH as u64));
    for proto in [2u8, 3] {
        let mut out = BytesMut::with_capacity(8192);
        group.bench_function(format!("getjob_16_jobs_resp{proto}"), |b| {
            b.iter(|| {
                out.clear();
                encode(black_box(&reply), proto, &mut out);
                black_box(&out);
            })
        });
    }
    group.throughput(Throughput::Elements(1));
    let mut out = BytesMut::with_capacity(64);
    group.bench_function("integer", |b| {
        b.iter(|| {
            out.clear();
            encode(&Reply::Integer(black_box(-1234567890123)), 2, &mut out);
            black_box(&out);
        })
    });
    group.finish();
}

fn decode_replies(c: &mut Criterion) {
    let mut wire = BytesMut::new();
    encode(&getjob_reply(), 2, &mut wire);
    let mut group = c.benchmark_group("client_decode");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("getjob_16_jobs", |b| {
        b.iter(|| {
            let (reply, used) = decode(black_box(&wire))
                .expect("valid reply")
                .expect("complete reply");
            assert_eq!(used, wire.len());
            black_box(reply);
        })
    });
    group.finish();
}

criterion_group!(benches, parse_requests, encode_replies, decode_replies);
criterion_main!(benches);
