//! Command-line options (clap derive) and their validation into a
//! [`Config`], the resolved settings a run uses and `--json` records.

use std::time::Duration;

use clap::{ArgAction, Parser, ValueEnum};
use serde::Serialize;

/// Which server dialect to drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// Disque: ADDJOB / GETJOB / ACKJOB.
    Disque,
    /// Redis list baseline: addjob=LPUSH, getjob=RPOP, cycle=LPUSH+BRPOP.
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// ADDJOB q body 0 [REPLICATE n] [ASYNC]
    #[value(name = "addjob")]
    AddJob,
    /// Pre-fill, then GETJOB NOHANG FROM q (+ ACKJOB/FASTACK with --ack)
    #[value(name = "getjob")]
    GetJob,
    /// Producers ADDJOB, blocking consumers GETJOB TIMEOUT then ACKJOB;
    /// end-to-end latency from a send timestamp embedded in the body
    Cycle,
    /// Cycle with producers on host 1 and consumers on host 2
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
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

const AFTER_HELP: &str = "\
Latency: without --rate each operation is timed from the moment its command
is sent (closed loop). With --rate the run follows a fixed schedule and each
operation is timed from its scheduled send time, so a stall that delays later
sends is counted in their latency (no coordinated omission).

Output: --csv prints one line
  target,workload,clients,pipeline,size,ops_per_sec,p50_us,p99_us,p999_us,max_us,ops,errors
(cycle: latencies are end-to-end); --json prints one JSON object with every
resolved option and the results.

Exit status: 0 ok, 1 bad usage, 2 could not connect (or prefill failed),
3 errors occurred with --strict.";

/// disque-benchmark: load generator for Disque (and a Redis list baseline)
#[derive(Debug, Parser)]
#[command(
    name = "disque-benchmark",
    version,
    disable_help_flag = true,
    after_help = AFTER_HELP
)]
struct Cli {
    /// Node to use; repeat or give a comma list for several nodes (default
    /// 127.0.0.1). Clients are spread round-robin over the nodes
    #[arg(
        short = 'h',
        long = "host",
        value_name = "HOST[:PORT]",
        help_heading = "Connection"
    )]
    hosts: Vec<String>,
    /// Port for hosts given without one
    #[arg(short, long, default_value_t = 7711, help_heading = "Connection")]
    port: u16,
    /// cycle: consumers use these nodes instead (repeatable, comma list)
    #[arg(
        long = "consume-host",
        value_name = "HOST[:PORT]",
        help_heading = "Connection"
    )]
    consume_hosts: Vec<String>,
    /// Timeout of every network read/write
    #[arg(long = "timeout-ms", value_name = "MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..), help_heading = "Connection")]
    timeout_ms: u64,
    /// Open N extra idle connections first, kept open during the whole run
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        help_heading = "Connection"
    )]
    idle_connections: usize,

    /// What the clients do
    #[arg(
        short,
        long,
        value_enum,
        default_value = "addjob",
        help_heading = "Load"
    )]
    workload: Workload,
    /// Server dialect; redis is a baseline driving lists
    #[arg(long, value_enum, default_value = "disque", help_heading = "Load")]
    target: Target,
    /// Concurrent connections
    #[arg(short, long, value_name = "N", default_value_t = 50,
          value_parser = at_least_one, help_heading = "Load")]
    clients: usize,
    /// Total operations [default: 100000; unbounded when only -d is given]
    #[arg(short = 'n', long, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..), help_heading = "Load")]
    requests: Option<u64>,
    /// Stop after SECS seconds (whichever bound comes first)
    #[arg(short, long, value_name = "SECS", value_parser = parse_duration, help_heading = "Load")]
    duration: Option<Duration>,
    /// Commands in flight per connection; for cycle consumers the GETJOB COUNT
    #[arg(short = 'P', long, value_name = "N", default_value_t = 1,
          value_parser = at_least_one, help_heading = "Load")]
    pipeline: usize,
    /// Job body size in bytes (cycle needs >= 24)
    #[arg(
        short,
        long,
        value_name = "BYTES",
        default_value_t = 100,
        help_heading = "Load"
    )]
    size: usize,
    /// Distinct queues, used round-robin
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = at_least_one,
          help_heading = "Load")]
    queues: usize,
    /// Queue names are NAME:0 .. NAME:N-1
    #[arg(
        long,
        value_name = "NAME",
        default_value = "dqbench",
        help_heading = "Load"
    )]
    queue_prefix: String,
    /// ADDJOB ... REPLICATE N
    #[arg(long, value_name = "N", help_heading = "Load")]
    replicate: Option<u32>,
    /// ADDJOB ... RETRY SECONDS
    #[arg(long, value_name = "SECONDS", help_heading = "Load")]
    retry: Option<u32>,
    /// ADDJOB ... ASYNC
    #[arg(long = "async", help_heading = "Load")]
    async_add: bool,
    /// Fixed-rate (open loop) schedule: OPS operations per second in total
    /// (addjob/getjob clients, cycle producers); latency is measured from
    /// each operation's scheduled send time
    #[arg(long, value_name = "OPS", value_parser = parse_rate, help_heading = "Load")]
    rate: Option<f64>,
    /// getjob: ACKJOB each consumed job (cycle: the default)
    #[arg(long, overrides_with_all = ["fastack", "no_ack"], help_heading = "Load")]
    ack: bool,
    /// FASTACK instead of ACKJOB (getjob and cycle)
    #[arg(long, overrides_with_all = ["ack", "no_ack"], help_heading = "Load")]
    fastack: bool,
    /// cycle: do not acknowledge consumed jobs
    #[arg(long, overrides_with_all = ["ack", "fastack"], help_heading = "Load")]
    no_ack: bool,
    /// cycle: send each job's ACKJOB/FASTACK in the same write as the
    /// consumer's next GETJOB (one round trip per job) instead of waiting
    /// for its reply first
    #[arg(long, help_heading = "Load")]
    ack_with_next: bool,
    /// getjob: jobs inserted before the run [default: -n, or 100000 when -n
    /// is unbounded]
    #[arg(long, value_name = "N", help_heading = "Load")]
    prefill: Option<u64>,
    /// cycle: how many of the -c clients consume [default: half, at least 1;
    /// producers at least 1]
    #[arg(long, value_name = "N", value_parser = at_least_one, help_heading = "Load")]
    consumers: Option<usize>,
    /// cycle: GETJOB TIMEOUT / BRPOP timeout
    #[arg(
        long = "block-ms",
        value_name = "MS",
        default_value_t = 1000,
        help_heading = "Load"
    )]
    block_ms: u64,
    /// Tokio worker threads
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = at_least_one,
          help_heading = "Load")]
    threads: usize,

    /// One CSV line (see below)
    #[arg(long, help_heading = "Output")]
    csv: bool,
    /// Print the CSV header line first
    #[arg(long, help_heading = "Output")]
    csv_header: bool,
    /// One JSON object: every resolved option and the results
    #[arg(long, conflicts_with = "csv", help_heading = "Output")]
    json: bool,
    /// One summary line
    #[arg(short, long, help_heading = "Output")]
    quiet: bool,
    /// Exit 3 if any error occurred
    #[arg(long, help_heading = "Output")]
    strict: bool,
    /// Print help
    #[arg(long, action = ArgAction::Help, help_heading = "Output")]
    help: Option<bool>,
}

fn at_least_one(v: &str) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{v}' is not a valid number")),
    }
}

fn parse_duration(v: &str) -> Result<Duration, String> {
    match v.parse::<f64>() {
        Ok(secs) if secs > 0.0 && secs < 1e9 => Ok(Duration::from_secs_f64(secs)),
        Ok(_) => Err("duration must be positive".into()),
        Err(_) => Err(format!("'{v}' is not a number of seconds")),
    }
}

fn parse_rate(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(r) if r > 0.0 && r.is_finite() => Ok(r),
        Ok(_) => Err("rate must be positive".into()),
        Err(_) => Err(format!("'{v}' is not a number of ops/s")),
    }
}

/// Everything the run needs, validated. Serialized as the `options` of
/// `--json` output (durations in milliseconds).
#[derive(Clone, Debug, Serialize)]
pub struct Config {
    /// Nodes as "host:port" strings, in command-line order.
    pub hosts: Vec<String>,
    /// Where cycle consumers connect (empty: same as `hosts`).
    pub consume_hosts: Vec<String>,
    pub clients: usize,
    /// Upper bound on operations (`u64::MAX` when only a duration bounds the run).
    pub requests: u64,
    #[serde(rename = "duration_ms", serialize_with = "opt_ms")]
    pub duration: Option<Duration>,
    pub pipeline: usize,
    pub size: usize,
    pub queues: usize,
    pub queue_prefix: String,
    pub replicate: Option<u32>,
    pub retry: Option<u32>,
    #[serde(rename = "async")]
    pub async_add: bool,
    /// Fixed schedule of this many ops/s in total (addjob, getjob, cycle producers).
    pub rate: Option<f64>,
    pub idle_connections: usize,
    pub target: Target,
    pub workload: Workload,
    pub ack: AckMode,
    /// Cycle consumers pipeline each ACK with their next GETJOB.
    pub ack_with_next: bool,
    /// Jobs inserted before a getjob run.
    pub prefill: u64,
    /// Cycle consumer count (the rest of `clients` produce).
    pub consumers: usize,
    /// Server-side blocking timeout of cycle consumers.
    #[serde(rename = "block_ms", serialize_with = "ms")]
    pub block: Duration,
    /// Per network read/write timeout.
    #[serde(rename = "timeout_ms", serialize_with = "ms")]
    pub timeout: Duration,
    pub csv: bool,
    pub csv_header: bool,
    pub json: bool,
    pub quiet: bool,
    pub strict: bool,
    pub threads: usize,
}

fn ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

fn opt_ms<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => ms(d, s),
        None => s.serialize_none(),
    }
}

/// Result of parsing: run, or print this text (help, version) and exit 0.
#[derive(Debug)]
pub enum Parsed {
    Run(Box<Config>),
    Print(String),
}

/// Parses the arguments (without the program name).
pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Parsed, String> {
    let argv = std::iter::once("disque-benchmark".to_string()).chain(args);
    match Cli::try_parse_from(argv) {
        Ok(cli) => finish(cli)
            .map(|c| Parsed::Run(Box::new(c)))
            .map_err(|e| format!("error: {e}\n\nFor more information, try '--help'.\n")),
        Err(e) => match e.kind() {
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                Ok(Parsed::Print(e.render().to_string()))
            }
            _ => Err(e.render().to_string()),
        },
    }
}

fn finish(cli: Cli) -> Result<Config, String> {
    let hosts: Vec<String> = if cli.hosts.is_empty() {
        vec![with_port("127.0.0.1", cli.port)?]
    } else {
        split_list(&cli.hosts)
            .iter()
            .map(|h| with_port(h, cli.port))
            .collect::<Result<_, _>>()?
    };
    let consume_hosts = split_list(&cli.consume_hosts)
        .iter()
        .map(|h| with_port(h, cli.port))
        .collect::<Result<_, _>>()?;
    let requests = match (cli.requests, cli.duration) {
        (Some(n), _) => n,
        (None, Some(_)) => u64::MAX,
        (None, None) => 100_000,
    };
    let prefill = cli.prefill.unwrap_or(if requests == u64::MAX {
        100_000
    } else {
        requests
    });
    let mut cfg = Config {
        hosts,
        consume_hosts,
        clients: cli.clients,
        requests,
        duration: cli.duration,
        pipeline: cli.pipeline,
        size: cli.size,
        queues: cli.queues,
        queue_prefix: cli.queue_prefix,
        replicate: cli.replicate,
        retry: cli.retry,
        async_add: cli.async_add,
        rate: cli.rate,
        idle_connections: cli.idle_connections,
        target: cli.target,
        workload: cli.workload,
        ack: AckMode::None,
        ack_with_next: cli.ack_with_next,
        prefill,
        consumers: 0,
        block: Duration::from_millis(cli.block_ms),
        timeout: Duration::from_millis(cli.timeout_ms),
        csv: cli.csv,
        csv_header: cli.csv_header,
        json: cli.json,
        quiet: cli.quiet,
        strict: cli.strict,
        threads: cli.threads,
    };
    if cfg.target == Target::Redis
        && (cfg.replicate.is_some() || cfg.retry.is_some() || cfg.async_add)
    {
        return Err("--replicate/--retry/--async only apply to --target disque".into());
    }
    let ack = match (cli.ack, cli.fastack, cli.no_ack) {
        (true, _, _) => Some(AckMode::AckJob),
        (_, true, _) => Some(AckMode::FastAck),
        (_, _, true) => Some(AckMode::None),
        _ => None,
    };
    cfg.ack = match (ack, cfg.workload, cfg.target) {
        (Some(AckMode::None) | None, _, Target::Redis) => AckMode::None,
        (Some(_), _, Target::Redis) => {
            return Err("--ack/--fastack only apply to --target disque".into());
        }
        (Some(a), _, Target::Disque) => a,
        (None, w, Target::Disque) if w.is_cycle() => AckMode::AckJob,
        (None, _, Target::Disque) => AckMode::None,
    };
    if cfg.ack_with_next && (!cfg.workload.is_cycle() || cfg.ack == AckMode::None) {
        return Err("--ack-with-next needs a cycle workload that acknowledges".into());
    }
    if cfg.workload.is_cycle() {
        if cfg.size < STAMP_LEN {
            return Err(format!(
                "{} needs --size >= {STAMP_LEN} (the body carries a timestamp)",
                cfg.workload.name()
            ));
        }
        cfg.consumers = cli.consumers.unwrap_or((cfg.clients / 2).max(1));
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

/// Every host of repeated, comma-separated `--host` values.
fn split_list(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

fn port_of(spec: &str, p: &str) -> Result<u16, String> {
    p.parse()
        .map_err(|_| format!("bad port '{p}' in host '{spec}'"))
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
            t => Ok(format!(
                "[{addr}]:{}",
                port_of(spec, t.trim_start_matches(':'))?
            )),
        };
    }
    match spec.split_once(':') {
        None => Ok(format!("{spec}:{default_port}")),
        Some((h, p)) if !p.contains(':') => Ok(format!("{h}:{}", port_of(spec, p)?)),
        Some(_) => Ok(format!("[{spec}]:{default_port}")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic
mod tests {
    use super::*;

    fn cfg(args: &[&str]) -> Config {
        match parse(args.iter().map(|s| s.to_string())).expect("parse") {
            Parsed::Run(c) => *c,
            Parsed::Print(t) => panic!("printed {t}"),
        }
    }

    fn fails(args: &[&str]) -> bool {
        parse(args.iter().map(|s| s.to_string())).is_err()
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
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
        assert_eq!(c.timeout, Duration::from_secs(10));
        assert_eq!(c.block, Duration::from_secs(1));
        assert_eq!(c.threads, 2);
        assert_eq!(cfg(&["--rate", "2500"]).rate, Some(2500.0));
    }

    #[test]
    fn hosts_and_ports() {
        let c = cfg(&["-h", "a,b:1", "--host", "[::1]:9", "-h", "::1", "-p", "5"]);
        assert_eq!(c.hosts, vec!["a:5", "b:1", "[::1]:9", "[::1]:5"]);
        assert!(fails(&["-h", "a:x"]));
        assert!(fails(&["-h", "[::1"]));
    }

    #[test]
    fn duration_only_means_unbounded_count() {
        let c = cfg(&["-d", "1.5", "-w", "getjob"]);
        assert_eq!(c.requests, u64::MAX);
        assert_eq!(c.prefill, 100_000);
        assert_eq!(c.duration, Some(Duration::from_millis(1500)));
        let c = cfg(&["-d", "2", "-n", "10"]);
        assert_eq!(c.requests, 10);
        assert_eq!(c.prefill, 10);
    }

    #[test]
    fn cycle_rules() {
        let c = cfg(&["-w", "cycle", "-c", "1"]);
        assert_eq!(c.ack, AckMode::AckJob);
        assert_eq!((c.consumers, producers(&c)), (1, 1));
        let c = cfg(&["--workload=cycle", "-c", "10", "--fastack"]);
        assert_eq!(c.ack, AckMode::FastAck);
        assert_eq!((c.consumers, producers(&c)), (5, 5));
        // The last of --ack/--fastack/--no-ack wins.
        assert_eq!(
            cfg(&["-w", "cycle", "--fastack", "--no-ack"]).ack,
            AckMode::None
        );
        assert_eq!(
            cfg(&["-w", "getjob", "--no-ack", "--ack"]).ack,
            AckMode::AckJob
        );
        assert!(fails(&["-w", "cycle", "-s", "10"]));
        assert!(fails(&["-w", "federated"]));
        let c = cfg(&["-w", "federated", "-h", "x:1,x:2"]);
        assert_eq!(c.hosts.len(), 2);
    }

    #[test]
    fn errors() {
        for bad in [
            &["--bogus"][..],
            &["-c"],
            &["-c", "0"],
            &["-P", "x"],
            &["-n", "0"],
            &["--timeout-ms", "0"],
            &["--target", "memcached"],
            &["-w", "add-job"],
            &["--csv=1"],
            &["--csv", "--json"],
            &["--target", "redis", "--ack"],
            &["--target", "redis", "--replicate", "2"],
            &["--rate", "0"],
            &["--rate", "x"],
            &["--rate", "inf"],
            &["-d", "-1"],
        ] {
            assert!(fails(bad), "{bad:?}");
        }
    }

    #[test]
    fn help_and_version_are_printed() {
        let Ok(Parsed::Print(help)) = parse(["--help".to_string()]) else {
            panic!("--help");
        };
        assert!(
            help.contains("--rate <OPS>") && help.contains("Exit status"),
            "{help}"
        );
        let Ok(Parsed::Print(v)) = parse(["--version".to_string()]) else {
            panic!("--version");
        };
        assert_eq!(
            v.trim(),
            format!("disque-benchmark {}", env!("CARGO_PKG_VERSION"))
        );
    }

    #[test]
    fn json_options_record_resolved_values() {
        let c = cfg(&["-w", "cycle", "--rate", "100", "-d", "2", "--json"]);
        let v = serde_json::to_value(&c).expect("serialize");
        assert_eq!(v["workload"], "cycle");
        assert_eq!(v["ack"], "ackjob");
        assert_eq!(v["rate"], 100.0);
        assert_eq!(v["duration_ms"], 2000.0);
        assert_eq!(v["requests"], u64::MAX);
        assert_eq!(v["async"], false);
        assert_eq!(v["hosts"][0], "127.0.0.1:7711");
    }
}
