//! Processes jobs from a queue with a few concurrent handlers.
//!
//! ```text
//! cargo run --example worker -- [--nodes 127.0.0.1:7711,127.0.0.1:7712] [--queue demo]
//!                               [--concurrency 4] [--count N] [--password PW]
//! ```
//!
//! Runs until Ctrl-C, or until it has processed `--count` jobs, then shuts
//! down gracefully and prints `processed <n> jobs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use disque_client::{Client, Worker};
use tokio::sync::Notify;

struct Args {
    nodes: Vec<String>,
    queue: String,
    concurrency: usize,
    count: Option<u64>,
    password: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        nodes: vec!["127.0.0.1:7711".into()],
        queue: "demo".into(),
        concurrency: 4,
        count: None,
        password: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--nodes" => args.nodes = value()?.split(',').map(str::to_string).collect(),
            "--queue" => args.queue = value()?,
            "--concurrency" => {
                args.concurrency = value()?
                    .parse()
                    .map_err(|e| format!("--concurrency: {e}"))?
            }
            "--count" => args.count = Some(value()?.parse().map_err(|e| format!("--count: {e}"))?),
            "--password" => args.password = Some(value()?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args().map_err(|e| {
        format!(
            "{e}\nusage: worker [--nodes a,b] [--queue q] [--concurrency n] [--count n] [--password pw]"
        )
    })?;
    let mut builder = Client::builder(&args.nodes);
    if let Some(pw) = &args.password {
        builder = builder.password(pw);
    }
    let processed = Arc::new(AtomicU64::new(0));
    let enough = Arc::new(Notify::new());
    let worker = {
        let processed = processed.clone();
        let enough = enough.clone();
        let limit = args.count;
        Worker::new(builder, [args.queue.as_str()])
            .concurrency(args.concurrency)
            .handler(move |job| {
                let processed = processed.clone();
                let enough = enough.clone();
                async move {
                    let body = std::str::from_utf8(&job.body)?;
                    println!("{} {body}", job.id);
                    let n = processed.fetch_add(1, Ordering::SeqCst) + 1;
                    if limit == Some(n) {
                        enough.notify_one();
                    }
                    Ok(())
                }
            })
    };
    let report = worker
        .run_until(async {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = enough.notified() => {}
            }
        })
        .await?;
    println!(
        "processed {} jobs ({} given back, {} heartbeats)",
        report.acked, report.nacked, report.heartbeats
    );
    Ok(())
}
