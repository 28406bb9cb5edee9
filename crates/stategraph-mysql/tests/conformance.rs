//! The shared conformance suite against `MySqlSaver`, each case in a fresh database on the
//! server `STATEGRAPH_TEST_MYSQL_URL` names (default: the local MariaDB). A server that cannot
//! be reached fails the tests, naming the URL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use mysql_async::prelude::Queryable;
use stategraph_checkpoint::conformance::{Cleanup, Corruptor, Fixture, RawPart};
use stategraph_mysql::MySqlConfig;

fn url() -> String {
    std::env::var("STATEGRAPH_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned())
}

/// Drops the test's database when the fixture goes away.
fn drop_database(name: String) -> Cleanup {
    Cleanup::new(async move {
        if let Ok(mut conn) = mysql_async::Conn::from_url(url()).await {
            let _ = conn
                .query_drop(format!("DROP DATABASE IF EXISTS `{name}`"))
                .await;
            let _ = conn.disconnect().await;
        }
    })
}

/// Edits rows of the scratch database directly.
struct Rows(mysql_async::Pool);

fn column(part: RawPart) -> &'static str {
    match part {
        RawPart::Checkpoint => "checkpoint",
        RawPart::Metadata => "metadata",
    }
}

const ROW: &str = "WHERE thread_id = ? AND checkpoint_ns_hash = MD5(?) AND checkpoint_id = ?";

#[async_trait::async_trait]
impl Corruptor for Rows {
    async fn read_raw(&self, thread: &str, ns: &str, id: &str, part: RawPart) -> Vec<u8> {
        let mut conn = self.0.get_conn().await.unwrap();
        let sql = format!("SELECT {} FROM checkpoints {ROW}", column(part));
        let v: Option<Vec<u8>> = conn.exec_first(sql, (thread, ns, id)).await.unwrap();
        v.expect("the row exists")
    }

    async fn write_raw(&self, thread: &str, ns: &str, id: &str, part: RawPart, bytes: &[u8]) {
        let mut conn = self.0.get_conn().await.unwrap();
        let sql = format!("UPDATE checkpoints SET {} = ? {ROW}", column(part));
        conn.exec_drop(sql, (bytes, thread, ns, id)).await.unwrap();
        assert_eq!(conn.affected_rows(), 1, "one row rewritten");
    }

    async fn set_parent(&self, thread: &str, ns: &str, id: &str, parent: &str) {
        let mut conn = self.0.get_conn().await.unwrap();
        let sql = format!("UPDATE checkpoints SET parent_checkpoint_id = ? {ROW}");
        conn.exec_drop(sql, (parent, thread, ns, id)).await.unwrap();
        assert_eq!(conn.affected_rows(), 1, "one row rewritten");
    }
}

async fn fixture() -> Fixture {
    let name = format!(
        "sg_test_{}",
        stategraph_checkpoint::uuid6(None).replace('-', "")
    );
    let saver = MySqlConfig::from_url(&url())
        .unwrap()
        .database(name.clone())
        .connect()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "MySQL/MariaDB at {} is required for these tests: {e}",
                url()
            )
        });
    let opts = mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(&url()).unwrap())
        .db_name(Some(name.clone()));
    Fixture::new(saver)
        .with_corruptor(Rows(mysql_async::Pool::new(opts)))
        .with_guard(drop_database(name))
}

stategraph_checkpoint::checkpointer_conformance!(fixture);
