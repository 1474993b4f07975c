//! The load generator keeps working against the real server: each
//! workload runs briefly and reports zero errors, `--json` records the
//! options and results, and `--version` answers.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use crate::harness::Server;

/// How long building the benchmark may take: its dependencies (clap,
/// hdrhistogram) are not in this package's build, so a first run compiles
/// them too.
const BUILD_DEADLINE: Duration = Duration::from_secs(600);

/// The benchmark binary, built once per test process. It is a package of
/// its own (benchmark/), and Cargo sets `CARGO_BIN_EXE_*` only for the
/// binaries of the package under test, so the Cargo that runs these tests
/// builds it (already up to date after a workspace `cargo test` or
/// `cargo build`) and reports where it put it.
fn bench_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(build_bench)
}

fn build_bench() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--message-format=json", "-p", "disque-benchmark"])
        .args(["--bin", "disque-benchmark", "--manifest-path"])
        .arg(&manifest)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The same profile as these tests: `cargo test --release` measures the
    // release benchmark.
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let mut child = cmd.spawn().expect("start cargo build -p disque-benchmark");
    let drain = |mut r: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for cargo build") {
            break status;
        }
        if start.elapsed() > BUILD_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "cargo build -p disque-benchmark took over {BUILD_DEADLINE:?}:\n{}",
                stderr.join().unwrap_or_default()
            );
        }
        thread::sleep(Duration::from_millis(100));
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    assert!(
        status.success(),
        "cargo build -p disque-benchmark: {status}\n{stderr}"
    );
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "disque-benchmark")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo named no disque-benchmark executable:\n{stderr}"))
}

/// Runs the benchmark to completion and returns its stdout.
fn bench(args: &[&str]) -> String {
    let out = Command::new(bench_bin())
        .args(args)
        .output()
        .expect("run disque-benchmark");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "disque-benchmark {args:?} failed: {}\n{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn run(port: u16, args: &[&str]) -> Vec<String> {
    let port = port.to_string();
    let mut all = vec!["-p", &port, "--csv", "-q", "--timeout-ms", "5000"];
    all.extend_from_slice(args);
    let stdout = bench(&all);
    let line = stdout.lines().last().unwrap_or_default().to_string();
    line.split(',').map(str::to_string).collect()
}

#[test]
fn benchmark_workloads_run_without_errors() {
    let s = Server::start_default();
    for args in [
        &["-w", "addjob", "-c", "4", "-n", "2000"][..],
        &[
            "-w", "addjob", "-c", "4", "-n", "2000", "-P", "8", "--queues", "3",
        ][..],
        &["-w", "getjob", "-c", "4", "-n", "1000", "--ack"][..],
        &["-w", "cycle", "-c", "4", "-n", "1000"][..],
        &["-w", "cycle", "-c", "4", "-n", "1000", "--ack-with-next"][..],
    ] {
        let cols = run(s.port(), args);
        // target,workload,clients,pipeline,size,ops_per_sec,p50,p99,p999,max,ops,errors
        assert!(cols.len() >= 12, "unexpected CSV {cols:?} for {args:?}");
        assert_eq!(cols[11], "0", "errors reported for {args:?}: {cols:?}");
        let ops: f64 = cols[5].parse().expect("ops/s");
        assert!(ops > 0.0, "{cols:?}");
    }
}

#[test]
fn benchmark_json_records_options_and_scheduled_latency() {
    let s = Server::start_default();
    let port = s.port().to_string();
    let out = bench(&[
        "-p",
        &port,
        "--json",
        "--timeout-ms",
        "5000",
        "-w",
        "cycle",
        "-c",
        "4",
        "-n",
        "400",
        "--rate",
        "2000",
        "--queue-prefix",
        "jsonrun",
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    let opts = &v["options"];
    assert_eq!(opts["workload"], "cycle");
    assert_eq!(opts["rate"], 2000.0);
    assert_eq!(opts["clients"], 4);
    assert_eq!(opts["requests"], 400);
    assert_eq!(opts["ack"], "ackjob");
    assert_eq!(opts["queue_prefix"], "jsonrun");
    assert_eq!(opts["hosts"][0], format!("127.0.0.1:{port}"));
    let res = &v["results"];
    assert_eq!(res["errors"], 0, "{v}");
    assert_eq!(res["ops"], 400, "{v}");
    assert_eq!(res["latency_from"], "scheduled_send");
    assert_eq!(res["latency_kind"], "end_to_end");
    assert_eq!(res["latency"]["count"], 400);
    let p50 = res["latency"]["p50_us"].as_f64().expect("p50");
    let max = res["latency"]["max_us"].as_f64().expect("max");
    assert!(p50 > 0.0 && p50 <= max, "{v}");
    assert_eq!(res["produce"]["ops"], 400);
    assert_eq!(res["schedule"]["rate"], 2000.0);
}

#[test]
fn benchmark_version_and_usage_errors() {
    let v = bench(&["--version"]);
    assert_eq!(
        v.trim(),
        format!("disque-benchmark {}", env!("CARGO_PKG_VERSION"))
    );
    let out = Command::new(bench_bin())
        .args(["-c", "0"])
        .output()
        .expect("run disque-benchmark");
    assert_eq!(out.status.code(), Some(1), "bad usage exits 1");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--clients"));
}

#[test]
fn cycle_ack_with_next_acknowledges_every_job() {
    let s = Server::start_default();
    let cols = run(
        s.port(),
        &["-w", "cycle", "-c", "6", "-n", "600", "--ack-with-next"],
    );
    assert_eq!(cols[11], "0", "errors reported: {cols:?}");
    assert_eq!(cols[10], "600", "jobs consumed: {cols:?}");
    // Every job was acknowledged, the last ones with the consumers' final
    // write: none is left on the node.
    let mut c = s.client();
    assert_eq!(c.info_int("registered_jobs"), 0);
}
