//! Three nodes: discovery through HELLO, jobs taken from another node
//! (federation), moving to the node that produces the jobs, failover of a
//! client and of a running worker when their node is killed (kill -9).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use disque_client::{AddJob, Client, JobState, Worker};
use tokio::sync::oneshot;

use crate::harness::{WAIT, cluster, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_node_cluster() {
    let nodes = cluster(3).await;
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    let mut c = Client::connect(&addrs).await.unwrap();
    assert_eq!(c.current_addr(), Some(addrs[0].as_str()));
    let hello = c.hello().await.unwrap();
    assert_eq!(hello.nodes.len(), 3);
    let mut ports: Vec<u16> = hello.nodes.iter().map(|n| n.port).collect();
    ports.sort_unstable();
    let mut want: Vec<u16> = nodes.iter().map(|n| n.port()).collect();
    want.sort_unstable();
    assert_eq!(ports, want);
    assert_eq!(c.known_nodes().len(), 3);

    // Synchronous replication to all three, visible on another node.
    let id = c
        .add_job(&AddJob::new("cq", "replicated").replicate(3))
        .await
        .unwrap();
    let mut c1 = nodes[1].client().await;
    let info = c1.show(&id).await.unwrap().unwrap();
    assert_eq!(info.state, JobState::Active);
    assert_eq!(info.nodes_delivered.len(), 3);
    assert!(wait_for(WAIT, async || c1.qlen_cluster("cq").await.unwrap() == 1).await);

    // A consumer on node 1 gets the job queued on node 0 (federation),
    // and acknowledges it cluster-wide.
    let job = c1.get_job("cq", WAIT).await.unwrap().unwrap();
    assert_eq!(job.id, id);
    c1.ack_job(&id).await.unwrap();
    let mut c2 = nodes[2].client().await;
    assert!(
        wait_for(WAIT, async || c2.show(&id).await.unwrap().is_none()).await,
        "the ACK never reached node 2"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_moves_to_the_node_producing_its_jobs() {
    let nodes = cluster(3).await;
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    let mut producer = nodes[1].client().await;
    const N: usize = 30;
    for i in 0..N {
        producer
            .add_job(&AddJob::new("fq", format!("job {i}")).replicate(1))
            .await
            .unwrap();
    }
    let mut consumer = Client::builder(&addrs)
        .follow_producers(Some(10))
        .connect()
        .await
        .unwrap();
    assert_eq!(consumer.current_addr(), Some(addrs[0].as_str()));
    let mut received = 0;
    while received < N {
        let job = consumer
            .get_job("fq", WAIT)
            .await
            .unwrap()
            .expect("a job within the deadline");
        consumer.ack_job(&job.id).await.unwrap();
        received += 1;
    }
    // Every job came from node 1, so after the first window of 10 the
    // consumer moved there.
    assert_eq!(consumer.current_addr(), Some(addrs[1].as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_fails_over_when_its_node_is_killed() {
    let mut nodes = cluster(3).await;
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    let mut c = Client::builder(&addrs)
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(5))
        .connect()
        .await
        .unwrap();
    assert_eq!(c.current_addr(), Some(addrs[0].as_str()));
    nodes[0].kill9();
    // A node-local command reports the lost connection...
    let e = c.qlen("q").await.unwrap_err();
    assert!(e.is_connection_error(), "{e}");
    // ...and the next one runs on another node.
    assert_eq!(c.qlen("q").await.unwrap(), 0);
    let now = c.current_addr().unwrap().to_string();
    assert!(now == addrs[1] || now == addrs[2], "{now}");
    // A command safe to repeat fails over by itself.
    let other = if now == addrs[1] { 1 } else { 2 };
    nodes[other].kill9();
    c.ping().await.unwrap();
    assert_eq!(c.current_addr(), Some(addrs[3 - other].as_str()));
    // With every node gone, the error lists what was tried.
    nodes[3 - other].kill9();
    let e = c.ping().await.unwrap_err();
    assert!(e.is_connection_error(), "{e}");
    let e = c.ping().await.unwrap_err();
    assert!(
        matches!(e, disque_client::Error::NoNodeReachable { ref attempts } if attempts.len() == 3),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_loses_nothing_when_its_node_is_killed() {
    let mut nodes = cluster(3).await;
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    // Jobs created on node 0, the worker's first node (so following the
    // producer keeps it there), replicated to all three, re-queued 2 s
    // after a delivery that was not acknowledged.
    let mut producer = nodes[0].client().await;
    const N: usize = 60;
    let mut added = Vec::new();
    for i in 0..N {
        let id = producer
            .add_job(
                &AddJob::new("fo", format!("job {i}"))
                    .replicate(3)
                    .retry(Duration::from_secs(2)),
            )
            .await
            .unwrap();
        added.push(id.to_string());
    }
    let seen: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let (stop, stopped) = oneshot::channel::<()>();
    let worker = {
        let seen = seen.clone();
        let calls = calls.clone();
        Worker::new(
            Client::builder(&addrs)
                .connect_timeout(Duration::from_secs(2))
                .command_timeout(Duration::from_secs(5)),
            ["fo"],
        )
        .concurrency(3)
        .fetch_timeout(Duration::from_millis(300))
        .handler(move |job| {
            let seen = seen.clone();
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::Relaxed);
                // Some work, so that the kill lands mid-run.
                tokio::time::sleep(Duration::from_millis(30)).await;
                *seen.lock().unwrap().entry(job.id.to_string()).or_default() += 1;
                Ok(())
            }
        })
    };
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    assert!(
        wait_for(WAIT, async || calls.load(Ordering::Relaxed) >= N / 4).await,
        "the worker did not start"
    );
    nodes[0].kill9();
    let unique = || seen.lock().unwrap().len();
    let at_kill = unique();
    assert!(at_kill < N, "every job was done before the kill");
    let all_done = wait_for(Duration::from_secs(60), async || unique() == N).await;
    stop.send(()).unwrap();
    let report = tokio::time::timeout(WAIT, running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let seen = seen.lock().unwrap();
    let missing: Vec<&String> = added.iter().filter(|id| !seen.contains_key(*id)).collect();
    assert!(
        all_done && missing.is_empty(),
        "{} of {N} jobs never processed: {missing:?}; {report:?}",
        missing.len()
    );
    let duplicates: u32 = seen.values().map(|n| n - 1).sum();
    eprintln!(
        "failover: {at_kill} of {N} jobs done at the kill, all {N} after it, \
         {duplicates} duplicate deliveries; {report:?}"
    );
}
