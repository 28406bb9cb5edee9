//! `copy_thread` (extended): duplicating a thread with the same checkpoint ids.

use super::*;
use stategraph_checkpoint::{CheckpointSource::*, ListOptions};

async fn all(saver: &dyn CheckpointSaver, t: &str) -> Vec<CheckpointTuple> {
    saver.list(&ListOptions::thread(t)).await.unwrap()
}

pub async fn copy_thread_basic(saver: &dyn CheckpointSaver) {
    require!(saver, copy_thread, saver.copy_thread(&thread(), &thread()));
    let (src, dst) = (thread(), thread());
    chain(saver, &src, "", 3).await;
    saver.copy_thread(&src, &dst).await.unwrap();
    assert_eq!(all(saver, &dst).await.len(), 3);
}

pub async fn copy_thread_all_checkpoints(saver: &dyn CheckpointSaver) {
    require!(saver, copy_thread, saver.copy_thread(&thread(), &thread()));
    let (src, dst) = (thread(), thread());
    chain(saver, &src, "", 4).await;
    saver.copy_thread(&src, &dst).await.unwrap();
    let (a, b) = (all(saver, &src).await, all(saver, &dst).await);
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.checkpoint.id, y.checkpoint.id);
        assert_eq!(x.checkpoint.channel_values, y.checkpoint.channel_values);
        assert_eq!(y.config.thread_id, dst);
    }
}

pub async fn copy_thread_preserves_metadata(saver: &dyn CheckpointSaver) {
    require!(saver, copy_thread, saver.copy_thread(&thread(), &thread()));
    let (src, dst) = (thread(), thread());
    let mut parent = config(&src);
    for step in 0..3 {
        let meta = metadata(Loop, step).with("custom", format!("value-{step}"));
        parent = put(saver, &parent, &checkpoint(&[], &[]), &meta).await;
    }
    saver.copy_thread(&src, &dst).await.unwrap();
    let (a, b) = (all(saver, &src).await, all(saver, &dst).await);
    for x in &a {
        let y = b
            .iter()
            .find(|y| y.metadata.step == x.metadata.step)
            .unwrap();
        assert_eq!(x.metadata, y.metadata);
    }
}

pub async fn copy_thread_preserves_namespaces(saver: &dyn CheckpointSaver) {
    require!(saver, copy_thread, saver.copy_thread(&thread(), &thread()));
    let (src, dst) = (thread(), thread());
    empty(saver, &config(&src)).await;
    empty(saver, &config(&src).with_ns("child:1")).await;
    saver.copy_thread(&src, &dst).await.unwrap();
    for ns in ["", "child:1"] {
        let hits = saver.list(&ListOptions::thread(&dst).ns(ns)).await.unwrap();
        assert_eq!(hits.len(), 1, "namespace {ns:?}");
    }
}

pub async fn copy_thread_preserves_writes(saver: &dyn CheckpointSaver) {
    require!(saver, copy_thread, saver.copy_thread(&thread(), &thread()));
    let (src, dst) = (thread(), thread());
    let c = empty(saver, &config(&src)).await;
    saver
        .put_writes(&c, &[("ch".into(), "write_val".into())], "task1", "~p")
        .await
        .unwrap();
    saver.copy_thread(&src, &dst).await.unwrap();
    let writes = must_get(saver, &config(&dst)).await.pending_writes;
    assert_eq!(writes.len(), 1);
    assert_eq!(
        (writes[0].channel.as_str(), &writes[0].value),
        ("ch", &Value::from("write_val"))
    );
    assert_eq!(writes[0].task_path, "~p");
}

pub async fn copy_thread_preserves_ordering(saver: &dyn CheckpointSaver) {
    require!(saver, copy_thread, saver.copy_thread(&thread(), &thread()));
    let (src, dst) = (thread(), thread());
    chain(saver, &src, "", 5).await;
    saver.copy_thread(&src, &dst).await.unwrap();
    assert_eq!(ids(&all(saver, &src).await), ids(&all(saver, &dst).await));
    let copied = all(saver, &dst).await;
    assert_eq!(
        copied[0]
            .parent_config
            .as_ref()
            .map(|p| p.thread_id.as_str()),
        Some(dst.as_str())
    );
}

pub async fn copy_thread_source_unchanged(saver: &dyn CheckpointSaver) {
    require!(saver, copy_thread, saver.copy_thread(&thread(), &thread()));
    let (src, dst) = (thread(), thread());
    chain(saver, &src, "", 3).await;
    let before = all(saver, &src).await;
    saver.copy_thread(&src, &dst).await.unwrap();
    assert_eq!(all(saver, &src).await, before);
}

pub async fn copy_thread_nonexistent_source(saver: &dyn CheckpointSaver) {
    require!(saver, copy_thread, saver.copy_thread(&thread(), &thread()));
    let dst = thread();
    let result = saver.copy_thread(&thread(), &dst).await;
    assert!(
        matches!(result, Err(stategraph_checkpoint::Error::NotFound { .. })),
        "copying a missing thread is NotFound, got {result:?}"
    );
    assert!(all(saver, &dst).await.is_empty());
}
