//! The shared conformance suite against `RedisSaver`, each case under its own key prefix on
//! the server `STATEGRAPH_TEST_REDIS_URL` names (default: the local Redis). A server that
//! cannot be reached fails the tests, naming the URL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use stategraph_checkpoint::conformance::{Corruptor, Fixture, RawPart};
use stategraph_redis::RedisSaver;

fn url() -> String {
    std::env::var("STATEGRAPH_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// Deletes the test's keys when the fixture goes away.
struct DropPrefix(String);

impl Drop for DropPrefix {
    fn drop(&mut self) {
        let prefix = self.0.clone();
        let _ = std::thread::spawn(move || {
            let client = redis::Client::open(url()).unwrap();
            if let Ok(mut conn) = client.get_connection() {
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

/// Edits the checkpoint hashes under the test's prefix directly.
struct Keys {
    conn: redis::aio::MultiplexedConnection,
    prefix: String,
}

impl Keys {
    fn cp(&self, thread: &str, ns: &str, id: &str) -> String {
        format!("{}:cp:{thread}:{ns}:{id}", self.prefix)
    }
}

fn field(part: RawPart) -> &'static str {
    match part {
        RawPart::Checkpoint => "checkpoint",
        RawPart::Metadata => "metadata",
    }
}

#[async_trait::async_trait]
impl Corruptor for Keys {
    async fn read_raw(&self, thread: &str, ns: &str, id: &str, part: RawPart) -> Vec<u8> {
        let mut conn = self.conn.clone();
        let v: Option<Vec<u8>> = redis::cmd("HGET")
            .arg(self.cp(thread, ns, id))
            .arg(field(part))
            .query_async(&mut conn)
            .await
            .unwrap();
        v.expect("the field exists")
    }

    async fn write_raw(&self, thread: &str, ns: &str, id: &str, part: RawPart, bytes: &[u8]) {
        let mut conn = self.conn.clone();
        let _: () = redis::cmd("HSET")
            .arg(self.cp(thread, ns, id))
            .arg(field(part))
            .arg(bytes)
            .query_async(&mut conn)
            .await
            .unwrap();
    }

    async fn set_parent(&self, thread: &str, ns: &str, id: &str, parent: &str) {
        let mut conn = self.conn.clone();
        let _: () = redis::cmd("HSET")
            .arg(self.cp(thread, ns, id))
            .arg("parent")
            .arg(parent)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
}

async fn fixture() -> Fixture {
    let prefix = format!("sg_test:{}", stategraph_checkpoint::uuid6(None));
    let saver = RedisSaver::connect_with(&url(), &prefix, None)
        .await
        .unwrap_or_else(|e| panic!("Redis at {} is required for these tests: {e}", url()));
    let conn = redis::Client::open(url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    Fixture::new(saver)
        .with_corruptor(Keys {
            conn,
            prefix: prefix.clone(),
        })
        .with_guard(DropPrefix(prefix))
}

stategraph_checkpoint::checkpointer_conformance!(fixture);

#[tokio::test]
async fn thread_ttl_expires_every_key_of_the_thread() {
    use stategraph_checkpoint::*;
    let prefix = format!("sg_test:{}", uuid6(None));
    let _guard = DropPrefix(prefix.clone());
    let saver = RedisSaver::connect_with(&url(), &prefix, Some(std::time::Duration::from_secs(1)))
        .await
        .unwrap();
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
