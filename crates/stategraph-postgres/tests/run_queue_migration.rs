//! Upgrading the run queue's tables of an earlier version (migrations v0–v3, runs with an
//! opaque `payload` of `{"body": …, "run": {record}}`) against a real PostgreSQL
//! (`STATEGRAPH_TEST_POSTGRES_URL`, default the local test server): the runs read back with
//! their records, their events and errors, and the queue goes on with them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use stategraph_checkpoint::Error;
use stategraph_postgres::{
    Deletion, Multitask, RunEnd, RunEvents, RunQueue, RunQueueConfig, RunStatus, ThreadStatus,
};
use stategraph_testkit::postgres::{ScratchSchema, url};

/// The tables as migrations v0–v3 of the earlier version left them.
const OLD_SCHEMA: &str = "
CREATE TABLE stategraph_runs (
    run_id text PRIMARY KEY,
    thread_id text NOT NULL,
    status text NOT NULL,
    payload jsonb NOT NULL,
    seq bigserial NOT NULL,
    attempt integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL,
    worker text,
    lease_until timestamptz,
    cancel text CHECK (cancel IN ('interrupt', 'rollback')),
    events bigint NOT NULL DEFAULT 0,
    error jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CHECK (status IN ('pending', 'running', 'success', 'error', 'timeout', 'interrupted'))
);
CREATE UNIQUE INDEX stategraph_runs_one_running
    ON stategraph_runs (thread_id) WHERE status = 'running';
CREATE INDEX stategraph_runs_pending ON stategraph_runs (seq) WHERE status = 'pending';
CREATE INDEX stategraph_runs_thread ON stategraph_runs (thread_id, seq);
CREATE INDEX stategraph_runs_lease ON stategraph_runs (lease_until) WHERE status = 'running';
CREATE TABLE stategraph_run_events (
    run_id text NOT NULL REFERENCES stategraph_runs (run_id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    event text NOT NULL,
    data jsonb NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE stategraph_run_claims (
    key text PRIMARY KEY,
    claimed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX stategraph_run_claims_at ON stategraph_run_claims (claimed_at);
CREATE INDEX stategraph_runs_finished
    ON stategraph_runs (updated_at) WHERE status NOT IN ('pending', 'running');
ALTER TABLE stategraph_runs ADD COLUMN cancel_reason text;
CREATE TABLE stategraph_run_migrations (v INTEGER PRIMARY KEY);
INSERT INTO stategraph_run_migrations (v) VALUES (0), (1), (2), (3);
";

/// Runs as the earlier version's server enqueued them: one pending with its record, one that
/// failed with two events, one whose payload has no record (an earlier client's).
const OLD_ROWS: &str = r#"
INSERT INTO stategraph_runs (run_id, thread_id, status, payload, max_attempts) VALUES
('old-1', 't1', 'pending', '{"body": {"input": {"x": 1}}, "run": {
    "run_id": "old-1", "thread_id": "t1", "assistant_id": "agent-1",
    "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
    "status": "pending", "metadata": {"user": "ünï", "n": 2},
    "kwargs": {"input": {"x": 1}, "stream_mode": ["values"], "temporary": false},
    "multitask_strategy": "interrupt", "langsmith_session_name": null}}', 3);
INSERT INTO stategraph_runs
    (run_id, thread_id, status, payload, max_attempts, attempt, worker, events, error)
VALUES ('old-2', 't2', 'error', '{"body": {}, "run": {
    "run_id": "old-2", "thread_id": "t2", "assistant_id": "agent-2", "status": "pending",
    "metadata": null, "kwargs": {"temporary": true}, "multitask_strategy": "rollback"}}',
    3, 1, 'w', 2, '{"error": "ValueError", "message": "boom"}');
INSERT INTO stategraph_run_events (run_id, seq, event, data) VALUES
    ('old-2', 1, 'values', '{"n": 1}'), ('old-2', 2, 'error', '{"message": "boom"}');
INSERT INTO stategraph_runs (run_id, thread_id, status, payload, max_attempts) VALUES
    ('old-3', 't3', 'pending', '{"input": "x"}', 3);
"#;

#[tokio::test]
async fn runs_of_an_earlier_version_read_back_with_their_records() {
    let schema = ScratchSchema::create("sg_runs_old").await;
    let client = schema.client().await;
    client.batch_execute(OLD_SCHEMA).await.unwrap();
    client.batch_execute(OLD_ROWS).await.unwrap();
    let config = RunQueueConfig::from_url(&url())
        .unwrap()
        .schema(schema.name())
        .pool_size(2);

    // Without the setup, the tables of the earlier version are refused, naming the version.
    let err = config.clone().without_setup().connect().await.unwrap_err();
    assert!(
        matches!(&err, Error::NotFound { what } if what.contains("v3")),
        "{err:?}"
    );

    let q = config.clone().connect().await.unwrap();
    let versions: Vec<i32> = client
        .query("SELECT v FROM stategraph_run_migrations ORDER BY v", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, (0..=6).collect::<Vec<_>>());

    let old = q.get("old-1").await.unwrap().unwrap();
    assert_eq!(
        (
            old.run_id.as_str(),
            old.thread_id.as_str(),
            old.assistant_id.as_str()
        ),
        ("old-1", "t1", "agent-1")
    );
    assert_eq!(old.status, RunStatus::Pending);
    assert_eq!(json!(old.metadata), json!({"user": "ünï", "n": 2}));
    assert_eq!(
        json!(old.kwargs),
        json!({"input": {"x": 1}, "stream_mode": ["values"], "temporary": false})
    );
    assert_eq!(old.multitask, Multitask::Interrupt);
    assert!(!old.temporary);
    assert_eq!((old.output, old.events), (None, 0));

    let failed = q.get("old-2").await.unwrap().unwrap();
    assert_eq!(failed.assistant_id, "agent-2");
    assert!(failed.metadata.is_empty(), "a null metadata reads as none");
    assert_eq!(failed.multitask, Multitask::Rollback);
    assert!(failed.temporary, "from its arguments");
    assert_eq!(
        failed.error,
        Some(json!({"error": "ValueError", "message": "boom"}))
    );
    let events = q.events_after("old-2", 0, 10).await.unwrap();
    let data: Vec<_> = events.iter().map(|e| (e.seq, e.data.clone())).collect();
    assert_eq!(
        data,
        [(1, json!({"n": 1})), (2, json!({"message": "boom"}))]
    );

    let bare = q.get("old-3").await.unwrap().unwrap();
    assert_eq!(bare.assistant_id, "");
    assert!(bare.metadata.is_empty() && bare.kwargs.is_empty());
    assert_eq!(bare.multitask, Multitask::Enqueue);

    // The queue goes on with them: claimed with their arguments, ended, purged.
    let claimed = q.claim("w", Some("old-1")).await.unwrap().unwrap();
    assert_eq!(claimed.kwargs["input"], json!({"x": 1}));
    let output = json!({"x": 2});
    let end = RunEnd::new("old-1", "w", RunStatus::Success).output(Some(&output));
    assert!(q.finish(end).await.unwrap().ended);
    assert_eq!(
        q.threads(&["t1".to_owned()]).await.unwrap()[0].status,
        ThreadStatus::Idle
    );
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    let purge = Deletion::EventsEndedBefore {
        ended_before: later,
        limit: 10,
    };
    assert_eq!(q.delete(purge).await.unwrap(), 2);
    assert_eq!(q.get("old-2").await.unwrap(), None, "temporary: gone");
    assert_eq!(q.get("old-1").await.unwrap().unwrap().output, Some(output));

    // A second setup changes nothing; nor do the new migrations run again (a setup that
    // stopped before recording them).
    let again = config.clone().connect().await.unwrap();
    assert_eq!(again.get("old-3").await.unwrap().unwrap().run_id, "old-3");
    client
        .batch_execute("DELETE FROM stategraph_run_migrations WHERE v >= 4")
        .await
        .unwrap();
    let again = config.connect().await.unwrap();
    let old = again.get("old-1").await.unwrap().unwrap();
    assert_eq!(
        (old.status, old.assistant_id.as_str(), old.multitask),
        (RunStatus::Success, "agent-1", Multitask::Interrupt)
    );
    assert_eq!(old.kwargs["input"], json!({"x": 1}));
    assert_eq!(old.output, Some(json!({"x": 2})));
    assert_eq!(
        again.threads(&["t1".to_owned()]).await.unwrap()[0].status,
        ThreadStatus::Idle
    );
}
