//! The load generator keeps working against the real server: each
//! workload runs briefly and reports zero errors.

use std::process::Command;

use crate::harness::Server;

const BENCH_BIN: &str = env!("CARGO_BIN_EXE_disque-benchmark");

fn run(port: u16, args: &[&str]) -> Vec<String> {
    let out = Command::new(BENCH_BIN)
        .args([
            "-p",
            &port.to_string(),
            "--csv",
            "-q",
            "--timeout-ms",
            "5000",
        ])
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
    ] {
        let cols = run(s.port(), args);
        // target,workload,clients,pipeline,size,ops_per_sec,p50,p99,p999,max,ops,errors
        assert!(cols.len() >= 12, "unexpected CSV {cols:?} for {args:?}");
        assert_eq!(cols[11], "0", "errors reported for {args:?}: {cols:?}");
        let ops: f64 = cols[5].parse().expect("ops/s");
        assert!(ops > 0.0, "{cols:?}");
    }
}
