//! What the Postgres integration tests share: the server's URL, connections, scratch schemas
//! dropped afterwards, and the pgvector requirement. An unreachable server fails the test,
//! naming the URL.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use stategraph_checkpoint::conformance::Cleanup;

/// The test server (`STATEGRAPH_TEST_POSTGRES_URL`, default the local one).
pub(crate) fn url() -> String {
    std::env::var("STATEGRAPH_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A plain connection to the test database (its default `search_path`).
pub(crate) async fn connect() -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {} is required for these tests: {e}", url()));
    tokio::spawn(conn);
    client
}

/// A connection whose `search_path` is `schema`, then `public` (where pgvector lives).
pub(crate) async fn in_schema(schema: &str) -> tokio_postgres::Client {
    let client = connect().await;
    client
        .batch_execute(&format!("SET search_path = \"{schema}\", public"))
        .await
        .unwrap();
    client
}

/// A fresh schema name with `prefix`.
pub(crate) fn scratch_name(prefix: &str) -> String {
    format!(
        "{prefix}_{}",
        stategraph_checkpoint::uuid6(None).replace('-', "")
    )
}

/// Drops `schema` (with everything in it) when the guard goes away.
pub(crate) fn drop_schema(schema: String) -> Cleanup {
    Cleanup::new(async move {
        match tokio_postgres::connect(&url(), tokio_postgres::NoTls).await {
            Ok((client, conn)) => {
                let task = tokio::spawn(conn);
                let sql = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
                if let Err(e) = client.batch_execute(&sql).await {
                    eprintln!("could not drop test schema {schema}: {e}");
                }
                drop(client);
                let _ = task.await;
            }
            Err(e) => eprintln!("could not drop test schema {schema}: {e}"),
        }
    })
}

/// Makes sure the `vector` extension exists (in `public`, so dropping a test schema never
/// drops it), failing the test if the server does not have pgvector.
pub(crate) async fn require_pgvector() {
    let client = connect().await;
    let q = "SELECT 1 FROM pg_extension WHERE extname = 'vector'";
    if !client.query(q, &[]).await.unwrap().is_empty() {
        return;
    }
    let created = client
        .batch_execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        .await;
    // Another test may have created it at the same moment: look again.
    assert!(
        !client.query(q, &[]).await.unwrap().is_empty(),
        "the pgvector extension is required for these tests (run scripts/install-pgvector.sh): \
         {created:?}"
    );
}
