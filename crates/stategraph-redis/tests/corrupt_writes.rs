//! A write stored under a malformed field, or with a value of the wrong shape, reads as a
//! typed error naming its checkpoint — never as a write with a defaulted index, path or type.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use stategraph_checkpoint::*;
use stategraph_testkit::redis::saver;
use stategraph_testkit::services::redis_url;
use stategraph_value::encode;

/// Stores a checkpoint with one proper write, then sets `field` of its writes hash to `raw`;
/// returns what reading the checkpoint gives.
async fn read_with_write(
    field: &str,
    raw: Vec<u8>,
) -> (CheckpointId, Result<Option<CheckpointTuple>>) {
    let (saver, prefix) = saver().await;
    let cp = Checkpoint::empty();
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
    saver
        .put_writes(&at, &[("ch".into(), "ok".into())], "task", "")
        .await
        .unwrap();
    let key = format!("{}:w:t::{}", prefix.name(), cp.id);
    let mut conn = redis::Client::open(redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let exists: bool = redis::cmd("EXISTS")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(exists, "the writes hash is at {key}");
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg(field)
        .arg(raw)
        .query_async(&mut conn)
        .await
        .unwrap();
    let read = saver.get_tuple(&at).await;
    drop(prefix);
    (cp.id, read)
}

fn a_write(path: &str, channel: &str, tag: &str, bytes: &[u8]) -> Vec<u8> {
    encode(&Value::from(vec![
        Value::from(path),
        Value::from(channel),
        Value::from(tag),
        Value::Bytes(bytes.to_vec()),
    ]))
}

#[track_caller]
fn assert_typed(id: &str, read: Result<Option<CheckpointTuple>>) {
    match read {
        Err(e) => assert_eq!(
            e.location()
                .and_then(|l| l.checkpoint_id.clone())
                .as_deref(),
            Some(id),
            "{e}"
        ),
        Ok(t) => panic!("a malformed write was read as {t:?}"),
    }
}

#[tokio::test]
async fn a_field_without_task_and_index_is_an_error() {
    let good = a_write("", "ch", "null", b"");
    let (id, read) = read_with_write("no-separator", good).await;
    assert_typed(&id, read);
}

#[tokio::test]
async fn an_index_that_is_not_a_number_is_an_error() {
    let good = a_write("", "ch", "null", b"");
    let (id, read) = read_with_write("task\u{1f}first", good).await;
    assert_typed(&id, read);
}

#[tokio::test]
async fn a_value_of_the_wrong_shape_is_an_error() {
    let short = encode(&Value::from(vec![Value::from(""), Value::from("ch")]));
    let (id, read) = read_with_write("task\u{1f}7", short).await;
    assert_typed(&id, read);
}
