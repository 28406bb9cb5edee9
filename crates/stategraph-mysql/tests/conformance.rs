//! The shared conformance suite against `MySqlSaver`, each case in a fresh database on the
//! server `STATEGRAPH_TEST_MYSQL_URL` names (default: the local MariaDB). A server that cannot
//! be reached fails the tests, naming the URL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use mysql_async::prelude::Queryable;
use stategraph_checkpoint::conformance::{Cleanup, Fixture};
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
    Fixture::new(saver).with_guard(drop_database(name))
}

stategraph_checkpoint::checkpointer_conformance!(fixture);
