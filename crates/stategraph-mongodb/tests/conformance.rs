//! The shared conformance suite against `MongoSaver`, each case in its own database on the
//! server `STATEGRAPH_TEST_MONGODB_URL` names (default: the local MongoDB-compatible server
//! `scripts/mongo-server.sh start` runs). A server that cannot be reached fails the tests,
//! naming the URL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use stategraph_testkit::mongodb::fixture;

stategraph_conformance::checkpointer_conformance!(fixture);
