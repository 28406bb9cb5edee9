//! Indexes: Python's unique indexes, the saver's own, the TTL indexes.

use mongodb::bson::{Bson, Document, doc};
use mongodb::error::ErrorKind;
use mongodb::options::IndexOptions;
use mongodb::{Collection, Database, IndexModel};
use stategraph_checkpoint::{Error, Result};

use super::MongoSaver;
use super::cursor::Cursor;
use crate::error::db as db_error;

/// MongoDB's error code for a collection that does not exist.
const NAMESPACE_NOT_FOUND: i32 = 26;

/// An index's keys as (field, direction) pairs, whatever numeric type the server sent.
fn key_list(keys: &Document) -> Vec<(String, i64)> {
    keys.iter()
        .map(|(k, v)| {
            let dir = match v {
                Bson::Int32(i) => i64::from(*i),
                Bson::Int64(i) => *i,
                #[allow(clippy::cast_possible_truncation)]
                Bson::Double(f) => *f as i64,
                _ => 0,
            };
            (k.clone(), dir)
        })
        .collect()
}

fn keys(pairs: &[(&str, i32)]) -> Document {
    pairs
        .iter()
        .map(|(k, d)| ((*k).to_owned(), Bson::Int32(*d)))
        .collect()
}

/// What the saver needs to know of an existing index.
#[derive(Debug)]
struct Index {
    name: String,
    keys: Document,
    expire_after: Option<i64>,
}

/// The indexes of a collection (none if it does not exist yet).
async fn indexes(db: &Database, collection: &str) -> Result<Vec<Index>> {
    let doing = "listing indexes";
    let reply = match db.run_command(doc! { "listIndexes": collection }).await {
        Ok(r) => r,
        Err(e) if matches!(&*e.kind, ErrorKind::Command(c) if c.code == NAMESPACE_NOT_FOUND) => {
            return Ok(Vec::new());
        }
        Err(e) => return Err(db_error(doing)(e)),
    };
    let mut cursor = Cursor::from_reply(db, reply, "firstBatch", doing)?;
    let mut out = Vec::new();
    while let Some(spec) = cursor.next().await? {
        out.push(Index {
            name: spec.get_str("name").unwrap_or_default().to_owned(),
            keys: spec.get_document("key").cloned().unwrap_or_default(),
            expire_after: match spec.get("expireAfterSeconds") {
                Some(Bson::Int32(i)) => Some(i64::from(*i)),
                Some(Bson::Int64(i)) => Some(*i),
                #[allow(clippy::cast_possible_truncation)]
                Some(Bson::Double(f)) => Some(*f as i64),
                _ => None,
            },
        });
    }
    Ok(out)
}

fn find<'i>(existing: &'i [Index], wanted: &Document) -> Option<&'i Index> {
    let wanted = key_list(wanted);
    existing.iter().find(|i| key_list(&i.keys) == wanted)
}

/// The TTL index on `created_at` (Python's: default name, `expireAfterSeconds`).
fn ttl_index(seconds: i64) -> IndexModel {
    IndexModel::builder()
        .keys(keys(&[("created_at", 1)]))
        .options(
            IndexOptions::builder()
                .expire_after(std::time::Duration::from_secs(seconds.unsigned_abs()))
                .build(),
        )
        .build()
}

impl MongoSaver {
    /// Creates what is missing, as Python's saver does (an index with the same keys counts
    /// as present); with a TTL, a TTL index on `created_at` in
    /// each collection (an existing one with another duration is changed).
    pub(crate) async fn setup(&self) -> Result<()> {
        let ids = [
            ("thread_id", 1),
            ("checkpoint_ns", 1),
            ("checkpoint_id", -1),
        ];
        let write_ids = [
            ("thread_id", 1),
            ("checkpoint_ns", 1),
            ("checkpoint_id", -1),
            ("task_id", 1),
            ("idx", 1),
        ];
        let unique = |k: &[(&str, i32)]| {
            IndexModel::builder()
                .keys(keys(k))
                .options(IndexOptions::builder().unique(true).build())
                .build()
        };
        let checkpoints = self.checkpoints.clone();
        let writes = self.writes.clone();
        self.ensure(&checkpoints, vec![unique(&ids)]).await?;
        self.ensure(&writes, vec![unique(&write_ids)]).await?;
        Ok(())
    }

    async fn ensure(
        &self,
        collection: &Collection<Document>,
        wanted: Vec<IndexModel>,
    ) -> Result<()> {
        let existing = indexes(&self.db, collection.name()).await?;
        for index in wanted {
            if find(&existing, &index.keys).is_none() {
                collection
                    .create_index(index)
                    .await
                    .map_err(db_error("creating an index"))?;
            }
        }
        let Some(ttl) = self.ttl else { return Ok(()) };
        let seconds = i64::try_from(ttl.as_secs().max(1)).unwrap_or(i64::MAX);
        let created = keys(&[("created_at", 1)]);
        match find(&existing, &created) {
            None => {
                collection
                    .create_index(ttl_index(seconds))
                    .await
                    .map_err(db_error("creating the TTL index"))?;
            }
            Some(index) if index.expire_after != Some(seconds) => {
                // Another duration: drop and create it again (`collMod` would change it in
                // place, but not every MongoDB-compatible server has it; both accept this).
                self.db
                    .run_command(doc! { "dropIndexes": collection.name(), "index": &index.name })
                    .await
                    .map_err(db_error("changing the TTL index"))?;
                collection
                    .create_index(ttl_index(seconds))
                    .await
                    .map_err(db_error("changing the TTL index"))?;
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// For a saver connected without setup: the checkpoints collection must exist.
    pub(crate) async fn check_existing(&self) -> Result<()> {
        let name = self.checkpoints.name();
        let doing = "listing collections";
        let reply = self
            .db
            .run_command(
                doc! { "listCollections": 1, "filter": { "name": name }, "nameOnly": true },
            )
            .await
            .map_err(db_error(doing))?;
        if Cursor::from_reply(&self.db, reply, "firstBatch", doing)?
            .next()
            .await?
            .is_none()
        {
            return Err(Error::NotFound {
                what: format!(
                    "collection `{name}` in MongoDB database `{}`",
                    self.db.name()
                ),
            });
        }
        Ok(())
    }
}
