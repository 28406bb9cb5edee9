//! The shared conformance suite against `RedisSaver`, each case under its own key prefix on
//! the server `STATEGRAPH_TEST_REDIS_URL` names (default: the local Redis). A server that
//! cannot be reached fails the tests, naming the URL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use stategraph_testkit::redis::fixture;

stategraph_conformance::checkpointer_conformance!(fixture);

#[tokio::test]
async fn thread_ttl_expires_every_key_of_the_thread() {
    use stategraph_checkpoint::*;
    let (saver, _prefix) = stategraph_testkit::redis::saver_with(|config| {
        config.ttl(std::time::Duration::from_secs(1))
    })
    .await;
    let mut cp = Checkpoint::empty();
    cp.channel_values.insert("k".into(), "v".into());
    cp.channel_versions
        .insert("k", saver.get_next_version(None));
    let at = saver
        .put(
            &CheckpointConfig::new("t"),
            &cp,
            &CheckpointMetadata::new(CheckpointSource::Input, -1),
            &cp.channel_versions,
        )
        .await
        .unwrap();
    saver
        .put_writes(&at, &[("k".into(), "w".into())], "task", "")
        .await
        .unwrap();
    assert!(saver.get_tuple(&at).await.unwrap().is_some());
    tokio::time::sleep(std::time::Duration::from_millis(2200)).await;
    assert!(
        saver
            .get_tuple(&CheckpointConfig::new("t"))
            .await
            .unwrap()
            .is_none(),
        "expired"
    );
}

/// A saver on a connection the user owns writes through it under its prefix.
#[tokio::test]
async fn a_saver_on_a_users_connection() {
    let prefix = stategraph_testkit::redis::ScratchPrefix::new("sg_user_conn");
    let client = redis::Client::open(prefix.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let saver = stategraph_redis::RedisConfig::from_connection(conn.clone())
        .prefix(prefix.name())
        .connect()
        .await
        .unwrap();
    stategraph_conformance::get_tuple_latest_when_no_checkpoint_id(&saver).await;
    stategraph_conformance::get_tuple_checkpoint_fields(&saver).await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}:*", prefix.name()))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        !keys.is_empty(),
        "written under the prefix through the user's connection"
    );
}
