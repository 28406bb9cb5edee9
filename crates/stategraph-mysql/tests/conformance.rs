//! The shared conformance suite against `MySqlSaver`, each case in a fresh database on the
//! server `STATEGRAPH_TEST_MYSQL_URL` names (default: the local MariaDB). A server that cannot
//! be reached fails the tests, naming the URL.

use stategraph_testkit::mysql::fixture;

stategraph_conformance::checkpointer_conformance!(fixture);
