//! Backends for the integration tests: every behaviour test runs on each saver, each on a
//! scratch place of its own from `stategraph_testkit` (an unreachable server fails the test,
//! naming its URL).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

pub(crate) mod child;

#[cfg(feature = "server")]
pub(crate) mod reference;
#[cfg(feature = "server")]
pub(crate) mod seed_server;
#[cfg(feature = "agent")]
pub(crate) mod weather_agent;

use stategraph::CheckpointSaver;
use stategraph_testkit::postgres::ScratchSchema;

/// A Postgres saver on a fresh schema (with `serializer` instead of the default one, if
/// given), the schema's guard, and a URL that points other clients (Python) at the schema.
pub(crate) async fn postgres_with_url(
    serializer: Option<Arc<dyn stategraph::Serializer>>,
) -> (Arc<dyn CheckpointSaver>, ScratchSchema, String) {
    let (saver, schema) = stategraph_testkit::postgres::saver_with(|config| match serializer {
        Some(serializer) => config.serializer(serializer),
        None => config,
    })
    .await;
    let url = schema.url();
    (Arc::new(saver), schema, url)
}

/// Expands each listed `async fn name(saver: Arc<dyn CheckpointSaver>)` into one test per
/// saver: in-memory, SQLite (a fresh file), Postgres (a fresh schema), MySQL/MariaDB (a fresh
/// database), Redis (a fresh key prefix) and MongoDB (a fresh database).
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
                let (saver, _file) = stategraph_testkit::sqlite::saver().await;
                super::$name(std::sync::Arc::new(saver)).await;
            })*
        }
        mod postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (saver, _schema) = stategraph_testkit::postgres::saver().await;
                super::$name(std::sync::Arc::new(saver)).await;
            })*
        }
        mod mysql {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (saver, _db) = stategraph_testkit::mysql::saver().await;
                super::$name(std::sync::Arc::new(saver)).await;
            })*
        }
        mod redis {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (saver, _keys) = stategraph_testkit::redis::saver().await;
                super::$name(std::sync::Arc::new(saver)).await;
            })*
        }
        mod mongodb {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (saver, _db) = stategraph_testkit::mongodb::saver().await;
                super::$name(std::sync::Arc::new(saver)).await;
            })*
        }
    };
}

/// Keeps the compiler from flagging `Arc`/`CheckpointSaver` as unused in files that only
/// use the macro.
pub(crate) type Saver = Arc<dyn CheckpointSaver>;
pub(crate) mod chat;

/// Asserts two event lists equal, naming each event that differs (both sides shown), then
/// their lengths.
pub(crate) fn assert_same_events(ours: &[serde_json::Value], theirs: &[serde_json::Value]) {
    let differ: Vec<String> = ours
        .iter()
        .zip(theirs)
        .enumerate()
        .filter(|(_, (o, t))| o != t)
        .map(|(i, (o, t))| format!("event {i}:\n ours:   {o}\n theirs: {t}"))
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    assert_eq!(
        ours.len(),
        theirs.len(),
        "ours: {ours:#?}\ntheirs: {theirs:#?}"
    );
}
