//! `disque-server --healthcheck [--live] [host:port]`: a probe for images
//! without a shell, curl or redis-cli (the Dockerfile HEALTHCHECK, or
//! Kubernetes exec probes where the HTTP endpoint is off). Exit status 0
//! when the node answers and, unless `--live`, is ready by the same
//! definition as `/readyz` (`INFO readiness` says `ready:1`: AOF loaded
//! and writable, cluster joined, a peer reachable); 1 otherwise, with the
//! reason on stderr. `--live` only needs a PONG. With `requirepass`, the
//! password is read from the `DISQUE_PASSWORD` environment variable.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Whole-probe budget: connect, optional AUTH, one command.
const TIMEOUT: Duration = Duration::from_secs(3);
const DEFAULT_ADDR: &str = "127.0.0.1:7711";

/// Why the probe failed (printed after `disque-server healthcheck ADDR: `).
#[derive(Debug, thiserror::Error)]
enum ProbeError {
    #[error("bad address: {0}")]
    BadAddress(#[source] std::io::Error),
    #[error("bad address")]
    NoAddress,
    /// Connecting, writing or reading failed.
    #[error("{0}")]
    Io(#[source] std::io::Error),
    #[error("timed out")]
    TimedOut,
    #[error("connection closed")]
    Closed,
    #[error("reply too large")]
    TooLarge,
    /// The first line of the node's reply to AUTH.
    #[error("AUTH: {0}")]
    Auth(String),
    #[error("PING: {0}")]
    Ping(String),
    #[error("INFO: {0}")]
    Info(String),
    /// The node's `not_ready_reason`.
    #[error("not ready: {0}")]
    NotReady(String),
    #[error("INFO has no readiness section")]
    NoReadiness,
}

/// Run the probe with the arguments after `--healthcheck`; returns the
/// process exit status.
pub fn main(args: &[String]) -> i32 {
    let live = args.iter().any(|a| a == "--live");
    let addr = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map_or(DEFAULT_ADDR, String::as_str);
    let password = std::env::var("DISQUE_PASSWORD")
        .ok()
        .filter(|p| !p.is_empty());
    match probe(addr, live, password.as_deref()) {
        Ok(()) => 0,
        Err(why) => {
            eprintln!("disque-server healthcheck {addr}: {why}");
            1
        }
    }
}

fn probe(addr: &str, live: bool, password: Option<&str>) -> Result<(), ProbeError> {
    let target: SocketAddr = addr
        .to_socket_addrs()
        .map_err(ProbeError::BadAddress)?
        .next()
        .ok_or(ProbeError::NoAddress)?;
    let deadline = Instant::now() + TIMEOUT;
    let mut s = TcpStream::connect_timeout(&target, TIMEOUT).map_err(ProbeError::Io)?;
    if let Some(p) = password {
        let r = request(&mut s, &["AUTH", p], deadline)?;
        if !r.starts_with(b"+OK") {
            return Err(ProbeError::Auth(first_line(&r)));
        }
    }
    if live {
        let r = request(&mut s, &["PING"], deadline)?;
        return if r.starts_with(b"+PONG") {
            Ok(())
        } else {
            Err(ProbeError::Ping(first_line(&r)))
        };
    }
    let r = request(&mut s, &["INFO", "readiness"], deadline)?;
    if r.first() != Some(&b'$') {
        return Err(ProbeError::Info(first_line(&r)));
    }
    readiness(&String::from_utf8_lossy(&r))
}

/// The verdict of an `INFO readiness` reply.
fn readiness(info: &str) -> Result<(), ProbeError> {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim_end)
    };
    match field("ready") {
        Some("1") => Ok(()),
        Some(_) => Err(ProbeError::NotReady(
            field("not_ready_reason").unwrap_or("").to_string(),
        )),
        None => Err(ProbeError::NoReadiness),
    }
}

fn first_line(r: &[u8]) -> String {
    String::from_utf8_lossy(r)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

/// Send one command, read one complete reply (a status/error line or a
/// bulk string, which is all PING, AUTH and INFO answer).
fn request(s: &mut TcpStream, args: &[&str], deadline: Instant) -> Result<Vec<u8>, ProbeError> {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(out.as_bytes()).map_err(ProbeError::Io)?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if complete(&buf) {
            return Ok(buf);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ProbeError::TimedOut);
        }
        s.set_read_timeout(Some(left)).map_err(ProbeError::Io)?;
        match s.read(&mut chunk) {
            Ok(0) => return Err(ProbeError::Closed),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(ProbeError::Io(e)),
        }
        if buf.len() > 1 << 20 {
            return Err(ProbeError::TooLarge);
        }
    }
}

fn complete(buf: &[u8]) -> bool {
    let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") else {
        return false;
    };
    if buf.first() != Some(&b'$') {
        return true;
    }
    let len: i64 = std::str::from_utf8(&buf[1..eol])
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1);
    len < 0 || buf.len() >= eol + 2 + len as usize + 2
}

#[cfg(test)]
mod tests {
    use super::{complete, readiness, ProbeError};

    #[test]
    fn verdict_from_info_readiness() {
        assert!(readiness("$40\r\n# Readiness\r\nready:1\r\nnot_ready_reason:\r\n").is_ok());
        let e = readiness("# Readiness\r\nready:0\r\nnot_ready_reason:joining: no seed\r\n");
        let e = e.unwrap_err();
        assert!(matches!(&e, ProbeError::NotReady(why) if why == "joining: no seed"));
        assert_eq!(e.to_string(), "not ready: joining: no seed");
        assert!(readiness("$0\r\n\r\n").is_err());
    }

    #[test]
    fn reply_framing() {
        assert!(!complete(b"+PO"));
        assert!(complete(b"+PONG\r\n"));
        assert!(complete(b"-LOADING x\r\n"));
        assert!(!complete(b"$10\r\nloading:0"));
        assert!(complete(b"$9\r\nloading:0\r\n"));
        assert!(complete(b"$-1\r\n"));
    }
}
