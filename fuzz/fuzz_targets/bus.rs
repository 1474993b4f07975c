//! Cluster bus frames: the decoder (`cluster::message::decode`) fed the
//! way `server::bus` feeds it, the `cluster-secret` handshake checks
//! (`cluster::auth`), and every decoded frame handed to the engine
//! (`Engine::on_bus_message`) as a peer's message, so a frame that decodes
//! but makes the engine panic is found too.
//!
//! Input: one control byte, then the byte stream a peer sends.
//! - bit 0 clear: frame checksums are recomputed before decoding (a
//!   fuzzer cannot forge CRC-32 often enough to get past it; the CRC check
//!   itself still runs, and inputs with bit 0 set exercise its failures).
//! - bits 1-2: handshake role: 0 none (no cluster-secret), 1 we accept
//!   (the stream starts with the connector's AUTH), 2 we connect (the
//!   stream starts with AUTHCHALLENGE then the acceptor's AUTH), 3 none.
//! - bits 3-4: link kind: 0 inbound, else outbound to node 1..=3.
//! - bits 5-7: read chunk size, 1 << n bytes (partial frames).
//!
//! An all-zero MAC in a handshake frame is replaced by the right one,
//! standing for a peer that knows the secret, so the fuzzer gets past the
//! handshake into the frames after it (bytes after the handshake frame in
//! the same read stay buffered, as in `read_frame`).
#![no_main]

use bytes::BytesMut;
use disque::engine::gossip::LinkKind;
use disque::protocol::bus::auth;
use disque::protocol::bus::message::{decode, Body, Message, HEADER_LEN, MAGIC, MAX_FRAME};
use disque_fuzz_common::{engine_with_peers, NOW};
use libfuzzer_sys::fuzz_target;

const SECRET: &[u8] = b"fuzz cluster secret";
const OUR_NONCE: [u8; 16] = [0x5a; 16];

/// Recompute the checksum of every complete frame in `s` (walking by the
/// frames' own length fields) so mutated payloads reach the body parser.
fn fix_checksums(s: &mut [u8]) {
    let mut at = 0;
    while s.len() >= at + 16 && s[at..at + 4] == MAGIC {
        let total = u32::from_be_bytes([s[at + 8], s[at + 9], s[at + 10], s[at + 11]]) as usize;
        if !(HEADER_LEN..=MAX_FRAME).contains(&total) || s.len() < at + total {
            return;
        }
        let f = &s[at..at + total];
        let mut h = crc32fast::Hasher::new();
        h.update(&f[..12]);
        h.update(&f[16..]);
        let crc = h.finalize().to_be_bytes();
        s[at + 12..at + 16].copy_from_slice(&crc);
        at += total;
    }
}

/// Feeds the stream to a read buffer in chunks, like socket reads.
struct Stream<'a> {
    rest: &'a [u8],
    chunk: usize,
}

impl Stream<'_> {
    /// Like `bus::read_frame`: decode, and read more while incomplete.
    fn read_frame(&mut self, rbuf: &mut BytesMut) -> Option<Message> {
        loop {
            match decode(rbuf) {
                Ok(Some(m)) => return Some(m),
                Ok(None) => {}
                Err(_) => return None,
            }
            if !self.read(rbuf) {
                return None;
            }
        }
    }

    fn read(&mut self, rbuf: &mut BytesMut) -> bool {
        if self.rest.is_empty() {
            return false;
        }
        let n = self.chunk.min(self.rest.len());
        rbuf.extend_from_slice(&self.rest[..n]);
        self.rest = &self.rest[n..];
        true
    }
}

/// `mac` unless it is all zero, then the correct proof.
fn or_right(mac: [u8; 32], right: [u8; 32]) -> [u8; 32] {
    if mac == [0; 32] {
        right
    } else {
        mac
    }
}

/// The acceptor's checks (`bus::auth_acceptor`); true when the peer passed.
fn accept(s: &mut Stream, rbuf: &mut BytesMut) -> bool {
    let Some(Message {
        body: Body::Auth { nonce: n_c, mac },
        ..
    }) = s.read_frame(rbuf)
    else {
        return false;
    };
    let right = auth::connector_mac(SECRET, &OUR_NONCE, &n_c);
    let mac = or_right(mac, right);
    let ok = auth::verify_connector(SECRET, &OUR_NONCE, &n_c, &mac);
    assert_eq!(ok, mac == right, "verify_connector disagrees with the MAC");
    // Our proof must verify on the other side.
    let ours = auth::acceptor_mac(SECRET, &n_c, &OUR_NONCE);
    assert!(auth::verify_acceptor(SECRET, &n_c, &OUR_NONCE, &ours));
    ok
}

/// The connector's checks (`bus::auth_connector`).
fn connect(s: &mut Stream, rbuf: &mut BytesMut) -> bool {
    let Some(Message {
        body: Body::AuthChallenge { nonce: n_a },
        ..
    }) = s.read_frame(rbuf)
    else {
        return false;
    };
    let Some(Message {
        body: Body::Auth { nonce: echoed, mac },
        ..
    }) = s.read_frame(rbuf)
    else {
        return false;
    };
    let right = auth::acceptor_mac(SECRET, &OUR_NONCE, &n_a);
    let mac = or_right(mac, right);
    let ok = auth::verify_acceptor(SECRET, &OUR_NONCE, &n_a, &mac);
    assert_eq!(ok, mac == right, "verify_acceptor disagrees with the MAC");
    echoed == n_a && ok
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, stream)) = data.split_first() else {
        return;
    };
    let mut bytes = stream.to_vec();
    if ctl & 1 == 0 {
        fix_checksums(&mut bytes);
    }
    let link = match (ctl >> 3) & 3 {
        0 => LinkKind::Inbound,
        n => LinkKind::Outbound(u32::from(n)),
    };
    let mut s = Stream {
        rest: &bytes,
        chunk: 1 << (ctl >> 5),
    };
    let mut rbuf = BytesMut::new();
    let authed = match (ctl >> 1) & 3 {
        1 => accept(&mut s, &mut rbuf),
        2 => connect(&mut s, &mut rbuf),
        _ => true,
    };
    if !authed {
        return;
    }
    // `bus::run_link`: decode everything buffered, hand it to the engine,
    // read more; a bad frame drops the link.
    let mut engine = engine_with_peers();
    let mut now = NOW;
    loop {
        loop {
            match decode(&mut rbuf) {
                Ok(Some(msg)) => {
                    // Encoding what we decoded gives a frame that decodes
                    // to the same message.
                    let mut again = BytesMut::from(&msg.to_bytes()[..]);
                    let back = decode(&mut again);
                    assert_eq!(back, Ok(Some(msg.clone())), "re-encoded frame differs");
                    assert!(again.is_empty());
                    if let Some(reply) =
                        engine.on_bus_message(link, "127.0.0.1", "127.0.0.2", msg, now)
                    {
                        let _ = reply.to_bytes();
                    }
                    let _ = engine.take_effects();
                    now += 7;
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
        engine.tick(now);
        let _ = engine.take_effects();
        if !s.read(&mut rbuf) {
            break;
        }
    }
    now += 60_000;
    engine.tick(now);
    let _ = engine.take_effects();
});
