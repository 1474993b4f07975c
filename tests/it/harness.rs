//! Process harness shared by every integration test: start the real
//! `disque-server` binary on a free port (`--port 0`) in its own temporary
//! directory, talk raw RESP to it, and poll conditions with deadlines.
//!
//! Reused by the cluster and AOF tests, so nothing here is specific to one
//! area: `ServerOpts` carries arbitrary arguments and an optional config
//! file, `Server::restart` brings a node back on the same port, dir and
//! config, and the captured output is dumped when a test fails.

#![allow(dead_code)] // shared with the cluster and AOF tests, which use more of it

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Path of the server binary built by Cargo for this test run.
pub const SERVER_BIN: &str = env!("CARGO_BIN_EXE_disque-server");

/// How long a server may take to print its ready line.
const START_DEADLINE: Duration = Duration::from_secs(10);
/// Socket read/write timeout of a [`Client`].
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Poll `f` every `poll` until it returns true or `timeout` elapses.
/// Returns whether the condition became true.
pub fn wait_until(timeout: Duration, poll: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(poll);
    }
}

/// How to start a server.
#[derive(Clone, Debug, Default)]
pub struct ServerOpts {
    /// Extra command-line arguments, appended after the harness's own
    /// `--port` and `--dir` (so they override them: later lines win).
    pub args: Vec<String>,
    /// Written to `<dir>/disque.conf` and passed as the first argument.
    pub config_file_text: Option<String>,
    /// Client port to use; `None` = `--port 0` (the kernel picks one).
    pub port: Option<u16>,
    /// Run in this existing directory instead of a fresh temporary one
    /// (the directory is then not removed on drop).
    pub dir: Option<PathBuf>,
    /// Do not pass `--dir` (the config file or the args provide it).
    pub no_dir_arg: bool,
}

impl ServerOpts {
    /// Options with the given extra arguments.
    pub fn with_args(args: &[&str]) -> Self {
        ServerOpts {
            args: args.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    /// Options with a config file of the given text.
    pub fn with_config(text: &str) -> Self {
        ServerOpts {
            config_file_text: Some(text.to_string()),
            ..Default::default()
        }
    }
}

/// A unique directory under the system temp dir.
fn fresh_dir() -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir =
        std::env::temp_dir().join(format!("disque-it-{}-{}-{}", std::process::id(), n, nanos));
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// Captured stdout+stderr of all the processes started for one `Server`.
type Output = Arc<Mutex<String>>;

fn drain<R: Read + Send + 'static>(mut r: R, out: Output) {
    thread::spawn(move || {
        let mut buf = [0u8; 8192];
        let mut pending: Vec<u8> = Vec::new();
        loop {
            match r.read(&mut buf) {
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    pending.extend_from_slice(&buf[..n]);
                    // Append whole lines so readers never see half a ready line.
                    while let Some(pos) = pending.iter().position(|&c| c == b'\n') {
                        let line: Vec<u8> = pending.drain(..=pos).collect();
                        let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
                        o.push_str(&String::from_utf8_lossy(&line));
                    }
                }
            }
        }
        if !pending.is_empty() {
            let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
            o.push_str(&String::from_utf8_lossy(&pending));
            o.push('\n');
        }
    });
}

/// Result of running the server to completion (for startup-failure tests).
pub struct Exited {
    pub status: ExitStatus,
    pub output: String,
}

/// One `disque-server` child process plus its directory.
pub struct Server {
    child: Option<Child>,
    opts: ServerOpts,
    dir: PathBuf,
    owns_dir: bool,
    config_path: Option<PathBuf>,
    port: u16,
    bus_port: u16,
    pid: u32,
    output: Output,
}

impl Server {
    /// Start a server and wait for its ready line (panics with the
    /// captured output on crash or timeout).
    pub fn start(opts: ServerOpts) -> Server {
        let (dir, owns_dir) = match &opts.dir {
            Some(d) => {
                std::fs::create_dir_all(d).expect("create dir");
                (d.clone(), false)
            }
            None => (fresh_dir(), true),
        };
        let config_path = opts.config_file_text.as_ref().map(|text| {
            let p = dir.join("disque.conf");
            std::fs::write(&p, text).expect("write config file");
            p
        });
        let mut s = Server {
            child: None,
            port: opts.port.unwrap_or(0),
            opts,
            dir,
            owns_dir,
            config_path,
            bus_port: 0,
            pid: 0,
            output: Arc::new(Mutex::new(String::new())),
        };
        s.spawn_and_wait(s.opts.port);
        s
    }

    /// Start with default options.
    pub fn start_default() -> Server {
        Server::start(ServerOpts::default())
    }

    /// Run the binary with these options and expect it to exit by itself
    /// within `timeout` (e.g. a bad config). Panics if it is still running.
    pub fn run_to_exit(opts: ServerOpts, timeout: Duration) -> Exited {
        let dir = opts.dir.clone().unwrap_or_else(fresh_dir);
        let config_path = opts.config_file_text.as_ref().map(|text| {
            let p = dir.join("disque.conf");
            std::fs::write(&p, text).expect("write config file");
            p
        });
        let args = build_args(&opts, config_path.as_deref(), &dir, opts.port.unwrap_or(0));
        let output: Output = Arc::new(Mutex::new(String::new()));
        let mut child = spawn(&args, &dir, &output);
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(st) = child.try_wait().expect("try_wait") {
                break st;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "server did not exit within {timeout:?}; output:\n{}",
                    output.lock().unwrap_or_else(|e| e.into_inner())
                );
            }
            thread::sleep(Duration::from_millis(10));
        };
        // Let the drain threads see EOF.
        wait_until(Duration::from_secs(2), Duration::from_millis(10), || {
            output.lock().map(|o| !o.is_empty()).unwrap_or(true)
        });
        if opts.dir.is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let output = output.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Exited { status, output }
    }

    fn spawn_and_wait(&mut self, port: Option<u16>) {
        let args = build_args(
            &self.opts,
            self.config_path.as_deref(),
            &self.dir,
            port.unwrap_or(0),
        );
        let start_offset = {
            let mut o = self.output.lock().unwrap_or_else(|e| e.into_inner());
            if !o.is_empty() {
                o.push_str("=== restart ===\n");
            }
            o.len()
        };
        let mut child = spawn(&args, &self.dir, &self.output);
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            let ready = {
                let o = self.output.lock().unwrap_or_else(|e| e.into_inner());
                o[start_offset..]
                    .lines()
                    .find(|l| l.starts_with("disque-server ready "))
                    .map(str::to_string)
            };
            if let Some(line) = ready {
                let field = |name: &str| -> u32 {
                    line.split_whitespace()
                        .find_map(|w| w.strip_prefix(name))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or_else(|| panic!("bad ready line: {line}"))
                };
                self.port = u16::try_from(field("port=")).expect("port fits u16");
                self.bus_port = u16::try_from(field("bus=")).expect("bus port fits u16");
                self.pid = field("pid=");
                assert_eq!(self.pid, child.id(), "ready line pid");
                self.child = Some(child);
                return;
            }
            if let Ok(Some(st)) = child.try_wait() {
                // Give the drain threads a moment to collect the last lines.
                thread::sleep(Duration::from_millis(50));
                panic!(
                    "server exited during startup with {st}; args {args:?}; output:\n{}",
                    self.output()
                );
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "server not ready within {START_DEADLINE:?}; args {args:?}; output:\n{}",
                    self.output()
                );
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Client port actually bound.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Cluster bus port (client port + 10000).
    pub fn bus_port(&self) -> u16 {
        self.bus_port
    }

    /// Process id of the running child.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The server's working directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of the config file, when started with one.
    pub fn config_path(&self) -> Option<&Path> {
        self.config_path.as_deref()
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A new connection to the client port.
    pub fn client(&self) -> Client {
        Client::connect(self.port)
    }

    /// Everything the server printed so far (all restarts included).
    pub fn output(&self) -> String {
        self.output
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether the child is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// SIGKILL the child and reap it.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Send SIGTERM (the child keeps running until it exits by itself;
    /// use [`Server::wait_exit`]).
    pub fn sigterm(&mut self) {
        if let Some(c) = self.child.as_ref() {
            let pid = i32::try_from(c.id()).expect("pid fits i32");
            // SAFETY: kill(2) with a pid we spawned and have not reaped yet.
            let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
            assert_eq!(rc, 0, "kill(SIGTERM)");
        }
    }

    /// Wait for the child to exit on its own; None on timeout.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let mut status = None;
        let c = self.child.as_mut()?;
        wait_until(timeout, Duration::from_millis(10), || {
            if let Ok(Some(st)) = c.try_wait() {
                status = Some(st);
                true
            } else {
                false
            }
        });
        if status.is_some() {
            self.child = None;
        }
        status
    }

    /// Start the server again (after kill9/sigterm/SHUTDOWN) with the same
    /// dir, config file and args, on the same client port.
    pub fn restart(&mut self) {
        if self.child.is_some() {
            self.kill9();
        }
        let port = self.port;
        // The old listener is gone; retry briefly if the port is not free yet.
        self.spawn_and_wait(Some(port));
    }
}

fn build_args(opts: &ServerOpts, config: Option<&Path>, dir: &Path, port: u16) -> Vec<String> {
    let mut args = Vec::new();
    if let Some(p) = config {
        args.push(p.display().to_string());
    }
    args.push("--port".to_string());
    args.push(port.to_string());
    if !opts.no_dir_arg {
        args.push("--dir".to_string());
        args.push(dir.display().to_string());
    }
    args.extend(opts.args.iter().cloned());
    args
}

fn spawn(args: &[String], dir: &Path, output: &Output) -> Child {
    let mut child = Command::new(SERVER_BIN)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn disque-server");
    if let Some(out) = child.stdout.take() {
        drain(out, output.clone());
    }
    if let Some(err) = child.stderr.take() {
        drain(err, output.clone());
    }
    child
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
        if thread::panicking() {
            eprintln!(
                "---- disque-server output (port {}, dir {}) ----\n{}\n---- end of output ----",
                self.port,
                self.dir.display(),
                self.output()
            );
        } else if self.owns_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A decoded RESP2/RESP3 reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+...`
    Status(String),
    /// `-...`
    Error(String),
    /// `:n`
    Int(i64),
    /// `$n` payload
    Bulk(Vec<u8>),
    /// `$-1`
    NilBulk,
    /// `*-1`
    NilArray,
    /// `*n` (also RESP3 `~` set and `>` push)
    Array(Vec<Reply>),
    /// RESP3 `_`
    Null,
    /// RESP3 `%n`
    Map(Vec<(Reply, Reply)>),
    /// RESP3 `#t` / `#f`
    Bool(bool),
    /// RESP3 `,` (kept as text)
    Double(String),
    /// RESP3 `(` (kept as text)
    BigNum(String),
    /// RESP3 `=` verbatim string: format and payload
    Verbatim(String, Vec<u8>),
}

impl Reply {
    /// Text of a status, bulk or verbatim reply; panics otherwise.
    pub fn text(&self) -> String {
        match self {
            Reply::Status(s) | Reply::Error(s) => s.clone(),
            Reply::Bulk(b) | Reply::Verbatim(_, b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("not a string reply: {other:?}"),
        }
    }

    /// Integer value; panics otherwise.
    pub fn int(&self) -> i64 {
        match self {
            Reply::Int(n) => *n,
            other => panic!("not an integer reply: {other:?}"),
        }
    }

    /// Array elements; panics otherwise.
    pub fn array(&self) -> &[Reply] {
        match self {
            Reply::Array(a) => a,
            other => panic!("not an array reply: {other:?}"),
        }
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Whether this is any kind of null.
    pub fn is_nil(&self) -> bool {
        matches!(self, Reply::NilBulk | Reply::NilArray | Reply::Null)
    }

    /// Value of `key` in a flat `[k1, v1, k2, v2...]` array or a RESP3 map.
    pub fn field(&self, key: &str) -> &Reply {
        match self {
            Reply::Array(a) => a
                .chunks(2)
                .find(|kv| kv.len() == 2 && kv[0] == Reply::Bulk(key.as_bytes().to_vec()))
                .map(|kv| &kv[1])
                .unwrap_or_else(|| panic!("no field {key} in {self:?}")),
            Reply::Map(m) => m
                .iter()
                .find(|(k, _)| *k == Reply::Bulk(key.as_bytes().to_vec()))
                .map(|(_, v)| v)
                .unwrap_or_else(|| panic!("no field {key} in {self:?}")),
            other => panic!("not a map-like reply: {other:?}"),
        }
    }
}

/// Parse one reply from the start of `buf`: `Ok(Some((reply, consumed)))`,
/// `Ok(None)` when more bytes are needed, `Err` on malformed input.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply, usize)>, String> {
    let Some(line_end) = buf.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    if line_end == 0 {
        return Err("empty reply line".into());
    }
    let kind = buf[0];
    let line = String::from_utf8_lossy(&buf[1..line_end]).into_owned();
    let after = line_end + 2;
    let num = |s: &str| -> Result<i64, String> {
        s.parse::<i64>()
            .map_err(|_| format!("bad number {s:?} in {:?}", String::from_utf8_lossy(buf)))
    };
    let aggregate = |n: i64, per: usize| -> Result<Option<(Vec<Reply>, usize)>, String> {
        let mut items = Vec::new();
        let mut pos = after;
        let total = usize::try_from(n).map_err(|_| "negative count")? * per;
        for _ in 0..total {
            match parse_reply(&buf[pos..])? {
                Some((r, used)) => {
                    items.push(r);
                    pos += used;
                }
                None => return Ok(None),
            }
        }
        Ok(Some((items, pos)))
    };
    let blob = |n: i64| -> Result<Option<(Vec<u8>, usize)>, String> {
        let n = usize::try_from(n).map_err(|_| "negative length")?;
        if buf.len() < after + n + 2 {
            return Ok(None);
        }
        if &buf[after + n..after + n + 2] != b"\r\n" {
            return Err("bulk not terminated by CRLF".into());
        }
        Ok(Some((buf[after..after + n].to_vec(), after + n + 2)))
    };
    let r = match kind {
        b'+' => Some((Reply::Status(line), after)),
        b'-' => Some((Reply::Error(line), after)),
        b':' => Some((Reply::Int(num(&line)?), after)),
        b'_' => Some((Reply::Null, after)),
        b'#' => Some((Reply::Bool(line == "t"), after)),
        b',' => Some((Reply::Double(line), after)),
        b'(' => Some((Reply::BigNum(line), after)),
        b'$' | b'!' => {
            let n = num(&line)?;
            if n < 0 {
                Some((Reply::NilBulk, after))
            } else {
                blob(n)?.map(|(b, used)| {
                    if kind == b'!' {
                        (Reply::Error(String::from_utf8_lossy(&b).into_owned()), used)
                    } else {
                        (Reply::Bulk(b), used)
                    }
                })
            }
        }
        b'=' => blob(num(&line)?)?.map(|(b, used)| {
            let fmt = String::from_utf8_lossy(&b[..3.min(b.len())]).into_owned();
            let payload = b.get(4..).unwrap_or_default().to_vec();
            (Reply::Verbatim(fmt, payload), used)
        }),
        b'*' | b'~' | b'>' => {
            let n = num(&line)?;
            if n < 0 {
                Some((Reply::NilArray, after))
            } else {
                aggregate(n, 1)?.map(|(items, used)| (Reply::Array(items), used))
            }
        }
        b'%' => aggregate(num(&line)?, 2)?.map(|(items, used)| {
            let mut it = items.into_iter();
            let mut pairs = Vec::new();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            (Reply::Map(pairs), used)
        }),
        other => {
            return Err(format!(
                "unknown reply type {:?} in {:?}",
                other as char,
                String::from_utf8_lossy(buf)
            ))
        }
    };
    Ok(r)
}

/// Encode a request as a RESP multibulk.
pub fn encode_cmd<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
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
        parse_reply(&raw)
            .expect("valid reply")
            .expect("complete reply")
            .0
    }

    /// Read one reply and return its exact bytes.
    pub fn read_reply_raw(&mut self) -> Vec<u8> {
        loop {
            match parse_reply(&self.buf) {
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
            if let Ok(Some((r, used))) = parse_reply(&self.buf) {
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

/// Find `name:` at the start of a line of an INFO text (WIRE 4.2).
pub fn info_value(info: &str, name: &str) -> Option<String> {
    info.split('\n').find_map(|l| {
        l.trim_end_matches('\r')
            .strip_prefix(name)
            .and_then(|r| r.strip_prefix(':'))
            .map(str::to_string)
    })
}

/// Whether `s` looks like a Disque job ID (WIRE 2.3).
pub fn is_job_id(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 40 && b[0] == b'D' && b[1] == b'-' && b[10] == b'-' && b[35] == b'-'
}
