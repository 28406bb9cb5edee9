//! The shared conformance suite against `MongoSaver`, each case in its own database on the
//! server `STATEGRAPH_TEST_MONGODB_URL` names (default: the local MongoDB-compatible server
//! `scripts/mongo-server.sh start` runs). A server that cannot be reached fails the tests,
//! naming the URL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use stategraph_testkit::mongodb::fixture;

stategraph_conformance::checkpointer_conformance!(fixture);

/// A saver on a client the user owns keeps its collections in the database it is given.
#[tokio::test]
async fn a_saver_on_a_users_client() {
    let database = stategraph_testkit::mongodb::ScratchDatabase::new("sg_user_client");
    let client = stategraph_testkit::mongodb::client().await;
    let saver = stategraph_mongodb::MongoConfig::from_client(client.clone(), database.name())
        .connect()
        .await
        .unwrap();
    round_trip(&saver).await;
    let stored = client
        .database(database.name())
        .collection::<mongodb::bson::Document>("checkpoints")
        .count_documents(mongodb::bson::doc! {})
        .await
        .unwrap();
    assert_eq!(stored, 1, "written through the user's client");
}

/// Puts a checkpoint through `saver` and reads it back, by id and as the thread's latest.
async fn round_trip(saver: &dyn stategraph_checkpoint::CheckpointSaver) {
    use stategraph_checkpoint::*;
    let mut cp = Checkpoint::empty();
    cp.channel_values.insert("k".into(), "v".into());
    cp.channel_versions
        .insert("k", saver.get_next_version(None));
    let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
    let at = saver
        .put(
            &CheckpointConfig::new("t"),
            &cp,
            &meta,
            &cp.channel_versions,
        )
        .await
        .unwrap();
    let back = saver.get_tuple(&at).await.unwrap().expect("stored");
    assert_eq!(back.checkpoint, cp);
    let latest = saver.get_tuple(&CheckpointConfig::new("t")).await.unwrap();
    assert_eq!(latest.map(|t| t.checkpoint.id), Some(cp.id));
}
