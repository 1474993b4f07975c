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

fn probe(addr: &str, live: bool, password: Option<&str>) -> Result<(), String> {
    let target: SocketAddr = addr
        .to_socket_addrs()
        .map_err(|e| format!("bad address: {e}"))?
        .next()
        .ok_or("bad address")?;
    let deadline = Instant::now() + TIMEOUT;
    let mut s = TcpStream::connect_timeout(&target, TIMEOUT).map_err(|e| e.to_string())?;
    if let Some(p) = password {
        let r = request(&mut s, &["AUTH", p], deadline)?;
        if !r.starts_with(b"+OK") {
            return Err(format!("AUTH: {}", first_line(&r)));
        }
    }
    if live {
        let r = request(&mut s, &["PING"], deadline)?;
        return if r.starts_with(b"+PONG") {
            Ok(())
        } else {
            Err(format!("PING: {}", first_line(&r)))
        };
    }
    let r = request(&mut s, &["INFO", "readiness"], deadline)?;
    if r.first() != Some(&b'$') {
        return Err(format!("INFO: {}", first_line(&r)));
    }
    readiness(&String::from_utf8_lossy(&r))
}

/// The verdict of an `INFO readiness` reply.
fn readiness(info: &str) -> Result<(), String> {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim_end)
    };
    match field("ready") {
        Some("1") => Ok(()),
        Some(_) => Err(format!(
            "not ready: {}",
            field("not_ready_reason").unwrap_or("")
        )),
        None => Err("INFO has no readiness section".into()),
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
fn request(s: &mut TcpStream, args: &[&str], deadline: Instant) -> Result<Vec<u8>, String> {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(out.as_bytes()).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if complete(&buf) {
            return Ok(buf);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("timed out".into());
        }
        s.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
        match s.read(&mut chunk) {
            Ok(0) => return Err("connection closed".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(e.to_string()),
        }
        if buf.len() > 1 << 20 {
            return Err("reply too large".into());
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
    use super::{complete, readiness};

    #[test]
    fn verdict_from_info_readiness() {
        assert!(readiness("$40\r\n# Readiness\r\nready:1\r\nnot_ready_reason:\r\n").is_ok());
        let e = readiness("# Readiness\r\nready:0\r\nnot_ready_reason:joining: no seed\r\n");
        assert_eq!(e, Err("not ready: joining: no seed".to_string()));
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
