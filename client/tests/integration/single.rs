//! One node: every command and its typed reply, Disque's error codes,
//! the extensions, RESP3 and AUTH.

use std::time::Duration;

use disque_client::{
    AddJob, Client, ErrorCode, GetJob, JScan, JobOutcome, JobState, PauseState, Protocol, QScan,
    Value,
};

use crate::harness::{Node, WAIT, wait_for};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_lifecycle_and_introspection() {
    let node = Node::start(&[]).await;
    let mut c = Client::connect(&[node.addr()]).await.unwrap();
    c.ping().await.unwrap();
    assert_eq!(c.current_addr(), Some(node.addr().as_str()));

    let hello = c.hello().await.unwrap();
    assert_eq!(hello.version, 1);
    assert_eq!(hello.nodes.len(), 1);
    assert_eq!(hello.nodes[0].id, hello.my_id);
    assert_eq!(hello.nodes[0].port, node.port());
    assert_eq!(c.current_node_id(), Some(hello.my_id.as_str()));

    let id = c
        .add_job(
            &AddJob::new("q", &b"body \x00 one"[..])
                .retry(secs(30))
                .ttl(secs(3600)),
        )
        .await
        .unwrap();
    assert!(id.is_well_formed(), "{id}");
    assert_eq!(id.node_prefix(), Some(&hello.my_id[..8]));

    assert_eq!(c.qlen("q").await.unwrap(), 1);
    assert_eq!(c.qlen_cluster("q").await.unwrap(), 1);
    let peek = c.qpeek("q", 10).await.unwrap();
    assert_eq!(peek.len(), 1);
    assert_eq!(peek[0].id, id);
    assert_eq!(&peek[0].body[..], b"body \x00 one");

    let info = c.show(&id).await.unwrap().unwrap();
    assert_eq!(info.id, id);
    assert_eq!(info.queue.as_deref(), Some("q"));
    assert_eq!(info.state, JobState::Queued);
    assert_eq!(info.retry, 30);
    assert!(info.ttl > 3500 && info.ttl <= 3600, "{}", info.ttl);
    assert_eq!(info.repl, 1);
    assert_eq!(info.nodes_delivered, vec![hello.my_id.clone()]);
    assert_eq!(info.body.as_deref(), Some(&b"body \x00 one"[..]));
    assert!(info.extensions.is_none());

    let stat = c.qstat("q").await.unwrap().unwrap();
    assert_eq!((stat.name.as_str(), stat.len), ("q", 1));
    assert_eq!(stat.pause, PauseState::None);
    assert_eq!(stat.len_cluster, None);
    assert_eq!(
        c.qstat_cluster("q").await.unwrap().unwrap().len_cluster,
        Some(1)
    );
    assert!(c.qstat("no-such-queue").await.unwrap().is_none());

    let ids = c.jscan(&JScan::new().busyloop()).await.unwrap();
    assert!(ids.is_last());
    assert_eq!(ids.items, vec![id.clone()]);
    let full = c
        .jscan_jobs(&JScan::new().queue("q").state(JobState::Queued).busyloop())
        .await
        .unwrap();
    assert_eq!(full.items.len(), 1);
    assert_eq!(full.items[0].state, JobState::Queued);
    let queues = c.qscan(&QScan::new().busyloop().min_len(1)).await.unwrap();
    assert_eq!(queues.items, vec!["q".to_string()]);

    // Take it, postpone it, give it back, take it again, acknowledge it.
    let job = c.get_job("q", secs(1)).await.unwrap().unwrap();
    assert_eq!((job.queue.as_str(), &job.id), ("q", &id));
    assert_eq!((job.nacks, job.additional_deliveries), (0, 0));
    assert_eq!(c.working(&id).await.unwrap(), secs(30));
    assert_eq!(c.show(&id).await.unwrap().unwrap().state, JobState::Active);
    assert_eq!(c.nack([&id]).await.unwrap(), 1);
    let job = c.get_job("q", secs(1)).await.unwrap().unwrap();
    assert_eq!(job.nacks, 1);
    // ENQUEUE counts an additional delivery; DEQUEUE takes it out again.
    assert_eq!(c.enqueue([&id]).await.unwrap(), 1);
    assert_eq!(c.qlen("q").await.unwrap(), 1);
    assert_eq!(c.dequeue([&id]).await.unwrap(), 1);
    assert_eq!(c.qlen("q").await.unwrap(), 0);
    assert_eq!(c.show(&id).await.unwrap().unwrap().additional_deliveries, 1);
    assert!(c.ack_job(&id).await.unwrap());
    assert!(!c.ack_job(&id).await.unwrap());

    // Empty queue: GETJOB times out, NOHANG returns at once.
    assert!(
        c.get_job("q", Duration::from_millis(50))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        c.get_jobs(&GetJob::from_queues(["q", "r"]).nohang())
            .await
            .unwrap()
            .is_empty()
    );

    // COUNT takes several at once.
    for i in 0..5 {
        c.add_job(&AddJob::new("batch", format!("job {i}")))
            .await
            .unwrap();
    }
    let batch = c
        .get_jobs(&GetJob::from_queues(["batch"]).count(10))
        .await
        .unwrap();
    assert_eq!(batch.len(), 5);
    assert_eq!(c.fast_ack(batch.iter().map(|j| &j.id)).await.unwrap(), 5);

    // DELJOB removes it here whatever its state.
    let gone = c.add_job(&AddJob::new("q", "x")).await.unwrap();
    assert_eq!(c.del_jobs([&gone]).await.unwrap(), 1);
    assert!(c.show(&gone).await.unwrap().is_none());

    let info = c.info(Some("jobs")).await.unwrap();
    assert!(info.get("registered_jobs").is_some(), "{}", info.text);
    assert!(
        c.info(None)
            .await
            .unwrap()
            .fields()
            .any(|(k, _)| k == "disque_version")
    );

    // The raw escape hatch.
    assert_eq!(
        c.cmd(["PING", "hi"]).await.unwrap(),
        Value::Bulk("hi".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_codes_are_typed() {
    let node = Node::start(&[]).await;
    let mut c = node.client().await;

    let e = c.working(&"not-an-id".into()).await.unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::BadId), "{e}");
    assert!(!e.is_connection_error());
    let unknown = "D-00000000-AAAAAAAAAAAAAAAAAAAAAAAA-05a1".into();
    let e = c.working(&unknown).await.unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::NoJob), "{e}");
    assert!(e.to_string().contains("Job not known"), "{e}");

    assert_eq!(
        c.pause("p", PauseState::In, false).await.unwrap(),
        PauseState::In
    );
    assert_eq!(c.pause_state("p").await.unwrap(), PauseState::In);
    let e = c.add_job(&AddJob::new("p", "x")).await.unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::Paused), "{e}");
    assert_eq!(c.qstat("p").await.unwrap().unwrap().pause, PauseState::In);
    assert_eq!(
        c.pause("p", PauseState::None, false).await.unwrap(),
        PauseState::None
    );

    c.add_job(&AddJob::new("m", "1")).await.unwrap();
    let e = c
        .add_job(&AddJob::new("m", "2").max_len(1))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::MaxLen), "{e}");

    let e = c
        .add_job(&AddJob::new("q", "x").delay(secs(10)).ttl(secs(5)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::Err), "{e}");
    let e = c.cmd(["NOSUCHCOMMAND"]).await.unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::Err), "{e}");
    // The connection is still usable after error replies.
    c.ping().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extensions() {
    let node = Node::start(&[]).await;
    let mut c = node.client().await;

    // DEDUP: the second ADDJOB returns the first job's ID.
    let a = c
        .add_job(&AddJob::new("pay", "pay 7").dedup("req-7"))
        .await
        .unwrap();
    let b = c
        .add_job(&AddJob::new("pay", "pay 7 again").dedup("req-7"))
        .await
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(c.qlen("pay").await.unwrap(), 1);
    let ext = c.show(&a).await.unwrap().unwrap().extensions.unwrap();
    assert_eq!(ext.dedup_key.as_deref(), Some("req-7"));

    // MAXDELIVERIES: the second NACK moves the job to its dead-letter
    // queue; WAITJOB sees it die; REDRIVE brings it back.
    let id = c
        .add_job(
            &AddJob::new("mail", "welcome")
                .retry(secs(60))
                .max_deliveries(2)
                .dead_letter("mail-failed"),
        )
        .await
        .unwrap();
    let mut waiter = node.client().await;
    let wid = id.clone();
    let waiting = tokio::spawn(async move { waiter.wait_job(&wid, Some(WAIT)).await });
    for _ in 0..2 {
        let job = c.get_job("mail", secs(1)).await.unwrap().unwrap();
        assert_eq!(job.id, id);
        assert_eq!(c.nack([&id]).await.unwrap(), 1);
    }
    assert_eq!(waiting.await.unwrap().unwrap(), Some(JobOutcome::Dead));
    assert_eq!(c.qlen("mail-failed").await.unwrap(), 1);
    let ext = c.show(&id).await.unwrap().unwrap().extensions.unwrap();
    assert!(ext.dead);
    assert_eq!(ext.origin_queue.as_deref(), Some("mail"));
    assert_eq!(ext.max_deliveries, 2);
    assert_eq!(ext.dead_letter_queue.as_deref(), Some("mail-failed"));
    assert_eq!(c.redrive_from("mail-failed", Some(10)).await.unwrap(), 1);
    assert_eq!(c.qlen("mail").await.unwrap(), 1);
    let job = c.get_job("mail", secs(1)).await.unwrap().unwrap();
    assert_eq!((job.nacks, job.additional_deliveries), (0, 0));
    // REDRIVE <id> of a job that is not dead moves nothing.
    assert_eq!(c.redrive([&id]).await.unwrap(), 0);

    // NACK DELAY: not queued at once, queued after the delay.
    assert_eq!(
        c.nack_with_delay([&id], Duration::from_millis(1))
            .await
            .unwrap(),
        1
    );
    assert_eq!(c.qlen("mail").await.unwrap(), 0);
    assert!(wait_for(WAIT, async || c.qlen("mail").await.unwrap() == 1).await);

    // BACKOFF shows in SHOW; WAITJOB times out on a live job, then sees
    // the ACK.
    let id = c
        .add_job(&AddJob::new("slow", "x").retry(secs(10)).backoff(secs(600)))
        .await
        .unwrap();
    assert_eq!(
        c.show(&id)
            .await
            .unwrap()
            .unwrap()
            .extensions
            .unwrap()
            .backoff,
        600
    );
    assert_eq!(
        c.wait_job(&id, Some(Duration::from_millis(50)))
            .await
            .unwrap(),
        None
    );
    let mut waiter = node.client().await;
    let wid = id.clone();
    let waiting = tokio::spawn(async move { waiter.wait_job(&wid, Some(WAIT)).await });
    assert!(
        wait_for(WAIT, async || {
            let info = c.info(Some("clients")).await.unwrap();
            info.get("blocked_clients") == Some("1")
        })
        .await
    );
    c.ack_job(&id).await.unwrap();
    assert_eq!(waiting.await.unwrap().unwrap(), Some(JobOutcome::Acked));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resp3_replies_decode_to_the_same_types() {
    let node = Node::start(&[]).await;
    let mut c = node
        .builder()
        .protocol(Protocol::Resp3)
        .connect()
        .await
        .unwrap();
    let id = c
        .add_job(&AddJob::new("q3", "b").backoff(secs(60)).retry(secs(5)))
        .await
        .unwrap();
    let info = c.show(&id).await.unwrap().unwrap();
    assert_eq!(info.state, JobState::Queued);
    assert_eq!(info.extensions.unwrap().backoff, 60);
    assert!(info.next_awake_within.is_some());
    let stat = c.qstat("q3").await.unwrap().unwrap();
    assert_eq!(stat.len, 1);
    assert!(c.qstat("none").await.unwrap().is_none());
    let all = c.jscan_jobs(&JScan::new().busyloop()).await.unwrap();
    assert_eq!(all.items[0].id, id);
    // A RESP3 map comes back as a map from the raw command.
    assert!(matches!(
        c.cmd(["SHOW", id.as_str()]).await.unwrap(),
        Value::Map(_)
    ));
    let job = c.get_job("q3", secs(1)).await.unwrap().unwrap();
    assert_eq!(job.id, id);
    assert!(
        c.get_job("q3", Duration::from_millis(20))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(c.hello().await.unwrap().nodes.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_with_password_or_user_and_password() {
    let node = Node::start(&["--requirepass", "s3cret"]).await;

    let e = node.builder().connect().await.unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::NoAuth), "{e}");
    let e = node
        .builder()
        .password("wrong")
        .connect()
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::Err), "{e}");
    let e = node
        .builder()
        .user_password("someone", "s3cret")
        .connect()
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::WrongPass), "{e}");

    for b in [
        node.builder().password("s3cret"),
        node.builder().user_password("default", "s3cret"),
        node.builder().password("s3cret").protocol(Protocol::Resp3),
    ] {
        let mut c = b.connect().await.unwrap();
        let id = c.add_job(&AddJob::new("a", "x")).await.unwrap();
        assert!(c.ack_job(&id).await.unwrap());
    }
}
