//! Corrupt or foreign rows give typed errors naming the thread, checkpoint and channel —
//! never a panic, never a silently missing value.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use stategraph_checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointId, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Error, ListOptions, SerdeError, Value, value,
};
use stategraph_sqlite::{SqliteConfig, SqliteSaver};
use stategraph_value::DecodeErrorKind;

struct Db {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    saver: SqliteSaver,
    config: CheckpointConfig,
}

/// A thread with one checkpoint (`bar` = ["a", "marker"]) and one write.
async fn db() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.sqlite");
    let saver = SqliteConfig::file(&path).connect().await.unwrap();
    let mut cp = Checkpoint::empty();
    cp.id = CheckpointId::for_step(0);
    cp.channel_values
        .insert("bar".into(), value!(["a", "marker"]));
    cp.channel_values.insert("foo".into(), "x".into());
    for ch in ["bar", "foo"] {
        cp.channel_versions.insert(ch, saver.get_next_version(None));
    }
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let config = saver
        .put(
            &CheckpointConfig::new("t-corrupt"),
            &cp,
            &meta,
            &cp.channel_versions,
        )
        .await
        .unwrap();
    saver
        .put_writes(&config, &[("foo".into(), Value::from("y"))], "task-7", "~p")
        .await
        .unwrap();
    Db {
        _dir: dir,
        path,
        saver,
        config,
    }
}

fn exec(db: &Db, sql: &str) {
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    conn.execute_batch(sql).unwrap();
}

/// Both read paths report the same error.
async fn read_error(db: &Db) -> Error {
    let listed = db.saver.list(&ListOptions::thread("t-corrupt")).await;
    assert!(listed.is_err(), "list must fail too, not skip the row");
    db.saver.get_tuple(&db.config).await.unwrap_err()
}

fn location(err: &Error) -> (&stategraph_checkpoint::Location, &SerdeError) {
    match err {
        Error::Serialization { location, source } => (location, source),
        other => panic!("expected Error::Serialization, got {other:?}"),
    }
}

#[tokio::test]
async fn a_corrupt_byte_inside_a_channel_names_the_channel_and_path() {
    let db = db().await;
    // Replace the marker of the string "marker" (0xa6) with the invalid marker 0xc1.
    let blob: Vec<u8> = rusqlite::Connection::open(&db.path)
        .unwrap()
        .query_row("SELECT checkpoint FROM checkpoints", [], |r| r.get(0))
        .unwrap();
    let at = blob.windows(7).position(|w| w == b"\xa6marker").unwrap();
    exec(
        &db,
        &format!(
            "UPDATE checkpoints SET checkpoint = substr(checkpoint, 1, {at}) || X'c1' || substr(checkpoint, {})",
            at + 2
        ),
    );
    let err = read_error(&db).await;
    let (loc, source) = location(&err);
    assert_eq!(loc.thread_id, "t-corrupt");
    assert_eq!(loc.checkpoint_id, db.config.checkpoint_id);
    assert_eq!(loc.channel.as_deref(), Some("bar"));
    match source {
        SerdeError::Decode { source, .. } => {
            assert_eq!(source.kind, DecodeErrorKind::InvalidMarker(0xc1));
            assert_eq!(source.path, "channel_values.bar[1]");
            assert_eq!(source.offset, at);
        }
        other => panic!("{other:?}"),
    }
    let msg = err.to_string();
    for needle in [
        "t-corrupt",
        "`bar`",
        db.config.checkpoint_id.as_deref().unwrap(),
        "byte",
    ] {
        assert!(msg.contains(needle), "{msg:?} should mention {needle}");
    }
}

#[tokio::test]
async fn truncated_checkpoint_bytes() {
    let db = db().await;
    exec(
        &db,
        "UPDATE checkpoints SET checkpoint = substr(checkpoint, 1, 20)",
    );
    let err = read_error(&db).await;
    let (loc, source) = location(&err);
    assert_eq!(loc.checkpoint_id, db.config.checkpoint_id);
    assert!(matches!(
        source,
        SerdeError::Decode { source, .. } if source.kind == DecodeErrorKind::Truncated
    ));
}

#[tokio::test]
async fn missing_checkpoint_blob() {
    let db = db().await;
    exec(&db, "UPDATE checkpoints SET checkpoint = NULL");
    let err = read_error(&db).await;
    assert_eq!(location(&err).0.checkpoint_id, db.config.checkpoint_id);
}

#[tokio::test]
async fn unknown_type_tag() {
    let db = db().await;
    exec(&db, "UPDATE checkpoints SET type = 'cbor'");
    let err = read_error(&db).await;
    assert_eq!(location(&err).1, &SerdeError::UnknownType("cbor".into()));
}

#[tokio::test]
async fn pickled_checkpoint_is_refused_with_a_reason() {
    let db = db().await;
    exec(&db, "UPDATE checkpoints SET type = 'pickle'");
    let err = read_error(&db).await;
    assert!(matches!(location(&err).1, SerdeError::Unsupported { .. }));
}

#[tokio::test]
async fn corrupt_write_names_channel_and_task() {
    let db = db().await;
    exec(&db, "UPDATE writes SET value = X'92a1'");
    let err = read_error(&db).await;
    let (loc, _) = location(&err);
    assert_eq!(loc.part, "write");
    assert_eq!(loc.channel.as_deref(), Some("foo"));
    assert_eq!(loc.task_id.as_deref(), Some("task-7"));
}

#[tokio::test]
async fn invalid_metadata_json() {
    let db = db().await;
    exec(&db, "UPDATE checkpoints SET metadata = X'7b22736f75726365'");
    let err = read_error(&db).await;
    assert_eq!(location(&err).0.part, "metadata");
}

#[tokio::test]
async fn wrong_shape_names_the_field() {
    let db = db().await;
    // A valid msgpack map whose `channel_versions` is a list.
    let bad = stategraph_value::encode(&value!({"v": 4, "id": "x", "channel_versions": [1]}));
    let hex: String = bad.iter().map(|b| format!("{b:02x}")).collect();
    exec(
        &db,
        &format!("UPDATE checkpoints SET checkpoint = X'{hex}'"),
    );
    let err = read_error(&db).await;
    assert_eq!(location(&err).1.path(), Some("channel_versions"));
}

#[tokio::test]
async fn bad_filter_key_is_invalid_input() {
    let db = db().await;
    let err = db
        .saver
        .list(&ListOptions::thread("t-corrupt").filter("a'; DROP TABLE writes; --", 1))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
}
