//! The shared conformance suite against `PostgresSaver`, each case in a fresh schema of the
//! database `STATEGRAPH_TEST_POSTGRES_URL` names (default: the local test server). A server
//! that cannot be reached fails the tests, naming the URL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use stategraph_checkpoint::conformance::Fixture;
use stategraph_postgres::{PostgresConfig, PostgresSaver};

fn url() -> String {
    std::env::var("STATEGRAPH_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Drops the test's schema when the fixture goes away.
struct DropSchema(String);

impl Drop for DropSchema {
    fn drop(&mut self) {
        let schema = self.0.clone();
        // Drop runs outside any async context we can borrow: use a short-lived runtime on a
        // thread of its own.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                match tokio_postgres_connect(&url()).await {
                    Ok((client, conn)) => {
                        let task = tokio::spawn(conn);
                        if let Err(e) = client
                            .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                            .await
                        {
                            eprintln!("could not drop test schema {schema}: {e}");
                        }
                        drop(client);
                        let _ = task.await;
                    }
                    Err(e) => eprintln!("could not drop test schema {schema}: {e}"),
                }
            });
        })
        .join();
    }
}

async fn tokio_postgres_connect(
    url: &str,
) -> Result<
    (
        tokio_postgres::Client,
        tokio_postgres::Connection<tokio_postgres::Socket, tokio_postgres::tls::NoTlsStream>,
    ),
    tokio_postgres::Error,
> {
    tokio_postgres::connect(url, tokio_postgres::NoTls).await
}

async fn fresh() -> (PostgresSaver, String) {
    let schema = format!(
        "sg_test_{}",
        stategraph_checkpoint::uuid6(None).replace('-', "")
    );
    let saver = PostgresConfig::from_url(&url())
        .unwrap()
        .schema(schema.clone())
        .pool_size(4)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {} is required for these tests: {e}", url()));
    (saver, schema)
}

async fn fixture() -> Fixture {
    let (saver, schema) = fresh().await;
    Fixture::new(saver).with_guard(DropSchema(schema))
}

stategraph_checkpoint::checkpointer_conformance!(fixture);
