//! The Postgres run queue against a real PostgreSQL (`STATEGRAPH_TEST_POSTGRES_URL`, default
//! the local test server), each test in a scratch schema of its own: the shared run queue
//! conformance suite (two queues on one schema stand for two processes), then what is
//! Postgres's own: notifications per schema, setup, a silent server. A server that cannot be
//! reached fails the tests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::json;
use stategraph_checkpoint::Error;
use stategraph_checkpoint::backend::Timeouts;
use stategraph_checkpoint::conformance::runs::{QueueOptions, RunQueueFixture};
use stategraph_postgres::{
    CancelAction, Listener, Multitask, NewRun, Notification, PostgresRunQueue, RunEnd, RunQueue,
    RunQueueConfig, RunStatus,
};
use stategraph_testkit::net::{StallingProxy, bounded};
use stategraph_testkit::postgres::{ScratchSchema, connect, server_addr, url, url_via};

/// The bound on any single wait for a notification (so a test cannot hang).
const WAIT: Duration = Duration::from_secs(5);

async fn queue_with(
    schema: &ScratchSchema,
    configure: impl FnOnce(RunQueueConfig) -> RunQueueConfig,
) -> PostgresRunQueue {
    let config = RunQueueConfig::from_url(&url())
        .unwrap()
        .schema(schema.name())
        .pool_size(4);
    configure(config)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {} is required for these tests: {e}", url()))
}

async fn queue(schema: &ScratchSchema) -> PostgresRunQueue {
    queue_with(schema, |c| c).await
}

/// A fresh schema with two queues on it, as two processes have.
async fn make(options: QueueOptions) -> RunQueueFixture {
    let schema = ScratchSchema::new("sg_runs");
    let name = schema.name().to_owned();
    let connect = |name: String| async move {
        RunQueueConfig::from_url(&url())
            .unwrap()
            .schema(name)
            .pool_size(4)
            .lease(options.lease)
            .max_attempts(options.max_attempts)
            .connect()
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL at {} is required for these tests: {e}", url()))
    };
    let a = connect(name.clone()).await;
    let b = connect(name).await;
    RunQueueFixture::new(a, b).with_guard(schema)
}

stategraph_checkpoint::run_queue_conformance!(make);

fn run(id: &str, thread: &str) -> NewRun {
    NewRun::new(id, thread, json!({ "input": id })).multitask(Multitask::Enqueue)
}

/// The next notification satisfying `wanted`, skipping others, within [`WAIT`].
async fn wait_for(
    listener: &mut Listener,
    what: &str,
    wanted: impl Fn(&Notification) -> bool,
) -> Notification {
    tokio::time::timeout(WAIT, async {
        loop {
            let n = listener
                .recv()
                .await
                .expect("the listener's connection closed");
            if wanted(&n) {
                return n;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {what} notification within {WAIT:?}"))
}

#[tokio::test]
async fn listeners_hear_their_own_schema_only() {
    let schema = ScratchSchema::new("sg_runs");
    let elsewhere = ScratchSchema::new("sg_runs");
    let q = queue(&schema).await;
    let writer = queue(&schema).await;
    let foreign = queue(&elsewhere).await;
    assert_ne!(q.channel(), foreign.channel());
    let mut mine = q.listen().await.unwrap();
    let mut theirs = foreign.listen().await.unwrap();

    writer.enqueue(run("r1", "t1")).await.unwrap();
    let n = wait_for(&mut mine, "enqueued", |_| true).await;
    assert_eq!(
        n,
        Notification::Enqueued {
            run_id: "r1".into(),
            thread_id: "t1".into(),
            claimable: true
        }
    );
    writer.claim("w").await.unwrap().unwrap();
    assert_eq!(
        writer
            .append_events("r1", "w", &[("values".into(), json!({}))])
            .await
            .unwrap(),
        Some(1)
    );
    let n = wait_for(&mut mine, "event", |_| true).await;
    assert_eq!(
        n,
        Notification::Event {
            run_id: "r1".into(),
            seq: 1
        }
    );
    writer
        .request_cancel("r1", CancelAction::Interrupt, &"é".repeat(3000))
        .await
        .unwrap();
    let n = wait_for(&mut mine, "cancel", |_| true).await;
    // A long reason is cut (at a character) to fit a notification's payload.
    assert_eq!(
        n,
        Notification::Cancel {
            run_id: "r1".into(),
            action: CancelAction::Interrupt,
            reason: "é".repeat(1000),
        }
    );
    writer
        .finish("r1", "w", RunStatus::Interrupted, None)
        .await
        .unwrap();
    let n = wait_for(&mut mine, "finished", |_| true).await;
    assert_eq!(
        n,
        Notification::Finished {
            run_id: "r1".into(),
            status: Some(RunStatus::Interrupted)
        }
    );

    // The other schema's listener heard none of that: the first thing it hears is its own.
    foreign.enqueue(run("x1", "tx")).await.unwrap();
    let n = wait_for(&mut theirs, "foreign enqueued", |_| true).await;
    assert_eq!(n.run_id(), "x1");
    // …and this one does not hear the other schema's.
    writer.enqueue(run("r2", "t2")).await.unwrap();
    let n = wait_for(&mut mine, "enqueued", |_| true).await;
    assert_eq!(n.run_id(), "r2");
    assert!(mine.receiver().try_recv().is_err());
}

#[tokio::test]
async fn setup_is_idempotent_and_safe_concurrently() {
    let schema = ScratchSchema::new("sg_runs");
    // Without setup on a fresh schema: the missing tables are named.
    let err = RunQueueConfig::from_url(&url())
        .unwrap()
        .schema(schema.name())
        .without_setup()
        .connect()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::NotFound { what } if what.contains("stategraph_runs")),
        "{err:?}"
    );

    let (a, b) = tokio::join!(queue(&schema), queue(&schema));
    a.enqueue(run("r1", "t1")).await.unwrap();
    assert_eq!(b.get("r1").await.unwrap().unwrap().thread_id, "t1");
    let again = queue(&schema).await;
    assert_eq!(again.get("r1").await.unwrap().unwrap().run_id, "r1");
    let plain = queue_with(&schema, RunQueueConfig::without_setup).await;
    assert_eq!(plain.claim("w").await.unwrap().unwrap().run_id, "r1");

    let client = connect().await;
    let versions: Vec<i32> = client
        .query(
            &format!(
                "SELECT v FROM \"{}\".stategraph_run_migrations ORDER BY v",
                schema.name()
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, [0, 1, 2, 3]);
    // The database itself refuses a second running run on a thread.
    let err = client
        .batch_execute(&format!(
            "INSERT INTO \"{0}\".stategraph_runs (run_id, thread_id, status, payload, max_attempts) \
             VALUES ('r2', 't1', 'running', '{{}}', 1)",
            schema.name()
        ))
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
    );
}

#[tokio::test]
async fn a_silent_server_times_out_queue_operations() {
    let proxy = StallingProxy::start(server_addr()).await;
    let schema = ScratchSchema::new("sg_runs");
    let limit = Duration::from_millis(800);
    let q = RunQueueConfig::from_url(&url_via(proxy.addr()))
        .unwrap()
        .schema(schema.name())
        .pool_size(1)
        .timeouts(Timeouts {
            connect: Some(limit),
            statement: Some(limit),
            ..Timeouts::default()
        })
        .connect()
        .await
        .unwrap();
    q.enqueue(run("r1", "t1")).await.unwrap();
    proxy.go_silent();
    let timed_out = |err: Error, op: &str| {
        assert!(
            matches!(&err, Error::Timeout { operation, after, .. } if operation == op && *after == limit),
            "{op}: {err:?}"
        );
    };
    timed_out(bounded(q.claim("w")).await.unwrap_err(), "claiming a run");
    timed_out(
        bounded(q.enqueue(run("r2", "t2"))).await.unwrap_err(),
        "enqueuing a run",
    );
    timed_out(
        bounded(q.append_events("r1", "w", &[("values".into(), json!(1))]))
            .await
            .unwrap_err(),
        "appending run events",
    );
    let err = bounded(q.listen()).await.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
}

/// Fencing: a saver fenced by a run's lease writes while its worker holds the lease; once
/// another worker took the run over, every write of the old worker is refused
/// (`Error::LeaseLost`) and stores nothing, while the new holder's fenced writes go through.
#[tokio::test]
async fn a_fenced_saver_writes_only_while_its_worker_holds_the_lease() {
    use stategraph_checkpoint::CheckpointSaver as _;
    use stategraph_checkpoint::runs::RunFence;
    use stategraph_checkpoint::{
        Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, ListOptions, Value,
    };
    let schema = ScratchSchema::new("sg_fence");
    let queue = queue_with(&schema, |c| c.lease(Duration::from_millis(400))).await;
    let saver = stategraph_postgres::PostgresConfig::from_url(&url())
        .unwrap()
        .schema(schema.name())
        .connect()
        .await
        .unwrap();
    queue
        .enqueue(NewRun::new("r1", "t1", json!({})).multitask(Multitask::Enqueue))
        .await
        .unwrap();
    assert_eq!(queue.claim("w1").await.unwrap().unwrap().attempt, 1);
    let first = saver
        .fenced(&queue.fence("r1", "w1").unwrap())
        .expect("the saver is on the queue's database");
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let at = CheckpointConfig::new("t1");
    let put = |saver: std::sync::Arc<dyn stategraph_postgres::CheckpointSaver>| {
        let (at, meta) = (at.clone(), meta.clone());
        async move {
            saver
                .put(&at, &Checkpoint::empty(), &meta, &Default::default())
                .await
        }
    };
    let stored = put(first.clone()).await.unwrap();
    let writes = [("x".to_owned(), Value::from(1))];
    first
        .put_writes(&stored, &writes, "task-1", "")
        .await
        .unwrap();

    // The lease runs out; another worker takes the run over.
    tokio::time::sleep(Duration::from_millis(500)).await;
    queue.requeue_expired().await.unwrap();
    assert_eq!(queue.claim("w2").await.unwrap().unwrap().attempt, 2);
    let lost = |e: Error| matches!(e, Error::LeaseLost { ref run_id, ref worker } if run_id == "r1" && worker == "w1");
    let e = put(first.clone()).await.unwrap_err();
    assert!(lost(e), "a put of the fenced-out worker");
    let e = first
        .put_writes(&stored, &[("y".to_owned(), Value::from(2))], "task-2", "")
        .await
        .unwrap_err();
    assert!(lost(e), "writes of the fenced-out worker");
    let all = saver.list(&ListOptions::thread("t1")).await.unwrap();
    assert_eq!(all.len(), 1, "nothing stored after the lease was lost");
    assert_eq!(all[0].pending_writes.len(), 1);
    // The new holder writes.
    let second = saver.fenced(&queue.fence("r1", "w2").unwrap()).unwrap();
    put(second).await.unwrap();
    assert_eq!(
        saver.list(&ListOptions::thread("t1")).await.unwrap().len(),
        2
    );
    // Finished: nobody's writes go through.
    assert!(
        queue
            .finish("r1", "w2", RunStatus::Success, None)
            .await
            .unwrap()
    );
    let third = saver.fenced(&queue.fence("r1", "w2").unwrap()).unwrap();
    assert!(matches!(put(third).await, Err(Error::LeaseLost { .. })));
    // A queue on another database cannot fence this saver.
    let elsewhere = RunFence::new("elsewhere:5432/other", "stategraph_runs", "r1", "w2");
    assert!(saver.fenced(&elsewhere).is_none());
}

/// A store on the queue's schema, and the record writes of its location.
async fn records_store(schema: &ScratchSchema) -> stategraph_postgres::PostgresStore {
    stategraph_postgres::PostgresStoreConfig::from_url(&url())
        .unwrap()
        .schema(schema.name())
        .connect()
        .await
        .unwrap()
}

fn put_record(key: &str, value: serde_json::Value) -> stategraph_checkpoint::runs::RecordWrite {
    stategraph_checkpoint::runs::RecordWrite::Put {
        namespace: vec!["records".into(), "threads".into()],
        key: key.into(),
        value,
    }
}

async fn record(
    store: &stategraph_postgres::PostgresStore,
    key: &str,
) -> Option<serde_json::Value> {
    use stategraph_checkpoint::store::Store as _;
    store
        .get(&["records", "threads"], key)
        .await
        .unwrap()
        .map(|i| i.value)
}

#[tokio::test]
async fn records_change_with_the_enqueue_and_the_end_of_a_run() {
    use stategraph_checkpoint::runs::{RecordWrite, RecordWrites};
    use stategraph_checkpoint::store::Store as _;
    let schema = ScratchSchema::new("sg_records");
    let queue = queue(&schema).await;
    let store = records_store(&schema).await;
    let at = store.location().expect("a Postgres store has a location");
    assert!(queue.writes_records_at(&at), "same database: {at:?}");
    let elsewhere = stategraph_checkpoint::store::StoreLocation::new(
        "postgres",
        "another@database",
        at.relation.clone(),
    );
    assert!(!queue.writes_records_at(&elsewhere));
    let writes = |w: Vec<RecordWrite>| RecordWrites::new(at.clone(), w);

    // Enqueued: the records are written with the run.
    queue
        .enqueue(run("r1", "t1").records(writes(vec![
            put_record("t1", json!({"status": "busy", "metadata": {"a": 1}})),
            put_record("r1", json!({"status": "pending"})),
        ])))
        .await
        .unwrap();
    assert_eq!(
        record(&store, "t1").await,
        Some(json!({"status": "busy", "metadata": {"a": 1}}))
    );
    // Refused (`reject` on a busy thread): neither the run nor its records.
    let e = queue
        .enqueue(
            NewRun::new("r2", "t1", json!({}))
                .multitask(Multitask::Reject)
                .records(writes(vec![put_record("r2", json!({"status": "pending"}))])),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Conflict { .. }), "{e}");
    assert_eq!(record(&store, "r2").await, None);
    // Records that start the thread's work are written only when nothing else of the thread
    // is pending or running.
    queue
        .enqueue(run("r4", "t1").records(
            writes(vec![put_record("r4", json!({"status": "pending"}))]).if_idle(vec![put_record(
                "t1",
                json!({"status": "busy", "by": "r4"}),
            )]),
        ))
        .await
        .unwrap();
    assert_eq!(
        record(&store, "r4").await,
        Some(json!({"status": "pending"}))
    );
    assert_eq!(
        record(&store, "t1").await,
        Some(json!({"status": "busy", "metadata": {"a": 1}})),
        "t1 has r1 pending"
    );
    queue
        .enqueue(
            run("r5", "t5")
                .records(writes(Vec::new()).if_idle(vec![put_record("t5", json!({"by": "r5"}))])),
        )
        .await
        .unwrap();
    assert_eq!(record(&store, "t5").await, Some(json!({"by": "r5"})));

    // Someone changes the thread's metadata while the run runs; the run's end sets only the
    // fields it changes.
    use stategraph_checkpoint::store::PutOptions;
    store
        .put_with(
            &["records", "threads"],
            "t1",
            json!({"status": "busy", "metadata": {"a": 2}}),
            PutOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(queue.claim("w1").await.unwrap().unwrap().run_id, "r1");
    let end = writes(vec![
        RecordWrite::Merge {
            namespace: vec!["records".into(), "threads".into()],
            key: "t1".into(),
            fields: json!({"status": "idle", "values": {"n": 1}})
                .as_object()
                .cloned()
                .unwrap(),
        },
        put_record("r1", json!({"status": "success"})),
        RecordWrite::Delete {
            namespace: vec!["records".into(), "threads".into()],
            key: "gone".into(),
        },
    ]);
    // Not the holder: nothing is written.
    assert!(
        !queue
            .finish_with_records("r1", "w2", RunStatus::Success, None, &[], &end)
            .await
            .unwrap()
    );
    assert_eq!(
        record(&store, "r1").await,
        Some(json!({"status": "pending"}))
    );
    store
        .put_with(
            &["records", "threads"],
            "gone",
            json!({}),
            PutOptions::default(),
        )
        .await
        .unwrap();
    let last = [("values".to_owned(), json!({"n": 1}))];
    assert!(
        queue
            .finish_with_records("r1", "w1", RunStatus::Success, None, &last, &end)
            .await
            .unwrap()
    );
    assert_eq!(
        record(&store, "t1").await,
        Some(json!({"status": "idle", "metadata": {"a": 2}, "values": {"n": 1}}))
    );
    assert_eq!(
        record(&store, "r1").await,
        Some(json!({"status": "success"}))
    );
    assert_eq!(record(&store, "gone").await, None);
    assert_eq!(queue.events_after("r1", 0, 10).await.unwrap().len(), 1);
    assert_eq!(
        queue.get("r1").await.unwrap().unwrap().status,
        RunStatus::Success
    );

    // One address written twice (a put, then a merge into it): made in order, in one
    // transaction.
    queue.enqueue(run("r6", "t6")).await.unwrap();
    assert!(queue.claim_run("r6", "w1").await.unwrap().is_some());
    let twice = writes(vec![
        put_record("t6", json!({"status": "busy", "metadata": {}})),
        RecordWrite::Merge {
            namespace: vec!["records".into(), "threads".into()],
            key: "t6".into(),
            fields: json!({"status": "idle"}).as_object().cloned().unwrap(),
        },
    ]);
    assert!(
        queue
            .finish_with_records("r6", "w1", RunStatus::Success, None, &[], &twice)
            .await
            .unwrap()
    );
    assert_eq!(
        record(&store, "t6").await,
        Some(json!({"status": "idle", "metadata": {}}))
    );

    // A queue on another database's store: records are refused, not dropped.
    let e = queue
        .enqueue(run("r3", "t3").records(RecordWrites::new(
            elsewhere,
            vec![put_record("r3", json!({}))],
        )))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("cannot write records"), "{e}");
    assert!(queue.get("r3").await.unwrap().is_none());
}

/// A run's end with its records and the worker's next claim, in one transaction: a worker
/// that no longer holds its run writes none of it (but claims); one that holds it writes the
/// records and goes on to the thread's next run.
#[tokio::test]
async fn records_go_with_the_end_that_claims_the_next_run() {
    use stategraph_checkpoint::runs::RecordWrites;
    use stategraph_checkpoint::store::Store as _;
    let schema = ScratchSchema::new("sg_records");
    let queue = queue(&schema).await;
    let store = records_store(&schema).await;
    let at = store.location().expect("a Postgres store has a location");
    let writes = |w| RecordWrites::new(at.clone(), w);
    for id in ["r7", "r8"] {
        queue.enqueue(run(id, "t7")).await.unwrap();
    }
    assert!(queue.claim_run("r7", "w1").await.unwrap().is_some());
    let end7 = writes(vec![put_record("r7", json!({"status": "success"}))]);
    let (ended, next) = queue
        .finish_and_claim(RunEnd::new("r7", "w2", RunStatus::Success).records(Some(&end7)))
        .await
        .unwrap();
    assert!(!ended && next.is_none(), "r8 waits for r7");
    assert_eq!(record(&store, "r7").await, None);
    let (ended, next) = queue
        .finish_and_claim(RunEnd::new("r7", "w1", RunStatus::Success).records(Some(&end7)))
        .await
        .unwrap();
    assert!(ended);
    assert_eq!(next.unwrap().run_id, "r8");
    assert_eq!(
        record(&store, "r7").await,
        Some(json!({"status": "success"}))
    );
}
