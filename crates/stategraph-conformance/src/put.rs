//! `put`: storing checkpoints.

use super::*;
use stategraph_checkpoint::{CheckpointSource::*, value};

pub async fn put_returns_config(saver: &dyn CheckpointSaver) {
    let t = thread();
    let cp = checkpoint(&[], &[]);
    let got = put(saver, &config(&t), &cp, &metadata(Loop, 0)).await;
    assert_eq!(got.thread_id, t);
    assert_eq!(got.checkpoint_ns, "");
    assert_eq!(got.checkpoint_id.as_deref(), Some(cp.id.as_str()));
}

pub async fn put_roundtrip(saver: &dyn CheckpointSaver) {
    let t = thread();
    let cp = checkpoint(&[("msg", "hello".into())], &[("msg", 1)]);
    let got = put(saver, &config(&t), &cp, &metadata(Loop, 0)).await;
    let tuple = must_get(saver, &got).await;
    assert_eq!(tuple.checkpoint.id, cp.id);
    assert_eq!(tuple.checkpoint.channel_values["msg"], Value::from("hello"));
    assert_eq!(tuple.checkpoint.channel_values.len(), 1);
}

pub async fn put_preserves_channel_values(saver: &dyn CheckpointSaver) {
    let t = thread();
    let values = [
        ("str", Value::from("hello")),
        ("int", Value::Int(42)),
        ("list", value!([1, 2, 3])),
        ("dict", value!({"nested": true})),
    ];
    let cp = checkpoint(&values, &[("str", 1), ("int", 1), ("list", 1), ("dict", 1)]);
    let got = put(saver, &config(&t), &cp, &metadata(Loop, 0)).await;
    let tuple = must_get(saver, &got).await;
    for (k, v) in &values {
        assert_eq!(&tuple.checkpoint.channel_values[*k], v, "channel {k}");
    }
}

pub async fn put_preserves_channel_versions(saver: &dyn CheckpointSaver) {
    let t = thread();
    let cp = checkpoint(
        &[("a", "x".into()), ("b", "y".into())],
        &[("a", 1), ("b", 2)],
    );
    let got = put(saver, &config(&t), &cp, &metadata(Loop, 0)).await;
    let tuple = must_get(saver, &got).await;
    let versions = &tuple.checkpoint.channel_versions;
    assert_eq!(versions["a"].counter(), 1);
    assert_eq!(versions["b"].counter(), 2);
}

pub async fn put_preserves_versions_seen(saver: &dyn CheckpointSaver) {
    let t = thread();
    let mut cp = checkpoint(&[], &[]);
    cp.versions_seen.insert("node1", versions_of(&[("a", 1)]));
    cp.versions_seen.insert("node2", versions_of(&[("b", 2)]));
    let got = put(saver, &config(&t), &cp, &metadata(Loop, 0)).await;
    let tuple = must_get(saver, &got).await;
    assert!(tuple.checkpoint.versions_seen.contains_key("node1"));
    assert!(tuple.checkpoint.versions_seen.contains_key("node2"));
}

pub async fn put_preserves_metadata(saver: &dyn CheckpointSaver) {
    let t = thread();
    let cp = checkpoint(&[], &[]);
    let meta = metadata(Loop, 3).with("custom_key", "custom_value");
    let got = put(saver, &config(&t), &cp, &meta).await;
    let tuple = must_get(saver, &got).await;
    assert_eq!(tuple.metadata.source, Some(Loop));
    assert_eq!(tuple.metadata.step, Some(3));
    assert_eq!(tuple.metadata.extra["custom_key"], "custom_value");
}

pub async fn put_root_namespace(saver: &dyn CheckpointSaver) {
    let t = thread();
    let cp = checkpoint(&[], &[]);
    let got = put(saver, &config(&t).with_ns(""), &cp, &metadata(Loop, 0)).await;
    let tuple = must_get(saver, &got).await;
    assert_eq!(tuple.config.checkpoint_ns, "");
}

pub async fn put_child_namespace(saver: &dyn CheckpointSaver) {
    let t = thread();
    let cp = checkpoint(&[], &[]);
    let got = put(
        saver,
        &config(&t).with_ns("child:abc"),
        &cp,
        &metadata(Loop, 0),
    )
    .await;
    assert_eq!(got.checkpoint_ns, "child:abc");
    let tuple = must_get(saver, &got).await;
    assert_eq!(tuple.config.checkpoint_ns, "child:abc");
    assert_eq!(tuple.checkpoint.id, cp.id);
}

pub async fn put_default_namespace(saver: &dyn CheckpointSaver) {
    let t = thread();
    let cp = checkpoint(&[], &[]);
    put(saver, &config(&t), &cp, &metadata(Loop, 0)).await;
    let tuple = must_get(saver, &config(&t)).await;
    assert_eq!(tuple.checkpoint.id, cp.id);
}

pub async fn put_multiple_checkpoints_same_thread(saver: &dyn CheckpointSaver) {
    let t = thread();
    let configs = chain(saver, &t, "", 3).await;
    for (i, c) in configs.iter().enumerate() {
        let tuple = must_get(saver, c).await;
        assert_eq!(tuple.checkpoint.id, c.checkpoint_id.clone().unwrap());
        assert_eq!(
            tuple.checkpoint.channel_values["step"],
            Value::Int(i as i64)
        );
    }
}

pub async fn put_multiple_threads_isolated(saver: &dyn CheckpointSaver) {
    let (t1, t2) = (thread(), thread());
    let cp1 = checkpoint(&[("ch", "one".into())], &[("ch", 1)]);
    let cp2 = checkpoint(&[("ch", "two".into())], &[("ch", 1)]);
    put(saver, &config(&t1), &cp1, &metadata(Loop, 0)).await;
    put(saver, &config(&t2), &cp2, &metadata(Loop, 0)).await;
    let a = must_get(saver, &config(&t1)).await;
    let b = must_get(saver, &config(&t2)).await;
    assert_eq!(a.checkpoint.channel_values["ch"], Value::from("one"));
    assert_eq!(b.checkpoint.channel_values["ch"], Value::from("two"));
}

pub async fn put_parent_config(saver: &dyn CheckpointSaver) {
    let t = thread();
    let configs = chain(saver, &t, "", 2).await;
    let second = must_get(saver, &configs[1]).await;
    let parent = second
        .parent_config
        .expect("second checkpoint has a parent");
    assert_eq!(parent.checkpoint_id, configs[0].checkpoint_id);
    assert_eq!(parent.thread_id, t);
}

pub async fn put_incremental_channel_update(saver: &dyn CheckpointSaver) {
    let t = thread();
    let cp1 = checkpoint(
        &[("a", "v1".into()), ("b", "v2".into())],
        &[("a", 1), ("b", 1)],
    );
    let c1 = put(saver, &config(&t), &cp1, &metadata(Loop, 0)).await;
    let cp2 = checkpoint(
        &[("a", "v1_updated".into()), ("b", "v2".into())],
        &[("a", 2), ("b", 1)],
    );
    let c2 = saver
        .put(&c1, &cp2, &metadata(Loop, 1), &versions_of(&[("a", 2)]))
        .await
        .expect("put");
    let second = must_get(saver, &c2).await;
    assert_eq!(
        second.checkpoint.channel_values["a"],
        Value::from("v1_updated")
    );
    assert_eq!(second.checkpoint.channel_values["b"], Value::from("v2"));
    let first = must_get(saver, &c1).await;
    assert_eq!(first.checkpoint.channel_values["a"], Value::from("v1"));
    assert_eq!(first.checkpoint.channel_values["b"], Value::from("v2"));
}

pub async fn put_new_channel_added(saver: &dyn CheckpointSaver) {
    let t = thread();
    let cp1 = checkpoint(&[("a", "v1".into())], &[("a", 1)]);
    let c1 = put(saver, &config(&t), &cp1, &metadata(Loop, 0)).await;
    let cp2 = checkpoint(
        &[("a", "v1".into()), ("b", "new".into())],
        &[("a", 1), ("b", 1)],
    );
    let c2 = saver
        .put(&c1, &cp2, &metadata(Loop, 1), &versions_of(&[("b", 1)]))
        .await
        .expect("put");
    let second = must_get(saver, &c2).await;
    assert_eq!(second.checkpoint.channel_values["a"], Value::from("v1"));
    assert_eq!(second.checkpoint.channel_values["b"], Value::from("new"));
}

pub async fn put_channel_removed(saver: &dyn CheckpointSaver) {
    let t = thread();
    let cp1 = checkpoint(
        &[("a", "v1".into()), ("b", "v2".into())],
        &[("a", 1), ("b", 1)],
    );
    let c1 = put(saver, &config(&t), &cp1, &metadata(Loop, 0)).await;
    let cp2 = checkpoint(&[("a", "v1_new".into())], &[("a", 2)]);
    let c2 = saver
        .put(&c1, &cp2, &metadata(Loop, 1), &versions_of(&[("a", 2)]))
        .await
        .expect("put");
    let second = must_get(saver, &c2).await;
    assert_eq!(second.checkpoint.channel_values["a"], Value::from("v1_new"));
    assert!(!second.checkpoint.channel_values.contains_key("b"));
}

pub async fn put_preserves_run_id(saver: &dyn CheckpointSaver) {
    let t = thread();
    let run = run_id();
    let cp = checkpoint(&[], &[]);
    let got = put(
        saver,
        &config(&t),
        &cp,
        &metadata(Loop, 0).with("run_id", run.as_str()),
    )
    .await;
    let tuple = must_get(saver, &got).await;
    assert_eq!(tuple.metadata.run_id(), Some(run.as_str()));
}

pub async fn put_preserves_versions_seen_values(saver: &dyn CheckpointSaver) {
    let t = thread();
    let mut cp = checkpoint(&[], &[]);
    cp.versions_seen
        .insert("node1", versions_of(&[("a", 1), ("b", 2)]));
    cp.versions_seen.insert("node2", versions_of(&[("c", 3)]));
    let got = put(saver, &config(&t), &cp, &metadata(Loop, 0)).await;
    let seen = must_get(saver, &got).await.checkpoint.versions_seen.clone();
    assert_eq!(seen["node1"]["a"].counter(), 1);
    assert_eq!(seen["node1"]["b"].counter(), 2);
    assert_eq!(seen["node2"]["c"].counter(), 3);
}
