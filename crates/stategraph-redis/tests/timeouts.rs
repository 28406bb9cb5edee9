//! No call waits on a silent Redis forever: a server that accepts and never answers, or one
//! that goes silent mid-run, ends in `Error::Timeout` naming the operation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use stategraph_checkpoint::backend::Timeouts;
use stategraph_checkpoint::*;
use stategraph_redis::RedisConfig;
use stategraph_testkit::net::{SilentServer, StallingProxy, bounded, read_after_silence};
use stategraph_testkit::redis::{ScratchPrefix, server_addr};

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
    let proxy = StallingProxy::start(server_addr()).await;
    let prefix = ScratchPrefix::new("sg_timeout");
    let saver = RedisConfig::from_url(&format!("redis://{}", proxy.addr()))
        .unwrap()
        .prefix(prefix.name())
        .timeouts(Timeouts {
            statement: Some(Duration::from_millis(800)),
            ..Timeouts::default()
        })
        .connect()
        .await
        .unwrap();
    let (_, read) = read_after_silence(&saver, &proxy, "t").await;
    let err = read.unwrap_err();
    assert!(
        matches!(&err, Error::Timeout { operation, .. } if operation == "reading a checkpoint"),
        "{err:?}"
    );
}
