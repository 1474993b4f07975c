//! The command line of `disque-benchmark`, without a server: `--version`
//! and usage errors. Being an integration test of this package also makes
//! `cargo test` build the benchmark binary before any test runs, which is
//! the binary the server package's tests (tests/it/bench_tool.rs) drive.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_disque-benchmark");

#[test]
fn version_and_usage_errors() {
    let out = Command::new(BIN)
        .arg("--version")
        .output()
        .expect("run disque-benchmark --version");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("disque-benchmark {}", env!("CARGO_PKG_VERSION"))
    );
    let out = Command::new(BIN)
        .args(["-c", "0"])
        .output()
        .expect("run disque-benchmark");
    assert_eq!(out.status.code(), Some(1), "bad usage exits 1");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--clients"));
}
