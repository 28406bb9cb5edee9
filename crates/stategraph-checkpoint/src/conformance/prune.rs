//! `prune` (extended): dropping old checkpoints.

use super::*;
use crate::{ListOptions, PruneStrategy};

async fn all(saver: &dyn CheckpointSaver, t: &str) -> Vec<CheckpointTuple> {
    saver.list(&ListOptions::thread(t)).await.unwrap()
}

pub async fn prune_keep_latest_single_thread(saver: &dyn CheckpointSaver) {
    require!(
        saver,
        prune,
        saver.prune(&[thread()], PruneStrategy::KeepLatest)
    );
    let t = thread();
    let configs = chain(saver, &t, "", 4).await;
    saver
        .prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest)
        .await
        .unwrap();
    let left = all(saver, &t).await;
    assert_eq!(ids(&left), [configs[3].checkpoint_id.clone().unwrap()]);
    assert_eq!(left[0].checkpoint.channel_values["step"], Value::Int(3));
}

pub async fn prune_keep_latest_multiple_threads(saver: &dyn CheckpointSaver) {
    require!(
        saver,
        prune,
        saver.prune(&[thread()], PruneStrategy::KeepLatest)
    );
    let (t1, t2) = (thread(), thread());
    let a = chain(saver, &t1, "", 3).await;
    let b = chain(saver, &t2, "", 2).await;
    saver
        .prune(&[t1.clone(), t2.clone()], PruneStrategy::KeepLatest)
        .await
        .unwrap();
    assert_eq!(
        ids(&all(saver, &t1).await),
        [a[2].checkpoint_id.clone().unwrap()]
    );
    assert_eq!(
        ids(&all(saver, &t2).await),
        [b[1].checkpoint_id.clone().unwrap()]
    );
}

pub async fn prune_keep_latest_across_namespaces(saver: &dyn CheckpointSaver) {
    require!(
        saver,
        prune,
        saver.prune(&[thread()], PruneStrategy::KeepLatest)
    );
    let t = thread();
    let root = chain(saver, &t, "", 3).await;
    let child = chain(saver, &t, "child:1", 2).await;
    saver
        .prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest)
        .await
        .unwrap();
    let r = saver.list(&ListOptions::thread(&t).ns("")).await.unwrap();
    let c = saver
        .list(&ListOptions::thread(&t).ns("child:1"))
        .await
        .unwrap();
    assert_eq!(ids(&r), [root[2].checkpoint_id.clone().unwrap()]);
    assert_eq!(ids(&c), [child[1].checkpoint_id.clone().unwrap()]);
}

pub async fn prune_keep_latest_preserves_writes(saver: &dyn CheckpointSaver) {
    require!(
        saver,
        prune,
        saver.prune(&[thread()], PruneStrategy::KeepLatest)
    );
    let t = thread();
    let configs = chain(saver, &t, "", 3).await;
    write(saver, &configs[2], "ch", "kept").await;
    saver
        .prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest)
        .await
        .unwrap();
    let writes = must_get(saver, &config(&t)).await.pending_writes;
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].value, Value::from("kept"));
}

pub async fn prune_delete_all(saver: &dyn CheckpointSaver) {
    require!(
        saver,
        prune,
        saver.prune(&[thread()], PruneStrategy::Delete)
    );
    let t = thread();
    chain(saver, &t, "", 3).await;
    chain(saver, &t, "child:1", 1).await;
    saver
        .prune(std::slice::from_ref(&t), PruneStrategy::Delete)
        .await
        .unwrap();
    assert!(all(saver, &t).await.is_empty());
}

pub async fn prune_preserves_other_threads(saver: &dyn CheckpointSaver) {
    require!(
        saver,
        prune,
        saver.prune(&[thread()], PruneStrategy::KeepLatest)
    );
    let (t1, t2) = (thread(), thread());
    chain(saver, &t1, "", 3).await;
    chain(saver, &t2, "", 3).await;
    let before = ids(&all(saver, &t2).await);
    saver.prune(&[t1], PruneStrategy::KeepLatest).await.unwrap();
    assert_eq!(ids(&all(saver, &t2).await), before);
}

pub async fn prune_empty_list_noop(saver: &dyn CheckpointSaver) {
    require!(saver, prune, saver.prune(&[], PruneStrategy::KeepLatest));
    let t = thread();
    chain(saver, &t, "", 2).await;
    saver.prune(&[], PruneStrategy::KeepLatest).await.unwrap();
    assert_eq!(all(saver, &t).await.len(), 2);
}

pub async fn prune_nonexistent_noop(saver: &dyn CheckpointSaver) {
    require!(
        saver,
        prune,
        saver.prune(&[thread()], PruneStrategy::KeepLatest)
    );
    let t = thread();
    chain(saver, &t, "", 2).await;
    saver
        .prune(&[thread()], PruneStrategy::KeepLatest)
        .await
        .unwrap();
    saver
        .prune(&[thread()], PruneStrategy::Delete)
        .await
        .unwrap();
    assert_eq!(all(saver, &t).await.len(), 2);
}
