//! What the saver stores, field by field, is what Python's `langgraph-checkpoint-mongodb`
//! stores (the interop tests show each side reads the other's; this pins the documents and
//! indexes themselves), plus the conditional put's claim, the TTL, and connecting without
//! setup.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use mongodb::bson::{Bson, Document, doc};
use stategraph_checkpoint::*;
use stategraph_mongodb::MongoConfig;
use stategraph_testkit::mongodb::{
    ScratchDatabase, client, find_documents, index_specs, saver, saver_with,
};

fn bin(bytes: &[u8]) -> Bson {
    Bson::Binary(mongodb::bson::Binary {
        subtype: mongodb::bson::spec::BinarySubtype::Generic,
        bytes: bytes.to_vec(),
    })
}

fn pair(tag: &str, bytes: &[u8]) -> Bson {
    Bson::Array(vec![Bson::from(tag), bin(bytes)])
}

async fn first_checkpoint(saver: &dyn CheckpointSaver, thread: &str) -> CheckpointConfig {
    let mut cp = Checkpoint::empty();
    cp.channel_values.insert("foo".into(), "bar".into());
    cp.channel_versions
        .insert("foo", saver.get_next_version(None));
    let meta = CheckpointMetadata::new(CheckpointSource::Input, -1).with("run_id", "r1");
    saver
        .put_if_latest(
            &CheckpointConfig::new(thread),
            &cp,
            &meta,
            &cp.channel_versions,
            None,
        )
        .await
        .unwrap()
}

fn names(specs: &[Document]) -> Vec<&str> {
    let mut n: Vec<&str> = specs.iter().map(|s| s.get_str("name").unwrap()).collect();
    n.sort_unstable();
    n
}

#[tokio::test]
async fn documents_and_indexes_are_the_python_savers() {
    let (saver, database) = saver().await;
    let at = first_checkpoint(&saver, "t").await;
    saver
        .put_writes(&at, &[("foo".into(), "w".into())], "task-1", "~path")
        .await
        .unwrap();
    let db = client().await.database(database.name());

    let cps = find_documents(&db, "checkpoints", doc! {}).await;
    assert_eq!(cps.len(), 1);
    let mut cp = cps[0].clone();
    // The conditional put's claim: the first checkpoint of the namespace.
    assert_eq!(
        cp.remove("_id"),
        Some(Bson::Document(doc! {
            "thread_id": "t", "checkpoint_ns": "", "stategraph_after": "",
        }))
    );
    let body = cp.remove("checkpoint").unwrap();
    assert!(matches!(body, Bson::Binary(_)), "{body:?}");
    assert_eq!(
        cp,
        doc! {
            "thread_id": "t",
            "checkpoint_ns": "",
            "checkpoint_id": at.checkpoint_id.as_deref().unwrap(),
            "parent_checkpoint_id": Bson::Null,
            "type": "msgpack",
            "metadata": {
                "source": pair("msgpack", b"\xa5input"),
                "step": pair("msgpack", b"\xff"),
                "parents": {},
                "run_id": pair("msgpack", b"\xa2r1"),
            },
        }
    );
    let mut w = find_documents(&db, "checkpoint_writes", doc! {}).await;
    assert_eq!(w.len(), 1);
    w[0].remove("_id");
    assert_eq!(
        w[0],
        doc! {
            "thread_id": "t",
            "checkpoint_ns": "",
            "checkpoint_id": at.checkpoint_id.as_deref().unwrap(),
            "task_id": "task-1",
            "task_path": "~path",
            "idx": 0_i32,
            "channel": "foo",
            "type": "msgpack",
            "value": bin(b"\xa1w"),
        }
    );

    assert_eq!(
        names(&index_specs(&db, "checkpoints").await),
        ["_id_", "thread_id_1_checkpoint_ns_1_checkpoint_id_-1"]
    );
    assert_eq!(
        names(&index_specs(&db, "checkpoint_writes").await),
        [
            "_id_",
            "thread_id_1_checkpoint_ns_1_checkpoint_id_-1_task_id_1_idx_1"
        ]
    );
}

#[tokio::test]
async fn a_ttl_stamps_documents_and_indexes_them_and_a_new_ttl_changes_the_index() {
    let (saver, database) = saver_with(|c| c.ttl(Duration::from_secs(60))).await;
    let at = first_checkpoint(&saver, "t").await;
    saver
        .put_writes(&at, &[("foo".into(), "w".into())], "task-1", "")
        .await
        .unwrap();
    let db = client().await.database(database.name());
    for collection in ["checkpoints", "checkpoint_writes"] {
        let docs = find_documents(&db, collection, doc! {}).await;
        assert!(
            matches!(docs[0].get("created_at"), Some(Bson::DateTime(_))),
            "{collection}: {docs:?}"
        );
    }
    let ttl_of = |specs: Vec<Document>| {
        specs
            .into_iter()
            .find(|s| s.get_str("name").ok() == Some("created_at_1"))
            .and_then(|s| s.get("expireAfterSeconds").cloned())
            .and_then(|v| match v {
                Bson::Int32(i) => Some(i64::from(i)),
                Bson::Int64(i) => Some(i),
                _ => None,
            })
    };
    assert_eq!(ttl_of(index_specs(&db, "checkpoints").await), Some(60));
    assert_eq!(
        ttl_of(index_specs(&db, "checkpoint_writes").await),
        Some(60)
    );
    // Connecting again with another TTL changes the index rather than failing on it.
    MongoConfig::from_url(&database.url())
        .unwrap()
        .ttl(Duration::from_secs(120))
        .connect()
        .await
        .unwrap();
    assert_eq!(ttl_of(index_specs(&db, "checkpoints").await), Some(120));
    assert_eq!(
        ttl_of(index_specs(&db, "checkpoint_writes").await),
        Some(120)
    );
}

#[tokio::test]
async fn without_setup_a_missing_collection_is_not_found_and_nothing_is_created() {
    let database = ScratchDatabase::new("sg_existing");
    let err = MongoConfig::from_url(&database.url())
        .unwrap()
        .without_setup()
        .connect()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::NotFound { what } if what.contains("checkpoints")),
        "{err:?}"
    );
    let db = client().await.database(database.name());
    let listed = db
        .run_command(doc! { "listCollections": 1, "nameOnly": true })
        .await
        .unwrap();
    let collections = listed
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert!(collections.is_empty(), "{collections:?}");
}

/// A database only Python's saver wrote to: without setup, stategraph reads it and continues
/// it with conditional puts, and a second writer claiming the same predecessor is refused.
#[tokio::test]
async fn without_setup_conditional_puts_still_refuse_a_second_writer() {
    let database = ScratchDatabase::new("sg_existing");
    let db = client().await.database(database.name());
    db.create_collection("checkpoints").await.unwrap();
    let saver = MongoConfig::from_url(&database.url())
        .unwrap()
        .without_setup()
        .connect()
        .await
        .unwrap();
    let at = first_checkpoint(&saver, "t").await;
    let first = at.checkpoint_id.as_deref().unwrap();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let next = || {
        let mut cp = Checkpoint::empty();
        cp.channel_versions.insert("foo", ChannelVersion::Int(2));
        cp
    };
    let (a, b) = (next(), next());
    saver
        .put_if_latest(&at, &a, &meta, &a.channel_versions, Some(first))
        .await
        .unwrap();
    let refused = saver
        .put_if_latest(&at, &b, &meta, &b.channel_versions, Some(first))
        .await
        .unwrap_err();
    assert!(matches!(&refused, Error::Conflict { .. }), "{refused:?}");
    let latest = saver
        .get_tuple(&CheckpointConfig::new("t"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest.checkpoint.id, a.id);
}

/// Two savers (two processes' worth) racing to extend the same checkpoint: the server lets
/// exactly one claim it, even when neither reads first (each wrote the predecessor itself).
#[tokio::test]
async fn two_savers_that_each_wrote_the_predecessor_cannot_both_extend_it() {
    let (one, database) = saver().await;
    let two = MongoConfig::from_url(&database.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let at = first_checkpoint(&one, "t").await;
    let first = at.checkpoint_id.as_deref().unwrap();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    // `one` remembers `first` as its own last write, so it skips the read; `two` reads.
    let mut results = Vec::new();
    for saver in [&one, &two] {
        let cp = Checkpoint::empty();
        results.push(
            saver
                .put_if_latest(&at, &cp, &meta, &cp.channel_versions, Some(first))
                .await,
        );
    }
    assert!(results[0].is_ok(), "{:?}", results[0]);
    assert!(
        matches!(&results[1], Err(Error::Conflict { .. })),
        "{:?}",
        results[1]
    );
    // Expecting the old checkpoint again is refused (it is not what `one` wrote last, so it
    // reads first); the other saver extends the newest.
    let newest = results[0].as_ref().unwrap().checkpoint_id.clone().unwrap();
    let cp = Checkpoint::empty();
    let stale = one
        .put_if_latest(&at, &cp, &meta, &cp.channel_versions, Some(first))
        .await;
    assert!(matches!(&stale, Err(Error::Conflict { .. })), "{stale:?}");
    let cp = Checkpoint::empty();
    two.put_if_latest(&at, &cp, &meta, &cp.channel_versions, Some(&newest))
        .await
        .unwrap();
}

/// Integer channel versions, as Python's MongoDB saver (LangGraph's default) writes them.
#[tokio::test]
async fn channel_versions_are_integers() {
    let (saver, _database) = saver().await;
    assert_eq!(saver.get_next_version(None), ChannelVersion::Int(1));
    assert_eq!(
        saver.get_next_version(Some(&ChannelVersion::Int(41))),
        ChannelVersion::Int(42)
    );
}
