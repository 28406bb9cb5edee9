//! No call waits on a silent Redis forever: a server that accepts and never answers, or one
//! that goes silent mid-run, ends in `Error::Timeout` naming the operation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::Duration;

use stategraph_checkpoint::backend::Timeouts;
use stategraph_checkpoint::*;
use stategraph_redis::RedisConfig;
use stategraph_testkit::net::{SilentServer, StallingProxy};

/// Fails the test (instead of hanging CI) if the saver does not give up by itself.
async fn bounded<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), work)
        .await
        .expect("the saver's own limit must end the call")
}

fn upstream() -> SocketAddr {
    let url = std::env::var("STATEGRAPH_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    let host_port = url
        .trim_start_matches("redis://")
        .split(['/', '?'])
        .next()
        .unwrap()
        .to_owned();
    std::net::ToSocketAddrs::to_socket_addrs(&host_port)
        .unwrap()
        .next()
        .unwrap()
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_connecting() {
    let silent = SilentServer::start().await;
    let url = format!("redis://{}?connect_timeout=0.5", silent.addr());
    let err = bounded(RedisConfig::from_url(&url).unwrap().connect())
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Timeout {
                backend: "redis",
                ..
            } | Error::Backend {
                backend: "redis",
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_server_that_goes_silent_mid_run_times_out_the_operation() {
    let proxy = StallingProxy::start(upstream()).await;
    let prefix = format!("sg_timeout:{}", uuid6(None));
    let saver = RedisConfig::from_url(&format!("redis://{}", proxy.addr()))
        .unwrap()
        .prefix(prefix.clone())
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
        matches!(&err, Error::Timeout { operation, .. } if operation == "reading a checkpoint"),
        "{err:?}"
    );
    // Clean up on a direct connection (the proxy stays silent).
    let direct = RedisConfig::from_url(&format!("redis://{}", upstream()))
        .unwrap()
        .prefix(prefix)
        .connect()
        .await
        .unwrap();
    direct.delete_thread("t").await.unwrap();
}
