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
    stategraph_conformance::get_tuple_latest_when_no_checkpoint_id(&saver).await;
    stategraph_conformance::get_tuple_checkpoint_fields(&saver).await;
    let stored = client
        .database(database.name())
        .collection::<mongodb::bson::Document>("checkpoints")
        .count_documents(mongodb::bson::doc! {})
        .await
        .unwrap();
    assert_eq!(stored, 4, "the four checkpoints the cases stored");
}
