//! Cluster bus frames: encoding and incremental decoding.
//!
//! Each message carries what Disque's does; the byte format is ours (we
//! are not byte-compatible with C Disque). Design goals: versioned, every
//! frame length-checked before anything is buffered or allocated for it,
//! checksummed, exact payload sizes per type, and message types reserved
//! for link authentication.
//!
//! # Frame layout (integers big-endian)
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0  | 4  | magic `DbuZ` |
//! | 4  | 2  | version (= 1) |
//! | 6  | 2  | message type |
//! | 8  | 4  | total frame length, header included |
//! | 12 | 4  | CRC-32/ISO-HDLC of bytes `0..12` followed by `16..total` |
//! | 16 | 2  | sender node flags (receivers only honour LEAVING, 0x80) |
//! | 18 | 2  | sender client port (base port, not bus port) |
//! | 20 | 40 | sender node ID |
//! | 60 | 1  | mflags: bit0 NOREPLY, bit1 INCR_NACKS, bit2 INCR_DELIV, bit3 TOTALS |
//! | 61 | .. | payload |
//!
//! The checksum covers every byte of the frame except itself - including the
//! magic/version/type/length prefix. Covering the type matters: several types
//! share a payload shape (e.g. GOTJOB=5 / QUEUED=7 differ by one bit), so a
//! checksum over "everything after the checksum field" alone would let a
//! single flipped bit turn one valid message into another.
//!
//! # Payloads
//!
//! | type | # | payload | exact payload size |
//! |---|---|---|---|
//! | PING/PONG/MEET | 0/1/2 | u16 count, count x gossip entry (98 bytes) | 2 + 98*count |
//! | FAIL | 3 | node ID[40] | 40 |
//! | REPLJOB | 4 | one serialized job (`job_codec`) | that record's size |
//! | GOTJOB..DELJOB, WORKING | 5..11, 14 | job ID[40], u32 aux | 44 |
//! | NEEDJOBS | 12 | u32 count, u32 qlen, queue | 8 + qlen |
//! | YOURJOBS | 13 | u32 numjobs (>= 1), numjobs serialized jobs | sum of records + 4 |
//! | PAUSE | 15 | u32 flags, u32 qlen, queue | 8 + qlen |
//! | AUTHCHALLENGE | 16 | nonce[16] | 16 |
//! | AUTH | 17 | nonce[16], mac[32] | 48 |
//! | DEADLETTER | 18 | job ID[40], u32 epoch | 44 |
//! | DEDUP | 19 | u32 window seconds, u32 len, entry | 8 + len |
//! | QLENREQ | 20 | u32 request, u32 qlen, queue | 8 + qlen |
//! | QLENREP | 21 | u32 request, u32 8, u64 queued jobs | 16 |
//! | QLENREP (totals) | 21 | u32 request, u32 32, u64 queued, jobs, queues, blocked | 40 |
//! | ACL | 22 | u8 kind, then the kind's body (`acl::sync`) | >= 1 |
//! | PRIORITY | 30 | job ID[40], u32 level | 44 |
//! | CANCEL | 31 | job ID[40], u32 0 | 44 |
//! | PROGRESS | 32 | job ID[40], u64 ms, u8 percent, u16 n, text[n], u32 m, data[m] | >= 40 |
//! | QLIMIT | 33 | u64 version, origin[40], u32 rate, u64 ms, u32 inflight, u32 qlen, queue | 68 + qlen |
//! | SCHEDULE | 40 | a schedule definition (`engine::schedule`) | >= 1 |
//! | BATCH | 41 | a batch state or delta (`engine::batch`) | >= 1 |
//! | DEPS | 42 | u8 kind, then (u8 state, job ID[40]) repeated (`engine::after`) | >= 42 |
//!
//! Types 18..22, 30..33 and 40..42 carry our extensions
//! (docs/COMPATIBILITY.md). A node sends SCHEDULE and BATCH frames only once
//! a schedule or a batch exists, DEPS only while it holds a job added with
//! ADDJOB AFTER or was asked about one.
//!
//! A receiver skips a frame of a type it does not know (`server::bus`),
//! but builds older than that dropped the link on one, so a node sends
//! an ACL frame only to peers whose frames carry [`HFLAG_ACL`] in the
//! header flags (nodes that predate it ignore that bit: they read LEAVING
//! only). Mixed clusters keep their links; the older nodes just do not get
//! the user table.
//!
//! Node totals ride on QLENREQ/QLENREP so that a node predating them
//! keeps its link: a QLENREQ with the TOTALS mflag (and an empty queue
//! name) asks for the receiver's node-wide totals, and only a node that
//! knows the flag answers with the 40-byte QLENREP; an older node ignores
//! the flag and answers the 16-byte form, which tells the asker that this
//! peer's totals are unknown.
//!
//! PING/PONG/MEET of a node with `cluster-announce-*` settings end with an
//! announce trailer (48 bytes, so the payload is 2 + 98*count + 48):
//! ip[46] NUL-padded (empty = use the connection's address), u16 bus port
//! (0 = client port + 10000). Nodes without those settings never send it.
//!
//! Gossip entry (98 bytes): node ID[40] @0, u32 ping_sent @40, u32
//! pong_received @44, ip[46] NUL-padded @48, u16 port @94, u16 flags @96.
//!
//! # Authentication (reserved, not implemented yet)
//!
//! Links are one-directional for requests (as in Disque: a node sends on its own
//! outbound link and only reads inbound ones, except PONG replies), so the
//! intended handshake runs on the connection being accepted: when a node
//! accepts an inbound bus connection and a cluster secret is configured, it
//! writes `AUTHCHALLENGE { nonce }` (16 random bytes) back on that
//! connection and ignores everything else it reads there until the
//! connecting node answers `AUTH { nonce, mac }` with the echoed nonce and
//! `mac = HMAC-SHA256(secret, nonce)`. A wrong or missing answer drops the
//! link. Only the codec exists today.

use crate::protocol::job_codec::{CodecError, JobRecord};
use bytes::{BufMut, Bytes, BytesMut};
use std::fmt;

/// Frame magic.
pub const MAGIC: [u8; 4] = *b"DbuZ";
/// The only protocol version we speak; anything else drops the link.
pub const VERSION: u16 = 1;
/// Fixed header size; the payload starts here.
pub const HEADER_LEN: usize = 61;
/// Bytes needed to know magic, version, type and total length.
pub const PREFIX_LEN: usize = 12;
/// Largest payload accepted. Jobs can be big and YOURJOBS batches several.
pub const MAX_PAYLOAD: usize = 64 * 1024 * 1024;
/// Largest frame accepted (header included).
pub const MAX_FRAME: usize = MAX_PAYLOAD + HEADER_LEN;
/// Serialized size of one gossip entry.
pub const GOSSIP_ENTRY_LEN: usize = 98;
/// Room for the textual IP in a gossip entry (longest IPv6 text + NUL).
pub const GOSSIP_IP_LEN: usize = 46;

/// Do not reply (REPLJOB without GOTJOB).
pub const MFLAG_NOREPLY: u8 = 0x01;
/// QUEUED: increment the nack counter.
pub const MFLAG_INCR_NACKS: u8 = 0x02;
/// QUEUED: increment the additional-deliveries counter.
pub const MFLAG_INCR_DELIV: u8 = 0x04;
/// QLENREQ: answer with the node's totals (40-byte QLENREP), not a queue's length.
pub const MFLAG_TOTALS: u8 = 0x08;
/// SETACK: the job was cancelled (CANCEL), so that a holder that missed
/// the CANCEL frame still knows (job dependencies tell the two apart).
pub const MFLAG_CANCELLED: u8 = 0x10;

/// Header flag: the sender understands ACL frames (type 22). Disjoint from
/// the node-table flags, which stop at LEAVING (0x80).
pub const HFLAG_ACL: u16 = 0x0100;

/// Wire type numbers (0..15 as Disque numbers them, then ours).
pub mod msg_type {
    pub const PING: u16 = 0;
    pub const PONG: u16 = 1;
    pub const MEET: u16 = 2;
    pub const FAIL: u16 = 3;
    pub const REPLJOB: u16 = 4;
    pub const GOTJOB: u16 = 5;
    pub const ENQUEUE: u16 = 6;
    pub const QUEUED: u16 = 7;
    pub const SETACK: u16 = 8;
    pub const WILLQUEUE: u16 = 9;
    pub const GOTACK: u16 = 10;
    pub const DELJOB: u16 = 11;
    pub const NEEDJOBS: u16 = 12;
    pub const YOURJOBS: u16 = 13;
    pub const WORKING: u16 = 14;
    pub const PAUSE: u16 = 15;
    pub const AUTH_CHALLENGE: u16 = 16;
    pub const AUTH: u16 = 17;
    // Our extensions (docs/COMPATIBILITY.md).
    pub const DEADLETTER: u16 = 18;
    pub const DEDUP: u16 = 19;
    pub const QLENREQ: u16 = 20;
    pub const QLENREP: u16 = 21;
    pub const ACL: u16 = 22;
    // Job controls: 30-39.
    pub const PRIORITY: u16 = 30;
    pub const CANCEL: u16 = 31;
    pub const PROGRESS: u16 = 32;
    pub const QLIMIT: u16 = 33;
    /// Schedules and workflows (types 40..49 are theirs).
    pub const SCHEDULE: u16 = 40;
    pub const BATCH: u16 = 41;
    pub const DEPS: u16 = 42;
}

/// Common header fields (framing fields are implicit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub sender: [u8; 40],
    /// Sender's client port (bus port = port + 10000).
    pub port: u16,
    /// Sender's node flags (the engine's node-table flags, which are the
    /// wire values); only LEAVING (0x80) is meaningful to receivers.
    pub flags: u16,
    /// `MFLAG_*` bits.
    pub mflags: u8,
    /// Announced address (PING/PONG/MEET only; see the module docs).
    pub announce: Option<Announce>,
}

/// `cluster-announce-ip` / `cluster-announce-bus-port` of the sender.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Announce {
    /// None: the address the connection comes from.
    pub ip: Option<std::net::IpAddr>,
    /// 0: client port + 10000.
    pub bus_port: u16,
}

/// Size of the announce trailer.
pub const ANNOUNCE_LEN: usize = GOSSIP_IP_LEN + 2;

/// One gossip section entry of PING/PONG/MEET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GossipEntry {
    pub node_id: [u8; 40],
    /// Milliseconds truncated to 32 bits; informational.
    pub ping_sent: u32,
    /// Milliseconds truncated to 32 bits; informational.
    pub pong_received: u32,
    /// Textual address. Encoding keeps at most 46 bytes and stops at the
    /// first NUL (it is NUL-padded on the wire).
    pub ip: String,
    pub port: u16,
    pub flags: u16,
}

/// The messages whose payload is a job-id block: a 40-byte job ID and a
/// u32 whose meaning depends on the type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobMsg {
    /// The replica stored the job (aux unused).
    GotJob,
    /// Queue the job; aux = delay in seconds (0 = enqueue now).
    Enqueue,
    /// The sender queued the job; aux = its dead-letter epoch. Counter
    /// increments travel in the header mflags.
    Queued,
    /// The job was acknowledged; aux = sender's |nodes_delivered| ("may-have").
    SetAck,
    /// The sender will queue the job soon (aux unused).
    WillQueue,
    /// Answer to SETACK; aux = 1 if the sender knows the job.
    GotAck,
    /// Delete the job (aux unused).
    DelJob,
    /// A consumer is working on the job; aux = delay in seconds.
    Working,
    /// aux = the job's dead-letter epoch (odd = dead, even = redriven).
    DeadLetter,
    /// aux = the job's new PRIORITY level.
    Priority,
    /// The job was cancelled (aux unused); a SETACK follows.
    Cancel,
}

impl JobMsg {
    /// Wire type number.
    pub fn msg_type(self) -> u16 {
        use msg_type::*;
        match self {
            JobMsg::GotJob => GOTJOB,
            JobMsg::Enqueue => ENQUEUE,
            JobMsg::Queued => QUEUED,
            JobMsg::SetAck => SETACK,
            JobMsg::WillQueue => WILLQUEUE,
            JobMsg::GotAck => GOTACK,
            JobMsg::DelJob => DELJOB,
            JobMsg::Working => WORKING,
            JobMsg::DeadLetter => DEADLETTER,
            JobMsg::Priority => PRIORITY,
            JobMsg::Cancel => CANCEL,
        }
    }

    fn from_type(t: u16) -> Option<JobMsg> {
        use msg_type::*;
        Some(match t {
            GOTJOB => JobMsg::GotJob,
            ENQUEUE => JobMsg::Enqueue,
            QUEUED => JobMsg::Queued,
            SETACK => JobMsg::SetAck,
            WILLQUEUE => JobMsg::WillQueue,
            GOTACK => JobMsg::GotAck,
            DELJOB => JobMsg::DelJob,
            WORKING => JobMsg::Working,
            DEADLETTER => JobMsg::DeadLetter,
            PRIORITY => JobMsg::Priority,
            CANCEL => JobMsg::Cancel,
            _ => return None,
        })
    }
}

/// Typed payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    Ping(Vec<GossipEntry>),
    Pong(Vec<GossipEntry>),
    Meet(Vec<GossipEntry>),
    Fail {
        node: [u8; 40],
    },
    /// One encoded [`JobRecord`] (validated structurally on decode).
    ReplJob {
        job: Bytes,
    },
    /// The job-level messages that carry a job ID and one number (the
    /// 44-byte "job-id block"); `kind` says which and what `aux` means.
    Job {
        kind: JobMsg,
        job_id: [u8; 40],
        aux: u32,
    },
    NeedJobs {
        count: u32,
        queue: Bytes,
    },
    /// Each element is one encoded [`JobRecord`]; never empty after decode.
    YourJobs {
        jobs: Vec<Bytes>,
    },
    /// flags: 1 = in, 2 = out.
    Pause {
        flags: u32,
        queue: Bytes,
    },
    AuthChallenge {
        nonce: [u8; 16],
    },
    Auth {
        nonce: [u8; 16],
        mac: [u8; 32],
    },
    /// A DEDUP key registration: `window` = seconds left, `entry` =
    /// `engine::dedup` encoding of queue, key and job ID.
    Dedup {
        window: u32,
        entry: Bytes,
    },
    /// QLEN <queue> CLUSTER: how many jobs of `queue` are queued at the receiver?
    QLenReq {
        req: u32,
        queue: Bytes,
    },
    /// Answer to [`Body::QLenReq`] `req`.
    QLenRep {
        req: u32,
        len: u64,
    },
    /// Answer to a [`Body::QLenReq`] sent with [`MFLAG_TOTALS`]: the
    /// sender's node-wide totals (wire type QLENREP, longer payload).
    QLenTotals {
        req: u32,
        totals: NodeTotals,
    },
    /// The user table's replication (`acl::sync` encodes and checks the
    /// payload; here it is only a non-empty byte string).
    Acl {
        data: Bytes,
    },
    /// A schedule definition (`engine::schedule` checks the payload; here
    /// it is only a non-empty byte string).
    Schedule {
        data: Bytes,
    },
    /// A worker's progress report: job ID[40] then `job_ext::Progress`'s
    /// encoding (checked by its consumer, `engine::progress`).
    Progress {
        data: Bytes,
    },
    /// A queue's QLIMIT setting (`engine::limits` encodes and checks it).
    QLimit {
        data: Bytes,
    },
    /// A batch state or delta (`engine::batch` checks the payload).
    Batch {
        data: Bytes,
    },
    /// Questions about, or answers on, job dependencies (`engine::after`
    /// checks the payload).
    Deps {
        data: Bytes,
    },
}

/// One node's queue totals (the dashboard's cluster view).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeTotals {
    /// Jobs queued, all queues.
    pub queued: u64,
    /// Jobs the node holds in any state (queued, active, acked).
    pub jobs: u64,
    pub queues: u64,
    /// Consumers blocked in GETJOB.
    pub blocked: u64,
}

/// A complete bus message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub header: Header,
    pub body: Body,
}

/// Reasons to drop a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusError {
    BadMagic,
    BadVersion(u16),
    BadLength(u64),
    BadChecksum,
    UnknownType(u16),
    BadPayload(&'static str),
}

impl fmt::Display for BusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BusError::BadMagic => f.write_str("bus frame: bad magic (expected \"DbuZ\")"),
            BusError::BadVersion(v) => {
                write!(f, "bus frame: unsupported version {v} (expected {VERSION})")
            }
            BusError::BadLength(n) => write!(
                f,
                "bus frame: bad total length {n} (allowed {HEADER_LEN}..={MAX_FRAME})"
            ),
            BusError::BadChecksum => f.write_str("bus frame: checksum mismatch"),
            BusError::UnknownType(t) => write!(f, "bus frame: unknown message type {t}"),
            BusError::BadPayload(why) => write!(f, "bus frame: bad payload: {why}"),
        }
    }
}

impl std::error::Error for BusError {}

// ---------------------------------------------------------------------------
// CRC-32/ISO-HDLC (the common CRC32), computed with `crc32fast`, which
// uses the CPU's carry-less multiply where available instead of a table
// lookup per byte: every bus frame is checksummed whole, REPLJOB bodies
// included.

/// CRC-32/ISO-HDLC of one contiguous slice.
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// Checksum of a whole frame, skipping the checksum field itself. The
/// caller guarantees `frame.len() >= HEADER_LEN`; shorter input just
/// checksums what exists (never panics).
fn frame_crc(frame: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(frame.get(..12).unwrap_or(frame));
    h.update(frame.get(16..).unwrap_or(&[]));
    h.finalize()
}

// ---------------------------------------------------------------------------
// Encoding

fn wire_u32(n: usize) -> u32 {
    // Oversized values cannot be produced by a sane caller (MAX_FRAME is far
    // below 4 GiB); writing u32::MAX makes the peer reject the frame rather
    // than mis-frame it.
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn gossip_ip_bytes(ip: &str) -> &[u8] {
    let mut s = ip.split('\0').next().unwrap_or("");
    if s.len() > GOSSIP_IP_LEN {
        let mut cut = GOSSIP_IP_LEN;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s = &s[..cut];
    }
    s.as_bytes()
}

/// Gossip lists longer than u16::MAX are cut there (the count is a u16);
/// real clusters are nowhere near that.
fn gossip_slice(g: &[GossipEntry]) -> &[GossipEntry] {
    &g[..g.len().min(u16::MAX as usize)]
}

impl Body {
    /// Wire type number.
    pub fn msg_type(&self) -> u16 {
        use msg_type::*;
        match self {
            Body::Ping(_) => PING,
            Body::Pong(_) => PONG,
            Body::Meet(_) => MEET,
            Body::Fail { .. } => FAIL,
            Body::ReplJob { .. } => REPLJOB,
            Body::Job { kind, .. } => kind.msg_type(),
            Body::NeedJobs { .. } => NEEDJOBS,
            Body::YourJobs { .. } => YOURJOBS,
            Body::Pause { .. } => PAUSE,
            Body::AuthChallenge { .. } => AUTH_CHALLENGE,
            Body::Auth { .. } => AUTH,
            Body::Dedup { .. } => DEDUP,
            Body::QLenReq { .. } => QLENREQ,
            Body::QLenRep { .. } | Body::QLenTotals { .. } => QLENREP,
            Body::Acl { .. } => ACL,
            Body::Schedule { .. } => SCHEDULE,
            Body::Progress { .. } => PROGRESS,
            Body::QLimit { .. } => QLIMIT,
            Body::Batch { .. } => BATCH,
            Body::Deps { .. } => DEPS,
        }
    }

    /// Upper-case name for logs.
    pub fn name(&self) -> &'static str {
        type_name(self.msg_type())
    }

    fn job_block(&self) -> Option<(&[u8; 40], u32)> {
        match self {
            Body::Job { job_id, aux, .. } => Some((job_id, *aux)),
            _ => None,
        }
    }

    fn payload_len(&self) -> usize {
        if self.job_block().is_some() {
            return 44;
        }
        match self {
            Body::Ping(g) | Body::Pong(g) | Body::Meet(g) => {
                2 + GOSSIP_ENTRY_LEN * gossip_slice(g).len()
            }
            Body::Fail { .. } => 40,
            Body::ReplJob { job }
            | Body::Acl { data: job }
            | Body::Progress { data: job }
            | Body::Schedule { data: job }
            | Body::QLimit { data: job }
            | Body::Batch { data: job }
            | Body::Deps { data: job } => job.len(),
            Body::NeedJobs { queue, .. }
            | Body::Pause { queue, .. }
            | Body::QLenReq { queue, .. }
            | Body::Dedup { entry: queue, .. } => 8 + queue.len(),
            Body::QLenRep { .. } => 16,
            Body::QLenTotals { .. } => 40,
            Body::YourJobs { jobs } => 4 + jobs.iter().map(Bytes::len).sum::<usize>(),
            Body::AuthChallenge { .. } => 16,
            Body::Auth { .. } => 48,
            _ => 0,
        }
    }

    fn encode(&self, out: &mut BytesMut) {
        if let Some((id, aux)) = self.job_block() {
            out.put_slice(id);
            out.put_u32(aux);
            return;
        }
        match self {
            Body::Ping(g) | Body::Pong(g) | Body::Meet(g) => {
                let g = gossip_slice(g);
                out.put_u16(g.len() as u16);
                for e in g {
                    out.put_slice(&e.node_id);
                    out.put_u32(e.ping_sent);
                    out.put_u32(e.pong_received);
                    let ip = gossip_ip_bytes(&e.ip);
                    out.put_slice(ip);
                    out.put_bytes(0, GOSSIP_IP_LEN - ip.len());
                    out.put_u16(e.port);
                    out.put_u16(e.flags);
                }
            }
            Body::Fail { node } => out.put_slice(node),
            Body::ReplJob { job }
            | Body::Acl { data: job }
            | Body::Progress { data: job }
            | Body::Schedule { data: job }
            | Body::QLimit { data: job }
            | Body::Batch { data: job }
            | Body::Deps { data: job } => out.put_slice(job),
            Body::QLenRep { req, len } => {
                out.put_u32(*req);
                out.put_u32(8);
                out.put_u64(*len);
            }
            Body::QLenTotals { req, totals: t } => {
                out.put_u32(*req);
                out.put_u32(32);
                for v in [t.queued, t.jobs, t.queues, t.blocked] {
                    out.put_u64(v);
                }
            }
            Body::NeedJobs { count: a, queue }
            | Body::Pause { flags: a, queue }
            | Body::QLenReq { req: a, queue }
            | Body::Dedup {
                window: a,
                entry: queue,
            } => {
                out.put_u32(*a);
                out.put_u32(wire_u32(queue.len()));
                out.put_slice(queue);
            }
            Body::YourJobs { jobs } => {
                out.put_u32(wire_u32(jobs.len()));
                for j in jobs {
                    out.put_slice(j);
                }
            }
            Body::AuthChallenge { nonce } => out.put_slice(nonce),
            Body::Auth { nonce, mac } => {
                out.put_slice(nonce);
                out.put_slice(mac);
            }
            _ => {}
        }
    }
}

/// Upper-case name of a type number ("UNKNOWN" otherwise).
pub fn type_name(t: u16) -> &'static str {
    use msg_type::*;
    match t {
        PING => "PING",
        PONG => "PONG",
        MEET => "MEET",
        FAIL => "FAIL",
        REPLJOB => "REPLJOB",
        GOTJOB => "GOTJOB",
        ENQUEUE => "ENQUEUE",
        QUEUED => "QUEUED",
        SETACK => "SETACK",
        WILLQUEUE => "WILLQUEUE",
        GOTACK => "GOTACK",
        DELJOB => "DELJOB",
        NEEDJOBS => "NEEDJOBS",
        YOURJOBS => "YOURJOBS",
        WORKING => "WORKING",
        PAUSE => "PAUSE",
        AUTH_CHALLENGE => "AUTHCHALLENGE",
        AUTH => "AUTH",
        DEADLETTER => "DEADLETTER",
        DEDUP => "DEDUP",
        QLENREQ => "QLENREQ",
        QLENREP => "QLENREP",
        ACL => "ACL",
        SCHEDULE => "SCHEDULE",
        PRIORITY => "PRIORITY",
        CANCEL => "CANCEL",
        PROGRESS => "PROGRESS",
        QLIMIT => "QLIMIT",
        BATCH => "BATCH",
        DEPS => "DEPS",
        _ => "UNKNOWN",
    }
}

impl Message {
    pub fn new(header: Header, body: Body) -> Self {
        Message { header, body }
    }

    /// Total bytes `encode` appends. Callers building large YOURJOBS
    /// batches or REPLJOB with huge bodies should keep this `<= MAX_FRAME`:
    /// a larger frame is still written but every peer will drop the link.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.body.payload_len() + self.announce_len()
    }

    fn announce_len(&self) -> usize {
        let gossip = matches!(self.body, Body::Ping(_) | Body::Pong(_) | Body::Meet(_));
        if gossip && self.header.announce.is_some() {
            ANNOUNCE_LEN
        } else {
            0
        }
    }

    /// Append one complete frame to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        let total = self.encoded_len();
        out.reserve(total);
        let start = out.len();
        out.put_slice(&MAGIC);
        out.put_u16(VERSION);
        out.put_u16(self.body.msg_type());
        out.put_u32(wire_u32(total));
        out.put_u32(0); // checksum, patched below
        out.put_u16(self.header.flags);
        out.put_u16(self.header.port);
        out.put_slice(&self.header.sender);
        out.put_u8(self.header.mflags);
        self.body.encode(out);
        if self.announce_len() != 0 {
            if let Some(a) = &self.header.announce {
                let text = a.ip.map(|i| i.to_string()).unwrap_or_default();
                let ip = text.as_bytes();
                let n = ip.len().min(GOSSIP_IP_LEN);
                out.put_slice(&ip[..n]);
                out.put_bytes(0, GOSSIP_IP_LEN - n);
                out.put_u16(a.bus_port);
            }
        }
        let crc = frame_crc(&out[start..]);
        out[start + 12..start + 16].copy_from_slice(&crc.to_be_bytes());
    }

    /// Convenience: encode into a fresh buffer.
    pub fn to_bytes(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(self.encoded_len());
        self.encode(&mut b);
        b.freeze()
    }
}

// ---------------------------------------------------------------------------
// Decoding

/// Bounds-checked big-endian reader over a payload.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

const SHORT: BusError = BusError::BadPayload("payload shorter than its contents");

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], BusError> {
        let end = self.pos.checked_add(n).ok_or(SHORT)?;
        let s = self.buf.get(self.pos..end).ok_or(SHORT)?;
        self.pos = end;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self) -> Result<[u8; N], BusError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u16(&mut self) -> Result<u16, BusError> {
        Ok(u16::from_be_bytes(self.arr()?))
    }
    fn u32(&mut self) -> Result<u32, BusError> {
        Ok(u32::from_be_bytes(self.arr()?))
    }
    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }
}

fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Decode one frame from the front of `buf`.
///
/// * `Ok(None)`: need more bytes; `buf` untouched.
/// * `Ok(Some(m))`: exactly one frame was removed from `buf`.
/// * `Err(e)`: the stream is unusable, drop the link (`buf` untouched).
///
/// Magic, version and length are checked as soon as their bytes are present
/// (after 4, 6 and 12 bytes), so garbage or an oversize length is rejected
/// before any of the frame body is waited for. Nothing is allocated here
/// for the frame: it is split off the caller's buffer and payload byte
/// strings are zero-copy slices of it. We deliberately do not `reserve` the
/// announced length, so a peer cannot make us pre-allocate 64 MiB per link
/// by sending 12 bytes.
///
/// Retention caveat: payload `Bytes` (REPLJOB/YOURJOBS records, queue
/// names) keep the link's read-buffer allocation alive while held. Short
/// lived handling is fine; anything stored long term should be copied
/// (`JobRecord::decode` copies, `JobRecord::decode_bytes` does not).
///
/// The type is checked only after the checksum so that corruption reports
/// as `BadChecksum` and `UnknownType` means a well-formed frame from a peer
/// speaking a type we do not know.
pub fn decode(buf: &mut BytesMut) -> Result<Option<Message>, BusError> {
    let have = buf.len();
    let m = have.min(4);
    if buf[..m] != MAGIC[..m] {
        return Err(BusError::BadMagic);
    }
    if have < 6 {
        return Ok(None);
    }
    let version = be_u16(buf, 4);
    if version != VERSION {
        return Err(BusError::BadVersion(version));
    }
    if have < PREFIX_LEN {
        return Ok(None);
    }
    let total = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
    if !(HEADER_LEN..=MAX_FRAME).contains(&total) {
        return Err(BusError::BadLength(total as u64));
    }
    if have < total {
        return Ok(None);
    }
    let frame = &buf[..total];
    let want = u32::from_be_bytes([frame[12], frame[13], frame[14], frame[15]]);
    if frame_crc(frame) != want {
        return Err(BusError::BadChecksum);
    }
    let ty = be_u16(frame, 6);
    if type_name(ty) == "UNKNOWN" {
        return Err(BusError::UnknownType(ty));
    }
    let mut sender = [0u8; 40];
    sender.copy_from_slice(&frame[20..60]);
    let header = Header {
        sender,
        port: be_u16(frame, 18),
        flags: be_u16(frame, 16),
        mflags: frame[60],
        announce: None,
    };
    // Validate the payload on the borrowed buffer first so an error leaves
    // `buf` untouched; only then split the frame off (O(1), no copy) and
    // build the body with payload byte strings sharing the frame.
    let mut header = header;
    let mut shape = parse_body_shape(ty, &buf[HEADER_LEN..total])?;
    if let Shape::Gossip(_, a) = &mut shape {
        header.announce = a.take();
    }
    let frame = buf.split_to(total).freeze();
    let payload = frame.slice(HEADER_LEN..);
    Ok(Some(Message {
        header,
        body: shape.materialize(ty, &payload)?,
    }))
}

/// Result of validating a payload before consuming the frame: everything
/// that can fail is checked here, on a borrowed slice.
enum Shape {
    Gossip(Vec<GossipEntry>, Option<Announce>),
    Fixed,
    /// Queue name at payload[8..].
    Queue,
    /// Byte ranges of each job record inside the payload.
    Jobs(Vec<(usize, usize)>),
    /// REPLJOB: the whole payload is one record (no `Vec` per frame: one
    /// REPLJOB arrives per replicated job).
    Job,
    /// ACL: the whole payload, checked by its consumer.
    Opaque,
}

fn parse_gossip(p: &[u8]) -> Result<(Vec<GossipEntry>, Option<Announce>), BusError> {
    let mut r = Reader { buf: p, pos: 0 };
    let count = r.u16()? as usize;
    let announced = r.remaining() == count * GOSSIP_ENTRY_LEN + ANNOUNCE_LEN;
    // Size check first: the Vec below is bounded by bytes really present.
    if !announced && r.remaining() != count * GOSSIP_ENTRY_LEN {
        return Err(BusError::BadPayload(
            "gossip count does not match payload size",
        ));
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let node_id = r.arr::<40>()?;
        let ping_sent = r.u32()?;
        let pong_received = r.u32()?;
        let ipb = r.take(GOSSIP_IP_LEN)?;
        let end = ipb.iter().position(|&b| b == 0).unwrap_or(GOSSIP_IP_LEN);
        if ipb[end..].iter().any(|&b| b != 0) {
            return Err(BusError::BadPayload("gossip ip not NUL padded"));
        }
        let ip = std::str::from_utf8(&ipb[..end])
            .map_err(|_| BusError::BadPayload("gossip ip not UTF-8"))?
            .to_owned();
        let port = r.u16()?;
        let flags = r.u16()?;
        out.push(GossipEntry {
            node_id,
            ping_sent,
            pong_received,
            ip,
            port,
            flags,
        });
    }
    let announce = if announced {
        let text = read_nul_padded(r.take(GOSSIP_IP_LEN)?)?;
        let ip = if text.is_empty() {
            None
        } else {
            Some(
                text.parse()
                    .map_err(|_| BusError::BadPayload("announce ip not an address"))?,
            )
        };
        Some(Announce {
            ip,
            bus_port: r.u16()?,
        })
    } else {
        None
    };
    Ok((out, announce))
}

fn read_nul_padded(ipb: &[u8]) -> Result<String, BusError> {
    let end = ipb.iter().position(|&b| b == 0).unwrap_or(ipb.len());
    if ipb[end..].iter().any(|&b| b != 0) {
        return Err(BusError::BadPayload("announce ip not NUL padded"));
    }
    std::str::from_utf8(&ipb[..end])
        .map(str::to_owned)
        .map_err(|_| BusError::BadPayload("announce ip not UTF-8"))
}

fn job_err(e: CodecError) -> BusError {
    match e {
        CodecError::Truncated => BusError::BadPayload("job record truncated"),
        CodecError::Invalid(why) => BusError::BadPayload(why),
    }
}

fn parse_body_shape(ty: u16, p: &[u8]) -> Result<Shape, BusError> {
    use msg_type::*;
    let exact = |n: usize, why: &'static str| {
        if p.len() == n {
            Ok(Shape::Fixed)
        } else {
            Err(BusError::BadPayload(why))
        }
    };
    match ty {
        PING | PONG | MEET => parse_gossip(p).map(|(g, a)| Shape::Gossip(g, a)),
        FAIL => exact(40, "FAIL payload must be 40 bytes"),
        t if JobMsg::from_type(t).is_some() => exact(44, "job-id block must be 44 bytes"),
        AUTH_CHALLENGE => exact(16, "AUTHCHALLENGE payload must be 16 bytes"),
        AUTH => exact(48, "AUTH payload must be 48 bytes"),
        ACL if p.is_empty() => Err(BusError::BadPayload("ACL payload is empty")),
        ACL => Ok(Shape::Opaque),
        SCHEDULE if p.is_empty() => Err(BusError::BadPayload("SCHEDULE payload is empty")),
        SCHEDULE => Ok(Shape::Opaque),
        PROGRESS if p.len() < 40 => Err(BusError::BadPayload("PROGRESS payload too short")),
        PROGRESS => Ok(Shape::Opaque),
        QLIMIT if p.len() < 68 => Err(BusError::BadPayload("QLIMIT payload too short")),
        QLIMIT => Ok(Shape::Opaque),
        BATCH if p.is_empty() => Err(BusError::BadPayload("BATCH payload is empty")),
        BATCH => Ok(Shape::Opaque),
        DEPS if p.len() < 42 => Err(BusError::BadPayload("DEPS payload too short")),
        DEPS => Ok(Shape::Opaque),
        QLENREP => match (p.len(), p.get(4..8)) {
            (16, Some([0, 0, 0, 8])) | (40, Some([0, 0, 0, 32])) => Ok(Shape::Fixed),
            _ => Err(BusError::BadPayload(
                "QLENREP payload must be 16 or 40 bytes",
            )),
        },
        NEEDJOBS | PAUSE | QLENREQ | DEDUP => {
            let mut r = Reader { buf: p, pos: 0 };
            r.u32()?;
            let qlen = r.u32()? as usize;
            if r.remaining() != qlen {
                return Err(BusError::BadPayload(
                    "queue length does not match payload size",
                ));
            }
            Ok(Shape::Queue)
        }
        REPLJOB => {
            let used = JobRecord::validate(p).map_err(job_err)?;
            if used != p.len() {
                return Err(BusError::BadPayload("REPLJOB payload has trailing bytes"));
            }
            Ok(Shape::Job)
        }
        YOURJOBS => {
            let mut r = Reader { buf: p, pos: 0 };
            let n = r.u32()?;
            if n == 0 {
                return Err(BusError::BadPayload("YOURJOBS with zero jobs"));
            }
            // No with_capacity(n): n is untrusted. Each pushed range
            // corresponds to a validated record of >= 84 bytes, so the Vec
            // is bounded by the payload size.
            let mut ranges = Vec::new();
            let mut pos = 4;
            for _ in 0..n {
                let rest = p.get(pos..).ok_or(SHORT)?;
                let used = JobRecord::validate(rest).map_err(job_err)?;
                ranges.push((pos, pos + used));
                pos += used;
            }
            if pos != p.len() {
                return Err(BusError::BadPayload("YOURJOBS payload has trailing bytes"));
            }
            Ok(Shape::Jobs(ranges))
        }
        _ => Err(BusError::UnknownType(ty)),
    }
}

impl Shape {
    /// Build the typed body from a validated payload. Cannot fail for
    /// shapes produced by `parse_body_shape` on the same bytes; the
    /// fallible signature only avoids panicking indexing.
    fn materialize(self, ty: u16, p: &Bytes) -> Result<Body, BusError> {
        use msg_type::*;
        let mut r = Reader { buf: p, pos: 0 };
        Ok(match self {
            Shape::Gossip(g, _) => match ty {
                PING => Body::Ping(g),
                PONG => Body::Pong(g),
                _ => Body::Meet(g),
            },
            Shape::Job => Body::ReplJob { job: p.clone() },
            Shape::Opaque if ty == PROGRESS => Body::Progress { data: p.clone() },
            Shape::Opaque if ty == SCHEDULE => Body::Schedule { data: p.clone() },
            Shape::Opaque if ty == QLIMIT => Body::QLimit { data: p.clone() },
            Shape::Opaque if ty == BATCH => Body::Batch { data: p.clone() },
            Shape::Opaque if ty == DEPS => Body::Deps { data: p.clone() },
            Shape::Opaque => Body::Acl { data: p.clone() },
            Shape::Jobs(ranges) => Body::YourJobs {
                jobs: ranges.into_iter().map(|(a, b)| p.slice(a..b)).collect(),
            },
            Shape::Queue => {
                let a = r.u32()?;
                let _qlen = r.u32()?;
                if p.len() < 8 {
                    return Err(SHORT);
                }
                let queue = p.slice(8..);
                match ty {
                    NEEDJOBS => Body::NeedJobs { count: a, queue },
                    QLENREQ => Body::QLenReq { req: a, queue },
                    DEDUP => Body::Dedup {
                        window: a,
                        entry: queue,
                    },
                    _ => Body::Pause { flags: a, queue },
                }
            }
            Shape::Fixed => match ty {
                FAIL => Body::Fail { node: r.arr()? },
                AUTH_CHALLENGE => Body::AuthChallenge { nonce: r.arr()? },
                AUTH => Body::Auth {
                    nonce: r.arr()?,
                    mac: r.arr()?,
                },
                QLENREP => {
                    let req = r.u32()?;
                    let _len_field = r.u32()?;
                    let mut u64s = [0u64; 4];
                    let n = p.len().saturating_sub(8) / 8;
                    for v in u64s.iter_mut().take(n) {
                        let hi = u64::from(r.u32()?);
                        *v = (hi << 32) | u64::from(r.u32()?);
                    }
                    if n == 1 {
                        Body::QLenRep { req, len: u64s[0] }
                    } else {
                        let [queued, jobs, queues, blocked] = u64s;
                        Body::QLenTotals {
                            req,
                            totals: NodeTotals {
                                queued,
                                jobs,
                                queues,
                                blocked,
                            },
                        }
                    }
                }
                _ => {
                    let job_id = r.arr()?;
                    let aux = r.u32()?;
                    let kind = JobMsg::from_type(ty).ok_or(BusError::UnknownType(ty))?;
                    Body::Job { kind, job_id, aux }
                }
            },
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic
mod tests {
    use super::*;

    fn hdr(mflags: u8) -> Header {
        Header {
            announce: None,
            sender: *b"0123456789abcdef0123456789abcdef01234567",
            port: 7711,
            flags: 0x80,
            mflags,
        }
    }

    fn job(n_nodes: usize, body: &[u8]) -> Bytes {
        JobRecord {
            id: *b"D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-003d",
            state: 1,
            gc_retry: 0,
            flags: 0,
            repl: 3,
            etime: 10,
            ctime: 1 << 40,
            delay: 0,
            retry: 30,
            nacks: 0,
            deliv: 0,
            queue: Bytes::from_static(b"myqueue"),
            body: Bytes::copy_from_slice(body),
            nodes: vec![[b'f'; 40]; n_nodes],
            ext: None,
        }
        .to_bytes()
    }

    fn gossip() -> Vec<GossipEntry> {
        vec![
            GossipEntry {
                node_id: [b'a'; 40],
                ping_sent: 1,
                pong_received: 2,
                ip: "127.0.0.1".into(),
                port: 7712,
                flags: 0,
            },
            GossipEntry {
                node_id: [b'b'; 40],
                ping_sent: u32::MAX,
                pong_received: 0,
                ip: "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255".into(),
                port: 0,
                flags: 0x83,
            },
        ]
    }

    fn all_messages() -> Vec<Message> {
        let id = *b"D-00000000-OF1sLDglZX7WluoLS7rcXAGl-0000";
        let bodies = vec![
            Body::Ping(gossip()),
            Body::Ping(vec![]),
            Body::Pong(gossip()),
            Body::Meet(gossip()),
            Body::Fail { node: [b'c'; 40] },
            Body::ReplJob {
                job: job(2, b"hello"),
            },
            Body::Job {
                kind: JobMsg::GotJob,
                job_id: id,
                aux: 0,
            },
            Body::Job {
                kind: JobMsg::Enqueue,
                job_id: id,
                aux: 5,
            },
            Body::Job {
                kind: JobMsg::Queued,
                job_id: id,
                aux: 0,
            },
            Body::Job {
                kind: JobMsg::SetAck,
                job_id: id,
                aux: 3,
            },
            Body::Job {
                kind: JobMsg::WillQueue,
                job_id: id,
                aux: 0,
            },
            Body::Job {
                kind: JobMsg::GotAck,
                job_id: id,
                aux: 1,
            },
            Body::Job {
                kind: JobMsg::DelJob,
                job_id: id,
                aux: 0,
            },
            Body::Job {
                kind: JobMsg::Working,
                job_id: id,
                aux: 0,
            },
            Body::NeedJobs {
                count: 10,
                queue: Bytes::from_static(b"q1"),
            },
            Body::YourJobs {
                jobs: vec![job(0, b""), job(1, b"x"), job(3, &[0u8; 1000])],
            },
            Body::Pause {
                flags: 3,
                queue: Bytes::new(),
            },
            Body::AuthChallenge { nonce: [7; 16] },
            Body::Auth {
                nonce: [7; 16],
                mac: [9; 32],
            },
            Body::Job {
                kind: JobMsg::DeadLetter,
                job_id: id,
                aux: 3,
            },
            Body::Job {
                kind: JobMsg::Priority,
                job_id: id,
                aux: 9,
            },
            Body::Job {
                kind: JobMsg::Cancel,
                job_id: id,
                aux: 0,
            },
            Body::Progress {
                data: Bytes::from_static(&[b'x'; 60]),
            },
            Body::QLimit {
                data: Bytes::from_static(&[b'x'; 70]),
            },
            Body::Dedup {
                window: 300,
                entry: Bytes::from_static(b"entry"),
            },
            Body::QLenReq {
                req: 7,
                queue: Bytes::from_static(b"q"),
            },
            Body::QLenRep {
                req: 7,
                len: (5 << 32) | 9,
            },
            Body::QLenTotals {
                req: 8,
                totals: NodeTotals {
                    queued: 1,
                    jobs: (3 << 32) | 2,
                    queues: 4,
                    blocked: 5,
                },
            },
            Body::Acl {
                data: Bytes::from_static(b"\x01table"),
            },
            Body::Schedule {
                data: Bytes::from_static(b"\x01def"),
            },
            Body::Batch {
                data: Bytes::from_static(b"\x01batch"),
            },
            Body::Deps {
                data: Bytes::from(vec![1u8; 42]),
            },
        ];
        bodies
            .into_iter()
            .enumerate()
            .map(|(i, b)| Message::new(hdr((i % 8) as u8), b))
            .collect()
    }

    #[test]
    fn crc_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn every_type_round_trips() {
        let msgs = all_messages();
        let mut types: Vec<u16> = msgs.iter().map(|m| m.body.msg_type()).collect();
        types.dedup();
        assert_eq!(types.len(), 30, "all types covered");
        for m in &msgs {
            let mut b = BytesMut::new();
            m.encode(&mut b);
            assert_eq!(b.len(), m.encoded_len(), "{}", m.body.name());
            b.extend_from_slice(b"DbuZ"); // start of the next frame stays
            let d = decode(&mut b).unwrap().unwrap();
            assert_eq!(&d, m);
            assert_eq!(&b[..], b"DbuZ", "exactly one frame consumed");
        }
    }

    #[test]
    fn announce_trailer_only_on_membership_frames() {
        let mut h = hdr(0);
        h.announce = Some(Announce {
            ip: Some("10.1.2.3".parse().unwrap()),
            bus_port: 30002,
        });
        let ping = Message::new(h, Body::Ping(Vec::new()));
        let mut b = BytesMut::new();
        ping.encode(&mut b);
        assert_eq!(b.len(), HEADER_LEN + 2 + ANNOUNCE_LEN);
        assert_eq!(decode(&mut b).unwrap().unwrap(), ping);
        // Without announce settings the frame is the plain one.
        let plain = Message::new(hdr(0), Body::Ping(Vec::new()));
        assert_eq!(plain.encoded_len(), HEADER_LEN + 2);
        // Other types never carry it (and decode without it).
        let fail = Message::new(h, Body::Fail { node: [b'a'; 40] });
        let mut b = BytesMut::new();
        fail.encode(&mut b);
        assert_eq!(decode(&mut b).unwrap().unwrap().header.announce, None);
    }

    #[test]
    fn stream_of_frames() {
        let msgs = all_messages();
        let mut b = BytesMut::new();
        for m in &msgs {
            m.encode(&mut b);
        }
        let mut out = vec![];
        while let Some(m) = decode(&mut b).unwrap() {
            out.push(m);
        }
        assert_eq!(out, msgs);
        assert!(b.is_empty());
    }

    #[test]
    fn layout_offsets() {
        let m = Message::new(
            hdr(MFLAG_INCR_DELIV),
            Body::Job {
                kind: JobMsg::GotAck,
                job_id: [b'j'; 40],
                aux: 0x0102_0304,
            },
        );
        let b = m.to_bytes();
        assert_eq!(b.len(), HEADER_LEN + 44);
        assert_eq!(&b[0..4], b"DbuZ");
        assert_eq!(&b[4..6], &[0, 1]);
        assert_eq!(&b[6..8], &[0, 10]);
        assert_eq!(&b[8..12], &((HEADER_LEN + 44) as u32).to_be_bytes());
        let mut c = b[..12].to_vec();
        c.extend_from_slice(&b[16..]);
        assert_eq!(&b[12..16], &crc32(&c).to_be_bytes());
        assert_eq!(&b[16..18], &[0, 0x80]);
        assert_eq!(&b[18..20], &7711u16.to_be_bytes());
        assert_eq!(&b[20..60], &hdr(0).sender);
        assert_eq!(b[60], MFLAG_INCR_DELIV);
        assert_eq!(&b[61..101], &[b'j'; 40]);
        assert_eq!(&b[101..105], &[1, 2, 3, 4]);
    }

    #[test]
    fn truncated_at_every_boundary_is_none() {
        for m in all_messages() {
            let full = m.to_bytes();
            for cut in 0..full.len() {
                let mut b = BytesMut::from(&full[..cut]);
                assert_eq!(decode(&mut b), Ok(None), "{} cut {cut}", m.body.name());
                assert_eq!(b.len(), cut, "nothing consumed");
            }
        }
    }

    #[test]
    fn early_rejections() {
        // Bad magic from the very first byte.
        assert_eq!(
            decode(&mut BytesMut::from(&b"X"[..])),
            Err(BusError::BadMagic)
        );
        assert_eq!(
            decode(&mut BytesMut::from(&b"DbuX"[..])),
            Err(BusError::BadMagic)
        );
        // Bad version as soon as it is there.
        let mut b = BytesMut::from(&b"DbuZ\x00\x02"[..]);
        assert_eq!(decode(&mut b), Err(BusError::BadVersion(2)));
        // Oversize length rejected right after the 12-byte prefix, without
        // waiting for (or buffering) the announced bytes.
        let mut p = b"DbuZ\x00\x01\x00\x00".to_vec();
        p.extend_from_slice(&((MAX_FRAME + 1) as u32).to_be_bytes());
        let mut b = BytesMut::from(&p[..]);
        assert_eq!(
            decode(&mut b),
            Err(BusError::BadLength((MAX_FRAME + 1) as u64))
        );
        assert_eq!(b.len(), p.len(), "nothing consumed or reserved for");
        let mut p = b"DbuZ\x00\x01\x00\x00".to_vec();
        p.extend_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(
            decode(&mut BytesMut::from(&p[..])),
            Err(BusError::BadLength(u32::MAX as u64))
        );
        // Undersize length.
        let mut p = b"DbuZ\x00\x01\x00\x00".to_vec();
        p.extend_from_slice(&60u32.to_be_bytes());
        assert_eq!(
            decode(&mut BytesMut::from(&p[..])),
            Err(BusError::BadLength(60))
        );
        // Max size itself is accepted as "need more".
        let mut p = b"DbuZ\x00\x01\x00\x00".to_vec();
        p.extend_from_slice(&(MAX_FRAME as u32).to_be_bytes());
        assert_eq!(decode(&mut BytesMut::from(&p[..])), Ok(None));
    }

    fn set_len(f: &mut [u8]) {
        let n = f.len() as u32;
        f[8..12].copy_from_slice(&n.to_be_bytes());
    }

    /// Re-seal a (possibly edited) frame with a correct checksum.
    fn reseal(f: &mut [u8]) {
        let c = frame_crc(f);
        f[12..16].copy_from_slice(&c.to_be_bytes());
    }

    #[test]
    fn checksum_flip_rejected() {
        let m = &all_messages()[5];
        let full = m.to_bytes();
        let mut f = full.to_vec();
        f[HEADER_LEN + 3] ^= 0x10;
        let mut b = BytesMut::from(&f[..]);
        assert_eq!(decode(&mut b), Err(BusError::BadChecksum));
        assert_eq!(b.len(), f.len(), "error leaves buffer untouched");
        // Type field is covered too: GOTJOB(5) -> QUEUED(7) is one bit.
        let g = Message::new(
            hdr(0),
            Body::Job {
                kind: JobMsg::GotJob,
                job_id: [1; 40],
                aux: 0,
            },
        )
        .to_bytes();
        let mut f = g.to_vec();
        f[7] ^= 0x02;
        assert_eq!(
            decode(&mut BytesMut::from(&f[..])),
            Err(BusError::BadChecksum)
        );
    }

    #[test]
    fn payload_size_and_type_checks() {
        let g = Message::new(
            hdr(0),
            Body::Job {
                kind: JobMsg::GotJob,
                job_id: [1; 40],
                aux: 0,
            },
        )
        .to_bytes();
        // Unknown type with a valid checksum.
        let mut f = g.to_vec();
        f[6..8].copy_from_slice(&99u16.to_be_bytes());
        reseal(&mut f);
        assert_eq!(
            decode(&mut BytesMut::from(&f[..])),
            Err(BusError::UnknownType(99))
        );
        // GOTJOB retyped as FAIL: 44 bytes is not 40.
        let mut f = g.to_vec();
        f[6..8].copy_from_slice(&msg_type::FAIL.to_be_bytes());
        reseal(&mut f);
        assert!(matches!(
            decode(&mut BytesMut::from(&f[..])),
            Err(BusError::BadPayload(_))
        ));
        // One extra byte on a job-id block.
        let mut f = g.to_vec();
        f.push(0);
        set_len(&mut f);
        reseal(&mut f);
        assert!(matches!(
            decode(&mut BytesMut::from(&f[..])),
            Err(BusError::BadPayload(_))
        ));
        // QLENREP: the inner length must match the size (8 or 32).
        for (body, at) in [
            (Body::QLenRep { req: 1, len: 2 }, HEADER_LEN + 7),
            (
                Body::QLenTotals {
                    req: 1,
                    totals: NodeTotals::default(),
                },
                HEADER_LEN + 7,
            ),
        ] {
            let mut f = Message::new(hdr(0), body).to_bytes().to_vec();
            f[at] ^= 40;
            reseal(&mut f);
            assert!(matches!(
                decode(&mut BytesMut::from(&f[..])),
                Err(BusError::BadPayload(_))
            ));
        }
        // Gossip count lying.
        let p = Message::new(hdr(0), Body::Ping(gossip())).to_bytes();
        let mut f = p.to_vec();
        f[HEADER_LEN + 1] = 3;
        reseal(&mut f);
        assert!(matches!(
            decode(&mut BytesMut::from(&f[..])),
            Err(BusError::BadPayload(_))
        ));
        // YOURJOBS count larger than the records present.
        let y = Message::new(
            hdr(0),
            Body::YourJobs {
                jobs: vec![job(1, b"a")],
            },
        )
        .to_bytes();
        let mut f = y.to_vec();
        f[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        reseal(&mut f);
        assert!(matches!(
            decode(&mut BytesMut::from(&f[..])),
            Err(BusError::BadPayload(_))
        ));
        // YOURJOBS with zero jobs.
        let mut f = y[..HEADER_LEN + 4].to_vec();
        f[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&0u32.to_be_bytes());
        set_len(&mut f);
        reseal(&mut f);
        assert!(matches!(
            decode(&mut BytesMut::from(&f[..])),
            Err(BusError::BadPayload(_))
        ));
        // REPLJOB whose record length disagrees with the payload.
        let r = Message::new(hdr(0), Body::ReplJob { job: job(0, b"z") }).to_bytes();
        let mut f = r.to_vec();
        f.push(0);
        set_len(&mut f);
        reseal(&mut f);
        assert!(matches!(
            decode(&mut BytesMut::from(&f[..])),
            Err(BusError::BadPayload(_))
        ));
    }

    #[test]
    fn display_texts() {
        assert_eq!(
            BusError::BadLength(5).to_string(),
            format!("bus frame: bad total length 5 (allowed 61..={MAX_FRAME})")
        );
        assert_eq!(
            BusError::BadChecksum.to_string(),
            "bus frame: checksum mismatch"
        );
        assert_eq!(
            BusError::UnknownType(40).to_string(),
            "bus frame: unknown message type 40"
        );
    }

    #[test]
    fn gossip_ip_edge_cases() {
        let mut g = gossip();
        g[0].ip = "x".repeat(60);
        g[1].ip = "1.2.3.4\0junk".into();
        let m = Message::new(hdr(0), Body::Meet(g));
        let d = decode(&mut BytesMut::from(&m.to_bytes()[..]))
            .unwrap()
            .unwrap();
        let Body::Meet(d) = d.body else { panic!() };
        assert_eq!(d[0].ip, "x".repeat(46));
        assert_eq!(d[1].ip, "1.2.3.4");
    }

    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    #[test]
    fn fuzz_never_panics() {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        let valid: Vec<Bytes> = all_messages().iter().map(Message::to_bytes).collect();
        for i in 0..20_000 {
            let base = &valid[rng.below(valid.len())];
            match i % 5 {
                // Pure garbage, sometimes with a valid magic/version prefix.
                0 => {
                    let n = rng.below(300);
                    let mut v: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                    if rng.below(2) == 0 && v.len() >= 6 {
                        v[..6].copy_from_slice(b"DbuZ\x00\x01");
                    }
                    let _ = decode(&mut BytesMut::from(&v[..]));
                }
                // Random truncation: always "need more".
                1 => {
                    let cut = rng.below(base.len());
                    assert_eq!(decode(&mut BytesMut::from(&base[..cut])), Ok(None));
                }
                // Single bit flip: never accepted as a message.
                2 => {
                    let mut v = base.to_vec();
                    let bit = rng.below(v.len() * 8);
                    v[bit / 8] ^= 1 << (bit % 8);
                    let r = decode(&mut BytesMut::from(&v[..]));
                    assert!(!matches!(r, Ok(Some(_))), "flip {bit} accepted");
                }
                // Random payload bytes and type behind a correct checksum:
                // exercises the payload parsers themselves.
                3 => {
                    let mut v = base.to_vec();
                    for _ in 0..1 + rng.below(8) {
                        if v.len() > HEADER_LEN {
                            let at = HEADER_LEN + rng.below(v.len() - HEADER_LEN);
                            v[at] = rng.next() as u8;
                        }
                    }
                    let ty = rng.below(20) as u16;
                    v[6..8].copy_from_slice(&ty.to_be_bytes());
                    let newlen = HEADER_LEN + rng.below(v.len() - HEADER_LEN + 1);
                    v.truncate(newlen);
                    set_len(&mut v);
                    reseal(&mut v);
                    let mut b = BytesMut::from(&v[..]);
                    if let Ok(Some(m)) = decode(&mut b) {
                        // Anything accepted must re-encode identically.
                        assert_eq!(m.to_bytes(), Bytes::from(v), "type {ty}");
                        assert!(b.is_empty());
                    }
                }
                // Valid frame followed by garbage: first frame decodes.
                _ => {
                    let mut v = base.to_vec();
                    v.extend((0..rng.below(50)).map(|_| rng.next() as u8));
                    let mut b = BytesMut::from(&v[..]);
                    assert!(decode(&mut b).unwrap().is_some());
                    let _ = decode(&mut b);
                }
            }
        }
    }
}
