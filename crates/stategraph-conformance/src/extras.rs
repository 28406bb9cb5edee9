//! stategraph's own contracts on top of LangGraph's spec: typed errors, the write-conflict
//! rules, write ordering, and values LangGraph's suite does not exercise.

use super::*;
use stategraph_checkpoint::{
    CheckpointSource::*, Error, Ext, ExtCode, ListOptions, Map, PruneStrategy, value,
};

pub async fn put_requires_thread_id(saver: &dyn CheckpointSaver) {
    let cp = checkpoint(&[], &[]);
    let result = saver
        .put(&config(""), &cp, &metadata(Loop, 0), &Default::default())
        .await;
    assert!(
        matches!(result, Err(Error::InvalidInput { .. })),
        "an empty thread id is InvalidInput, got {result:?}"
    );
}

pub async fn put_writes_requires_checkpoint_id(saver: &dyn CheckpointSaver) {
    let result = saver
        .put_writes(
            &config(&thread()),
            &[("ch".into(), Value::Int(1))],
            "task1",
            "",
        )
        .await;
    match result {
        Err(Error::InvalidInput { what, .. }) => assert_eq!(what, "config.checkpoint_id"),
        other => panic!("put_writes without a checkpoint id is InvalidInput, got {other:?}"),
    }
}

pub async fn put_writes_special_upsert_and_mixed_ignore(saver: &dyn CheckpointSaver) {
    let t = thread();
    let c = empty(saver, &config(&t)).await;
    let c = &c;
    let put_w = |batch: Vec<(String, Value)>| async move {
        saver.put_writes(c, &batch, "task1", "").await.unwrap();
    };
    // All special: the second call replaces the first.
    put_w(vec![("__interrupt__".into(), "first".into())]).await;
    put_w(vec![("__interrupt__".into(), "second".into())]).await;
    // Mixed: existing rows win, the special write included.
    put_w(vec![("out".into(), "a".into())]).await;
    put_w(vec![
        ("out".into(), "b".into()),
        ("__interrupt__".into(), "third".into()),
    ])
    .await;
    let c = config(&t);
    let writes = must_get(saver, &c).await.pending_writes;
    assert_eq!(writes.len(), 2, "{writes:?}");
    let int = writes
        .iter()
        .find(|w| w.channel == "__interrupt__")
        .unwrap();
    assert_eq!(int.value, Value::from("second"));
    let out = writes.iter().find(|w| w.channel == "out").unwrap();
    assert_eq!(out.value, Value::from("a"));
}

pub async fn pending_writes_sorted_by_task_path(saver: &dyn CheckpointSaver) {
    let t = thread();
    let c = empty(saver, &config(&t)).await;
    let batch = |v: &str| {
        vec![
            ("a".to_owned(), Value::from(v)),
            ("b".to_owned(), Value::from(v)),
        ]
    };
    saver
        .put_writes(&c, &batch("z"), "task-0", "~__pregel_pull, z_node")
        .await
        .unwrap();
    saver
        .put_writes(&c, &batch("b"), "task-2", "~__pregel_pull, a_node")
        .await
        .unwrap();
    saver
        .put_writes(&c, &batch("a"), "task-1", "~__pregel_pull, a_node")
        .await
        .unwrap();
    saver
        .put_writes(
            &c,
            &[("in".into(), Value::Null)],
            stategraph_checkpoint::NULL_TASK_ID,
            "",
        )
        .await
        .unwrap();
    let got: Vec<(String, String, i64)> = must_get(saver, &c)
        .await
        .pending_writes
        .into_iter()
        .map(|w| (w.task_path, w.task_id, w.idx))
        .collect();
    let want = [
        ("", stategraph_checkpoint::NULL_TASK_ID, 0),
        ("~__pregel_pull, a_node", "task-1", 0),
        ("~__pregel_pull, a_node", "task-1", 1),
        ("~__pregel_pull, a_node", "task-2", 0),
        ("~__pregel_pull, a_node", "task-2", 1),
        ("~__pregel_pull, z_node", "task-0", 0),
        ("~__pregel_pull, z_node", "task-0", 1),
    ];
    let want: Vec<_> = want
        .iter()
        .map(|(p, t, i)| ((*p).to_owned(), (*t).to_owned(), *i))
        .collect();
    assert_eq!(got, want);
}

/// Values of every kind the serializer supports, including Python objects it has no Rust
/// type for, round-trip through channels and writes.
pub async fn put_preserves_rich_values(saver: &dyn CheckpointSaver) {
    let t = thread();
    let mut int_keys = Map::new();
    int_keys.insert(Value::Int(1), "one");
    int_keys.insert(Value::Int(-2), value!([null, true, 1.5]));
    let message = Value::Ext(Ext::from_py_object(
        ExtCode::PydanticV2,
        &stategraph_checkpoint::PyObject::new(
            "langchain_core.messages.human",
            "HumanMessage",
            value!({"content": "héllo ✓ 你好", "additional_kwargs": {}, "response_metadata": {},
                    "type": "human", "name": null, "id": "h1"}),
        )
        .with_method("model_validate_json"),
    ));
    let values = [
        ("big", Value::UInt(u64::MAX)),
        ("neg", Value::Int(i64::MIN)),
        ("float", Value::Float(-0.125)),
        ("bytes", Value::Bytes(vec![0, 255, 7])),
        ("nested", value!({"a": [{"b": [1, 2, {"c": null}]}]})),
        ("int_keys", Value::Map(int_keys)),
        ("messages", Value::from(vec![message.clone(), message])),
        (
            "when",
            Value::py_datetime("2024-01-02T03:04:05.000006+00:00"),
        ),
        ("unknown_ext", Value::Ext(Ext::from_raw(42, vec![1, 2, 3]))),
        ("empty_str", Value::from("")),
        ("flag", Value::Bool(false)),
    ];
    let versions: Vec<(&str, i64)> = values.iter().map(|(k, _)| (*k, 1)).collect();
    let cp = checkpoint(&values, &versions);
    let c = put(saver, &config(&t), &cp, &metadata(Loop, 0)).await;
    let writes: Vec<(String, Value)> = values
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    saver.put_writes(&c, &writes, "task1", "").await.unwrap();
    let got = must_get(saver, &c).await;
    for (k, v) in &values {
        assert_eq!(&got.checkpoint.channel_values[*k], v, "channel {k}");
    }
    for (w, (k, v)) in got.pending_writes.iter().zip(&values) {
        assert_eq!((&w.channel, &w.value), (&(*k).to_owned(), v));
    }
}

/// The fields LangGraph's own writers produce (format 4, string versions, updated channels)
/// come back as written.
pub async fn put_preserves_checkpoint_fields(saver: &dyn CheckpointSaver) {
    let t = thread();
    let mut cp = Checkpoint::empty();
    cp.id = CheckpointId::for_step(3);
    let v1 = saver.get_next_version(None);
    let v2 = saver.get_next_version(Some(&v1));
    cp.channel_values.insert("foo".into(), "b".into());
    cp.channel_values.insert("bar".into(), value!(["a", "b"]));
    cp.channel_values.insert("branch:to:x".into(), Value::Null);
    cp.channel_versions.insert("foo", v2.clone());
    cp.channel_versions.insert("bar", v2.clone());
    cp.channel_versions.insert("branch:to:x", v2.clone());
    cp.channel_versions.insert("__start__", v1.clone());
    cp.versions_seen.insert("__input__", Default::default());
    cp.versions_seen
        .insert("node", [("__start__".to_owned(), v1)].into_iter().collect());
    cp.updated_channels = Some(vec!["bar".into(), "branch:to:x".into(), "foo".into()]);
    let meta = CheckpointMetadata::new(Update, 3).with("user_key", 1.5);
    let c = saver
        .put(&config(&t), &cp, &meta, &cp.channel_versions)
        .await
        .unwrap();
    let got = must_get(saver, &c).await;
    assert_eq!(*got.checkpoint, cp);
    assert_eq!(*got.metadata, meta);
    cp.updated_channels = None;
    cp.id = CheckpointId::for_step(4);
    let c2 = saver
        .put(&c, &cp, &meta, &Default::default())
        .await
        .unwrap();
    assert_eq!(must_get(saver, &c2).await.checkpoint.updated_channels, None);
}

pub async fn copy_thread_onto_existing_thread_conflicts(saver: &dyn CheckpointSaver) {
    require!(saver, copy_thread, saver.copy_thread(&thread(), &thread()));
    let (src, dst) = (thread(), thread());
    chain(saver, &src, "", 2).await;
    let existing = chain(saver, &dst, "", 1).await;
    let result = saver.copy_thread(&src, &dst).await;
    assert!(
        matches!(result, Err(Error::Conflict { .. })),
        "copying onto a thread with checkpoints is a Conflict, got {result:?}"
    );
    let left = saver.list(&ListOptions::thread(&dst)).await.unwrap();
    assert_eq!(ids(&left), [existing[0].checkpoint_id.clone().unwrap()]);
}

pub async fn prune_unlinks_deleted_parents(saver: &dyn CheckpointSaver) {
    require!(
        saver,
        prune,
        saver.prune(&[thread()], PruneStrategy::KeepLatest)
    );
    let t = thread();
    chain(saver, &t, "", 3).await;
    saver
        .prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest)
        .await
        .unwrap();
    assert!(must_get(saver, &config(&t)).await.parent_config.is_none());
}

pub async fn get_next_version_increases(saver: &dyn CheckpointSaver) {
    let mut v = saver.get_next_version(None);
    assert_eq!(v.counter(), 1);
    for expect in 2..=12 {
        let next = saver.get_next_version(Some(&v));
        assert!(next > v, "{next} > {v}");
        assert_eq!(next.counter(), expect);
        v = next;
    }
    assert_eq!(
        saver
            .get_next_version(Some(&ChannelVersion::Int(5)))
            .counter(),
        6
    );
}

pub async fn list_filter_on_nested_value(saver: &dyn CheckpointSaver) {
    let t = thread();
    let nested = value!({"a": 1, "b": ["x"]}).to_json();
    put(
        saver,
        &config(&t),
        &checkpoint(&[], &[]),
        &metadata(Loop, 0).with("info", nested.clone()),
    )
    .await;
    put(
        saver,
        &config(&t),
        &checkpoint(&[], &[]),
        &metadata(Loop, 1).with("info", serde_json::json!({"a": 2})),
    )
    .await;
    let hits = saver
        .list(&ListOptions::thread(&t).filter("info", nested))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].metadata.step, Some(0));
}

/// A listing that names U+0000 (in a metadata filter's value or as the thread) answers,
/// matching what was stored with it or nothing: never a backend failure (PostgreSQL cannot
/// even store the character).
pub async fn list_naming_a_nul_character_answers(saver: &dyn CheckpointSaver) {
    let t = thread();
    put(
        saver,
        &config(&t),
        &checkpoint(&[], &[]),
        &metadata(Loop, 0).with("user", serde_json::json!("plain")),
    )
    .await;
    let hits = saver
        .list(&ListOptions::thread(&t).filter("user", serde_json::json!("a\u{0}b")))
        .await
        .unwrap();
    assert!(hits.is_empty());
    let hits = saver
        .list(&ListOptions::thread(format!("{t}\u{0}")))
        .await
        .unwrap();
    assert!(hits.is_empty());
    let hits = saver
        .list(&ListOptions::thread(&t).filter("user", serde_json::json!("plain")))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
}

pub async fn put_if_latest_on_an_empty_namespace(saver: &dyn CheckpointSaver) {
    let t = thread();
    let cp = checkpoint(&[], &[]);
    let at = saver
        .put_if_latest(
            &config(&t),
            &cp,
            &metadata(Input, -1),
            &cp.channel_versions,
            None,
        )
        .await
        .unwrap();
    assert_eq!(at.checkpoint_id.as_deref(), Some(cp.id.as_str()));
    // Now the namespace is not empty: expecting it empty conflicts, and nothing is written.
    let other = checkpoint(&[], &[]);
    let err = saver
        .put_if_latest(
            &config(&t),
            &other,
            &metadata(Input, -1),
            &Default::default(),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    assert_eq!(must_get(saver, &config(&t)).await.checkpoint.id, cp.id);
    // Other namespaces are separate.
    saver
        .put_if_latest(
            &config(&t).with_ns("child:1"),
            &other,
            &metadata(Input, -1),
            &Default::default(),
            None,
        )
        .await
        .unwrap();
}

pub async fn put_if_latest_chains_and_refuses_a_stale_parent(saver: &dyn CheckpointSaver) {
    let t = thread();
    let first = checkpoint(&[], &[]);
    let at1 = saver
        .put_if_latest(
            &config(&t),
            &first,
            &metadata(Input, -1),
            &Default::default(),
            None,
        )
        .await
        .unwrap();
    // Run A continues from `first`.
    let a = checkpoint(&[("who", "a".into())], &[("who", 1)]);
    let at_a = saver
        .put_if_latest(
            &at1,
            &a,
            &metadata(Loop, 0),
            &a.channel_versions,
            Some(&first.id),
        )
        .await
        .unwrap();
    // Run B also started from `first`: it lost the race.
    let b = checkpoint(&[("who", "b".into())], &[("who", 1)]);
    let err = saver
        .put_if_latest(
            &at1,
            &b,
            &metadata(Loop, 0),
            &b.channel_versions,
            Some(&first.id),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    let all = saver.list(&ListOptions::thread(&t)).await.unwrap();
    assert_eq!(
        ids(&all),
        [a.id.clone(), first.id.clone()],
        "the loser wrote nothing"
    );
    assert_eq!(
        must_get(saver, &at_a).await.checkpoint.channel_values["who"],
        Value::from("a")
    );
}

pub async fn concurrent_put_if_latest_has_one_winner(saver: &dyn CheckpointSaver) {
    let t = thread();
    let first = checkpoint(&[], &[]);
    let at1 = saver
        .put_if_latest(
            &config(&t),
            &first,
            &metadata(Input, -1),
            &Default::default(),
            None,
        )
        .await
        .unwrap();
    let racers: Vec<Checkpoint> = (0..8).map(|_| checkpoint(&[], &[])).collect();
    let meta = metadata(Loop, 0);
    let results = futures_join(
        racers
            .iter()
            .map(|cp| saver.put_if_latest(&at1, cp, &meta, &cp.channel_versions, Some(&first.id))),
    )
    .await;
    let wins = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(wins, 1, "{results:?}");
    assert!(
        results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .all(|e| matches!(e, Error::Conflict { .. }))
    );
    assert_eq!(saver.list(&ListOptions::thread(&t)).await.unwrap().len(), 2);
}

/// Polls futures concurrently on the current task (no extra dependency).
async fn futures_join<F: std::future::Future>(
    futures: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    let mut outs: Vec<Option<F::Output>> = Vec::new();
    let futures: Vec<_> = futures.into_iter().collect();
    outs.resize_with(futures.len(), || None);
    // Borrowed futures cannot be spawned; poll them all from this task instead.
    let mut pinned: Vec<std::pin::Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut done = vec![false; pinned.len()];
    std::future::poll_fn(|cx| {
        for (i, f) in pinned.iter_mut().enumerate() {
            if !done[i]
                && let std::task::Poll::Ready(v) = f.as_mut().poll(cx)
            {
                outs[i] = Some(v);
                done[i] = true;
            }
        }
        if done.iter().all(|d| *d) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    outs.into_iter()
        .map(|o| o.expect("every future finished"))
        .collect()
}
