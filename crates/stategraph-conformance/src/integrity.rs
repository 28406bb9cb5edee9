//! Stored data that is damaged, edited or looped: every saver reads it strictly (a typed
//! error naming the checkpoint, never a panic or a default), keeps the damage local, and
//! never deletes what it cannot read. The cases that damage rows need the fixture's
//! [`Corruptor`]; the in-memory saver keeps decoded values, so it has no bytes to damage.

use std::time::Duration;

use super::*;
use stategraph_checkpoint::{Error, ListOptions, PruneStrategy};

/// The part of a stored checkpoint a [`Corruptor`] rewrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawPart {
    /// The checkpoint itself (JSON or serialized bytes, as the backend stores it).
    Checkpoint,
    /// Its metadata.
    Metadata,
}

/// Bytes that no saver can read as a checkpoint or as metadata, but that every column type
/// accepts (a JSON string; as msgpack, an integer followed by junk).
pub const DAMAGED: &[u8] = b"\"damaged\"";

/// Direct access to a backend's stored rows, behind the saver's back: what an operator's
/// hand edit, a disk fault or another program's bug does to the database. Each backend's
/// conformance fixture provides one.
#[async_trait::async_trait]
pub trait Corruptor: Send + Sync {
    /// The stored bytes of `part` of a checkpoint (for a JSON column, its text).
    async fn read_raw(&self, thread: &str, ns: &str, id: &str, part: RawPart) -> Vec<u8>;
    /// Overwrites `part` of a checkpoint with `bytes`.
    async fn write_raw(&self, thread: &str, ns: &str, id: &str, part: RawPart, bytes: &[u8]);
    /// Overwrites a checkpoint's parent id.
    async fn set_parent(&self, thread: &str, ns: &str, id: &str, parent: &str);
}

/// The fixture's corruptor, or `None` for the one saver that keeps no bytes (memory).
fn corruptor(fixture: &Fixture) -> Option<&dyn Corruptor> {
    match fixture.corruptor() {
        Some(c) => Some(c),
        None => {
            assert!(
                fixture.saver().name() == "memory" || fixture.corruptor_exemption().is_some(),
                "a saver that stores bytes needs a Corruptor in its conformance fixture"
            );
            None
        }
    }
}

/// The checkpoint id an error's location names, if it is a serialization error.
fn damaged_id(e: &Error) -> Option<CheckpointId> {
    e.location().and_then(|l| l.checkpoint_id.clone())
}

#[track_caller]
fn assert_damaged<T: std::fmt::Debug>(
    result: stategraph_checkpoint::Result<T>,
    id: &str,
    doing: &str,
) {
    match result {
        Err(e) => assert_eq!(
            damaged_id(&e).as_deref(),
            Some(id),
            "{doing}: expected a serialization error naming checkpoint {id}, got {e:?}"
        ),
        Ok(v) => panic!("{doing}: a damaged checkpoint read as {v:?}"),
    }
}

/// Metadata numbers compare by value on every saver and wrapper: `42` matches `42.0` both
/// ways (as Python's `==` and Postgres' `jsonb` do).
pub async fn list_metadata_filter_numbers_by_value(saver: &dyn CheckpointSaver) {
    let thread = thread();
    let mut int_meta = metadata(CheckpointSource::Loop, 0);
    int_meta.extra.insert("score".into(), serde_json::json!(42));
    let at_int = put(saver, &config(&thread), &checkpoint(&[], &[]), &int_meta).await;
    let mut float_meta = metadata(CheckpointSource::Loop, 1);
    float_meta
        .extra
        .insert("score".into(), serde_json::json!(7.0));
    let at_float = put(saver, &at_int, &checkpoint(&[], &[]), &float_meta).await;
    for want in [serde_json::json!(42), serde_json::json!(42.0)] {
        let found = saver
            .list(&ListOptions::thread(&thread).filter("score", want.clone()))
            .await
            .expect("list");
        assert_eq!(
            ids(&found),
            vec![at_int.checkpoint_id.clone().unwrap()],
            "a stored 42 matches {want}"
        );
    }
    let found = saver
        .list(&ListOptions::thread(&thread).filter("score", 7))
        .await
        .expect("list");
    assert_eq!(
        ids(&found),
        vec![at_float.checkpoint_id.clone().unwrap()],
        "a stored 7.0 matches 7"
    );
}

/// A parent chain that loops (an edited row) does not make reads walk on: the delta history
/// and `get_tuple` of a checkpoint on the loop come back promptly, each checkpoint's writes
/// counted once.
pub async fn delta_history_stops_at_a_parent_loop(fixture: Fixture) {
    let saver = fixture.saver();
    let thread = thread();
    let cfgs = chain(saver, &thread, "", 3).await;
    for at in &cfgs {
        write(saver, at, "log", "entry").await;
    }
    let first = cfgs[0].checkpoint_id.clone().unwrap();
    let last = cfgs[2].checkpoint_id.clone().unwrap();
    // The oldest checkpoint's parent becomes the newest: a loop of three.
    match corruptor(&fixture) {
        Some(c) => c.set_parent(&thread, "", &first, &last).await,
        None => {
            // The in-memory saver re-puts an id with a new parent.
            let old = must_get(saver, &cfgs[0]).await;
            saver
                .put(
                    &cfgs[2],
                    &old.checkpoint,
                    &old.metadata,
                    &Default::default(),
                )
                .await
                .expect("re-put");
        }
    }
    let looped = must_get(saver, &cfgs[0]).await;
    assert_eq!(
        looped.parent_config.and_then(|p| p.checkpoint_id),
        Some(last.clone()),
        "the loop is stored"
    );
    let history = tokio::time::timeout(
        Duration::from_secs(30),
        saver.get_delta_channel_history(&cfgs[2], &["log".to_owned()]),
    )
    .await
    .expect("a looped parent chain must not make the walk run on")
    .expect("delta history");
    let writes = &history["log"].writes;
    assert_eq!(
        writes.len(),
        2,
        "each checkpoint behind the target is visited once, the target never: {writes:?}"
    );
}

/// Prune refuses a thread with unreadable metadata (its delta-history check depends on it):
/// a typed error naming the checkpoint, and nothing deleted.
pub async fn prune_refuses_unreadable_metadata(fixture: Fixture) {
    let saver = fixture.saver();
    require!(
        saver,
        prune,
        saver.prune(&[thread()], PruneStrategy::KeepLatest)
    );
    let Some(c) = corruptor(&fixture) else { return };
    let thread = thread();
    let cfgs = chain(saver, &thread, "", 3).await;
    let middle = cfgs[1].checkpoint_id.clone().unwrap();
    c.write_raw(&thread, "", &middle, RawPart::Metadata, DAMAGED)
        .await;
    let refused = saver
        .prune(std::slice::from_ref(&thread), PruneStrategy::KeepLatest)
        .await;
    assert_damaged(refused, &middle, "prune");
    for at in [&cfgs[0], &cfgs[2]] {
        must_get(saver, at).await;
    }
    assert_damaged(saver.get_tuple(&cfgs[1]).await, &middle, "get_tuple");
}

/// Garbage collection is conservative: a stored value that only an unreadable checkpoint
/// references survives a prune, and reads back once the checkpoint is repaired.
pub async fn prune_keeps_values_of_unreadable_checkpoints(fixture: Fixture) {
    let saver = fixture.saver();
    require!(
        saver,
        prune,
        saver.prune(&[thread()], PruneStrategy::KeepLatest)
    );
    let Some(c) = corruptor(&fixture) else { return };
    let thread = thread();
    let big = Value::from(vec![Value::from("a"), Value::from("b")]);
    let first = checkpoint(&[("big", big.clone())], &[("big", 1)]);
    let at1 = put(
        saver,
        &config(&thread),
        &first,
        &metadata(CheckpointSource::Loop, 0),
    )
    .await;
    // The second checkpoint keeps `big` at version 1 without storing it again.
    let second = checkpoint(&[("big", big.clone())], &[("big", 1)]);
    let at2 = saver
        .put(
            &at1,
            &second,
            &metadata(CheckpointSource::Loop, 1),
            &Default::default(),
        )
        .await
        .expect("put");
    let id2 = at2.checkpoint_id.clone().unwrap();
    let intact = c.read_raw(&thread, "", &id2, RawPart::Checkpoint).await;
    c.write_raw(&thread, "", &id2, RawPart::Checkpoint, DAMAGED)
        .await;
    saver
        .prune(std::slice::from_ref(&thread), PruneStrategy::KeepLatest)
        .await
        .expect("prune reads metadata only; the damaged checkpoint is the one kept");
    assert!(
        saver.get_tuple(&at1).await.expect("get_tuple").is_none(),
        "pruned"
    );
    c.write_raw(&thread, "", &id2, RawPart::Checkpoint, &intact)
        .await;
    let repaired = must_get(saver, &at2).await;
    assert_eq!(
        repaired.checkpoint.channel_values.get("big"),
        Some(&big),
        "the value the unreadable checkpoint referenced was kept"
    );
}

/// A damaged row reads as a typed error naming it, and only it: its neighbours, the
/// namespace's other checkpoints and other threads read as before.
pub async fn damaged_rows_read_as_typed_errors(fixture: Fixture) {
    let saver = fixture.saver();
    let Some(c) = corruptor(&fixture) else { return };
    let thread = thread();
    let cfgs = chain(saver, &thread, "", 3).await;
    write(saver, &cfgs[2], "log", "entry").await;
    let other = thread_with_one_checkpoint(saver).await;
    let (first, middle) = (
        cfgs[0].checkpoint_id.clone().unwrap(),
        cfgs[1].checkpoint_id.clone().unwrap(),
    );
    c.write_raw(&thread, "", &middle, RawPart::Metadata, DAMAGED)
        .await;
    c.write_raw(&thread, "", &first, RawPart::Checkpoint, DAMAGED)
        .await;
    assert_damaged(saver.get_tuple(&cfgs[1]).await, &middle, "damaged metadata");
    assert_damaged(
        saver.get_tuple(&cfgs[0]).await,
        &first,
        "damaged checkpoint",
    );
    let latest = must_get(saver, &config(&thread)).await;
    assert_eq!(latest.checkpoint.id, cfgs[2].checkpoint_id.clone().unwrap());
    assert_eq!(latest.pending_writes.len(), 1);
    must_get(saver, &other).await;
    // Listing stops at the damage with the same typed error; what is older or newer is
    // still reachable around it.
    assert!(
        damaged_id(&saver.list(&ListOptions::thread(&thread)).await.unwrap_err()).is_some(),
        "list names a damaged checkpoint"
    );
    let newest = saver
        .list(&ListOptions::thread(&thread).limit(1))
        .await
        .expect("the newest checkpoint lists");
    assert_eq!(ids(&newest), vec![latest.checkpoint.id.clone()]);
}

async fn thread_with_one_checkpoint(saver: &dyn CheckpointSaver) -> CheckpointConfig {
    empty(saver, &config(&thread())).await
}
