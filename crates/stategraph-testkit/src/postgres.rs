//! PostgreSQL (feature `postgres`): connections to the test server, scratch schemas dropped
//! with their guard, savers on them, and the conformance fixture with its [`Rows`]
//! corruptor. Failing to reach the server panics, naming its URL.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test support: a failed set-up or edit fails the test"
)]

use std::net::SocketAddr;

use stategraph_conformance::{Corruptor, Fixture, RawPart};
use stategraph_postgres::{PostgresConfig, PostgresSaver};

use crate::Cleanup;
pub use crate::services::{postgres_url as url, scratch_name};

/// A plain connection to the test database (its default `search_path`).
///
/// # Panics
/// Naming the URL, if the server cannot be reached.
pub async fn connect() -> tokio_postgres::Client {
    connect_to(&url()).await
}

/// A connection to `url` (a test URL, such as a [`ScratchSchema::url`]).
///
/// # Panics
/// Naming the URL, if the server cannot be reached.
pub async fn connect_to(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {url} is required for these tests: {e}"));
    tokio::spawn(conn);
    client
}

/// A connection whose `search_path` is `schema`, then `public` (where pgvector lives).
pub async fn in_schema(schema: &str) -> tokio_postgres::Client {
    let client = connect().await;
    client
        .batch_execute(&format!("SET search_path = \"{schema}\", public"))
        .await
        .unwrap();
    client
}

/// Drops `schema` (with everything in it) when the guard goes away.
pub fn drop_schema(schema: String) -> Cleanup {
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
/// drops it).
///
/// # Panics
/// If the server does not have pgvector (`scripts/install-pgvector.sh` installs it).
pub async fn require_pgvector() {
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

/// The test server's address (for a proxy in front of it).
pub fn server_addr() -> SocketAddr {
    let config: tokio_postgres::Config = url().parse().unwrap();
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}")
        .parse()
        .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], port)))
}

/// A URL for the test server's user and database at `addr` instead (a proxy, a silent
/// server).
pub fn url_via(addr: SocketAddr) -> String {
    let config: tokio_postgres::Config = url().parse().unwrap();
    let user = config.get_user().unwrap_or("postgres");
    let db = config.get_dbname().unwrap_or("test");
    format!("postgres://{user}@{addr}/{db}")
}

/// A schema of its own for one test, dropped (with everything in it) with the guard.
#[derive(Debug)]
pub struct ScratchSchema {
    name: String,
    _drop: Cleanup,
}

impl ScratchSchema {
    /// A fresh schema name starting with `prefix`; the schema is not created (a saver
    /// configured with it creates it), but is dropped with the guard either way.
    pub fn new(prefix: &str) -> Self {
        let name = scratch_name(prefix);
        Self {
            _drop: drop_schema(name.clone()),
            name,
        }
    }

    /// Like [`new`](Self::new), and creates the (empty) schema.
    ///
    /// # Panics
    /// Naming the URL, if the server cannot be reached.
    pub async fn create(prefix: &str) -> Self {
        let schema = Self::new(prefix);
        connect()
            .await
            .batch_execute(&format!("CREATE SCHEMA \"{}\"", schema.name))
            .await
            .unwrap();
        schema
    }

    /// The schema's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A URL of the test database whose `search_path` is this schema alone (for other
    /// clients: the binary, Python).
    pub fn url(&self) -> String {
        crate::services::with_param(&url(), &format!("options=-c%20search_path%3D{}", self.name))
    }

    /// A URL of the test database whose `search_path` is this schema, then `public` (where
    /// pgvector's type lives).
    pub fn url_with_public(&self) -> String {
        format!("{}%2Cpublic", self.url())
    }

    /// A connection whose `search_path` is this schema, then `public`.
    pub async fn client(&self) -> tokio_postgres::Client {
        in_schema(&self.name).await
    }
}

/// A saver on a fresh [`ScratchSchema`] (pool of 4).
///
/// # Panics
/// Naming the URL, if the server cannot be reached.
pub async fn saver() -> (PostgresSaver, ScratchSchema) {
    saver_with(|config| config).await
}

/// Like [`saver`], with `configure` applied to the configuration before connecting.
///
/// # Panics
/// Naming the URL, if the server cannot be reached.
pub async fn saver_with(
    configure: impl FnOnce(PostgresConfig) -> PostgresConfig,
) -> (PostgresSaver, ScratchSchema) {
    let schema = ScratchSchema::new("sg_test");
    let config = PostgresConfig::from_url(&url())
        .unwrap()
        .schema(schema.name())
        .pool_size(4);
    let saver = configure(config)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {} is required for these tests: {e}", url()));
    (saver, schema)
}

/// The conformance suite's fixture: a saver on a fresh schema, [`Rows`] on it, and the
/// schema's guard.
pub async fn fixture() -> Fixture {
    fixture_with(|config| config).await
}

/// Like [`fixture`], with `configure` applied to the saver's configuration (say, without
/// prepared statements).
pub async fn fixture_with(configure: impl FnOnce(PostgresConfig) -> PostgresConfig) -> Fixture {
    let (saver, schema) = saver_with(configure).await;
    let rows = Rows::connect(&schema).await;
    Fixture::new(saver).with_corruptor(rows).with_guard(schema)
}

/// Edits the checkpoint rows of a schema directly (the conformance suite's [`Corruptor`]).
#[derive(Debug)]
pub struct Rows(tokio_postgres::Client);

impl Rows {
    /// Rows of `schema`.
    pub async fn connect(schema: &ScratchSchema) -> Self {
        Self(schema.client().await)
    }
}

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
