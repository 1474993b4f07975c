//! Writes the binary seed inputs of the `bus` and `job_codec` targets
//! (`seeds/bus`, `seeds/job_codec/engine-*`): frames a real engine sends,
//! made by driving a second engine (peer 1 of `NODES_CONF`) through
//! ADDJOB, ACKJOB, pings, NEEDJOBS, PAUSE and QLEN CLUSTER, plus the
//! handshake frames `server::bus` writes. Run by `scripts/fuzz.sh seeds`.

use std::path::Path;

use bytes::{Bytes, BytesMut};
use disque::domain::job_ext::JobExt;
use disque::engine::addjob::AddJobRequest;
use disque::engine::cluster::parse_nodes_conf;
use disque::engine::getjob::NeedReason;
use disque::engine::gossip::LinkKind;
use disque::engine::records::Flavor;
use disque::engine::Engine;
use disque::protocol::bus::auth;
use disque::protocol::bus::message::{decode, Body, JobMsg, Message};
use disque_fuzz_common::{engine_with_peers, NOW};

// The crate is built with sanitizer-coverage instrumentation (same flags
// as the targets, to share one build); a no-op target links the libFuzzer
// runtime that provides the coverage callbacks. Our `main` wins over
// libFuzzer's.
libfuzzer_sys::fuzz_target!(|_data: &[u8]| {});

/// Peer 1's view of the same cluster: it is `myself`, we are index 1.
const PEER_CONF: &str = "\
8bcfb920b68a04e6d1c7e6aab5ee4878e4d743f4 127.0.0.1:7712 myself 0 0 connected
67d78e936368c0fc75d22f83d328e5c163e896b1 127.0.0.1:7711 noflags 0 1 connected
ad249f8c9b2240cd45f72fd233bd3d5a42a6709d 127.0.0.1:7713 noflags 0 1 connected
c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00 127.0.0.2:7714 noflags 0 1 connected
";

/// Index of our node in the peer's table.
const US: u32 = 1;

fn peer() -> Engine {
    let Ok(Some(l)) = parse_nodes_conf(PEER_CONF, NOW) else {
        panic!("PEER_CONF must parse");
    };
    let mut e = Engine::new(l.nodes[0].id, 7712, 7, NOW);
    e.restore_nodes(l.nodes);
    for i in 1..=3 {
        e.on_link_up(i, NOW);
    }
    e
}

/// The frames the peer has queued for us, encoded.
fn frames_to_us(e: &mut Engine, now: u64) -> Vec<Bytes> {
    // Job messages first: take_effects drains them too.
    let mut out = Vec::new();
    for (to, m) in e.take_messages(now) {
        if to == US {
            out.push(m.to_bytes());
        }
    }
    for (to, m) in e.take_effects().frames {
        if to == US {
            out.push(m.to_bytes());
        }
    }
    out
}

fn write(dir: &Path, name: &str, ctl: u8, frames: &[Bytes]) {
    if frames.is_empty() {
        return; // that step produced nothing for us
    }
    let mut b = vec![ctl];
    for f in frames {
        b.extend_from_slice(f);
    }
    std::fs::write(dir.join(name), b).unwrap_or_else(|e| panic!("{name}: {e}"));
}

/// Control byte: checksums recomputed, no handshake, inbound, 128-byte reads.
const PLAIN: u8 = 7 << 5;

fn main() {
    let root = std::env::args().nth(1).unwrap_or_else(|| "seeds".into());
    let bus = Path::new(&root).join("bus");
    let jobs = Path::new(&root).join("job_codec");
    std::fs::create_dir_all(&bus).expect("mkdir seeds/bus");
    std::fs::create_dir_all(&jobs).expect("mkdir seeds/job_codec");

    let mut p = peer();
    let mut all = Vec::new();
    let mut now = NOW;

    // PING -> our PONG -> the peer now sees us as reachable.
    let mut us = engine_with_peers();
    p.send_ping(US, now);
    let ping = frames_to_us(&mut p, now);
    write(&bus, "ping", PLAIN, &ping);
    all.extend(ping.clone());
    for f in &ping {
        let mut b = BytesMut::from(&f[..]);
        if let Ok(Some(m)) = decode(&mut b) {
            if let Some(pong) =
                us.on_bus_message(LinkKind::Inbound, "127.0.0.1", "127.0.0.1", m, now)
            {
                let _ =
                    p.on_bus_message(LinkKind::Outbound(US), "127.0.0.1", "127.0.0.1", pong, now);
            }
        }
    }

    // ADDJOB REPLICATE 2 (REPLJOB to us), one with extension options.
    let mut req = AddJobRequest::new(
        Bytes::from_static(b"orders"),
        Bytes::from_static(b"{\"id\":1}"),
    );
    req.replicate = Some(2);
    req.retry = Some(30);
    let _ = p.addjob(1, req, now);
    let repl = frames_to_us(&mut p, now);
    write(&bus, "repljob", PLAIN, &repl);
    all.extend(repl.clone());
    let mut req = AddJobRequest::new(Bytes::from_static(b"q1"), Bytes::from_static(b"with ext"));
    req.replicate = Some(2);
    req.ext = Some(Box::new(JobExt {
        backoff_max: 60,
        max_deliveries: 3,
        dead_queue: Some(Bytes::from_static(b"q1-dead")),
        dedup_key: Some(Bytes::from_static(b"order-42")),
        ..JobExt::default()
    }));
    let _ = p.addjob(2, req, now);
    let repl_ext = frames_to_us(&mut p, now);
    write(&bus, "repljob-ext", PLAIN, &repl_ext);
    all.extend(repl_ext.clone());

    // Job records as the engine serializes them, both flavours.
    let mut n = 0;
    for h in p.store().handles() {
        for flavor in [Flavor::Message, Flavor::Storage] {
            if let Some(r) = p.job_record(h, flavor, now) {
                std::fs::write(jobs.join(format!("engine-{n}.bin")), r.to_bytes())
                    .expect("write job seed");
                n += 1;
            }
        }
    }

    // Timers: replication retries, queueing (QUEUED/WILLQUEUE), gossip.
    for _ in 0..5 {
        now += 40_000;
        p.tick(now);
        p.cluster_cron(now);
    }
    let later = frames_to_us(&mut p, now);
    write(&bus, "timers", PLAIN, &later);
    all.extend(later.clone());

    // ACKJOB of every job (SETACK / DELJOB), NEEDJOBS, PAUSE, QLEN CLUSTER.
    let ids: Vec<_> = p
        .store()
        .handles()
        .into_iter()
        .filter_map(|h| p.job(h).map(|j| j.id))
        .collect();
    // Every other message type, about the peer's first job, as
    // `take_messages` would frame them.
    let job_id = ids.first().map(|j| j.0).unwrap_or([b'x'; 40]);
    let h = p.header(0);
    let job = |kind, aux| Body::Job { kind, job_id, aux };
    let rec = p
        .store()
        .handles()
        .first()
        .and_then(|&h| p.job_record(h, Flavor::Message, now))
        .map(|r| r.to_bytes())
        .unwrap_or_default();
    let others: Vec<Bytes> = [
        Body::Meet(Vec::new()),
        job(JobMsg::GotJob, 0),
        job(JobMsg::Enqueue, 5),
        job(JobMsg::Queued, 0),
        job(JobMsg::WillQueue, 0),
        job(JobMsg::Working, 10),
        job(JobMsg::GotAck, 1),
        job(JobMsg::DeadLetter, 1),
        job(JobMsg::DelJob, 0),
        Body::NeedJobs {
            count: 10,
            queue: Bytes::from_static(b"orders"),
        },
        Body::YourJobs {
            jobs: vec![rec.clone(), rec],
        },
        Body::Pause {
            flags: 3,
            queue: Bytes::from_static(b"orders"),
        },
        Body::QLenReq {
            req: 1,
            queue: Bytes::from_static(b"orders"),
        },
        Body::QLenRep { req: 1, len: 42 },
        Body::Dedup {
            window: 300,
            entry: disque::engine::dedup::encode_aof(
                b"q1",
                b"order-42",
                &disque::domain::job::JobId(job_id),
                now + 300_000,
            ),
        },
        Body::Fail {
            node: *b"c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00",
        },
        Body::Schedule {
            data: disque::engine::schedule::ScheduleDef {
                name: Bytes::from_static(b"nightly"),
                spec: disque::engine::schedule::Spec::Cron {
                    expr: "0 3 * * *".into(),
                    tz: "Europe/Paris".into(),
                },
                queue: Bytes::from_static(b"orders"),
                body: Bytes::from_static(b"report"),
                replicate: 0,
                retry: Some(30),
                ttl: None,
                catchup: 60,
                grace: 2000,
                skip_overlap: true,
                paused: false,
                deleted: false,
                created: now,
                version: now,
                origin: *b"c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00",
            }
            .encode(),
        },
        Body::Batch {
            data: disque::engine::batch::BatchState {
                id: Bytes::from_static(b"import-42"),
                flags: 1,
                on_success: Some(disque::engine::batch::Callback {
                    queue: Bytes::from_static(b"reports"),
                    body: Bytes::from_static(b"ok"),
                }),
                on_complete: None,
                members: [disque::domain::job::JobId(
                    *b"D-c0ffee00-0123456789abcdefABCDEFGH-05a0",
                )]
                .into_iter()
                .collect(),
                acked: Default::default(),
                dead: Default::default(),
            }
            .encode(),
        },
    ]
    .into_iter()
    .map(|b| Message::new(h, b).to_bytes())
    .collect();
    write(&bus, "every-type", PLAIN, &others);
    all.extend(others);
    p.ackjob(&ids, now);
    let acks = frames_to_us(&mut p, now);
    write(&bus, "ackjob", PLAIN, &acks);
    all.extend(acks.clone());
    p.need_jobs(b"orders", NeedReason::ClientsWaiting, now);
    p.set_pause(b"orders", 1, now);
    let _ = p.count_cluster(1, Bytes::from_static(b"orders"), None, now);
    let misc = frames_to_us(&mut p, now);
    write(&bus, "needjobs-pause-qlen", PLAIN, &misc);
    all.extend(misc.clone());
    write(&bus, "all-in-one-read", 0xff, &all);
    write(&bus, "all-bytewise", 0, &all);

    // Handshakes (`server::bus`): we accept and the peer answers our
    // challenge (zero MAC = "the right one", see the target), or we
    // connect and the peer challenges us. Each is followed by frames.
    let header = p.header(0);
    let answer = Message::new(
        header,
        Body::Auth {
            nonce: [0x11; 16],
            mac: [0; 32],
        },
    );
    let mut accept = vec![answer.to_bytes()];
    accept.extend(ping.clone());
    accept.extend(repl.clone());
    write(&bus, "auth-accept", PLAIN | 0b010, &accept);
    let challenge = Message::new(header, Body::AuthChallenge { nonce: [0x22; 16] });
    let proof = Message::new(
        header,
        Body::Auth {
            nonce: [0x22; 16],
            mac: [0; 32],
        },
    );
    let mut connect = vec![challenge.to_bytes(), proof.to_bytes()];
    connect.extend(repl);
    write(&bus, "auth-connect", PLAIN | 0b100 | (1 << 3), &connect);
    // A wrong proof: the handshake must fail.
    let wrong = Message::new(
        header,
        Body::Auth {
            nonce: [0x11; 16],
            mac: auth::connector_mac(b"another secret", &[0; 16], &[0x11; 16]),
        },
    );
    write(&bus, "auth-wrong", PLAIN | 0b010, &[wrong.to_bytes()]);
    println!("wrote {} frames, {n} job records", all.len());
}
