//! `delete_for_runs` (extended): removing the checkpoints of runs.

use super::*;
use stategraph_checkpoint::{CheckpointSource::*, ListOptions};

/// Puts one checkpoint tagged with `run` (chained onto `parent` if given).
async fn tagged(
    saver: &dyn CheckpointSaver,
    parent: &CheckpointConfig,
    run: &str,
    step: i64,
) -> CheckpointConfig {
    let meta = metadata(Loop, step).with("run_id", run);
    put(saver, parent, &checkpoint(&[], &[]), &meta).await
}

pub async fn delete_for_runs_single(saver: &dyn CheckpointSaver) {
    require!(saver, delete_for_runs, saver.delete_for_runs(&[run_id()]));
    let t = thread();
    let (r1, r2) = (run_id(), run_id());
    let c1 = tagged(saver, &config(&t), &r1, 0).await;
    let c2 = tagged(saver, &c1, &r2, 1).await;
    saver
        .delete_for_runs(std::slice::from_ref(&r1))
        .await
        .unwrap();
    let left = saver.list(&ListOptions::thread(&t)).await.unwrap();
    assert_eq!(ids(&left), [c2.checkpoint_id.clone().unwrap()]);
    assert!(
        left.iter()
            .all(|l| l.metadata.run_id() != Some(r1.as_str()))
    );
}

pub async fn delete_for_runs_multiple(saver: &dyn CheckpointSaver) {
    require!(saver, delete_for_runs, saver.delete_for_runs(&[run_id()]));
    let t = thread();
    let (r1, r2, r3) = (run_id(), run_id(), run_id());
    let c1 = tagged(saver, &config(&t), &r1, 0).await;
    let c2 = tagged(saver, &c1, &r2, 1).await;
    let c3 = tagged(saver, &c2, &r3, 2).await;
    saver.delete_for_runs(&[r1, r2]).await.unwrap();
    let left = saver.list(&ListOptions::thread(&t)).await.unwrap();
    assert_eq!(ids(&left), [c3.checkpoint_id.unwrap()]);
}

pub async fn delete_for_runs_preserves_other_runs(saver: &dyn CheckpointSaver) {
    require!(saver, delete_for_runs, saver.delete_for_runs(&[run_id()]));
    let (t1, t2) = (thread(), thread());
    let (r1, r2) = (run_id(), run_id());
    tagged(saver, &config(&t1), &r1, 0).await;
    let keep = tagged(saver, &config(&t2), &r2, 0).await;
    saver.delete_for_runs(&[r1]).await.unwrap();
    assert!(saver.get_tuple(&config(&t1)).await.unwrap().is_none());
    assert_eq!(must_get(saver, &config(&t2)).await.config, keep);
}

pub async fn delete_for_runs_removes_writes(saver: &dyn CheckpointSaver) {
    require!(saver, delete_for_runs, saver.delete_for_runs(&[run_id()]));
    let t = thread();
    let r1 = run_id();
    let c = tagged(saver, &config(&t), &r1, 0).await;
    write(saver, &c, "ch", "v").await;
    saver.delete_for_runs(&[r1]).await.unwrap();
    assert!(saver.get_tuple(&c).await.unwrap().is_none());
    let mut again = checkpoint(&[], &[]);
    again.id = c.checkpoint_id.clone().unwrap();
    put(saver, &config(&t), &again, &metadata(Loop, 0)).await;
    assert!(
        must_get(saver, &c).await.pending_writes.is_empty(),
        "writes went with the run"
    );
}

pub async fn delete_for_runs_empty_list_noop(saver: &dyn CheckpointSaver) {
    require!(saver, delete_for_runs, saver.delete_for_runs(&[run_id()]));
    let t = thread();
    tagged(saver, &config(&t), &run_id(), 0).await;
    saver.delete_for_runs(&[]).await.unwrap();
    assert_eq!(saver.list(&ListOptions::thread(&t)).await.unwrap().len(), 1);
}

pub async fn delete_for_runs_nonexistent_noop(saver: &dyn CheckpointSaver) {
    require!(saver, delete_for_runs, saver.delete_for_runs(&[run_id()]));
    let t = thread();
    tagged(saver, &config(&t), &run_id(), 0).await;
    saver.delete_for_runs(&[run_id()]).await.unwrap();
    assert_eq!(saver.list(&ListOptions::thread(&t)).await.unwrap().len(), 1);
}

pub async fn delete_for_runs_across_namespaces(saver: &dyn CheckpointSaver) {
    require!(saver, delete_for_runs, saver.delete_for_runs(&[run_id()]));
    let t = thread();
    let r1 = run_id();
    tagged(saver, &config(&t), &r1, 0).await;
    tagged(saver, &config(&t).with_ns("child:1"), &r1, 0).await;
    let other = tagged(saver, &config(&t).with_ns("child:2"), &run_id(), 0).await;
    saver.delete_for_runs(&[r1]).await.unwrap();
    assert!(saver.get_tuple(&config(&t)).await.unwrap().is_none());
    assert!(
        saver
            .get_tuple(&config(&t).with_ns("child:1"))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(must_get(saver, &other).await.config, other);
}
