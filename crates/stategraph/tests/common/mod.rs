//! Backends for the integration tests: every behaviour test runs on each saver.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use stategraph::CheckpointSaver;

/// The Postgres test server (`STATEGRAPH_TEST_POSTGRES_URL`, default the local one).
pub(crate) fn postgres_url() -> String {
    std::env::var("STATEGRAPH_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Drops a test schema when dropped.
pub(crate) struct SchemaGuard(String);

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        let schema = self.0.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
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
            });
        })
        .join();
    }
}

/// A Postgres saver on a fresh schema; fails the test if the server cannot be reached.
pub(crate) async fn postgres() -> (Arc<dyn CheckpointSaver>, SchemaGuard) {
    let (saver, guard, _) = postgres_with_url().await;
    (saver, guard)
}

/// Like [`postgres`], plus a URL that points other clients (Python) at the same schema.
pub(crate) async fn postgres_with_url() -> (Arc<dyn CheckpointSaver>, SchemaGuard, String) {
    let schema = format!("sg_test_{}", stategraph::uuid6(None).replace('-', ""));
    let saver = stategraph_postgres::PostgresConfig::from_url(&postgres_url())
        .unwrap()
        .schema(schema.clone())
        .pool_size(4)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {} is required: {e}", postgres_url()));
    let base = postgres_url();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    (Arc::new(saver), SchemaGuard(schema), url)
}

/// Expands each listed `async fn name(saver: Arc<dyn CheckpointSaver>)` into one test per
/// saver: in-memory, SQLite (a fresh file) and Postgres (a fresh schema).
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
    };
}

/// Keeps the compiler from flagging `Arc`/`CheckpointSaver` as unused in files that only
/// use the macro.
pub(crate) type Saver = Arc<dyn CheckpointSaver>;
