//! `get_tuple`: reading one checkpoint.

use super::*;
use stategraph_checkpoint::CheckpointSource::*;

pub async fn get_tuple_nonexistent_returns_none(saver: &dyn CheckpointSaver) {
    assert!(saver.get_tuple(&config(&thread())).await.unwrap().is_none());
}

pub async fn get_tuple_latest_when_no_checkpoint_id(saver: &dyn CheckpointSaver) {
    let t = thread();
    let configs = chain(saver, &t, "", 3).await;
    let latest = must_get(saver, &config(&t)).await;
    assert_eq!(
        Some(&latest.checkpoint.id),
        configs[2].checkpoint_id.as_ref()
    );
    assert_eq!(latest.metadata.step, Some(2));
}

pub async fn get_tuple_specific_checkpoint_id(saver: &dyn CheckpointSaver) {
    let t = thread();
    let configs = chain(saver, &t, "", 3).await;
    let first = must_get(saver, &configs[0]).await;
    assert_eq!(
        Some(&first.checkpoint.id),
        configs[0].checkpoint_id.as_ref()
    );
}

pub async fn get_tuple_config_structure(saver: &dyn CheckpointSaver) {
    let t = thread();
    let cp = checkpoint(&[], &[]);
    put(saver, &config(&t), &cp, &metadata(Loop, 0)).await;
    let tuple = must_get(saver, &config(&t)).await;
    assert_eq!(tuple.config.thread_id, t);
    assert_eq!(tuple.config.checkpoint_ns, "");
    assert_eq!(tuple.config.checkpoint_id.as_deref(), Some(cp.id.as_str()));
}

pub async fn get_tuple_checkpoint_fields(saver: &dyn CheckpointSaver) {
    let t = thread();
    let cp = checkpoint(&[("k", "v".into())], &[("k", 1)]);
    put(saver, &config(&t), &cp, &metadata(Loop, 0)).await;
    let got = must_get(saver, &config(&t)).await.checkpoint;
    assert_eq!(got.id, cp.id);
    assert_eq!(got.v, 1, "the format version is stored as given");
    assert!(!got.ts.is_empty());
    assert_eq!(got.channel_values.len(), 1);
    assert_eq!(got.channel_values["k"], Value::from("v"));
    assert!(got.channel_versions.contains_key("k"));
}

pub async fn get_tuple_metadata(saver: &dyn CheckpointSaver) {
    let t = thread();
    put(
        saver,
        &config(&t),
        &checkpoint(&[], &[]),
        &metadata(Input, -1),
    )
    .await;
    let meta = must_get(saver, &config(&t)).await.metadata;
    assert_eq!(meta.source, Some(Input));
    assert_eq!(meta.step, Some(-1));
}

pub async fn get_tuple_parent_config(saver: &dyn CheckpointSaver) {
    let t = thread();
    let configs = chain(saver, &t, "", 2).await;
    assert!(must_get(saver, &configs[0]).await.parent_config.is_none());
    let second = must_get(saver, &configs[1]).await;
    assert_eq!(
        second.parent_config.and_then(|p| p.checkpoint_id),
        configs[0].checkpoint_id
    );
}

pub async fn get_tuple_pending_writes(saver: &dyn CheckpointSaver) {
    let t = thread();
    let c = empty(saver, &config(&t)).await;
    write(saver, &c, "ch", "val").await;
    let writes = must_get(saver, &c).await.pending_writes;
    assert_eq!(writes.len(), 1);
    assert_eq!(
        (
            writes[0].task_id.as_str(),
            writes[0].channel.as_str(),
            &writes[0].value
        ),
        ("task1", "ch", &Value::from("val"))
    );
}

pub async fn get_tuple_respects_namespace(saver: &dyn CheckpointSaver) {
    let t = thread();
    let root_cp = checkpoint(&[("who", "root".into())], &[("who", 1)]);
    let child_cp = checkpoint(&[("who", "child".into())], &[("who", 1)]);
    put(saver, &config(&t), &root_cp, &metadata(Loop, 0)).await;
    put(
        saver,
        &config(&t).with_ns("child:1"),
        &child_cp,
        &metadata(Loop, 0),
    )
    .await;
    let root = must_get(saver, &config(&t)).await;
    let child = must_get(saver, &config(&t).with_ns("child:1")).await;
    assert_eq!(root.checkpoint.id, root_cp.id);
    assert_eq!(child.checkpoint.id, child_cp.id);
    assert_eq!(child.checkpoint.channel_values["who"], Value::from("child"));
    assert_eq!(child.config.checkpoint_ns, "child:1");
}

pub async fn get_tuple_nonexistent_checkpoint_id(saver: &dyn CheckpointSaver) {
    let t = thread();
    empty(saver, &config(&t)).await;
    let missing = config(&t).with_checkpoint_id(uuid6(Some(-1)));
    assert!(saver.get_tuple(&missing).await.unwrap().is_none());
}
