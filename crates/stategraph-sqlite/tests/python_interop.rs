//! Interop with Python LangGraph on one SQLite file, both directions.
//!
//! - `reads_a_file_written_by_python`: `tests/fixtures/langgraph_1_2_22.sqlite` was written by
//!   langgraph 1.2.22 + langgraph-checkpoint-sqlite 3.1.2 (`scripts/interop/gen_sqlite_fixture.py`,
//!   which also wrote `langgraph_1_2_22.expected.json`: what Python's `SqliteSaver.list` reports).
//!   Every checkpoint, metadata field, parent link and pending write must come back equal, and
//!   every value must re-encode to the bytes Python's serializer produces for it.
//! - `python_reads_a_file_written_by_stategraph`: we write a thread, Python's `SqliteSaver.list`
//!   reads it (`scripts/interop/dump_sqlite.py`), and it must report exactly what we stored.
//!
//! The second test needs the pinned Python environment (`scripts/python-env.sh`, which
//! `scripts/test.sh` runs); it fails, never skips, when that is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value as Json, json};
use stategraph_checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointId, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, CheckpointTuple, Ext, ExtCode, JsonPlusSerializer, ListOptions, NULL_TASK_ID,
    PyObject, Serializer, Value, value,
};
use stategraph_sqlite::{SqliteConfig, SqliteSaver};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn typed(serde: &dyn Serializer, v: &Value) -> Json {
    let (tag, bytes) = serde.dumps_typed(v).unwrap();
    json!({"type": tag, "hex": hex(&bytes)})
}

fn config_json(c: &CheckpointConfig) -> Json {
    json!({
        "thread_id": c.thread_id,
        "checkpoint_ns": c.checkpoint_ns,
        "checkpoint_id": c.checkpoint_id,
    })
}

/// A tuple in the shape `dump_sqlite.py` prints.
fn dump(t: &CheckpointTuple) -> Json {
    let serde = JsonPlusSerializer::new();
    let cp = &t.checkpoint;
    let versions = |v: &stategraph_checkpoint::ChannelVersions| -> Json {
        v.iter()
            .map(|(k, v)| (k.to_owned(), v.to_json()))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    json!({
        "config": config_json(&t.config),
        "parent_config": t.parent_config.as_ref().map(config_json),
        "metadata": t.metadata.to_json(),
        "checkpoint": {
            "v": cp.v,
            "id": cp.id,
            "ts": cp.ts,
            "channel_versions": versions(&cp.channel_versions),
            "versions_seen": cp.versions_seen.iter()
                .map(|(k, v)| (k.to_owned(), versions(v)))
                .collect::<serde_json::Map<_, _>>(),
            "updated_channels": cp.updated_channels,
        },
        "channel_values": cp.channel_values.iter()
            .map(|(k, v)| (k.clone(), typed(&serde, v)))
            .collect::<serde_json::Map<_, _>>(),
        "pending_writes": t.pending_writes.iter()
            .map(|w| json!([w.task_id, w.channel, typed(&serde, &w.value)]))
            .collect::<Vec<_>>(),
    })
}

/// Drops the human-only `repr` fields of Python's dump.
fn strip_repr(j: &mut Json) {
    match j {
        Json::Object(o) => {
            o.remove("repr");
            o.values_mut().for_each(strip_repr);
        }
        Json::Array(a) => a.iter_mut().for_each(strip_repr),
        _ => {}
    }
}

fn copy_fixture(name: &str, dir: &Path) -> PathBuf {
    let src = manifest_dir().join("tests/fixtures").join(name);
    let dst = dir.join(name);
    std::fs::copy(&src, &dst).unwrap_or_else(|e| panic!("fixture {}: {e}", src.display()));
    dst
}

fn assert_same(ours: &[Json], theirs: &[Json]) {
    assert_eq!(ours.len(), theirs.len(), "number of checkpoints");
    for (o, t) in ours.iter().zip(theirs) {
        assert_eq!(
            o, t,
            "checkpoint {} differs:\nours:   {o:#}\ntheirs: {t:#}",
            t["config"]["checkpoint_id"]
        );
    }
}

#[tokio::test]
async fn reads_a_file_written_by_python() {
    let dir = tempfile::tempdir().unwrap();
    let db = copy_fixture("langgraph_1_2_22.sqlite", dir.path());
    let expected_path = manifest_dir().join("tests/fixtures/langgraph_1_2_22.expected.json");
    let mut expected: Json =
        serde_json::from_slice(&std::fs::read(&expected_path).unwrap()).unwrap();
    strip_repr(&mut expected);
    let theirs = expected["tuples"].as_array().unwrap().clone();
    assert!(theirs.len() > 20, "the fixture covers many checkpoints");

    let saver = SqliteConfig::file(&db).connect().await.unwrap();
    let ours: Vec<Json> = saver
        .list(&ListOptions::all())
        .await
        .unwrap()
        .iter()
        .map(dump)
        .collect();
    assert_same(&ours, &theirs);

    // get_tuple agrees with list, for every checkpoint and for "latest".
    for t in &theirs {
        let c = &t["config"];
        let config = CheckpointConfig::new(c["thread_id"].as_str().unwrap())
            .with_ns(c["checkpoint_ns"].as_str().unwrap())
            .with_checkpoint_id(c["checkpoint_id"].as_str().unwrap());
        assert_eq!(&dump(&saver.get_tuple(&config).await.unwrap().unwrap()), t);
    }
}

/// The Python interpreter of the pinned environment.
use stategraph_testkit::python::python_interpreter as python;

fn python_dump(db: &Path) -> Vec<Json> {
    python_dump_with(db, &[], &[])
}

fn python_dump_with(db: &Path, args: &[&str], env: &[(&str, &[u8])]) -> Vec<Json> {
    let script = manifest_dir().join("../../scripts/interop/dump_sqlite.py");
    let mut cmd = Command::new(python());
    cmd.arg(&script).arg(db).args(args);
    for (k, v) in env {
        cmd.env(k, std::str::from_utf8(v).unwrap());
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "dump_sqlite.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut j: Json = serde_json::from_slice(&out.stdout).unwrap();
    strip_repr(&mut j);
    j["tuples"].as_array().unwrap().clone()
}

#[tokio::test]
async fn python_reads_a_file_written_by_stategraph() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ours.sqlite");
    let saver = SqliteConfig::file(&db).connect().await.unwrap();
    let thread = CheckpointConfig::new("from-rust");
    let human = Value::Ext(Ext::from_py_object(
        ExtCode::PydanticV2,
        &PyObject::new(
            "langchain_core.messages.human",
            "HumanMessage",
            value!({"content": "héllo ✓", "additional_kwargs": {}, "response_metadata": {},
                    "type": "human", "name": null, "id": "h1"}),
        )
        .with_method("model_validate_json"),
    ));
    let mut at = thread.clone();
    let mut versions = stategraph_checkpoint::ChannelVersions::new();
    for step in -1..=2 {
        let mut cp = Checkpoint::empty();
        cp.id = CheckpointId::for_step(step);
        let next = saver.get_next_version(versions.values().max());
        for ch in ["foo", "messages", "when"] {
            versions.insert(ch, next.clone());
        }
        cp.channel_values
            .insert("foo".into(), Value::from(format!("step {step}")));
        cp.channel_values
            .insert("messages".into(), Value::from(vec![human.clone(); 2]));
        cp.channel_values.insert(
            "when".into(),
            Value::py_datetime("2026-11-22T10:07:00.334735+00:00"),
        );
        cp.channel_values
            .insert("nums".into(), value!([1, -2, 3.5, null, {"k": [true]}]));
        versions.insert("nums", next.clone());
        cp.channel_versions = versions.clone();
        cp.versions_seen.insert("__input__", Default::default());
        cp.updated_channels = Some(vec!["foo".into(), "messages".into()]);
        let source = if step < 0 {
            CheckpointSource::Input
        } else {
            CheckpointSource::Loop
        };
        let meta = CheckpointMetadata::new(source, step).with("user_id", "u-1");
        at = saver
            .put(&at, &cp, &meta, &cp.channel_versions)
            .await
            .unwrap();
        saver
            .put_writes(
                &at,
                &[("foo".into(), "w".into()), ("bar".into(), value!(["x"]))],
                "task-a",
                "~__pregel_pull, a",
            )
            .await
            .unwrap();
        saver
            .put_writes(
                &at,
                &[("__interrupt__".into(), value!([{"value": "ok?"}]))],
                "task-b",
                "~__pregel_pull, b",
            )
            .await
            .unwrap();
        saver
            .put_writes(
                &at,
                &[("__resume__".into(), "yes".into())],
                NULL_TASK_ID,
                "",
            )
            .await
            .unwrap();
    }
    let child = saver
        .put(
            &thread.clone().with_ns("sub:abc"),
            &Checkpoint::empty(),
            &CheckpointMetadata::new(CheckpointSource::Input, -1),
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(child.checkpoint_ns, "sub:abc");

    let ours: Vec<Json> = saver
        .list(&ListOptions::all())
        .await
        .unwrap()
        .iter()
        .map(dump)
        .collect();
    assert_eq!(ours.len(), 5);
    assert_same(&ours, &python_dump(&db));
}

const AES_KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

async fn encrypted_saver(db: &Path, key: &[u8]) -> SqliteSaver {
    SqliteConfig::file(db)
        .serializer(std::sync::Arc::new(
            stategraph_checkpoint::EncryptedSerializer::aes(key).unwrap(),
        ))
        .connect()
        .await
        .unwrap()
}

#[tokio::test]
async fn python_reads_a_thread_we_encrypted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("enc.sqlite");
    let saver = encrypted_saver(&db, AES_KEY).await;
    let mut cp = Checkpoint::empty();
    cp.id = CheckpointId::for_step(0);
    cp.channel_values
        .insert("secret".into(), Value::from("top-secret-text"));
    cp.channel_values
        .insert("list".into(), value!([1, {"k": "v"}]));
    cp.channel_versions
        .insert("secret", saver.get_next_version(None));
    cp.channel_versions
        .insert("list", saver.get_next_version(None));
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let at = saver
        .put(
            &CheckpointConfig::new("enc"),
            &cp,
            &meta,
            &cp.channel_versions,
        )
        .await
        .unwrap();
    saver
        .put_writes(
            &at,
            &[
                ("secret".into(), "written-secret".into()),
                ("n".into(), Value::Null),
            ],
            "task",
            "~p",
        )
        .await
        .unwrap();
    // At rest: tagged `+aes`, and the plaintext is nowhere in the file.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let tag: String = conn
        .query_row("SELECT type FROM checkpoints", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tag, "msgpack+aes");
    drop(conn);
    let raw = std::fs::read(&db).unwrap();
    for needle in [&b"top-secret-text"[..], b"written-secret"] {
        assert!(
            !raw.windows(needle.len()).any(|w| w == needle),
            "plaintext on disk"
        );
    }
    // Python, with the same key, reads exactly what we stored.
    let ours: Vec<Json> = saver
        .list(&ListOptions::all())
        .await
        .unwrap()
        .iter()
        .map(dump)
        .collect();
    let theirs = python_dump_with(&db, &["--aes"], &[("LANGGRAPH_AES_KEY", AES_KEY)]);
    assert_same(&ours, &theirs);
}

#[tokio::test]
async fn we_read_a_thread_python_encrypted_and_wrong_keys_fail_typed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("py-enc.sqlite");
    let script = manifest_dir().join("../../scripts/interop/aes_thread.py");
    let out = Command::new(python())
        .arg(&script)
        .arg(&db)
        .arg("t")
        .env("LANGGRAPH_AES_KEY", std::str::from_utf8(AES_KEY).unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let saver = encrypted_saver(&db, AES_KEY).await;
    let latest = saver
        .get_tuple(&CheckpointConfig::new("t"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest.checkpoint.channel_values["bar"], value!(["a", "b"]));
    assert_eq!(latest.checkpoint.channel_values["foo"], Value::from("b"));
    assert_eq!(
        saver.list(&ListOptions::thread("t")).await.unwrap().len(),
        4
    );

    // A wrong key: a typed error naming the checkpoint, never garbage.
    let wrong = encrypted_saver(&db, b"fedcba9876543210fedcba9876543210").await;
    match wrong.get_tuple(&CheckpointConfig::new("t")).await {
        Err(stategraph_checkpoint::Error::Serialization { location, source }) => {
            assert_eq!(location.thread_id, "t");
            assert!(location.checkpoint_id.is_some());
            assert!(matches!(
                source,
                stategraph_checkpoint::SerdeError::Cipher { .. }
            ));
        }
        other => panic!("expected a Serialization error, got {other:?}"),
    }
    // No key at all: also typed, and it says why.
    let plain = SqliteConfig::file(&db).connect().await.unwrap();
    let err = plain
        .get_tuple(&CheckpointConfig::new("t"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("encrypted"), "{err}");
}

#[tokio::test]
async fn strict_decoding_refuses_unexpected_python_classes() {
    use stategraph_value::allowlist::Allowlist;
    let dir = tempfile::tempdir().unwrap();
    let db = copy_fixture("langgraph_1_2_22.sqlite", dir.path());
    let strict = |list: Allowlist| {
        SqliteConfig::file(&db)
            .serializer(std::sync::Arc::new(JsonPlusSerializer::new().strict(list)))
            .connect()
    };
    // The `rich` thread holds a pydantic model, a dataclass and an enum of the generator's
    // own module: refused, with the channel named.
    let refused = strict(Allowlist::safe())
        .await
        .unwrap()
        .get_tuple(&CheckpointConfig::new("rich"))
        .await
        .unwrap_err();
    match &refused {
        stategraph_checkpoint::Error::Serialization { location, source } => {
            assert_eq!(location.thread_id, "rich");
            assert!(location.channel.is_some(), "{refused}");
            assert!(matches!(
                source,
                stategraph_checkpoint::SerdeError::Disallowed { .. }
            ));
        }
        other => panic!("{other:?}"),
    }
    // Allowing that module reads it; LangChain messages pass the default list.
    let allowed = strict(Allowlist::safe().allow("gen_sqlite_fixture", "*"))
        .await
        .unwrap();
    assert!(
        allowed
            .get_tuple(&CheckpointConfig::new("rich"))
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        strict(Allowlist::safe())
            .await
            .unwrap()
            .get_tuple(&CheckpointConfig::new("chat"))
            .await
            .unwrap()
            .is_some()
    );
}
