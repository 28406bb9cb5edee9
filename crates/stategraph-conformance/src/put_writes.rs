//! `put_writes`: storing the writes of tasks.

use super::*;
use stategraph_checkpoint::{CheckpointSource::*, value};

/// One root checkpoint in a new thread; returns its config.
async fn one(saver: &dyn CheckpointSaver) -> CheckpointConfig {
    let cp = checkpoint(&[], &[]);
    put(saver, &config(&thread()), &cp, &metadata(Loop, 0)).await
}

fn w(channel: &str, value: Value) -> (String, Value) {
    (channel.to_owned(), value)
}

pub async fn put_writes_basic(saver: &dyn CheckpointSaver) {
    let c = one(saver).await;
    saver
        .put_writes(&c, &[w("channel1", "value1".into())], "task1", "")
        .await
        .unwrap();
    let writes = must_get(saver, &c).await.pending_writes;
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].task_id, "task1");
    assert_eq!(writes[0].channel, "channel1");
    assert_eq!(writes[0].value, Value::from("value1"));
}

pub async fn put_writes_multiple_writes_same_task(saver: &dyn CheckpointSaver) {
    let c = one(saver).await;
    let batch = [
        w("ch1", "v1".into()),
        w("ch2", "v2".into()),
        w("ch3", "v3".into()),
    ];
    saver.put_writes(&c, &batch, "task1", "").await.unwrap();
    let writes = must_get(saver, &c).await.pending_writes;
    assert_eq!(writes.len(), 3);
    for (i, (ch, v)) in batch.iter().enumerate() {
        assert_eq!(&writes[i].channel, ch);
        assert_eq!(&writes[i].value, v);
        assert_eq!(writes[i].idx, i as i64);
    }
}

pub async fn put_writes_multiple_tasks(saver: &dyn CheckpointSaver) {
    let c = one(saver).await;
    saver
        .put_writes(&c, &[w("ch", "from1".into())], "task1", "")
        .await
        .unwrap();
    saver
        .put_writes(&c, &[w("ch", "from2".into())], "task2", "")
        .await
        .unwrap();
    let writes = must_get(saver, &c).await.pending_writes;
    assert_eq!(writes.len(), 2);
    let mut tasks: Vec<_> = writes.iter().map(|w| w.task_id.as_str()).collect();
    tasks.sort_unstable();
    assert_eq!(tasks, ["task1", "task2"]);
}

pub async fn put_writes_preserves_task_id(saver: &dyn CheckpointSaver) {
    let c = one(saver).await;
    let task = uuid6(None);
    saver
        .put_writes(&c, &[w("ch", Value::Int(1))], &task, "")
        .await
        .unwrap();
    assert_eq!(must_get(saver, &c).await.pending_writes[0].task_id, task);
}

pub async fn put_writes_preserves_channel_and_value(saver: &dyn CheckpointSaver) {
    let c = one(saver).await;
    saver
        .put_writes(&c, &[w("my_channel", value!({"data": 123}))], "task1", "")
        .await
        .unwrap();
    let writes = must_get(saver, &c).await.pending_writes;
    assert_eq!(writes[0].channel, "my_channel");
    assert_eq!(writes[0].value, value!({"data": 123}));
}

pub async fn put_writes_task_path(saver: &dyn CheckpointSaver) {
    let c = one(saver).await;
    saver
        .put_writes(&c, &[w("ch", "v".into())], "task1", "a:b:c")
        .await
        .unwrap();
    let writes = must_get(saver, &c).await.pending_writes;
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].task_path, "a:b:c");
}

pub async fn put_writes_idempotent(saver: &dyn CheckpointSaver) {
    let c = one(saver).await;
    for _ in 0..2 {
        saver
            .put_writes(&c, &[w("ch", "val".into())], "task1", "")
            .await
            .unwrap();
    }
    assert_eq!(must_get(saver, &c).await.pending_writes.len(), 1);
}

pub async fn put_writes_special_channels(saver: &dyn CheckpointSaver) {
    let c = one(saver).await;
    let batch = [
        w("__error__", "something went wrong".into()),
        w("__interrupt__", value!({"reason": "human_input"})),
    ];
    saver.put_writes(&c, &batch, "task1", "").await.unwrap();
    let writes = must_get(saver, &c).await.pending_writes;
    assert_eq!(writes.len(), 2);
    let err = writes.iter().find(|w| w.channel == "__error__").unwrap();
    assert_eq!(err.value, Value::from("something went wrong"));
    assert_eq!(err.idx, -1);
    let int = writes
        .iter()
        .find(|w| w.channel == "__interrupt__")
        .unwrap();
    assert_eq!(int.value, value!({"reason": "human_input"}));
    assert_eq!(int.idx, -3);
}

pub async fn put_writes_across_namespaces(saver: &dyn CheckpointSaver) {
    let t = thread();
    let root = empty(saver, &config(&t)).await;
    let child = empty(saver, &config(&t).with_ns("child:1")).await;
    saver
        .put_writes(&root, &[w("ch", "root".into())], "task1", "")
        .await
        .unwrap();
    saver
        .put_writes(&child, &[w("ch", "child".into())], "task2", "")
        .await
        .unwrap();
    let r = must_get(saver, &root).await.pending_writes;
    let c = must_get(saver, &child).await.pending_writes;
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].value, Value::from("root"));
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].value, Value::from("child"));
}

pub async fn put_writes_cleared_on_next_checkpoint(saver: &dyn CheckpointSaver) {
    let t = thread();
    let c1 = empty(saver, &config(&t)).await;
    saver
        .put_writes(&c1, &[w("ch", "v".into())], "task1", "")
        .await
        .unwrap();
    let c2 = put(saver, &c1, &checkpoint(&[], &[]), &metadata(Loop, 1)).await;
    assert!(must_get(saver, &c2).await.pending_writes.is_empty());
    assert_eq!(must_get(saver, &c1).await.pending_writes.len(), 1);
}
