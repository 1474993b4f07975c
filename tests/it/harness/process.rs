//! Server processes: start the real `disque-server` binary on a free port
//! (`--port 0`) in its own temporary directory, wait for its ready line,
//! restart, signal or kill it, and keep everything it printed.
//!
//! Nothing here is specific to one area: `ServerOpts` carries arbitrary
//! arguments, an optional config file and an optional file-size limit (a
//! full disk without root), `Server::restart` brings a node back on the
//! same port, dir and config, and the captured output is dumped when a
//! test fails.

use std::io::{self, ErrorKind, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::{wait_until, Client};

/// Path of the server binary built by Cargo for this test run.
pub const SERVER_BIN: &str = env!("CARGO_BIN_EXE_disque-server");

/// How long a server may take to print its ready line.
const START_DEADLINE: Duration = Duration::from_secs(10);
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
    /// Soft `RLIMIT_FSIZE` of the server process, in bytes: no file it
    /// writes may grow past this, as on a full disk (a write crossing it
    /// stores what fits, the next fails with EFBIG; SIGXFSZ is ignored in
    /// the child so it does not kill the process). Needs no privilege;
    /// [`Server::set_file_size_limit`] changes it while the node runs.
    pub file_size_limit: Option<u64>,
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
    /// HTTP endpoint port, when the ready line reports one.
    http_port: Option<u16>,
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
            http_port: None,
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
        let mut child = spawn(&args, &dir, &output, opts.file_size_limit);
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
        let mut child = spawn(&args, &self.dir, &self.output, self.opts.file_size_limit);
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
                self.http_port = line
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("http="))
                    .and_then(|v| v.parse().ok());
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

    /// HTTP endpoint port (`--http-port auto`); panics when it is off.
    pub fn http_port(&self) -> u16 {
        self.http_port.expect("server started without --http-port")
    }

    /// Whether the ready line reported an HTTP port.
    pub fn has_http(&self) -> bool {
        self.http_port.is_some()
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

    /// Wait until the server's output contains `needle` (log lines reach
    /// the captured output through a reader thread, so a line written just
    /// before a reply may not be there yet when the reply arrives).
    pub fn wait_output(&self, needle: &str, timeout: Duration) -> bool {
        wait_until(timeout, Duration::from_millis(10), || {
            self.output().contains(needle)
        })
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

    /// Set (`Some`) or lift (`None`: back to the hard limit) the running
    /// child's soft `RLIMIT_FSIZE` with prlimit(2), which needs no privilege
    /// for a process of the same user; later restarts use the new value.
    pub fn set_file_size_limit(&mut self, limit: Option<u64>) {
        let pid = libc::pid_t::try_from(self.pid).expect("pid fits pid_t");
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: prlimit(2) only reads the limit into `rl`, a valid rlimit.
        let rc = unsafe { libc::prlimit(pid, libc::RLIMIT_FSIZE, std::ptr::null(), &mut rl) };
        assert_eq!(rc, 0, "prlimit get: {}", io::Error::last_os_error());
        rl.rlim_cur = limit.map_or(rl.rlim_max, |l| l.min(rl.rlim_max));
        // SAFETY: prlimit(2) with a valid rlimit to set and no old value.
        let rc = unsafe { libc::prlimit(pid, libc::RLIMIT_FSIZE, &rl, std::ptr::null_mut()) };
        assert_eq!(rc, 0, "prlimit set: {}", io::Error::last_os_error());
        self.opts.file_size_limit = limit;
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

/// In the forked child, before exec: ignore SIGXFSZ (an ignored signal
/// stays ignored across exec) so a write past the limit fails with EFBIG
/// instead of killing the server, and lower the soft `RLIMIT_FSIZE` to
/// `limit` (the hard limit is kept, so it can be raised again).
fn limit_file_size(limit: u64) -> io::Result<()> {
    // SAFETY: signal(2) setting SIG_IGN, async-signal-safe.
    if unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) writes into `rl`, a valid rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut rl) } != 0 {
        return Err(io::Error::last_os_error());
    }
    rl.rlim_cur = limit.min(rl.rlim_max);
    // SAFETY: setrlimit(2) reads `rl`, a valid rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &rl) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn spawn(args: &[String], dir: &Path, output: &Output, file_size_limit: Option<u64>) -> Child {
    let mut cmd = Command::new(SERVER_BIN);
    cmd.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(limit) = file_size_limit {
        // SAFETY: the closure runs between fork and exec and only makes
        // async-signal-safe system calls (signal, getrlimit, setrlimit),
        // allocating nothing.
        unsafe {
            cmd.pre_exec(move || limit_file_size(limit));
        }
    }
    let mut child = cmd.spawn().expect("spawn disque-server");
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
