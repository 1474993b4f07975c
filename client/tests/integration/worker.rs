//! The worker on one node: every job processed and acknowledged, failed
//! handlers NACKed and retried, WORKING heartbeats keep a long job from
//! being delivered again, graceful shutdown NACKs what could not finish.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use disque_client::{AddJob, JobState, Worker};
use tokio::sync::{Notify, oneshot};

use crate::harness::{Node, WAIT, wait_for};

type Seen = Arc<Mutex<HashMap<String, u32>>>;

fn count(seen: &Seen) -> usize {
    seen.lock().unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_every_job_and_retries_failures() {
    let node = Node::start(&[]).await;
    let mut c = node.client().await;
    const N: usize = 40;
    for i in 0..N {
        // Every fifth job fails on its first delivery.
        let body = if i % 5 == 0 {
            format!("fail-once {i}")
        } else {
            format!("ok {i}")
        };
        c.add_job(&AddJob::new("work", body).retry(Duration::from_secs(30)))
            .await
            .unwrap();
    }
    let done: Seen = Arc::default();
    let failed: Arc<Mutex<HashSet<String>>> = Arc::default();
    let (stop, stopped) = oneshot::channel::<()>();
    let worker = {
        let done = done.clone();
        Worker::new(node.builder(), ["work"])
            .concurrency(4)
            .fetch_timeout(Duration::from_millis(200))
            .handler(move |job| {
                let done = done.clone();
                let failed = failed.clone();
                async move {
                    let body = String::from_utf8(job.body.to_vec())?;
                    if body.starts_with("fail-once") && failed.lock().unwrap().insert(body) {
                        return Err("first delivery fails".into());
                    }
                    *done.lock().unwrap().entry(job.id.to_string()).or_default() += 1;
                    Ok(())
                }
            })
    };
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    assert!(
        wait_for(WAIT, async || count(&done) == N).await,
        "processed {} of {N}",
        count(&done)
    );
    stop.send(()).unwrap();
    let report = tokio::time::timeout(WAIT, running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(report.acked, N as u64, "{report:?}");
    assert_eq!(report.nacked, (N / 5) as u64, "{report:?}");
    assert_eq!(report.failed_acks, 0, "{report:?}");
    assert!(done.lock().unwrap().values().all(|&n| n == 1));
    assert_eq!(c.qlen("work").await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_keep_a_long_job_from_being_redelivered() {
    let node = Node::start(&[]).await;
    let mut c = node.client().await;
    // RETRY 1: without WORKING the job would be queued again every second
    // and the second slot would take it.
    let id = c
        .add_job(&AddJob::new("long", "x").retry(Duration::from_secs(1)))
        .await
        .unwrap();
    let deliveries: Seen = Arc::default();
    let (stop, stopped) = oneshot::channel::<()>();
    let worker = {
        let deliveries = deliveries.clone();
        let builder = node.builder();
        // Clients from a factory rather than a builder.
        Worker::with_client_factory(
            move || {
                let builder = builder.clone();
                async move { builder.connect().await }
            },
            ["long"],
        )
        .concurrency(2)
        .fetch_timeout(Duration::from_millis(200))
        .first_heartbeat(Duration::from_millis(300))
        .handler(move |job| {
            let deliveries = deliveries.clone();
            async move {
                *deliveries
                    .lock()
                    .unwrap()
                    .entry(job.id.to_string())
                    .or_default() += 1;
                // The work itself: three retry periods long.
                tokio::time::sleep(Duration::from_millis(3200)).await;
                Ok(())
            }
        })
    };
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    let mut probe = node.client().await;
    assert!(
        wait_for(WAIT, async || probe.show(&id).await.unwrap().is_none()).await,
        "job never acknowledged"
    );
    stop.send(()).unwrap();
    let report = tokio::time::timeout(WAIT, running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(deliveries.lock().unwrap().get(id.as_str()), Some(&1));
    assert_eq!(report.acked, 1, "{report:?}");
    assert!(report.heartbeats >= 3, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_in_flight_jobs_then_nacks_the_rest() {
    let node = Node::start(&[]).await;
    let mut c = node.client().await;
    let quick = c
        .add_job(&AddJob::new("sd", "quick").retry(Duration::from_secs(60)))
        .await
        .unwrap();
    let stuck = c
        .add_job(&AddJob::new("sd", "stuck").retry(Duration::from_secs(60)))
        .await
        .unwrap();
    let started = Arc::new(Notify::new());
    let running_jobs = Arc::new(Mutex::new(0usize));
    let release = Arc::new(Notify::new());
    let worker = {
        let started = started.clone();
        let running_jobs = running_jobs.clone();
        let release = release.clone();
        Worker::new(node.builder(), ["sd"])
            .concurrency(2)
            .fetch_timeout(Duration::from_millis(200))
            .shutdown_timeout(Duration::from_millis(1500))
            .first_heartbeat(Duration::from_secs(60))
            .handler(move |job| {
                let started = started.clone();
                let running_jobs = running_jobs.clone();
                let release = release.clone();
                async move {
                    *running_jobs.lock().unwrap() += 1;
                    started.notify_one();
                    if &job.body[..] == b"quick" {
                        // Finishes only once shutdown has begun.
                        release.notified().await;
                        Ok(())
                    } else {
                        std::future::pending::<()>().await;
                        Ok(())
                    }
                }
            })
    };
    let shutdown = {
        let running_jobs = running_jobs.clone();
        let release = release.clone();
        async move {
            while *running_jobs.lock().unwrap() < 2 {
                started.notified().await;
            }
            release.notify_one();
        }
    };
    let report = tokio::time::timeout(WAIT, worker.run_until(shutdown))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.acked, 1, "{report:?}");
    assert_eq!(report.abandoned, 1, "{report:?}");
    assert_eq!(report.nacked, 1, "{report:?}");
    assert!(c.show(&quick).await.unwrap().is_none());
    let info = c.show(&stuck).await.unwrap().unwrap();
    assert_eq!(info.state, JobState::Queued);
    assert_eq!(info.nacks, 1);
}
