//! No call waits on a silent Postgres forever: a server that accepts and never answers, or
//! one that goes silent mid-run, ends in `Error::Timeout` naming the operation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::Duration;

use stategraph_checkpoint::backend::Timeouts;
use stategraph_checkpoint::*;
use stategraph_postgres::PostgresConfig;
use stategraph_testkit::net::{SilentServer, StallingProxy};

mod common;

use common::*;

/// The test server's address and a URL for the same database at `addr` instead.
fn via(addr: SocketAddr) -> String {
    let config: tokio_postgres::Config = url().parse().unwrap();
    let user = config.get_user().unwrap_or("postgres");
    let db = config.get_dbname().unwrap_or("test");
    format!("postgres://{user}@{addr}/{db}")
}

fn upstream() -> SocketAddr {
    let config: tokio_postgres::Config = url().parse().unwrap();
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}")
        .parse()
        .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], port)))
}

/// Fails the test (instead of hanging CI) if the saver does not give up by itself.
async fn bounded<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), work)
        .await
        .expect("the saver's own limit must end the call")
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_connecting() {
    let silent = SilentServer::start().await;
    let url = format!("{}?connect_timeout=0.5", via(silent.addr()));
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
    let proxy = StallingProxy::start(upstream()).await;
    let schema = scratch_name("sg_timeout");
    let _drop = drop_schema(schema.clone());
    let saver = PostgresConfig::from_url(&via(proxy.addr()))
        .unwrap()
        .schema(schema)
        .pool_size(1)
        .timeouts(Timeouts {
            statement: Some(Duration::from_millis(800)),
            ..Timeouts::default()
        })
        .connect()
        .await
        .unwrap();
    let cp = Checkpoint::empty();
    let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
    let at = saver
        .put(
            &CheckpointConfig::new("t"),
            &cp,
            &meta,
            &cp.channel_versions,
        )
        .await
        .unwrap();
    proxy.go_silent();
    let err = bounded(saver.get_tuple(&at)).await.unwrap_err();
    assert!(
        matches!(&err, Error::Timeout { operation, after, .. }
            if operation == "reading a checkpoint" && *after == Duration::from_millis(800)),
        "{err:?}"
    );
    let err = bounded(saver.put(&at, &Checkpoint::empty(), &meta, &Default::default()))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
}
