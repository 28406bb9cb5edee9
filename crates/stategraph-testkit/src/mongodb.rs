//! MongoDB (feature `mongodb`): scratch databases dropped with their guard, savers on them,
//! and the conformance fixture with its [`Documents`] corruptor. Failing to reach the server
//! panics, naming its URL and how to start the local one.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test support: a failed set-up or edit fails the test"
)]

use mongodb::bson::{Binary, Bson, Document, doc, spec::BinarySubtype};
use stategraph_conformance::{Corruptor, Fixture, RawPart};
use stategraph_mongodb::{MongoConfig, MongoSaver};

use crate::Cleanup;
pub use crate::services::{mongodb_url as url, scratch_name};

/// `url` with its database (the URL's path) replaced by `database`.
///
/// ```
/// use stategraph_testkit::mongodb::with_database;
/// assert_eq!(
///     with_database("mongodb://h:1/?directConnection=true", "d"),
///     "mongodb://h:1/d?directConnection=true"
/// );
/// assert_eq!(with_database("mongodb://u:p@h:1/old", "d"), "mongodb://u:p@h:1/d");
/// assert_eq!(with_database("mongodb://h", "d"), "mongodb://h/d");
/// ```
pub fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let (scheme, rest) = base.split_once("://").unwrap_or(("mongodb", base));
    let hosts = rest.split('/').next().unwrap_or(rest);
    let mut out = format!("{scheme}://{hosts}/{database}");
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// The test server's address (for a proxy in front of it; a single-host URL).
pub fn server_addr() -> std::net::SocketAddr {
    use std::net::ToSocketAddrs;
    let url = url();
    let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
    let hosts = rest.split(['/', '?']).next().unwrap();
    let host_port = hosts.rsplit('@').next().unwrap();
    host_port.to_socket_addrs().unwrap().next().unwrap()
}

fn unreachable(e: impl std::fmt::Display) -> String {
    format!(
        "MongoDB at {} is required for these tests (start the local MongoDB-compatible server \
         with `scripts/mongo-server.sh start`, or set STATEGRAPH_TEST_MONGODB_URL): {e}",
        url()
    )
}

/// A client for the test server (for editing documents behind a saver's back).
///
/// # Panics
/// Naming the URL, if the URL does not parse.
pub async fn client() -> mongodb::Client {
    mongodb::Client::with_uri_str(url())
        .await
        .unwrap_or_else(|e| panic!("{}", unreachable(e)))
}

/// A database of its own for one test, dropped with the guard.
#[derive(Debug)]
pub struct ScratchDatabase {
    name: String,
    _drop: Cleanup,
}

impl ScratchDatabase {
    /// A fresh database starting with `label`.
    pub fn new(label: &str) -> Self {
        let name = scratch_name(label);
        let drop = {
            let name = name.clone();
            Cleanup::new(async move {
                if let Ok(client) = mongodb::Client::with_uri_str(url()).await {
                    let _ = client.database(&name).drop().await;
                }
            })
        };
        Self { name, _drop: drop }
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The test server's URL naming this database.
    pub fn url(&self) -> String {
        with_database(&url(), &self.name)
    }
}

/// A saver on a fresh [`ScratchDatabase`].
///
/// # Panics
/// Naming the URL, if the server cannot be reached.
pub async fn saver() -> (MongoSaver, ScratchDatabase) {
    saver_with(|config| config).await
}

/// Like [`saver`], with `configure` applied to the configuration before connecting (say, a
/// TTL).
///
/// # Panics
/// Naming the URL, if the server cannot be reached.
pub async fn saver_with(
    configure: impl FnOnce(MongoConfig) -> MongoConfig,
) -> (MongoSaver, ScratchDatabase) {
    let database = ScratchDatabase::new("sg_test");
    let config = MongoConfig::from_url(&database.url()).unwrap();
    let saver = configure(config)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("{}", unreachable(e)));
    (saver, database)
}

/// The conformance suite's fixture: a saver on a fresh database, [`Documents`] in it, and
/// the database's guard.
pub async fn fixture() -> Fixture {
    let (saver, database) = saver().await;
    let documents = Documents::connect(&database).await;
    Fixture::new(saver)
        .with_corruptor(documents)
        .with_guard(database)
}

/// Edits the checkpoint documents of a database directly (the conformance suite's
/// [`Corruptor`]).
#[derive(Debug)]
pub struct Documents {
    db: mongodb::Database,
    checkpoints: mongodb::Collection<Document>,
}

impl Documents {
    /// The `checkpoints` collection of `database`.
    pub async fn connect(database: &ScratchDatabase) -> Self {
        let db = client().await.database(database.name());
        Self {
            checkpoints: db.collection("checkpoints"),
            db,
        }
    }

    async fn get(&self, thread: &str, ns: &str, id: &str) -> Document {
        find_documents(&self.db, "checkpoints", key(thread, ns, id))
            .await
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("checkpoint {id} of thread {thread} is not stored"))
    }

    async fn set(&self, thread: &str, ns: &str, id: &str, field: &str, value: Bson) {
        self.checkpoints
            .update_one(key(thread, ns, id), doc! { "$set": { field: value } })
            .await
            .unwrap();
    }
}

/// The documents of `collection` matching `filter` (up to 10,000), through a plain `find`
/// command: the driver's cursors refuse the 32-bit cursor ids some MongoDB-compatible servers
/// send.
pub async fn find_documents(
    db: &mongodb::Database,
    collection: &str,
    filter: Document,
) -> Vec<Document> {
    let reply = db
        .run_command(doc! {
            "find": collection,
            "filter": filter,
            "batchSize": 10_000,
            "singleBatch": true,
        })
        .await
        .unwrap();
    reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|d| d.as_document().unwrap().clone())
        .collect()
}

/// The index specifications of `collection` (`listIndexes`, one batch).
pub async fn index_specs(db: &mongodb::Database, collection: &str) -> Vec<Document> {
    let reply = db
        .run_command(doc! { "listIndexes": collection })
        .await
        .unwrap();
    reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|d| d.as_document().unwrap().clone())
        .collect()
}

fn key(thread: &str, ns: &str, id: &str) -> Document {
    doc! { "thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": id }
}

#[async_trait::async_trait]
impl Corruptor for Documents {
    /// The checkpoint's bytes; the metadata document as BSON bytes.
    async fn read_raw(&self, thread: &str, ns: &str, id: &str, part: RawPart) -> Vec<u8> {
        let doc = self.get(thread, ns, id).await;
        match part {
            RawPart::Checkpoint => doc.get_binary_generic("checkpoint").unwrap().clone(),
            RawPart::Metadata => {
                let mut out = Vec::new();
                doc.get_document("metadata")
                    .unwrap()
                    .to_writer(&mut out)
                    .unwrap();
                out
            }
        }
    }

    /// Bytes that are a BSON document become the metadata document; anything else is stored
    /// as binary data where a document belongs (damage).
    async fn write_raw(&self, thread: &str, ns: &str, id: &str, part: RawPart, bytes: &[u8]) {
        let binary = Bson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: bytes.to_vec(),
        });
        let (field, value) = match part {
            RawPart::Checkpoint => ("checkpoint", binary),
            RawPart::Metadata => (
                "metadata",
                Document::from_reader(bytes).map_or(binary, Bson::Document),
            ),
        };
        self.set(thread, ns, id, field, value).await;
    }

    async fn set_parent(&self, thread: &str, ns: &str, id: &str, parent: &str) {
        self.set(thread, ns, id, "parent_checkpoint_id", Bson::from(parent))
            .await;
    }
}
