//! The shared conformance suite against `MySqlSaver`, each case in a fresh database on the
//! server `STATEGRAPH_TEST_MYSQL_URL` names (default: the local MariaDB). A server that cannot
//! be reached fails the tests, naming the URL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use stategraph_testkit::mysql::fixture;

stategraph_conformance::checkpointer_conformance!(fixture);

/// A saver on a pool the user owns keeps its tables in the pool's database, and the pool
/// stays the user's (still usable, not closed by the saver).
#[tokio::test]
async fn a_saver_on_a_users_pool() {
    use mysql_async::prelude::Queryable;
    let database = stategraph_testkit::mysql::ScratchDatabase::new("sg_user_pool");
    let mut admin = mysql_async::Conn::new(stategraph_testkit::mysql::opts())
        .await
        .unwrap();
    admin
        .query_drop(format!("CREATE DATABASE `{}`", database.name()))
        .await
        .unwrap();
    let pool = database.pool();
    let saver = stategraph_mysql::MySqlConfig::from_pool(pool.clone())
        .connect()
        .await
        .unwrap();
    round_trip(&saver).await;
    drop(saver);
    let mut conn = pool.get_conn().await.unwrap();
    let n: Option<u64> = conn
        .query_first("SELECT COUNT(*) FROM checkpoints")
        .await
        .unwrap();
    assert_eq!(n, Some(1));
    let _ = admin.disconnect().await;
}

/// Puts a checkpoint through `saver` and reads it back, by id and as the thread's latest.
async fn round_trip(saver: &dyn stategraph_checkpoint::CheckpointSaver) {
    use stategraph_checkpoint::*;
    let mut cp = Checkpoint::empty();
    cp.channel_values.insert("k".into(), "v".into());
    cp.channel_versions
        .insert("k", saver.get_next_version(None));
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
    let back = saver.get_tuple(&at).await.unwrap().expect("stored");
    assert_eq!(back.checkpoint, cp);
    let latest = saver.get_tuple(&CheckpointConfig::new("t")).await.unwrap();
    assert_eq!(latest.map(|t| t.checkpoint.id), Some(cp.id));
}
