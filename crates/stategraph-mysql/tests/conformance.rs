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
    stategraph_conformance::get_tuple_latest_when_no_checkpoint_id(&saver).await;
    stategraph_conformance::get_tuple_checkpoint_fields(&saver).await;
    drop(saver);
    let mut conn = pool.get_conn().await.unwrap();
    let n: Option<u64> = conn
        .query_first("SELECT COUNT(*) FROM checkpoints")
        .await
        .unwrap();
    assert_eq!(n, Some(4), "the four checkpoints the cases stored");
    let _ = admin.disconnect().await;
}
