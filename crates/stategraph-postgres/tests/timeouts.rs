//! No call waits on a silent Postgres forever: a server that accepts and never answers, or
//! one that goes silent mid-run, ends in `Error::Timeout` naming the operation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use stategraph_checkpoint::backend::Timeouts;
use stategraph_checkpoint::*;
use stategraph_postgres::PostgresConfig;
use stategraph_testkit::net::{SilentServer, StallingProxy, bounded, read_after_silence};
use stategraph_testkit::postgres::{ScratchSchema, server_addr, url_via};

#[tokio::test]
async fn a_server_that_never_answers_times_out_connecting() {
    let silent = SilentServer::start().await;
    let url = format!("{}?connect_timeout=0.5", url_via(silent.addr()));
    let err = bounded(PostgresConfig::from_url(&url).unwrap().connect())
        .await
        .unwrap_err();
    match err {
        Error::Timeout {
            backend, operation, ..
        } => {
            assert_eq!(backend, "postgres");
            assert!(operation.starts_with("connecting to"), "{operation}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[tokio::test]
async fn a_server_that_goes_silent_mid_run_times_out_the_operation() {
    let proxy = StallingProxy::start(server_addr()).await;
    let schema = ScratchSchema::new("sg_timeout");
    let saver = PostgresConfig::from_url(&url_via(proxy.addr()))
        .unwrap()
        .schema(schema.name())
        .pool_size(1)
        .timeouts(Timeouts {
            statement: Some(Duration::from_millis(800)),
            ..Timeouts::default()
        })
        .connect()
        .await
        .unwrap();
    let (at, read) = read_after_silence(&saver, &proxy, "t").await;
    let err = read.unwrap_err();
    assert!(
        matches!(&err, Error::Timeout { operation, after, .. }
            if operation == "reading a checkpoint" && *after == Duration::from_millis(800)),
        "{err:?}"
    );
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let err = bounded(saver.put(&at, &Checkpoint::empty(), &meta, &Default::default()))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
}
