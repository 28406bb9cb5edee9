//! Backends for the integration tests: every behaviour test runs on each saver.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use stategraph::CheckpointSaver;
use stategraph_checkpoint::conformance::Cleanup;

/// The Postgres test server (`STATEGRAPH_TEST_POSTGRES_URL`, default the local one).
pub(crate) fn postgres_url() -> String {
    std::env::var("STATEGRAPH_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Drops a test schema (with everything in it) when the guard goes away.
pub(crate) fn drop_schema(schema: String) -> Cleanup {
    Cleanup::new(async move {
        if let Ok((client, conn)) =
            tokio_postgres::connect(&postgres_url(), tokio_postgres::NoTls).await
        {
            let task = tokio::spawn(conn);
            let _ = client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                .await;
            drop(client);
            let _ = task.await;
        }
    })
}

/// A Postgres saver on a fresh schema; fails the test if the server cannot be reached.
pub(crate) async fn postgres() -> (Arc<dyn CheckpointSaver>, Cleanup) {
    let (saver, guard, _) = postgres_with_url(None).await;
    (saver, guard)
}

/// Like [`postgres`] (with `serializer` instead of the default one, if given), plus a URL
/// that points other clients (Python) at the same schema.
pub(crate) async fn postgres_with_url(
    serializer: Option<Arc<dyn stategraph::Serializer>>,
) -> (Arc<dyn CheckpointSaver>, Cleanup, String) {
    let schema = format!("sg_test_{}", stategraph::uuid6(None).replace('-', ""));
    let mut config = stategraph_postgres::PostgresConfig::from_url(&postgres_url())
        .unwrap()
        .schema(schema.clone())
        .pool_size(4);
    if let Some(serializer) = serializer {
        config = config.serializer(serializer);
    }
    let saver = config
        .connect()
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {} is required: {e}", postgres_url()));
    let base = postgres_url();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    (Arc::new(saver), drop_schema(schema), url)
}

/// A MySQL/MariaDB saver on a fresh database (dropped afterwards by the guard).
pub(crate) async fn mysql() -> (Arc<dyn CheckpointSaver>, Cleanup) {
    let url = std::env::var("STATEGRAPH_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned());
    let name = format!("sg_test_{}", stategraph::uuid6(None).replace('-', ""));
    let saver = stategraph_mysql::MySqlConfig::from_url(&url)
        .unwrap()
        .database(name.clone())
        .connect()
        .await
        .unwrap_or_else(|e| panic!("MySQL/MariaDB at {url} is required: {e}"));
    (Arc::new(saver), drop_database(url, name))
}

/// Drops a test database when the guard goes away.
fn drop_database(url: String, name: String) -> Cleanup {
    Cleanup::new(async move {
        use mysql_async::prelude::Queryable;
        if let Ok(mut conn) = mysql_async::Conn::from_url(url).await {
            let _ = conn
                .query_drop(format!("DROP DATABASE IF EXISTS `{name}`"))
                .await;
            let _ = conn.disconnect().await;
        }
    })
}

/// A Redis saver under a fresh key prefix (keys deleted afterwards by the guard).
pub(crate) async fn redis() -> (Arc<dyn CheckpointSaver>, PrefixGuard) {
    let url = std::env::var("STATEGRAPH_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    let prefix = format!("sg_test:{}", stategraph::uuid6(None));
    let saver = stategraph_redis::RedisSaver::connect_with(&url, &prefix, None)
        .await
        .unwrap_or_else(|e| panic!("Redis at {url} is required: {e}"));
    (Arc::new(saver), PrefixGuard(url, prefix))
}

/// Deletes a test key prefix when dropped.
pub(crate) struct PrefixGuard(String, String);

impl Drop for PrefixGuard {
    fn drop(&mut self) {
        let (url, prefix) = (self.0.clone(), self.1.clone());
        let _ = std::thread::spawn(move || {
            if let Ok(mut conn) = redis::Client::open(url).and_then(|c| c.get_connection()) {
                let keys: Vec<String> = redis::cmd("KEYS")
                    .arg(format!("{prefix}:*"))
                    .query(&mut conn)
                    .unwrap_or_default();
                if !keys.is_empty() {
                    let _: redis::RedisResult<()> = redis::cmd("DEL").arg(keys).query(&mut conn);
                }
            }
        })
        .join();
    }
}

/// Expands each listed `async fn name(saver: Arc<dyn CheckpointSaver>)` into one test per
/// saver: in-memory, SQLite (a fresh file), Postgres (a fresh schema), MySQL/MariaDB (a fresh
/// database) and Redis (a fresh key prefix).
#[macro_export]
macro_rules! on_every_saver {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                super::$name(std::sync::Arc::new(stategraph::InMemorySaver::new())).await;
            })*
        }
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let dir = tempfile::tempdir().unwrap();
                let saver = stategraph::SqliteSaver::open(dir.path().join("test.sqlite")).unwrap();
                super::$name(std::sync::Arc::new(saver)).await;
            })*
        }
        mod postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (saver, _schema) = $crate::common::postgres().await;
                super::$name(saver).await;
            })*
        }
        mod mysql {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (saver, _db) = $crate::common::mysql().await;
                super::$name(saver).await;
            })*
        }
        mod redis {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (saver, _keys) = $crate::common::redis().await;
                super::$name(saver).await;
            })*
        }
    };
}

/// Keeps the compiler from flagging `Arc`/`CheckpointSaver` as unused in files that only
/// use the macro.
pub(crate) type Saver = Arc<dyn CheckpointSaver>;
pub(crate) mod chat;
