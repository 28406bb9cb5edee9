//! No call waits on a silent MySQL/MariaDB forever: a server that accepts and never answers,
//! or one that goes silent mid-run, ends in `Error::Timeout` naming the operation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use stategraph_checkpoint::backend::Timeouts;
use stategraph_checkpoint::*;
use stategraph_mysql::MySqlConfig;
use stategraph_testkit::net::{SilentServer, StallingProxy};

fn url() -> String {
    std::env::var("STATEGRAPH_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned())
}

fn opts() -> mysql_async::Opts {
    mysql_async::Opts::from_url(&url()).unwrap()
}

/// A URL for the test server's user and database at `addr` instead.
fn via(addr: SocketAddr) -> String {
    let o = opts();
    let user = o.user().unwrap_or("root");
    let auth = match o.pass() {
        Some(p) => format!("{user}:{p}"),
        None => user.to_owned(),
    };
    // `prefer_socket=false`: the driver would otherwise switch to the local Unix socket,
    // around the proxy.
    format!(
        "mysql://{auth}@{addr}/{}?prefer_socket=false",
        o.db_name().unwrap_or("test")
    )
}

fn upstream() -> SocketAddr {
    let o = opts();
    (o.ip_or_hostname(), o.tcp_port())
        .to_socket_addrs()
        .unwrap()
        .next()
        .unwrap()
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
    let url = format!("{}&connect_timeout=0.5", via(silent.addr()));
    let err = bounded(MySqlConfig::from_url(&url).unwrap().connect())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Timeout { backend: "mysql", operation, .. }
            if operation.starts_with("connecting to")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_server_that_goes_silent_mid_run_times_out_the_operation() {
    let proxy = StallingProxy::start(upstream()).await;
    let saver = MySqlConfig::from_url(&via(proxy.addr()))
        .unwrap()
        .timeouts(Timeouts {
            statement: Some(Duration::from_millis(800)),
            ..Timeouts::default()
        })
        .connect()
        .await
        .unwrap();
    let thread = format!("timeout-{}", uuid6(None));
    let cp = Checkpoint::empty();
    let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
    let at = saver
        .put(
            &CheckpointConfig::new(&thread),
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
}
