//! The Postgres run queue against a real PostgreSQL (`STATEGRAPH_TEST_POSTGRES_URL`, default
//! the local test server), each test in a scratch schema of its own: the shared run queue
//! conformance suite (two queues on one schema stand for two processes, a third connects as a
//! process starting later), then what is Postgres's own: notifications per schema, setup, a
//! silent server, fencing, U+0000 in what users write, a run given back with a next claim.
//! (Upgrading the tables of an earlier version: `run_queue_migration.rs`.) A server that
//! cannot be reached fails the tests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stategraph_checkpoint::Error;
use stategraph_checkpoint::backend::Timeouts;
use stategraph_conformance::runs::{QueueOptions, RunQueueFixture};
use stategraph_postgres::{
    CancelAction, Listener, Multitask, NewRun, Notification, PostgresRunQueue, RunEnd, RunEvents,
    RunQueue, RunQueueConfig, RunStatus, ThreadEnd, ThreadState, ThreadStatus,
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

/// A fresh schema with two queues on it, as two processes have, and a way to connect a
/// third, setup included, as a process starting later does.
async fn make(options: QueueOptions) -> RunQueueFixture {
    let schema = ScratchSchema::new("sg_runs");
    let name = schema.name().to_owned();
    let connect = move |name: String| async move {
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
    let b = connect(name.clone()).await;
    RunQueueFixture::new(a, b, move || {
        let name = name.clone();
        async move { Arc::new(connect(name).await) as Arc<dyn RunQueue> }
    })
    .with_guard(schema)
}

stategraph_conformance::run_queue_conformance!(make);

fn run(id: &str, thread: &str) -> NewRun {
    let mut kwargs = stategraph_runs::Object::new();
    kwargs.insert("input".into(), json!(id));
    NewRun::new(id, thread)
        .multitask(Multitask::Enqueue)
        .kwargs(kwargs)
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
    writer.claim("w", None).await.unwrap().unwrap();
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
    let last = [("values".to_owned(), json!({"n": 2}))];
    let end = RunEnd::new("r1", "w", RunStatus::Interrupted).events(&last);
    assert!(writer.finish(end).await.unwrap().ended);
    // The last events are announced before the end, with their last number.
    let n = wait_for(&mut mine, "last event", |_| true).await;
    assert_eq!(
        n,
        Notification::Event {
            run_id: "r1".into(),
            seq: 2
        }
    );
    let n = wait_for(&mut mine, "finished", |_| true).await;
    assert_eq!(
        n,
        Notification::Finished {
            run_id: "r1".into(),
            thread_id: "t1".into(),
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
    // Without setup on a fresh schema: the missing tables are named, even though the
    // connections' search path goes on to `public`, which has them.
    RunQueueConfig::from_url(&url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    stategraph_postgres::PostgresSaver::connect(&url())
        .await
        .unwrap();
    let err = stategraph_postgres::PostgresConfig::from_url(&url())
        .unwrap()
        .schema(schema.name())
        .without_setup()
        .connect()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::NotFound { what } if what.contains("checkpoints")),
        "{err:?}"
    );
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
    assert_eq!(plain.claim("w", None).await.unwrap().unwrap().run_id, "r1");

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
    assert_eq!(versions, (0..=6).collect::<Vec<_>>());
    // The database itself refuses a second running run on a thread.
    let err = client
        .batch_execute(&format!(
            "INSERT INTO \"{0}\".stategraph_runs (run_id, thread_id, status, max_attempts) \
             VALUES ('r2', 't1', 'running', 1)",
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
    timed_out(
        bounded(q.claim("w", None)).await.unwrap_err(),
        "claiming a run",
    );
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
    use stategraph_checkpoint::{
        Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, ListOptions, Value,
    };
    use stategraph_runs::{DatabaseId, FencingSaver, RunFence};
    let schema = ScratchSchema::new("sg_fence");
    // The saver and the queue are built from one database handle.
    let db = stategraph_postgres::PostgresConfig::from_url(&url())
        .unwrap()
        .schema(schema.name())
        .pool_size(4)
        .open()
        .unwrap();
    let queue = db
        .run_queue()
        .lease(Duration::from_millis(400))
        .connect()
        .await
        .unwrap();
    let saver = db.saver().connect().await.unwrap();
    queue.enqueue(run("r1", "t1")).await.unwrap();
    assert_eq!(queue.claim("w1", None).await.unwrap().unwrap().attempt, 1);
    let first = saver
        .fenced(&queue.fence("r1", "w1").unwrap())
        .expect("the saver is of the queue's database");
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
    assert_eq!(queue.claim("w2", None).await.unwrap().unwrap().attempt, 2);
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
    let end = RunEnd::new("r1", "w2", RunStatus::Success);
    assert!(queue.finish(end).await.unwrap().ended);
    let third = saver.fenced(&queue.fence("r1", "w2").unwrap()).unwrap();
    assert!(matches!(put(third).await, Err(Error::LeaseLost { .. })));
    // A queue of another database handle cannot fence this saver, even on the same
    // database: only a saver and a queue built from one handle fence each other.
    let elsewhere = RunFence::new(DatabaseId::new(), "stategraph_runs", "r1", "w2");
    assert!(saver.fenced(&elsewhere).is_none());
    let again = queue_with(&schema, |c| c).await;
    assert!(saver.fenced(&again.fence("r1", "w2").unwrap()).is_none());
}

/// A queue whose connections come from a pool of their own (`separate_pool`) still belongs to
/// its database: a saver of that database takes its fences, and both see the same runs.
#[tokio::test]
async fn a_queue_on_a_separate_pool_fences_the_saver_of_its_database() {
    use stategraph_runs::FencingSaver;
    let schema = ScratchSchema::new("sg_fence_pool");
    let db = stategraph_postgres::PostgresConfig::from_url(&url())
        .unwrap()
        .schema(schema.name())
        .open()
        .unwrap();
    let separate = stategraph_postgres::PostgresConfig::from_url(&url())
        .unwrap()
        .pool_size(1);
    let queue = db
        .run_queue()
        .separate_pool(separate)
        .connect()
        .await
        .unwrap();
    let saver = db.saver().connect().await.unwrap();
    queue.enqueue(run("r1", "t1")).await.unwrap();
    queue.claim("w1", None).await.unwrap().unwrap();
    assert!(saver.fenced(&queue.fence("r1", "w1").unwrap()).is_some());
    // The queue's tables are in the database's schema, not the separate pool's default.
    let other = db.run_queue().connect().await.unwrap();
    assert!(other.get("r1").await.unwrap().is_some());
}

/// A database made from a pool the user owns builds the saver and the queue on it, and they
/// fence each other; a queue on it listens only once given the connection settings, and
/// says so until then.
#[tokio::test]
async fn a_database_from_a_users_pool_builds_a_saver_and_a_queue_that_fence() {
    use stategraph_runs::FencingSaver;
    let schema = ScratchSchema::new("sg_user_pool");
    // The user's pool: connections whose search_path is the scratch schema.
    let mut settings: tokio_postgres::Config = url().parse().unwrap();
    settings.options(format!("-c search_path={}", schema.name()));
    let manager = deadpool_postgres::Manager::new(settings.clone(), tokio_postgres::NoTls);
    let pool = deadpool_postgres::Pool::builder(manager)
        .max_size(2)
        .build()
        .unwrap();
    let client = pool.get().await.unwrap();
    client
        .batch_execute(&format!("CREATE SCHEMA {}", schema.name()))
        .await
        .unwrap();
    drop(client);
    let db = stategraph_postgres::PostgresDatabase::from_pool(pool.clone());
    let queue = db.run_queue().connect().await.unwrap();
    let saver = db.saver().connect().await.unwrap();
    queue.enqueue(run("r1", "t1")).await.unwrap();
    queue.claim("w1", None).await.unwrap().unwrap();
    assert!(saver.fenced(&queue.fence("r1", "w1").unwrap()).is_some());
    // The tables are where the pool's connections put them.
    let client = pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = $1 \
             AND tablename IN ('checkpoints', 'stategraph_runs')",
            &[&schema.name()],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 2);
    let err = queue.listen().await.unwrap_err();
    assert!(err.to_string().contains("listen_with"), "{err}");
    // With the settings, the same database listens; its saver still takes the old queue's
    // fences.
    let db = db.listen_with(settings);
    let listening = db.run_queue().connect().await.unwrap();
    let mut wake = listening.listen().await.unwrap();
    listening.enqueue(run("r2", "t2")).await.unwrap();
    let note = tokio::time::timeout(Duration::from_secs(10), wake.recv())
        .await
        .unwrap();
    assert!(note.is_some());
    let later = db.saver().connect().await.unwrap();
    assert!(later.fenced(&queue.fence("r1", "w1").unwrap()).is_some());
}

/// What users write may hold U+0000 (PostgreSQL's `text` and `jsonb` cannot): a run's
/// arguments, metadata, events, error and output, and a thread's state, all come back as
/// they were given.
#[tokio::test]
async fn user_text_with_nul_round_trips() {
    let schema = ScratchSchema::new("sg_runs");
    let q = queue(&schema).await;
    let text = json!({ "content": "a \u{0} b", "k\u{0}": ["\u{0}"] });
    let object = text.as_object().cloned().unwrap();
    q.enqueue(
        run("r1", "t1")
            .metadata(object.clone())
            .kwargs(object.clone()),
    )
    .await
    .unwrap();
    q.claim("w", None).await.unwrap().unwrap();
    let events = [("messages".to_owned(), text.clone())];
    assert_eq!(q.append_events("r1", "w", &events).await.unwrap(), Some(1));
    let state = ThreadState::new(
        ThreadStatus::Error,
        text.clone(),
        json!({ "t": [text.clone()] }),
    )
    .error(text.clone());
    let end = RunEnd::new("r1", "w", RunStatus::Error)
        .error(Some(&text))
        .output(Some(&text))
        .events(&events)
        .thread(ThreadEnd::Settle(&state));
    assert!(q.finish(end).await.unwrap().ended);
    let row = q.get("r1").await.unwrap().unwrap();
    assert_eq!((row.metadata, row.kwargs), (object.clone(), object));
    assert_eq!(
        (row.error.as_ref(), row.output.as_ref()),
        (Some(&text), Some(&text))
    );
    let logged = q.events_after("r1", 0, 10).await.unwrap();
    assert_eq!(logged.len(), 2);
    assert!(logged.iter().all(|e| e.data == text));
    let thread = &q.threads(&["t1".to_owned()]).await.unwrap()[0];
    assert_eq!(thread.state.as_ref(), Some(&state));
}

/// A worker that gives its run back and asks for its next claim in the same call gets the
/// oldest claimable run — the one it gave back, first on its thread — in one transaction.
#[tokio::test]
async fn a_run_given_back_with_a_next_claim_is_claimable_again() {
    let schema = ScratchSchema::new("sg_runs");
    let q = queue(&schema).await;
    let mut notes = q.listen().await.unwrap();
    q.enqueue(run("r1", "t")).await.unwrap();
    q.enqueue(run("r2", "t")).await.unwrap();
    assert_eq!(q.claim("w1", None).await.unwrap().unwrap().run_id, "r1");
    let done = q
        .finish(RunEnd::released("r1", "w2").claim_next())
        .await
        .unwrap();
    assert!(!done.ended, "not the holder");
    assert_eq!(done.next, None, "r1 runs, r2 waits for it");
    let done = q
        .finish(RunEnd::released("r1", "w1").claim_next())
        .await
        .unwrap();
    assert!(done.ended);
    let next = done.next.expect("the run given back, claimed again");
    assert_eq!((next.run_id.as_str(), next.attempt), ("r1", 2));
    assert_eq!(
        next.max_attempts, 4,
        "the attempt given back does not count"
    );
    wait_for(
        &mut notes,
        "requeued",
        |n| matches!(n, Notification::Requeued { run_id, .. } if run_id == "r1"),
    )
    .await;
    // Ended, deleted (a rollback), with the thread's state deleted, claiming r2 in the
    // same statement.
    let done = q
        .finish(
            RunEnd::new("r1", "w1", RunStatus::Interrupted)
                .deleted()
                .thread(ThreadEnd::Delete)
                .claim_next(),
        )
        .await
        .unwrap();
    assert!(done.ended);
    assert_eq!(done.next.map(|r| r.run_id).as_deref(), Some("r2"));
    assert_eq!(q.get("r1").await.unwrap(), None);
    // Ended (kept), claiming the thread's next in the same statement.
    q.enqueue(run("r3", "t")).await.unwrap();
    let done = q
        .finish(RunEnd::new("r2", "w1", RunStatus::Success).claim_next())
        .await
        .unwrap();
    assert!(done.ended);
    let next = done.next.expect("r3, next on the thread");
    assert_eq!(
        (next.run_id.as_str(), next.worker.as_deref()),
        ("r3", Some("w1"))
    );
    assert_eq!(
        q.get("r2").await.unwrap().unwrap().status,
        RunStatus::Success
    );
}
