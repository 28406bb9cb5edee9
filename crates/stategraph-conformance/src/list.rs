//! `list`: searching checkpoints.

use super::*;
use stategraph_checkpoint::{CheckpointSource::*, ListOptions};

/// LangGraph's list fixture: 4 chained checkpoints with sources input, loop, input, loop at
/// steps 0–3. Returns the thread and the ids, oldest first.
async fn four(saver: &dyn CheckpointSaver) -> (String, Vec<CheckpointId>) {
    let t = thread();
    let mut parent = config(&t);
    let mut ids = Vec::new();
    for (step, source) in [Input, Loop, Input, Loop].into_iter().enumerate() {
        let cp = checkpoint(
            &[("step", Value::Int(step as i64))],
            &[("step", step as i64 + 1)],
        );
        parent = put(saver, &parent, &cp, &metadata(source, step as i64)).await;
        ids.push(cp.id);
    }
    (t, ids)
}

async fn list(saver: &dyn CheckpointSaver, options: ListOptions) -> Vec<CheckpointTuple> {
    saver.list(&options).await.expect("list")
}

pub async fn list_all(saver: &dyn CheckpointSaver) {
    let (t, _) = four(saver).await;
    assert_eq!(list(saver, ListOptions::thread(&t)).await.len(), 4);
}

pub async fn list_by_thread(saver: &dyn CheckpointSaver) {
    let (t, _) = four(saver).await;
    assert!(list(saver, ListOptions::thread(thread())).await.is_empty());
    assert_eq!(list(saver, ListOptions::thread(&t)).await.len(), 4);
}

pub async fn list_by_namespace(saver: &dyn CheckpointSaver) {
    let t = thread();
    empty(saver, &config(&t)).await;
    empty(saver, &config(&t).with_ns("child:1")).await;
    assert_eq!(list(saver, ListOptions::thread(&t).ns("")).await.len(), 1);
    let child = list(saver, ListOptions::thread(&t).ns("child:1")).await;
    assert_eq!(child.len(), 1);
    assert_eq!(child[0].config.checkpoint_ns, "child:1");
    assert_eq!(
        list(saver, ListOptions::thread(&t)).await.len(),
        2,
        "no ns: every namespace"
    );
}

pub async fn list_ordering(saver: &dyn CheckpointSaver) {
    let (t, mut put_ids) = four(saver).await;
    put_ids.reverse();
    assert_eq!(ids(&list(saver, ListOptions::thread(&t)).await), put_ids);
}

pub async fn list_metadata_filter_single_key(saver: &dyn CheckpointSaver) {
    let (t, _) = four(saver).await;
    let hits = list(saver, ListOptions::thread(&t).filter("source", "input")).await;
    assert_eq!(hits.len(), 2);
    assert!(hits.iter().all(|h| h.metadata.source == Some(Input)));
}

pub async fn list_metadata_filter_step(saver: &dyn CheckpointSaver) {
    let (t, ids) = four(saver).await;
    let hits = list(saver, ListOptions::thread(&t).filter("step", 1)).await;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].checkpoint.id, ids[1]);
}

pub async fn list_metadata_filter_multiple_keys(saver: &dyn CheckpointSaver) {
    let t = thread();
    for (source, step) in [(Input, 1), (Loop, 1), (Input, 2)] {
        put(
            saver,
            &config(&t),
            &checkpoint(&[], &[]),
            &metadata(source, step),
        )
        .await;
    }
    let hits = list(
        saver,
        ListOptions::thread(&t)
            .filter("source", "input")
            .filter("step", 2),
    )
    .await;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].metadata.step, Some(2));
}

pub async fn list_metadata_filter_no_match(saver: &dyn CheckpointSaver) {
    let (t, _) = four(saver).await;
    let hits = list(
        saver,
        ListOptions::thread(&t)
            .filter("source", "update")
            .filter("step", 99),
    )
    .await;
    assert!(hits.is_empty());
}

pub async fn list_metadata_custom_keys(saver: &dyn CheckpointSaver) {
    let t = thread();
    let tagged = metadata(Loop, 0)
        .with("score", 42)
        .with("run_id", "run-abc");
    put(saver, &config(&t), &checkpoint(&[], &[]), &tagged).await;
    put(
        saver,
        &config(&t),
        &checkpoint(&[], &[]),
        &metadata(Loop, 1).with("score", 7),
    )
    .await;
    let hits = list(saver, ListOptions::thread(&t).filter("score", 42)).await;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].metadata.run_id(), Some("run-abc"));
}

pub async fn list_before(saver: &dyn CheckpointSaver) {
    let (t, ids) = four(saver).await;
    let hits = list(saver, ListOptions::thread(&t).before(ids[2].clone())).await;
    assert_eq!(super::ids(&hits), [ids[1].clone(), ids[0].clone()]);
}

pub async fn list_limit(saver: &dyn CheckpointSaver) {
    let (t, _) = four(saver).await;
    assert_eq!(list(saver, ListOptions::thread(&t).limit(1)).await.len(), 1);
    assert_eq!(list(saver, ListOptions::thread(&t).limit(2)).await.len(), 2);
}

pub async fn list_limit_plus_before(saver: &dyn CheckpointSaver) {
    let (t, ids) = four(saver).await;
    let hits = list(
        saver,
        ListOptions::thread(&t).before(ids[3].clone()).limit(1),
    )
    .await;
    assert_eq!(super::ids(&hits), [ids[2].clone()]);
}

pub async fn list_combined_thread_and_filter(saver: &dyn CheckpointSaver) {
    let (t, _) = four(saver).await;
    four(saver).await; // another thread that must not leak in
    let hits = list(saver, ListOptions::thread(&t).filter("source", "loop")).await;
    assert_eq!(hits.len(), 2);
    assert!(hits.iter().all(|h| h.config.thread_id == t));
}

pub async fn list_empty_result(saver: &dyn CheckpointSaver) {
    four(saver).await;
    let hits = list(
        saver,
        ListOptions::thread(thread()).filter("source", "input"),
    )
    .await;
    assert!(hits.is_empty());
}

pub async fn list_includes_pending_writes(saver: &dyn CheckpointSaver) {
    let t = thread();
    let c = empty(saver, &config(&t)).await;
    write(saver, &c, "ch", "val").await;
    let hits = list(saver, ListOptions::thread(&t)).await;
    assert_eq!(hits.len(), 1);
    let writes = &hits[0].pending_writes;
    assert_eq!(writes.len(), 1);
    assert_eq!(
        (writes[0].channel.as_str(), &writes[0].value),
        ("ch", &Value::from("val"))
    );
}

pub async fn list_multiple_namespaces(saver: &dyn CheckpointSaver) {
    let t = thread();
    for ns in ["", "child:1", "child:2"] {
        empty(saver, &config(&t).with_ns(ns)).await;
    }
    let root = list(saver, ListOptions::thread(&t).ns("")).await;
    assert_eq!(root.len(), 1);
    assert_eq!(root[0].config.checkpoint_ns, "");
    assert_eq!(list(saver, ListOptions::thread(&t)).await.len(), 3);
}

/// A listing of checkpoints that repeat each other's values (a chat's messages: every later
/// checkpoint stores the earlier ones again; an unchanged channel; writes carrying the same
/// message) gives each checkpoint exactly what reading it alone gives — however a saver
/// shares what it decodes between them.
pub async fn list_of_repeating_values_equals_each_read_alone(saver: &dyn CheckpointSaver) {
    let t = thread();
    let message = |i: usize| {
        stategraph_messages::Message::human(format!(
            "message {i}: long enough to be shared when read again"
        ))
        .to_value()
    };
    let note = Value::from("a string channel that does not change from one step to the next");
    let mut messages: Vec<Value> = Vec::new();
    let mut parent = config(&t);
    for step in 0..6_i64 {
        let i = usize::try_from(step).unwrap();
        messages.push(message(i));
        messages.push(Value::from(format!(
            "reply {i}, a plain string as long as a message"
        )));
        // The same message again inside a nested value, and a short string (not shared).
        let nested = stategraph_checkpoint::value!({"last": null, "short": "x"});
        let mut nested = nested.as_map().unwrap().clone();
        nested.insert("last", message(i));
        let cp = checkpoint(
            &[
                ("messages", Value::from(messages.clone())),
                ("note", note.clone()),
                ("nested", Value::Map(nested)),
            ],
            &[("messages", step + 1), ("note", 1), ("nested", step + 1)],
        );
        let mut versions = cp.channel_versions.clone();
        if step > 0 {
            versions.remove("note");
        }
        parent = saver
            .put(&parent, &cp, &metadata(Loop, step), &versions)
            .await
            .expect("put");
        saver
            .put_writes(&parent, &[("messages".into(), message(i))], "task", "")
            .await
            .expect("put_writes");
    }
    let listed = list(saver, ListOptions::thread(&t)).await;
    assert_eq!(listed.len(), 6);
    for tuple in &listed {
        let alone = must_get(saver, &tuple.config).await;
        assert_eq!(tuple.checkpoint, alone.checkpoint);
        assert_eq!(tuple.pending_writes, alone.pending_writes);
        assert_eq!(tuple.checkpoint.channel_values.get("note"), Some(&note));
    }
    let newest = &listed[0].checkpoint.channel_values;
    assert_eq!(newest.get("messages"), Some(&Value::from(messages)));
}

/// A listing without values gives each checkpoint's id, versions, metadata, parent and
/// pending writes as a listing with values does, and no channel values.
pub async fn list_without_values_keeps_everything_else(saver: &dyn CheckpointSaver) {
    let t = thread();
    let mut parent = config(&t);
    for step in 0..3_i64 {
        let cp = checkpoint(
            &[
                (
                    "messages",
                    stategraph_checkpoint::value!(["a message", step]),
                ),
                ("count", Value::Int(step)),
            ],
            &[("messages", step + 1), ("count", step + 1)],
        );
        parent = put(saver, &parent, &cp, &metadata(Loop, step)).await;
        write(saver, &parent, "messages", "pending").await;
    }
    let full = list(saver, ListOptions::thread(&t)).await;
    let bare = list(saver, ListOptions::thread(&t).without_values()).await;
    assert_eq!(full.len(), 3);
    assert_eq!(bare.len(), full.len());
    for (b, f) in bare.iter().zip(&full) {
        assert!(b.checkpoint.channel_values.is_empty(), "{:?}", b.config);
        assert!(!f.checkpoint.channel_values.is_empty());
        let mut without = f.clone();
        without.checkpoint = std::sync::Arc::new(f.checkpoint.without_values());
        assert_eq!(b, &without);
    }
}

/// Each listed checkpoint carries exactly its own pending writes, however the listing is
/// narrowed: several namespaces at once, a metadata filter that skips checkpoints between
/// the listed ones, `before` and `limit`; a checkpoint without writes has none.
pub async fn list_pending_writes_are_each_checkpoints_own(saver: &dyn CheckpointSaver) {
    let t = thread();
    let mut root_ids = Vec::new();
    for ns in ["", "child:1"] {
        let mut parent = config(&t).with_ns(ns);
        for step in 0..6_i64 {
            let source = if step % 2 == 0 { Input } else { Loop };
            let cp = checkpoint(&[("step", Value::Int(step))], &[("step", step + 1)]);
            parent = put(saver, &parent, &cp, &metadata(source, step)).await;
            if ns.is_empty() {
                root_ids.push(cp.id.clone());
            }
            if step != 3 {
                let writes = [
                    ("a".to_owned(), Value::from(format!("{ns} {step} a"))),
                    ("b".to_owned(), Value::Int(step)),
                ];
                saver
                    .put_writes(&parent, &writes, &format!("task{step}"), "")
                    .await
                    .expect("put_writes");
            }
        }
    }
    let cases = [
        ListOptions::thread(&t),
        ListOptions::thread(&t).ns(""),
        ListOptions::thread(&t).filter("source", "input"),
        ListOptions::thread(&t).ns("child:1").limit(3),
        ListOptions::thread(&t)
            .ns("")
            .before(root_ids[4].clone())
            .limit(2),
    ];
    let expected_len = [12, 6, 6, 3, 2];
    for (options, n) in cases.into_iter().zip(expected_len) {
        let listed = list(saver, options.clone()).await;
        assert_eq!(listed.len(), n, "{options:?}");
        for tuple in &listed {
            let alone = must_get(saver, &tuple.config).await;
            assert_eq!(tuple.pending_writes, alone.pending_writes, "{options:?}");
            let step = tuple.metadata.step.expect("step");
            if step == 3 {
                assert!(tuple.pending_writes.is_empty(), "{options:?}");
            } else {
                let own = Value::from(format!("{} {step} a", tuple.config.checkpoint_ns));
                assert_eq!(tuple.pending_writes.len(), 2, "{options:?}");
                assert!(
                    tuple.pending_writes.iter().any(|w| w.value == own),
                    "{options:?}: {:?}",
                    tuple.pending_writes
                );
            }
        }
    }
}
