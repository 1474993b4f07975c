//! Adds jobs to a queue.
//!
//! ```text
//! cargo run --example producer -- [--nodes 127.0.0.1:7711,127.0.0.1:7712] [--queue demo]
//!                                 [--count 10] [--password PW]
//! ```
//!
//! Prints `added <count> jobs to <queue>` when done.

use std::time::Duration;

use disque_client::{AddJob, Client};

struct Args {
    nodes: Vec<String>,
    queue: String,
    count: u64,
    password: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        nodes: vec!["127.0.0.1:7711".into()],
        queue: "demo".into(),
        count: 10,
        password: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--nodes" => args.nodes = value()?.split(',').map(str::to_string).collect(),
            "--queue" => args.queue = value()?,
            "--count" => args.count = value()?.parse().map_err(|e| format!("--count: {e}"))?,
            "--password" => args.password = Some(value()?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args().map_err(|e| {
        format!("{e}\nusage: producer [--nodes a,b] [--queue q] [--count n] [--password pw]")
    })?;
    let mut builder = Client::builder(&args.nodes);
    if let Some(pw) = &args.password {
        builder = builder.password(pw);
    }
    let mut client = builder.connect().await?;
    for i in 0..args.count {
        let job = AddJob::new(args.queue.as_str(), format!("job {i}"))
            // Re-delivered 30 s after a worker took it without acknowledging.
            .retry(Duration::from_secs(30));
        let id = client.add_job(&job).await?;
        println!("{id} job {i}");
    }
    println!("added {} jobs to {}", args.count, args.queue);
    Ok(())
}
