//! What the in-memory saver keeps between reads: shared checkpoints, and when they are
//! assembled again.

use std::sync::Arc;

use super::InMemorySaver;
use crate::checkpoint::Checkpoint;
use crate::checkpoint_id::CheckpointId;
use crate::config::CheckpointConfig;
use crate::metadata::{CheckpointMetadata, CheckpointSource};
use crate::saver::CheckpointSaver;
use crate::version::{ChannelVersion, ChannelVersions};
use stategraph_value::Value;

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// Checkpoint `step` of a thread: channel `a` at version 1 holding `value`.
fn checkpoint(step: i64, value: &str) -> Checkpoint {
    let mut cp = Checkpoint::empty();
    cp.id = CheckpointId::for_step(step);
    cp.channel_values.insert("a".into(), Value::from(value));
    cp.channel_versions.insert("a", ChannelVersion::Int(1));
    cp
}

fn versions(stored: bool) -> ChannelVersions {
    let mut v = ChannelVersions::new();
    if stored {
        v.insert("a", ChannelVersion::Int(1));
    }
    v
}

/// Puts `cp` after `parent`, storing `a`'s value when `new`; returns its address.
async fn put(
    saver: &InMemorySaver,
    parent: &CheckpointConfig,
    cp: &Checkpoint,
    new: bool,
) -> CheckpointConfig {
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    saver
        .put(parent, cp, &meta, &versions(new))
        .await
        .expect("put")
}

async fn value_of(saver: &InMemorySaver, config: &CheckpointConfig) -> Option<Value> {
    let t = saver
        .get_tuple(config)
        .await
        .expect("read")
        .expect("stored");
    t.checkpoint.channel_values.get("a").cloned()
}

#[test]
fn reads_share_the_stored_checkpoint_and_metadata() {
    block_on(async {
        let saver = InMemorySaver::new();
        let thread = CheckpointConfig::new("t");
        put(&saver, &thread, &checkpoint(0, "x"), true).await;
        let first = saver.get_tuple(&thread).await.unwrap().unwrap();
        let again = saver.get_tuple(&thread).await.unwrap().unwrap();
        assert!(Arc::ptr_eq(&first.checkpoint, &again.checkpoint));
        assert!(Arc::ptr_eq(&first.metadata, &again.metadata));
        assert_eq!(first.checkpoint.channel_values["a"], Value::from("x"));
        // A listing hands out the same checkpoint as a read.
        let listed = saver.list(&crate::ListOptions::thread("t")).await.unwrap();
        assert!(Arc::ptr_eq(&listed[0].checkpoint, &first.checkpoint));
    });
}

#[test]
fn a_value_stored_again_under_its_version_is_read_by_older_checkpoints() {
    block_on(async {
        let saver = InMemorySaver::new();
        let thread = CheckpointConfig::new("t");
        let first = put(&saver, &thread, &checkpoint(0, "x"), true).await;
        assert_eq!(value_of(&saver, &first).await, Some(Value::from("x")));
        // A later checkpoint stores channel `a` at the same version again, with another
        // value: as in LangGraph's in-memory saver, the first checkpoint now reads it.
        put(&saver, &first, &checkpoint(1, "y"), true).await;
        assert_eq!(value_of(&saver, &first).await, Some(Value::from("y")));
    });
}

#[test]
fn a_checkpoint_missing_a_value_reads_it_once_stored() {
    block_on(async {
        let saver = InMemorySaver::new();
        let thread = CheckpointConfig::new("t");
        // Put with `a` left out of the new versions: its value is not stored.
        let first = put(&saver, &thread, &checkpoint(0, "x"), false).await;
        assert_eq!(value_of(&saver, &first).await, None);
        put(&saver, &first, &checkpoint(1, "z"), true).await;
        assert_eq!(value_of(&saver, &first).await, Some(Value::from("z")));
    });
}
