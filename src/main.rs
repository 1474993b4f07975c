//! `disque-server [config-file] [--directive value ...]`: parse the
//! configuration, set up logging, run the node.

use disque::config::{self, Startup};

#[global_allocator]
static ALLOC: disque::Counting = disque::Counting;

fn main() {
    disque::tune_allocator();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--healthcheck") {
        std::process::exit(disque::healthcheck(&args[1..]));
    }
    // Before the config is parsed: `dir` changes the working directory.
    let start_dir = std::env::current_dir().ok();
    let cfg = match config::from_args(&args) {
        Ok(Startup::Run(cfg)) => cfg,
        Ok(Startup::Version) => {
            println!(
                "Disque server v={} (disque-rs {})",
                disque::VERSION,
                env!("CARGO_PKG_VERSION")
            );
            return;
        }
        Ok(Startup::Help) => {
            println!("Usage: ./disque-server [/path/to/disque.conf] [options]");
            println!("       ./disque-server - (read config from stdin)");
            println!("       ./disque-server -v or --version");
            println!("       ./disque-server -h or --help");
            println!("       ./disque-server --check-aof <file> [--fix]");
            println!("       ./disque-server --healthcheck [--live] [host:port]");
            println!();
            println!("Examples:");
            println!("       ./disque-server (run the server with default conf)");
            println!("       ./disque-server /etc/disque/7711.conf");
            println!("       ./disque-server --port 7777");
            println!("       ./disque-server /etc/mydisque.conf --loglevel verbose");
            return;
        }
        Ok(Startup::CheckAof { file, fix }) => {
            std::process::exit(disque::check_aof(&file, fix));
        }
        Ok(Startup::TestMemory(_)) => {
            eprintln!("--test-memory is not supported by this build.");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = disque::init_logging(&cfg) {
        eprintln!("{e}");
        std::process::exit(1);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(
            // The environment variable predates the directive and is kept
            // for benchmark scripts (docs/DEPLOY.md).
            std::env::var("DISQUE_WORKER_THREADS")
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|&n: &usize| n > 0)
                .unwrap_or_else(|| cfg.deploy.worker_threads()),
        )
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("Cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let config_file = cfg.config_file.clone();
    let exit = match runtime.block_on(disque::run(*cfg)) {
        Ok(exit) => exit,
        Err(e) => {
            tracing::error!(error = %e, "Fatal error.");
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    drop(runtime);
    if let Some(delay) = exit.restart_after_ms {
        restart(&args, config_file, start_dir, delay, exit.port);
    }
}

/// DEBUG RESTART: run this binary again with the same arguments (the
/// config file path made absolute, since `dir` moved the working
/// directory). All descriptors are close-on-exec, so the listeners and the
/// nodes.conf lock are released.
fn restart(
    args: &[String],
    config_file: Option<std::path::PathBuf>,
    start_dir: Option<std::path::PathBuf>,
    delay_ms: u64,
    port: u16,
) {
    use std::os::unix::process::CommandExt;
    std::thread::sleep(std::time::Duration::from_millis(delay_ms.min(60_000)));
    let mut argv: Vec<String> = args.to_vec();
    if let (Some(first), Some(abs)) = (argv.first_mut(), config_file) {
        if !first.starts_with("--") {
            *first = abs.display().to_string();
        }
    }
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("DEBUG RESTART: cannot find the executable: {e}");
            std::process::exit(1);
        }
    };
    // Same port, even if it was picked with `--port 0`.
    argv.push("--port".to_string());
    argv.push(port.to_string());
    let mut cmd = std::process::Command::new(exe);
    cmd.args(&argv);
    if let Some(d) = start_dir {
        cmd.current_dir(d);
    }
    let err = cmd.exec();
    eprintln!("DEBUG RESTART: exec failed: {err}");
    std::process::exit(1);
}
