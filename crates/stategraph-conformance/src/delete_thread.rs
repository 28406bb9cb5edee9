//! `delete_thread`: removing a thread.

use super::*;
use stategraph_checkpoint::{CheckpointSource::*, ListOptions};

pub async fn delete_thread_removes_checkpoints(saver: &dyn CheckpointSaver) {
    let t = thread();
    chain(saver, &t, "", 2).await;
    saver.delete_thread(&t).await.unwrap();
    assert!(saver.get_tuple(&config(&t)).await.unwrap().is_none());
    assert!(
        saver
            .list(&ListOptions::thread(&t))
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn delete_thread_removes_writes(saver: &dyn CheckpointSaver) {
    let t = thread();
    let c = empty(saver, &config(&t)).await;
    write(saver, &c, "ch", "v").await;
    saver.delete_thread(&t).await.unwrap();
    assert!(saver.get_tuple(&c).await.unwrap().is_none());
    // A checkpoint put again under the same id must not resurrect the old writes.
    let mut again = checkpoint(&[], &[]);
    again.id = c.checkpoint_id.clone().unwrap();
    put(saver, &config(&t), &again, &metadata(Loop, 0)).await;
    assert!(must_get(saver, &c).await.pending_writes.is_empty());
}

pub async fn delete_thread_removes_all_namespaces(saver: &dyn CheckpointSaver) {
    let t = thread();
    empty(saver, &config(&t)).await;
    empty(saver, &config(&t).with_ns("child:1")).await;
    saver.delete_thread(&t).await.unwrap();
    assert!(saver.get_tuple(&config(&t)).await.unwrap().is_none());
    assert!(
        saver
            .get_tuple(&config(&t).with_ns("child:1"))
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn delete_thread_preserves_other_threads(saver: &dyn CheckpointSaver) {
    let (t1, t2) = (thread(), thread());
    chain(saver, &t1, "", 1).await;
    let keep = chain(saver, &t2, "", 2).await;
    saver.delete_thread(&t1).await.unwrap();
    let left = saver.list(&ListOptions::thread(&t2)).await.unwrap();
    assert_eq!(left.len(), 2);
    assert_eq!(must_get(saver, &config(&t2)).await.config, keep[1]);
}

pub async fn delete_thread_nonexistent_noop(saver: &dyn CheckpointSaver) {
    saver.delete_thread(&thread()).await.unwrap();
}
