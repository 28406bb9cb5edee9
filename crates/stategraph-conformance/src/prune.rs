//! `prune` (extended): dropping old checkpoints.

use super::*;
use stategraph_checkpoint::{ListOptions, PruneStrategy};

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

pub async fn prune_keep_last(saver: &dyn CheckpointSaver) {
    require!(
        saver,
        prune,
        saver.prune(&[thread()], PruneStrategy::KeepLast(2))
    );
    let t = thread();
    let configs = chain(saver, &t, "", 5).await;
    saver
        .prune(std::slice::from_ref(&t), PruneStrategy::KeepLast(2))
        .await
        .unwrap();
    let left = all(saver, &t).await;
    assert_eq!(
        ids(&left),
        [
            configs[4].checkpoint_id.clone().unwrap(),
            configs[3].checkpoint_id.clone().unwrap()
        ]
    );
    assert_eq!(
        left[0].parent_config.as_ref().unwrap().checkpoint_id,
        configs[3].checkpoint_id
    );
    assert!(
        left[1].parent_config.is_none(),
        "the deleted parent is unlinked"
    );
}

pub async fn prune_older_than(saver: &dyn CheckpointSaver) {
    let cutoff = std::time::SystemTime::now();
    require!(
        saver,
        prune,
        saver.prune(&[thread()], PruneStrategy::OlderThan(cutoff))
    );
    let t = thread();
    let old = chain(saver, &t, "", 2).await;
    let cutoff = std::time::SystemTime::now();
    let mut parent = config(&t);
    parent.checkpoint_id.clone_from(&old[1].checkpoint_id);
    let newer = put(
        saver,
        &parent,
        &checkpoint(&[("step", Value::Int(2))], &[("step", 3)]),
        &metadata(CheckpointSource::Loop, 2),
    )
    .await;
    saver
        .prune(std::slice::from_ref(&t), PruneStrategy::OlderThan(cutoff))
        .await
        .unwrap();
    assert_eq!(ids(&all(saver, &t).await), [newer.checkpoint_id.unwrap()]);
    // The newest checkpoint stays however old it is.
    let t2 = thread();
    let only = chain(saver, &t2, "", 2).await;
    saver
        .prune(
            std::slice::from_ref(&t2),
            PruneStrategy::OlderThan(std::time::SystemTime::now()),
        )
        .await
        .unwrap();
    assert_eq!(
        ids(&all(saver, &t2).await),
        [only[1].checkpoint_id.clone().unwrap()]
    );
}

pub async fn prune_abandoned_branches(saver: &dyn CheckpointSaver) {
    require!(
        saver,
        prune,
        saver.prune(&[thread()], PruneStrategy::AbandonedBranches)
    );
    let t = thread();
    let at = |id: &CheckpointConfig| {
        let mut c = config(&t);
        c.checkpoint_id.clone_from(&id.checkpoint_id);
        c
    };
    let step = |i: i64| checkpoint(&[("step", Value::Int(i))], &[("step", i + 1)]);
    let main = chain(saver, &t, "", 2).await;
    let loop_at = |i| metadata(CheckpointSource::Loop, i);
    // Two abandoned branches from main[0]: b1 → b2, and a newer b1x at the same step as b1.
    let b1 = put(saver, &at(&main[0]), &step(1), &loop_at(1)).await;
    let b2 = put(saver, &at(&b1), &step(2), &loop_at(2)).await;
    let b1x = put(saver, &at(&main[0]), &step(1), &loop_at(1)).await;
    // The newest checkpoint continues the main line.
    let head = put(saver, &at(&main[1]), &step(2), &loop_at(2)).await;
    saver
        .prune(std::slice::from_ref(&t), PruneStrategy::AbandonedBranches)
        .await
        .unwrap();
    let mut left = ids(&all(saver, &t).await);
    left.sort();
    let mut expected: Vec<CheckpointId> = [&main[0], &main[1], &b2, &b1x, &head]
        .iter()
        .map(|c| c.checkpoint_id.clone().unwrap())
        .collect();
    expected.sort();
    assert_eq!(
        left, expected,
        "b1 goes: b1x is the newest abandoned step-1 checkpoint"
    );
    let b2_left = must_get(saver, &b2).await;
    assert!(
        b2_left.parent_config.is_none(),
        "its deleted parent is unlinked"
    );
}

pub async fn prune_idle_threads(saver: &dyn CheckpointSaver) {
    let cutoff = std::time::SystemTime::now();
    require!(
        saver,
        prune,
        saver.prune(&[thread()], PruneStrategy::IdleSince(cutoff))
    );
    let (idle, busy) = (thread(), thread());
    chain(saver, &idle, "", 2).await;
    chain(saver, &idle, "child:1", 1).await;
    let early = chain(saver, &busy, "", 2).await;
    let cutoff = std::time::SystemTime::now();
    let mut parent = config(&busy);
    parent.checkpoint_id.clone_from(&early[1].checkpoint_id);
    put(
        saver,
        &parent,
        &checkpoint(&[("step", Value::Int(2))], &[("step", 3)]),
        &metadata(CheckpointSource::Loop, 2),
    )
    .await;
    saver
        .prune(
            &[idle.clone(), busy.clone()],
            PruneStrategy::IdleSince(cutoff),
        )
        .await
        .unwrap();
    assert!(
        all(saver, &idle).await.is_empty(),
        "the idle thread is gone, every namespace"
    );
    assert_eq!(
        all(saver, &busy).await.len(),
        3,
        "the busy thread is untouched"
    );
}
