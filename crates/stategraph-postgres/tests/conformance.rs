//! The shared conformance suite against `PostgresSaver`, each case in a fresh schema of the
//! database `STATEGRAPH_TEST_POSTGRES_URL` names (default: the local test server). A server
//! that cannot be reached fails the tests, naming the URL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use stategraph_checkpoint::conformance::{Corruptor, Fixture, RawPart};
use stategraph_postgres::{PostgresConfig, PostgresSaver};

mod common;

use common::*;

async fn fresh(prepared: bool) -> (PostgresSaver, String) {
    let schema = scratch_name("sg_test");
    let saver = PostgresConfig::from_url(&url())
        .unwrap()
        .schema(schema.clone())
        .pool_size(4)
        .prepared_statements(prepared)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {} is required for these tests: {e}", url()));
    (saver, schema)
}

/// Edits rows of the scratch schema directly.
struct Rows(tokio_postgres::Client);

fn column(part: RawPart) -> &'static str {
    match part {
        RawPart::Checkpoint => "checkpoint",
        RawPart::Metadata => "metadata",
    }
}

#[async_trait::async_trait]
impl Corruptor for Rows {
    async fn read_raw(&self, thread: &str, ns: &str, id: &str, part: RawPart) -> Vec<u8> {
        let sql = format!(
            "SELECT {}::text FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 \
             AND checkpoint_id = $3",
            column(part)
        );
        let row = self.0.query_one(&sql, &[&thread, &ns, &id]).await.unwrap();
        row.get::<_, String>(0).into_bytes()
    }

    async fn write_raw(&self, thread: &str, ns: &str, id: &str, part: RawPart, bytes: &[u8]) {
        let sql = format!(
            "UPDATE checkpoints SET {} = $4::text::jsonb WHERE thread_id = $1 \
             AND checkpoint_ns = $2 AND checkpoint_id = $3",
            column(part)
        );
        let text = std::str::from_utf8(bytes).unwrap();
        let n = self
            .0
            .execute(&sql, &[&thread, &ns, &id, &text])
            .await
            .unwrap();
        assert_eq!(n, 1, "one row rewritten");
    }

    async fn set_parent(&self, thread: &str, ns: &str, id: &str, parent: &str) {
        let n = self
            .0
            .execute(
                "UPDATE checkpoints SET parent_checkpoint_id = $4 WHERE thread_id = $1 \
                 AND checkpoint_ns = $2 AND checkpoint_id = $3",
                &[&thread, &ns, &id, &parent],
            )
            .await
            .unwrap();
        assert_eq!(n, 1, "one row rewritten");
    }
}

async fn fixture() -> Fixture {
    let (saver, schema) = fresh(true).await;
    let rows = Rows(in_schema(&schema).await);
    Fixture::new(saver)
        .with_corruptor(rows)
        .with_guard(drop_schema(schema))
}

stategraph_checkpoint::checkpointer_conformance!(fixture);

/// The same suite with every statement sent with its text (what runs behind a pooler that
/// cannot carry prepared statements).
mod unprepared {
    use super::*;

    async fn fixture() -> Fixture {
        let (saver, schema) = fresh(false).await;
        let rows = Rows(in_schema(&schema).await);
        Fixture::new(saver)
            .with_corruptor(rows)
            .with_guard(drop_schema(schema))
    }

    stategraph_checkpoint::checkpointer_conformance!(fixture);
}
