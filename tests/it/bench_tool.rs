//! The load generator keeps working against the real server: each
//! workload runs briefly and reports zero errors, `--json` records the
//! options and results (its command line alone is benchmark/tests/cli.rs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::harness::{Server, SERVER_BIN};

/// The benchmark binary of this build. It is a package of its own
/// (benchmark/), and Cargo sets `CARGO_BIN_EXE_*` only for the binaries
/// of the package under test; a workspace `cargo test` builds it beside
/// the server, because the benchmark package has integration tests
/// (benchmark/tests/cli.rs), before any test runs. Building it from here
/// instead would resolve the workspace's features anew and recompile.
fn bench_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let bin = Path::new(SERVER_BIN).with_file_name("disque-benchmark");
        assert!(
            bin.exists(),
            "{} is missing: run the workspace's `cargo test` (or `cargo build -p disque-benchmark`) first",
            bin.display()
        );
        bin
    })
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
