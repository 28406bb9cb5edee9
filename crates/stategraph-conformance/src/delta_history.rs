//! `get_delta_channel_history` (extended): what delta channels are rebuilt from.

use super::*;
use std::collections::BTreeMap;

use stategraph_value::{Ext, ExtCode};

/// A parent chain of `total` checkpoints in a new thread: at the steps in `snapshots`,
/// `channel` stores `_DeltaSnapshot(step)` (version `step + 1`); every other step stores the
/// write `(channel, step)` under a fresh task id. Returns the configs, oldest first.
async fn delta_chain(
    saver: &dyn CheckpointSaver,
    channel: &str,
    snapshots: &[i64],
    total: i64,
) -> Vec<CheckpointConfig> {
    let t = thread();
    let mut out: Vec<CheckpointConfig> = Vec::new();
    for step in 0..total {
        let snap = snapshots.contains(&step);
        let cp = if snap {
            let v = Value::Ext(Ext::delta_snapshot(&Value::Int(step)));
            checkpoint(&[(channel, v)], &[(channel, step + 1)])
        } else {
            checkpoint(&[], &[])
        };
        let at = put_after(saver, &t, out.last(), &cp, step).await;
        if !snap {
            write_as(saver, &at, &uuid6(None), "", &[(channel, Value::Int(step))]).await;
        }
        out.push(at);
    }
    out
}

/// Puts `cp` at `step` in thread `t`, child of `parent`.
async fn put_after(
    saver: &dyn CheckpointSaver,
    t: &str,
    parent: Option<&CheckpointConfig>,
    cp: &Checkpoint,
    step: i64,
) -> CheckpointConfig {
    let mut at = config(t);
    if let Some(p) = parent {
        at.checkpoint_id.clone_from(&p.checkpoint_id);
    }
    put(saver, &at, cp, &metadata(CheckpointSource::Loop, step)).await
}

async fn write_as(
    saver: &dyn CheckpointSaver,
    at: &CheckpointConfig,
    task_id: &str,
    task_path: &str,
    writes: &[(&str, Value)],
) {
    let writes: Vec<(String, Value)> = writes
        .iter()
        .map(|(c, v)| ((*c).to_owned(), v.clone()))
        .collect();
    saver
        .put_writes(at, &writes, task_id, task_path)
        .await
        .expect("put_writes");
}

async fn history(
    saver: &dyn CheckpointSaver,
    at: &CheckpointConfig,
    channels: &[&str],
) -> BTreeMap<String, stategraph_checkpoint::DeltaChannelHistory> {
    let channels: Vec<String> = channels.iter().map(|c| (*c).to_owned()).collect();
    saver
        .get_delta_channel_history(at, &channels)
        .await
        .expect("get_delta_channel_history")
}

fn values(h: &stategraph_checkpoint::DeltaChannelHistory) -> Vec<Value> {
    h.writes.iter().map(|w| w.value.clone()).collect()
}

/// A seed is a `_DeltaSnapshot(v)` or the plain value `v`.
fn unwrap_seed(seed: &Value) -> Value {
    match seed {
        Value::Ext(e) if e.code() == ExtCode::DeltaSnapshot as i8 => {
            e.payload().expect("a readable snapshot")
        }
        other => other.clone(),
    }
}

pub async fn delta_history_writes_oldest_first(saver: &dyn CheckpointSaver) {
    let c = delta_chain(saver, "ch", &[0], 5).await;
    let h = history(saver, &c[4], &["ch"]).await;
    assert_eq!(values(&h["ch"]), [1, 2, 3].map(Value::Int));
    assert_eq!(h["ch"].seed.as_ref().map(unwrap_seed), Some(Value::Int(0)));
}

pub async fn delta_history_seed_is_nearest_snapshot(saver: &dyn CheckpointSaver) {
    let c = delta_chain(saver, "ch", &[0, 3], 6).await;
    let h = history(saver, &c[5], &["ch"]).await;
    let seed = h["ch"].seed.as_ref().expect("the snapshot at step 3");
    assert_eq!(unwrap_seed(seed), Value::Int(3));
    assert_eq!(values(&h["ch"]), [Value::Int(4)]);
}

pub async fn delta_history_excludes_target_writes(saver: &dyn CheckpointSaver) {
    let c = delta_chain(saver, "ch", &[0], 3).await;
    write_as(
        saver,
        &c[2],
        &uuid6(None),
        "",
        &[("ch", Value::from("extra"))],
    )
    .await;
    let h = history(saver, &c[2], &["ch"]).await;
    assert_eq!(values(&h["ch"]), [Value::Int(1)]);
}

pub async fn delta_history_multi_channel(saver: &dyn CheckpointSaver) {
    let t = thread();
    let mut out: Vec<CheckpointConfig> = Vec::new();
    for step in 0..5 {
        let cp = match step {
            1 => checkpoint(
                &[("a", Value::Ext(Ext::delta_snapshot(&Value::from("snap_a"))))],
                &[("a", 2)],
            ),
            3 => checkpoint(
                &[("b", Value::Ext(Ext::delta_snapshot(&Value::from("snap_b"))))],
                &[("b", 4)],
            ),
            _ => checkpoint(&[], &[]),
        };
        let at = put_after(saver, &t, out.last(), &cp, step).await;
        write_as(
            saver,
            &at,
            &uuid6(None),
            "",
            &[("a", Value::Int(step)), ("b", Value::Int(step))],
        )
        .await;
        out.push(at);
    }
    let h = history(saver, &out[4], &["a", "b"]).await;
    assert_eq!(values(&h["a"]), [1, 2, 3].map(Value::Int));
    assert_eq!(values(&h["b"]), [Value::Int(3)]);
    assert_eq!(
        h["a"].seed.as_ref().map(unwrap_seed),
        Some(Value::from("snap_a"))
    );
    assert_eq!(
        h["b"].seed.as_ref().map(unwrap_seed),
        Some(Value::from("snap_b"))
    );
}

pub async fn delta_history_no_channels_is_empty(saver: &dyn CheckpointSaver) {
    let c = delta_chain(saver, "ch", &[0], 3).await;
    assert!(history(saver, &c[2], &[]).await.is_empty());
}

pub async fn delta_history_walk_to_root_has_no_seed(saver: &dyn CheckpointSaver) {
    let c = delta_chain(saver, "ch", &[], 4).await;
    let h = history(saver, &c[3], &["ch"]).await;
    assert_eq!(h["ch"].seed, None);
    assert_eq!(values(&h["ch"]), [0, 1, 2].map(Value::Int));
}

/// Threads from before a channel became a delta channel store plain values: the nearest one
/// is the seed.
pub async fn delta_history_plain_value_is_a_seed(saver: &dyn CheckpointSaver) {
    let t = thread();
    let plain = Value::from(vec![Value::Int(10), Value::Int(20), Value::Int(30)]);
    let mut out: Vec<CheckpointConfig> = Vec::new();
    for step in 0..4 {
        let cp = if step == 1 {
            checkpoint(&[("ch", plain.clone())], &[("ch", 2)])
        } else {
            checkpoint(&[], &[])
        };
        let at = put_after(saver, &t, out.last(), &cp, step).await;
        if step != 1 {
            write_as(saver, &at, &uuid6(None), "", &[("ch", Value::Int(step))]).await;
        }
        out.push(at);
    }
    let h = history(saver, &out[3], &["ch"]).await;
    assert_eq!(h["ch"].seed, Some(plain));
    assert_eq!(values(&h["ch"]), [Value::Int(2)]);
}

/// The writes stored at the seed's checkpoint made its child, so they are replayed; older
/// ones are not, nor the target's.
pub async fn delta_history_seed_checkpoint_writes_are_replayed(saver: &dyn CheckpointSaver) {
    let t = thread();
    let labels = [
        "older-than-seed",
        "at-seed",
        "after-seed",
        "pending-at-head",
    ];
    let mut out: Vec<CheckpointConfig> = Vec::new();
    for (step, label) in (0..).zip(labels) {
        let cp = match step {
            0 => checkpoint(&[("ch", Value::from(vec![Value::Int(10)]))], &[("ch", 1)]),
            1 => checkpoint(
                &[("ch", Value::from(vec![Value::Int(10), Value::Int(20)]))],
                &[("ch", 2)],
            ),
            _ => checkpoint(&[], &[]),
        };
        let at = put_after(saver, &t, out.last(), &cp, step).await;
        write_as(saver, &at, &uuid6(None), "", &[("ch", Value::from(label))]).await;
        out.push(at);
    }
    let h = history(saver, &out[3], &["ch"]).await;
    assert_eq!(
        h["ch"].seed,
        Some(Value::from(vec![Value::Int(10), Value::Int(20)]))
    );
    assert_eq!(
        values(&h["ch"]),
        [Value::from("at-seed"), Value::from("after-seed")]
    );
}

const SORTS_FIRST: &str = "00000000-0000-0000-0000-000000000000";
const SORTS_LAST: &str = "ffffffff-ffff-ffff-ffff-ffffffffffff";

/// Parallel tasks' writes replay in task path order, not task id order.
pub async fn delta_history_orders_writes_by_task_path(saver: &dyn CheckpointSaver) {
    let c = delta_chain(saver, "ch", &[0], 3).await;
    write_as(
        saver,
        &c[1],
        SORTS_FIRST,
        "~pull, 02",
        &[("ch", Value::from("second"))],
    )
    .await;
    write_as(
        saver,
        &c[1],
        SORTS_LAST,
        "~pull, 01",
        &[("ch", Value::from("first"))],
    )
    .await;
    let h = history(saver, &c[2], &["ch"]).await;
    assert_eq!(
        values(&h["ch"]),
        [Value::Int(1), Value::from("first"), Value::from("second")]
    );
}

/// Writes without a task path (graph input) replay before task writes.
pub async fn delta_history_orders_pathless_writes_first(saver: &dyn CheckpointSaver) {
    let c = delta_chain(saver, "ch", &[0], 3).await;
    write_as(
        saver,
        &c[1],
        SORTS_FIRST,
        "~pull, a",
        &[("ch", Value::from("from_node"))],
    )
    .await;
    write_as(
        saver,
        &c[1],
        SORTS_LAST,
        "",
        &[("ch", Value::from("from_input"))],
    )
    .await;
    let h = history(saver, &c[2], &["ch"]).await;
    assert_eq!(
        values(&h["ch"]),
        [
            Value::Int(1),
            Value::from("from_input"),
            Value::from("from_node")
        ]
    );
}

/// On a forked thread only the checkpoints on the target's path count.
pub async fn delta_history_follows_the_parent_chain(saver: &dyn CheckpointSaver) {
    let c = delta_chain(saver, "ch", &[0], 3).await;
    // A sibling of c[2] under c[1], with writes of its own that must not leak in.
    let t = c[0].thread_id.clone();
    let sibling = put_after(saver, &t, Some(&c[1]), &checkpoint(&[], &[]), 2).await;
    write_as(
        saver,
        &sibling,
        &uuid6(None),
        "",
        &[("ch", Value::from("other branch"))],
    )
    .await;
    let child = put_after(saver, &t, Some(&sibling), &checkpoint(&[], &[]), 3).await;
    let h = history(saver, &child, &["ch"]).await;
    assert_eq!(
        values(&h["ch"]),
        [Value::Int(1), Value::from("other branch")]
    );
    let h = history(saver, &c[2], &["ch"]).await;
    assert_eq!(values(&h["ch"]), [Value::Int(1)]);
}
