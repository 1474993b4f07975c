//! Hand-written command-line parsing and the `--help` text.

use std::time::Duration;

/// Which server dialect to drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Disque: ADDJOB / GETJOB / ACKJOB.
    Disque,
    /// Redis baseline: LPUSH / RPOP / BRPOP on lists.
    Redis,
}

impl Target {
    /// Name as used on the command line and in CSV output.
    pub fn name(self) -> &'static str {
        match self {
            Target::Disque => "disque",
            Target::Redis => "redis",
        }
    }
}

/// What the clients do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Produce only.
    AddJob,
    /// Consume pre-filled jobs with non-blocking GETJOB.
    GetJob,
    /// Producers and blocking consumers at the same time.
    Cycle,
    /// Cycle with producers on host 0 and consumers on host 1.
    Federated,
}

impl Workload {
    /// Name as used on the command line and in CSV output.
    pub fn name(self) -> &'static str {
        match self {
            Workload::AddJob => "addjob",
            Workload::GetJob => "getjob",
            Workload::Cycle => "cycle",
            Workload::Federated => "federated",
        }
    }

    /// True for the producer + consumer workloads.
    pub fn is_cycle(self) -> bool {
        matches!(self, Workload::Cycle | Workload::Federated)
    }
}

/// How consumed jobs are acknowledged (Disque only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckMode {
    /// Jobs are not acknowledged.
    None,
    /// `ACKJOB id` per job.
    AckJob,
    /// `FASTACK id` per job.
    FastAck,
}

/// Size of the timestamp + run-id stamp written at the start of cycle bodies.
pub const STAMP_LEN: usize = 24;

/// Everything the run needs, validated.
#[derive(Clone, Debug)]
pub struct Config {
    /// Nodes as "host:port" strings, in command-line order.
    pub hosts: Vec<String>,
    /// Where cycle consumers connect (empty: same as `hosts`).
    pub consume_hosts: Vec<String>,
    pub clients: usize,
    /// Upper bound on operations (`u64::MAX` when only a duration bounds the run).
    pub requests: u64,
    pub duration: Option<Duration>,
    pub pipeline: usize,
    pub size: usize,
    pub queues: usize,
    pub queue_prefix: String,
    pub replicate: Option<u32>,
    pub async_add: bool,
    /// Produce at most this many ops/s in total (addjob, cycle producers).
    pub rate: Option<f64>,
    pub idle_connections: usize,
    pub target: Target,
    pub workload: Workload,
    pub ack: AckMode,
    /// Jobs inserted before a getjob run.
    pub prefill: u64,
    /// Cycle consumer count (the rest of `clients` produce).
    pub consumers: usize,
    /// Server-side blocking timeout of cycle consumers.
    pub block: Duration,
    /// Per network read/write timeout.
    pub timeout: Duration,
    pub csv: bool,
    pub csv_header: bool,
    pub quiet: bool,
    pub strict: bool,
    pub threads: usize,
}

/// Result of parsing: run, or print help.
#[derive(Debug)]
pub enum Parsed {
    Run(Box<Config>),
    Help,
}

/// The `--help` text.
pub const HELP: &str = "\
disque-benchmark: load generator for Disque (and a Redis list baseline)

USAGE: disque-benchmark [OPTIONS]

Connection:
  -h, --host HOST[:PORT]   node to use; repeat or give a comma list for several
                           nodes (default 127.0.0.1). Clients are spread
                           round-robin over the nodes.
  -p, --port PORT          port for hosts given without one (default 7711)
      --consume-host H[:P] cycle: consumers use these nodes instead (repeatable)
      --timeout-ms MS      timeout of every network read/write (default 10000)
      --idle-connections N open N extra idle connections first, kept open
                           during the whole run

Load:
  -w, --workload NAME      addjob | getjob | cycle | federated (default addjob)
      --target NAME        disque | redis (default disque). redis is a baseline:
                           addjob=LPUSH, getjob=RPOP, cycle=LPUSH+BRPOP
  -c, --clients N          concurrent connections (default 50)
  -n, --requests N         total operations (default 100000; unbounded when
                           only -d is given)
  -d, --duration SECS      stop after SECS seconds (whichever bound comes first)
  -P, --pipeline N         commands in flight per connection (default 1); for
                           cycle consumers it is the GETJOB COUNT
  -s, --size BYTES         job body size (default 100; cycle needs >= 24)
      --queues N           distinct queues, used round-robin (default 1)
      --queue-prefix NAME  queue names are NAME:0 .. NAME:N-1 (default dqbench)
      --replicate N        ADDJOB ... REPLICATE N
      --async              ADDJOB ... ASYNC
      --rate OPS           open-loop pacing: issue at most OPS operations per
                           second in total (addjob/getjob clients, cycle
                           producers); use it to measure cycle latency at a
                           load the consumers sustain
      --ack                getjob: ACKJOB each consumed job (cycle: default)
      --fastack            FASTACK instead of ACKJOB (getjob and cycle)
      --no-ack             cycle: do not acknowledge consumed jobs
      --prefill N          getjob: jobs inserted before the run (default -n,
                           or 100000 when -n is unbounded)
      --consumers N        cycle: how many of the -c clients consume
                           (default half, at least 1; producers at least 1)
      --block-ms MS        cycle: GETJOB TIMEOUT / BRPOP timeout (default 1000)
      --threads N          tokio worker threads (default 2)

Workloads:
  addjob     ADDJOB q body 0 [REPLICATE n] [ASYNC]
  getjob     pre-fill, then GETJOB NOHANG FROM q (+ ACKJOB/FASTACK with --ack)
  cycle      producers ADDJOB on --host, consumers GETJOB TIMEOUT on
             --consume-host (or --host) then ACKJOB; reports end-to-end
             latency from a send timestamp embedded in the body
  federated  cycle with producers on host 1 and consumers on host 2

Output:
      --csv                one CSV line: target,workload,clients,pipeline,size,
                           ops_per_sec,p50_us,p99_us,p999_us,max_us,ops,errors
                           (cycle: latencies are end-to-end)
      --csv-header         print the CSV header line first
  -q, --quiet              one summary line
      --strict             exit 3 if any error occurred
      --help               this text

Exit status: 0 ok, 1 bad usage, 2 could not connect (or prefill failed),
3 errors occurred with --strict.
";

struct Raw {
    hosts: Vec<String>,
    consume_hosts: Vec<String>,
    port: u16,
    requests: Option<u64>,
    prefill: Option<u64>,
    consumers: Option<usize>,
    ack: Option<AckMode>,
}

/// Parses the arguments (without the program name).
pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Parsed, String> {
    let mut cfg = Config {
        hosts: Vec::new(),
        consume_hosts: Vec::new(),
        clients: 50,
        requests: 100_000,
        duration: None,
        pipeline: 1,
        size: 100,
        queues: 1,
        queue_prefix: "dqbench".to_string(),
        replicate: None,
        async_add: false,
        rate: None,
        idle_connections: 0,
        target: Target::Disque,
        workload: Workload::AddJob,
        ack: AckMode::None,
        prefill: 0,
        consumers: 0,
        block: Duration::from_millis(1000),
        timeout: Duration::from_millis(10_000),
        csv: false,
        csv_header: false,
        quiet: false,
        strict: false,
        threads: 2,
    };
    let mut raw = Raw {
        hosts: Vec::new(),
        consume_hosts: Vec::new(),
        port: 7711,
        requests: None,
        prefill: None,
        consumers: None,
        ack: None,
    };

    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        // Accept "--flag=value" for long options.
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => it.next().ok_or_else(|| format!("{name} needs a value")),
            }
        };
        match flag.as_str() {
            "--help" => return Ok(Parsed::Help),
            "-h" | "--host" => {
                raw.hosts.extend(split_list(&value(&flag)?));
            }
            "--consume-host" => raw.consume_hosts.extend(split_list(&value(&flag)?)),
            "-p" | "--port" => raw.port = num(&flag, &value(&flag)?)?,
            "-c" | "--clients" => cfg.clients = num(&flag, &value(&flag)?)?,
            "-n" | "--requests" => raw.requests = Some(num(&flag, &value(&flag)?)?),
            "-d" | "--duration" => {
                let v = value(&flag)?;
                let secs: f64 = v
                    .parse()
                    .map_err(|_| format!("{flag}: '{v}' is not a number of seconds"))?;
                if !(secs > 0.0 && secs < 1e9) {
                    return Err(format!("{flag}: duration must be positive"));
                }
                cfg.duration = Some(Duration::from_secs_f64(secs));
            }
            "-P" | "--pipeline" => cfg.pipeline = num(&flag, &value(&flag)?)?,
            "-s" | "--size" => cfg.size = num(&flag, &value(&flag)?)?,
            "--queues" => cfg.queues = num(&flag, &value(&flag)?)?,
            "--queue-prefix" => cfg.queue_prefix = value(&flag)?,
            "--replicate" => cfg.replicate = Some(num(&flag, &value(&flag)?)?),
            "--async" => cfg.async_add = true,
            "--rate" => {
                let v = value(&flag)?;
                let r: f64 = v
                    .parse()
                    .map_err(|_| format!("{flag}: '{v}' is not a number of ops/s"))?;
                if !(r > 0.0 && r.is_finite()) {
                    return Err(format!("{flag}: rate must be positive"));
                }
                cfg.rate = Some(r);
            }
            "--idle-connections" => cfg.idle_connections = num(&flag, &value(&flag)?)?,
            "--target" => {
                cfg.target = match value(&flag)?.as_str() {
                    "disque" => Target::Disque,
                    "redis" => Target::Redis,
                    other => return Err(format!("unknown target '{other}' (disque|redis)")),
                }
            }
            "-w" | "--workload" => {
                cfg.workload = match value(&flag)?.as_str() {
                    "addjob" => Workload::AddJob,
                    "getjob" => Workload::GetJob,
                    "cycle" => Workload::Cycle,
                    "federated" => Workload::Federated,
                    other => {
                        return Err(format!(
                            "unknown workload '{other}' (addjob|getjob|cycle|federated)"
                        ));
                    }
                }
            }
            "--ack" => raw.ack = Some(AckMode::AckJob),
            "--fastack" => raw.ack = Some(AckMode::FastAck),
            "--no-ack" => raw.ack = Some(AckMode::None),
            "--prefill" => raw.prefill = Some(num(&flag, &value(&flag)?)?),
            "--consumers" => raw.consumers = Some(num(&flag, &value(&flag)?)?),
            "--block-ms" => cfg.block = Duration::from_millis(num(&flag, &value(&flag)?)?),
            "--timeout-ms" => cfg.timeout = Duration::from_millis(num(&flag, &value(&flag)?)?),
            "--threads" => cfg.threads = num(&flag, &value(&flag)?)?,
            "--csv" => cfg.csv = true,
            "--csv-header" => cfg.csv_header = true,
            "-q" | "--quiet" => cfg.quiet = true,
            "--strict" => cfg.strict = true,
            other => return Err(format!("unknown option '{other}'")),
        }
        if inline.is_some() && !flag_takes_value(&flag) {
            return Err(format!("{flag} does not take a value"));
        }
    }
    finish(cfg, raw).map(|c| Parsed::Run(Box::new(c)))
}

fn flag_takes_value(flag: &str) -> bool {
    !matches!(
        flag,
        "--help"
            | "--async"
            | "--ack"
            | "--fastack"
            | "--no-ack"
            | "--csv"
            | "--csv-header"
            | "--quiet"
            | "--strict"
    )
}

fn finish(mut cfg: Config, raw: Raw) -> Result<Config, String> {
    if raw.hosts.is_empty() {
        cfg.hosts = vec![with_port("127.0.0.1", raw.port)?];
    } else {
        cfg.hosts = raw
            .hosts
            .iter()
            .map(|h| with_port(h, raw.port))
            .collect::<Result<_, _>>()?;
    }
    cfg.consume_hosts = raw
        .consume_hosts
        .iter()
        .map(|h| with_port(h, raw.port))
        .collect::<Result<_, _>>()?;

    cfg.requests = match (raw.requests, cfg.duration) {
        (Some(n), _) => n,
        (None, Some(_)) => u64::MAX,
        (None, None) => 100_000,
    };
    cfg.prefill = raw.prefill.unwrap_or(if cfg.requests == u64::MAX {
        100_000
    } else {
        cfg.requests
    });

    if cfg.clients == 0 {
        return Err("--clients must be at least 1".into());
    }
    if cfg.pipeline == 0 {
        return Err("--pipeline must be at least 1".into());
    }
    if cfg.queues == 0 {
        return Err("--queues must be at least 1".into());
    }
    if cfg.threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    if cfg.timeout.is_zero() {
        return Err("--timeout-ms must be at least 1".into());
    }
    if cfg.requests == 0 {
        return Err("--requests must be at least 1".into());
    }
    if cfg.target == Target::Redis && (cfg.replicate.is_some() || cfg.async_add) {
        return Err("--replicate/--async only apply to --target disque".into());
    }
    cfg.ack = match (raw.ack, cfg.workload, cfg.target) {
        (Some(AckMode::None) | None, _, Target::Redis) => AckMode::None,
        (Some(_), _, Target::Redis) => {
            return Err("--ack/--fastack only apply to --target disque".into());
        }
        (Some(a), _, Target::Disque) => a,
        (None, w, Target::Disque) if w.is_cycle() => AckMode::AckJob,
        (None, _, Target::Disque) => AckMode::None,
    };
    if cfg.workload.is_cycle() {
        if cfg.size < STAMP_LEN {
            return Err(format!(
                "{} needs --size >= {STAMP_LEN} (the body carries a timestamp)",
                cfg.workload.name()
            ));
        }
        cfg.consumers = raw.consumers.unwrap_or((cfg.clients / 2).max(1));
        if cfg.consumers == 0 {
            return Err("--consumers must be at least 1".into());
        }
    }
    if cfg.workload == Workload::Federated {
        if cfg.target != Target::Disque {
            return Err("federated needs --target disque".into());
        }
        if cfg.hosts.len() < 2 {
            return Err("federated needs two nodes: -h HOST1,HOST2".into());
        }
        if !cfg.consume_hosts.is_empty() {
            return Err("federated uses host 2 for consumers; drop --consume-host".into());
        }
    }
    Ok(cfg)
}

/// Cycle producer count: the clients that do not consume, at least one.
pub fn producers(cfg: &Config) -> usize {
    cfg.clients.saturating_sub(cfg.consumers).max(1)
}

fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

fn num<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{flag}: '{v}' is not a valid number"))
}

/// Turns "host", "host:port", "[v6]", "[v6]:port" or a bare IPv6 address
/// into "host:port".
fn with_port(spec: &str, default_port: u16) -> Result<String, String> {
    if let Some(rest) = spec.strip_prefix('[') {
        let (addr, tail) = rest
            .split_once(']')
            .ok_or_else(|| format!("bad host '{spec}'"))?;
        return match tail {
            "" => Ok(format!("[{addr}]:{default_port}")),
            t => {
                let port: u16 = num("host port", t.trim_start_matches(':'))?;
                Ok(format!("[{addr}]:{port}"))
            }
        };
    }
    match spec.matches(':').count() {
        0 => Ok(format!("{spec}:{default_port}")),
        1 => {
            let (h, p) = spec.split_once(':').unwrap_or((spec, ""));
            let port: u16 = num("host port", p)?;
            Ok(format!("{h}:{port}"))
        }
        _ => Ok(format!("[{spec}]:{default_port}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(args: &[&str]) -> Config {
        match parse(args.iter().map(|s| s.to_string())).expect("parse") {
            Parsed::Run(c) => *c,
            Parsed::Help => panic!("help"),
        }
    }

    #[test]
    fn defaults() {
        let c = cfg(&[]);
        assert_eq!(c.hosts, vec!["127.0.0.1:7711"]);
        assert_eq!(c.clients, 50);
        assert_eq!(c.requests, 100_000);
        assert_eq!(c.pipeline, 1);
        assert_eq!(c.size, 100);
        assert_eq!(c.target, Target::Disque);
        assert_eq!(c.workload, Workload::AddJob);
        assert_eq!(c.ack, AckMode::None);
        assert_eq!(c.rate, None);
        assert_eq!(cfg(&["--rate", "2500"]).rate, Some(2500.0));
    }

    #[test]
    fn hosts_and_ports() {
        let c = cfg(&["-h", "a,b:1", "--host", "[::1]:9", "-h", "::1", "-p", "5"]);
        assert_eq!(c.hosts, vec!["a:5", "b:1", "[::1]:9", "[::1]:5"]);
        assert!(parse(["-h".to_string(), "a:x".to_string()]).is_err());
    }

    #[test]
    fn duration_only_means_unbounded_count() {
        let c = cfg(&["-d", "1.5", "-w", "getjob"]);
        assert_eq!(c.requests, u64::MAX);
        assert_eq!(c.prefill, 100_000);
        assert_eq!(c.duration, Some(Duration::from_millis(1500)));
        let c = cfg(&["-d", "2", "-n", "10"]);
        assert_eq!(c.requests, 10);
    }

    #[test]
    fn cycle_rules() {
        let c = cfg(&["-w", "cycle", "-c", "1"]);
        assert_eq!(c.ack, AckMode::AckJob);
        assert_eq!((c.consumers, producers(&c)), (1, 1));
        let c = cfg(&["--workload=cycle", "-c", "10", "--fastack"]);
        assert_eq!(c.ack, AckMode::FastAck);
        assert_eq!((c.consumers, producers(&c)), (5, 5));
        assert!(parse(["-w", "cycle", "-s", "10"].map(String::from)).is_err());
        assert!(parse(["-w", "federated"].map(String::from)).is_err());
        let c = cfg(&["-w", "federated", "-h", "x:1,x:2"]);
        assert_eq!(c.hosts.len(), 2);
    }

    #[test]
    fn errors() {
        for bad in [
            vec!["--bogus"],
            vec!["-c"],
            vec!["-c", "0"],
            vec!["-P", "x"],
            vec!["--target", "memcached"],
            vec!["--csv=1"],
            vec!["--target", "redis", "--ack"],
            vec!["--rate", "0"],
            vec!["--rate", "x"],
        ] {
            assert!(parse(bad.iter().map(|s| s.to_string())).is_err(), "{bad:?}");
        }
        assert!(matches!(parse(["--help".to_string()]), Ok(Parsed::Help)));
    }
}
