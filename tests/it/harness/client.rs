//! A blocking RESP client for tests: send commands (or raw bytes), read
//! replies decoded by the library's client-side decoder
//! ([`disque::protocol::resp::reply`]) or as exact bytes, all with I/O timeouts.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use disque::protocol::resp::reply::{decode, encode_command, Reply};

use super::ReplyExt;

/// Socket read/write timeout of a [`Client`].
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Encode a request as a RESP multibulk.
pub fn encode_cmd<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_command(&mut out, args);
    out
}

/// A blocking RESP client over `std::net::TcpStream` with 5 s timeouts.
pub struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    /// Connect to `127.0.0.1:<port>`.
    pub fn connect(port: u16) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to server");
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        stream.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
        let _ = stream.set_nodelay(true);
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// A client over an already connected socket (e.g. one bound to a
    /// chosen source address).
    pub fn from_stream(stream: TcpStream) -> Client {
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        stream.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
        let _ = stream.set_nodelay(true);
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// The underlying socket (e.g. to read its local address).
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Send one command and read its reply.
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        self.send(args);
        self.read_reply()
    }

    /// Send one command and return the exact bytes of its reply.
    pub fn cmd_raw<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        self.send(args);
        self.read_reply_raw()
    }

    /// Send `cmds` in one write, then read one reply per command, in order.
    pub fn pipeline<A: AsRef<[u8]>>(&mut self, cmds: &[Vec<A>]) -> Vec<Reply> {
        let mut req = Vec::new();
        for cmd in cmds {
            req.extend_from_slice(&encode_cmd(cmd));
        }
        self.send_raw(&req);
        cmds.iter().map(|_| self.read_reply()).collect()
    }

    /// Send one command without reading the reply.
    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        self.send_raw(&encode_cmd(args));
    }

    /// Write raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to server");
    }

    /// Write raw bytes, returning the I/O error instead of panicking.
    pub fn try_send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut tmp = [0u8; 65536];
        loop {
            match self.stream.read(&mut tmp) {
                // A signal (e.g. from a child exiting) is not an I/O failure.
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
                Ok(n) => {
                    self.buf.extend_from_slice(&tmp[..n]);
                    return Ok(n);
                }
            }
        }
    }

    /// Read one reply (panics on timeout, EOF or malformed data).
    pub fn read_reply(&mut self) -> Reply {
        let raw = self.read_reply_raw();
        decode(&raw)
            .expect("valid reply")
            .expect("complete reply")
            .0
    }

    /// Read one reply and return its exact bytes.
    pub fn read_reply_raw(&mut self) -> Vec<u8> {
        loop {
            match decode(&self.buf) {
                Ok(Some((_, used))) => return self.buf.drain(..used).collect(),
                Ok(None) => {}
                Err(e) => panic!("malformed reply: {e}"),
            }
            match self.fill() {
                Ok(0) => panic!(
                    "server closed the connection; pending bytes {:?}",
                    String::from_utf8_lossy(&self.buf)
                ),
                Ok(_) => {}
                Err(e) => panic!(
                    "reading reply: {e}; pending bytes {:?}",
                    String::from_utf8_lossy(&self.buf)
                ),
            }
        }
    }

    /// Read one reply waiting at most `timeout`; None if nothing complete
    /// arrived in time. The read timeout is restored afterwards.
    pub fn try_read_reply(&mut self, timeout: Duration) -> Option<Reply> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some((r, used))) = decode(&self.buf) {
                self.buf.drain(..used);
                return Some(r);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .expect("timeout");
            let r = self.fill();
            self.stream
                .set_read_timeout(Some(IO_TIMEOUT))
                .expect("timeout");
            match r {
                Ok(0) => panic!("server closed the connection"),
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return None
                }
                Err(e) => panic!("reading reply: {e}"),
            }
        }
    }

    /// Read whatever arrives until `quiet` passes with no new data (or EOF).
    pub fn read_raw_until_timeout(&mut self, quiet: Duration) -> Vec<u8> {
        self.stream.set_read_timeout(Some(quiet)).expect("timeout");
        loop {
            match self.fill() {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        self.stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("timeout");
        std::mem::take(&mut self.buf)
    }

    /// Expect the server to close the connection (within the I/O timeout);
    /// returns the bytes received before the close.
    pub fn expect_closed(&mut self) -> Vec<u8> {
        loop {
            match self.fill() {
                Ok(0) => return std::mem::take(&mut self.buf),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                    return std::mem::take(&mut self.buf)
                }
                Err(e) => panic!(
                    "expected the server to close the connection: {e}; got {:?}",
                    String::from_utf8_lossy(&self.buf)
                ),
            }
        }
    }

    /// Close our write side.
    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }

    /// One INFO field (`name:` at the start of a line).
    pub fn info_field(&mut self, name: &str) -> String {
        let info = self.cmd(&["INFO", "all"]).text();
        info_value(&info, name).unwrap_or_else(|| panic!("no {name} in INFO:\n{info}"))
    }

    /// One INFO field parsed as an integer.
    pub fn info_int(&mut self, name: &str) -> i64 {
        let v = self.info_field(name);
        v.parse()
            .unwrap_or_else(|_| panic!("{name}:{v} is not an integer"))
    }
}

/// Find `name:` at the start of a line of an INFO text (`field:value`
/// lines under `# Section` headers, see docs/COMMANDS.md).
pub fn info_value(info: &str, name: &str) -> Option<String> {
    info.split('\n').find_map(|l| {
        l.trim_end_matches('\r')
            .strip_prefix(name)
            .and_then(|r| r.strip_prefix(':'))
            .map(str::to_string)
    })
}
