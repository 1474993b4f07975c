//! `disque-server [config-file] [--directive value ...]`: parse the
//! configuration, set up logging, run the node.

use disque::config::{self, Startup};

#[global_allocator]
static ALLOC: disque::memory::Counting = disque::memory::Counting;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
            println!();
            println!("Examples:");
            println!("       ./disque-server (run the server with default conf)");
            println!("       ./disque-server /etc/disque/7711.conf");
            println!("       ./disque-server --port 7777");
            println!("       ./disque-server /etc/mydisque.conf --loglevel verbose");
            return;
        }
        Ok(Startup::CheckAof { file, fix }) => {
            std::process::exit(disque::aof::check_aof_main(&file, fix));
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
    if let Err(e) = disque::logging::init(&cfg) {
        eprintln!("{e}");
        std::process::exit(1);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(
            std::env::var("DISQUE_WORKER_THREADS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(2),
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
    if let Err(e) = runtime.block_on(disque::server::run(*cfg)) {
        tracing::error!(error = %e, "Fatal error.");
        eprintln!("{e}");
        std::process::exit(1);
    }
}
