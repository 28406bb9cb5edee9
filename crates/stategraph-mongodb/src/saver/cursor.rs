//! Reading through `find` / `getMore` commands.
//!
//! The driver's cursor types require 64-bit cursor ids; MongoDB sends them, but some
//! MongoDB-compatible servers (mongoeco, which the test suite runs on) send small ids as 32-bit
//! integers, which the driver refuses. The saver therefore issues `find`, `getMore`,
//! `listIndexes` and `listCollections` itself and accepts either width: one formulation every
//! server answers.

use std::collections::VecDeque;

use mongodb::Database;
use mongodb::bson::{Bson, Document, doc};
use stategraph_checkpoint::{Error, Result};

use crate::error::{BACKEND, db};

/// A `find` command being built.
#[derive(Clone, Debug)]
pub(crate) struct Find(Document);

impl Find {
    /// Documents of `collection` matching `filter`.
    pub(crate) fn new(collection: &str, filter: Document) -> Self {
        Self(doc! { "find": collection, "filter": filter })
    }

    pub(crate) fn sort(mut self, sort: Document) -> Self {
        self.0.insert("sort", sort);
        self
    }

    pub(crate) fn projection(mut self, projection: Document) -> Self {
        self.0.insert("projection", projection);
        self
    }

    pub(crate) fn limit(mut self, limit: i64) -> Self {
        // A 32-bit integer where it fits: some compatible servers refuse 64-bit ones here.
        self.0.insert("limit", super::docs::int(limit));
        self
    }

    /// Opens the cursor.
    pub(crate) async fn open<'d>(
        self,
        db: &'d Database,
        doing: &'static str,
    ) -> Result<Cursor<'d>> {
        let reply = db
            .run_command(self.0)
            .await
            .map_err(crate::error::db(doing))?;
        Cursor::from_reply(db, reply, "firstBatch", doing)
    }

    /// Every matching document.
    pub(crate) async fn all(self, db: &Database, doing: &'static str) -> Result<Vec<Document>> {
        let mut cursor = self.open(db, doing).await?;
        let mut out = Vec::new();
        while let Some(d) = cursor.next().await? {
            out.push(d);
        }
        Ok(out)
    }

    /// The first matching document.
    pub(crate) async fn one(self, db: &Database, doing: &'static str) -> Result<Option<Document>> {
        let mut find = self.limit(1);
        find.0.insert("singleBatch", true);
        Ok(find.all(db, doing).await?.into_iter().next())
    }
}

/// A server cursor: the batch in hand and the id to fetch more with.
#[derive(Debug)]
pub(crate) struct Cursor<'d> {
    db: &'d Database,
    collection: String,
    /// The cursor id as the server sent it (sent back with the same width: MongoDB wants
    /// 64-bit ids, some compatible servers their own 32-bit ones).
    id: Bson,
    batch: VecDeque<Document>,
    doing: &'static str,
}

fn bad_reply(doing: &'static str, what: &str) -> Error {
    Error::backend(BACKEND, doing, format!("unexpected cursor reply: {what}"))
}

impl<'d> Cursor<'d> {
    /// A command reply's `cursor` document (`batch` is `firstBatch` or `nextBatch`).
    pub(crate) fn from_reply(
        db: &'d Database,
        reply: Document,
        batch: &str,
        doing: &'static str,
    ) -> Result<Self> {
        let cursor = reply
            .get_document("cursor")
            .map_err(|_| bad_reply(doing, "no `cursor` document"))?;
        let id = match cursor.get("id") {
            Some(id @ (Bson::Int64(_) | Bson::Int32(_))) => id.clone(),
            _ => return Err(bad_reply(doing, "no integer `cursor.id`")),
        };
        let ns = cursor.get_str("ns").unwrap_or_default();
        let collection = ns.split_once('.').map(|(_, c)| c).unwrap_or(ns).to_owned();
        let docs = cursor
            .get_array(batch)
            .map_err(|_| bad_reply(doing, "no batch array"))?
            .iter()
            .map(|b| match b {
                Bson::Document(d) => Ok(d.clone()),
                _ => Err(bad_reply(doing, "a batch entry is not a document")),
            })
            .collect::<Result<VecDeque<_>>>()?;
        Ok(Self {
            db,
            collection,
            id,
            batch: docs,
            doing,
        })
    }

    /// Whether the server has nothing more (cursor id 0).
    fn exhausted(&self) -> bool {
        matches!(self.id, Bson::Int64(0) | Bson::Int32(0))
    }

    /// The next document, fetching the next batch when this one is used up.
    pub(crate) async fn next(&mut self) -> Result<Option<Document>> {
        loop {
            if let Some(d) = self.batch.pop_front() {
                return Ok(Some(d));
            }
            if self.exhausted() {
                return Ok(None);
            }
            let reply = self
                .db
                .run_command(doc! { "getMore": self.id.clone(), "collection": &self.collection })
                .await
                .map_err(db(self.doing))?;
            let next = Cursor::from_reply(self.db, reply, "nextBatch", self.doing)?;
            self.id = next.id;
            self.batch = next.batch;
        }
    }

    /// Closes the server's cursor if it is still open (a reader that stops early).
    pub(crate) async fn close(self) -> Result<()> {
        if !self.exhausted() {
            self.db
                .run_command(doc! { "killCursors": &self.collection, "cursors": [self.id.clone()] })
                .await
                .map_err(db(self.doing))?;
        }
        Ok(())
    }
}
