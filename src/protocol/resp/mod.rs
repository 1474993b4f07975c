//! The client wire protocol: RESP2/RESP3 request parsing (multibulk and
//! inline) and reply encoding. Pure and bounded: no I/O, no engine state.

pub mod encode;
pub mod parse;
pub mod reply;

use bytes::Bytes;

/// A reply to a client, independent of the protocol version the client chose.
/// `encode::encode(&reply, proto, &mut buf)` renders it as RESP2 or RESP3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+text` (status). Text must not contain CR or LF.
    Status(String),
    /// `+<40 bytes>`: a job ID as a status line (ADDJOB's reply), kept
    /// inline so the hot path neither allocates nor re-validates UTF-8.
    Id([u8; 40]),
    /// `-text` (the full error line without the leading '-', e.g. "ERR syntax error").
    Error(String),
    /// `:n`
    Integer(i64),
    /// `$len\r\nbytes` (binary safe)
    Bulk(Bytes),
    /// `$-1` in RESP2, `_` in RESP3.
    NullBulk,
    /// `*-1` in RESP2, `_` in RESP3.
    NullArray,
    /// `*n` followed by the elements.
    Array(Vec<Reply>),
    /// `%n` in RESP3; a flat `*2n` array of key, value, ... in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// Already encoded bytes, written verbatim (used for hot-path pre-encoded replies).
    Raw(Bytes),
}

impl Reply {
    pub fn ok() -> Reply {
        Reply::Status("OK".to_string())
    }
    pub fn err(msg: impl Into<String>) -> Reply {
        Reply::Error(msg.into())
    }
    pub fn bulk(b: impl AsRef<[u8]>) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(b.as_ref()))
    }
    pub fn bulk_str(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }
    /// A map with bulk-string keys (a flat array in RESP2).
    pub fn map(pairs: Vec<(&str, Reply)>) -> Reply {
        Reply::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (Reply::bulk_str(k), v))
                .collect(),
        )
    }
}
