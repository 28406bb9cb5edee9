//! Reading: tuples with their writes in one query per batch, listing, the checkpoints of
//! runs, and copying a thread.

use std::collections::{BTreeSet, HashMap};

use mongodb::bson::{Bson, Document, doc};
use stategraph_checkpoint::backend::{self, copy_preflight};
use stategraph_checkpoint::{
    CheckpointTuple, Error, ListOptions, Location, PendingWrite, Result, Value,
};

use super::MongoSaver;
use super::cursor::Find;
use super::docs::{bytes, kind, opt_string, read_metadata, read_write, string};
use crate::error::db;

/// How many checkpoints `list` decodes per query of their writes.
const BATCH: usize = 64;

/// (thread, namespace, checkpoint id) of a stored document.
type Key = (String, String, String);

/// A document's key, read strictly.
pub(super) fn doc_key(doc: &Document) -> Result<Key> {
    let unknown = Location::checkpoint("?", "?", "?");
    let thread = string(doc, "thread_id", &unknown)?;
    let ns = string(
        doc,
        "checkpoint_ns",
        &Location::checkpoint(thread, "?", "?"),
    )?;
    let id = string(doc, "checkpoint_id", &Location::checkpoint(thread, ns, "?"))?;
    Ok((thread.to_owned(), ns.to_owned(), id.to_owned()))
}

/// A filter matching the documents of `keys` (grouped by thread and namespace).
pub(super) fn keys_filter<'k>(keys: impl IntoIterator<Item = &'k Key>) -> Document {
    let mut groups: HashMap<(&str, &str), Vec<&str>> = HashMap::new();
    let mut order = Vec::new();
    for (thread, ns, id) in keys {
        let group = groups.entry((thread, ns)).or_insert_with(|| {
            order.push((thread.as_str(), ns.as_str()));
            Vec::new()
        });
        group.push(id);
    }
    let mut any: Vec<Document> = order
        .into_iter()
        .map(|(thread, ns)| {
            let ids = groups.remove(&(thread, ns)).unwrap_or_default();
            // One id: plain equality (the unique index serves it directly everywhere).
            let id = match ids.as_slice() {
                [one] => Bson::from(*one),
                _ => Bson::from(doc! { "$in": ids }),
            };
            doc! { "thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": id }
        })
        .collect();
    match any.len() {
        1 => any.pop().unwrap_or_default(),
        0 => doc! { "_id": { "$in": [] } },
        _ => doc! { "$or": any },
    }
}

impl MongoSaver {
    /// Decodes checkpoint documents into tuples, reading all their writes in one query.
    pub(super) async fn assemble(&self, docs: Vec<Document>) -> Result<Vec<CheckpointTuple>> {
        let keys = docs.iter().map(doc_key).collect::<Result<Vec<_>>>()?;
        let mut writes = self.writes_of(&keys).await?;
        docs.into_iter()
            .zip(keys)
            .map(|(doc, key)| {
                let pending = writes.remove(&key).unwrap_or_default();
                self.decode(&doc, key, pending)
            })
            .collect()
    }

    /// The writes of `keys`, undecoded, by checkpoint.
    async fn writes_of(&self, keys: &[Key]) -> Result<HashMap<Key, Vec<Document>>> {
        let mut out: HashMap<Key, Vec<Document>> = HashMap::new();
        if keys.is_empty() {
            return Ok(out);
        }
        let found = Find::new(self.writes.name(), keys_filter(keys))
            .all(&self.db, "reading writes")
            .await?;
        for doc in found {
            out.entry(doc_key(&doc)?).or_default().push(doc);
        }
        Ok(out)
    }

    /// One checkpoint document and its write documents as a tuple.
    fn decode(&self, doc: &Document, key: Key, writes: Vec<Document>) -> Result<CheckpointTuple> {
        let (thread, ns, id) = key;
        let loc = Location::checkpoint(&thread, &ns, &id);
        let serializer = self.serializer.as_ref();
        let tag = string(doc, "type", &loc)?;
        let body = bytes(doc, "checkpoint", &loc)?;
        let checkpoint = serializer
            .loads_checkpoint(tag, body, None)
            .map_err(|e| Error::serialization(loc.clone(), e))?;
        let metadata = read_metadata(serializer, doc.get("metadata"), &loc)?;
        let parent = opt_string(doc, "parent_checkpoint_id", &loc)?.map(Into::into);
        let pending = writes
            .iter()
            .map(|w| read_write(serializer, w, &loc))
            .collect::<Result<Vec<PendingWrite>>>()?;
        Ok(CheckpointTuple::from_parts(
            thread, ns, id, parent, checkpoint, metadata, pending,
        ))
    }

    /// `list`: the filter and order on the server, metadata filters here (stored values are
    /// serialized, so they are compared decoded), writes fetched per batch.
    pub(super) async fn list_tuples(&self, options: &ListOptions) -> Result<Vec<CheckpointTuple>> {
        let limit = options.limit.unwrap_or(usize::MAX);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut filter = Document::new();
        if let Some(thread) = &options.thread_id {
            filter.insert("thread_id", thread.as_str());
        }
        if let Some(ns) = &options.checkpoint_ns {
            filter.insert("checkpoint_ns", ns.as_str());
        }
        let mut id = Document::new();
        if let Some(exact) = &options.checkpoint_id {
            id.insert("$eq", exact.as_str());
        }
        if let Some(before) = &options.before {
            id.insert("$lt", before.as_str());
        }
        if !id.is_empty() {
            filter.insert("checkpoint_id", id);
        }
        let mut find = self.find(filter).sort(doc! { "checkpoint_id": -1 });
        if let (Some(n), true) = (options.limit, options.filter.is_empty()) {
            find = find.limit(i64::try_from(n).unwrap_or(i64::MAX));
        }
        let mut cursor = find.open(&self.db, "listing checkpoints").await?;
        let mut out = Vec::new();
        let mut batch = Vec::new();
        loop {
            let next = if out.len() + batch.len() < limit {
                cursor.next().await?
            } else {
                None
            };
            let more = next.is_some();
            if let Some(doc) = next {
                if !options.filter.is_empty() {
                    let (thread, ns, id) = doc_key(&doc)?;
                    let loc = Location::checkpoint(&thread, &ns, &id);
                    let metadata =
                        read_metadata(self.serializer.as_ref(), doc.get("metadata"), &loc)?;
                    if !metadata.matches(&options.filter) {
                        continue;
                    }
                }
                batch.push(doc);
            }
            if batch.len() >= BATCH || (!more && !batch.is_empty()) {
                out.extend(self.assemble(std::mem::take(&mut batch)).await?);
            }
            if !more {
                cursor.close().await?;
                return Ok(out);
            }
        }
    }

    /// The keys of the checkpoints whose `metadata.run_id` is one of `run_ids` (only that
    /// value is decoded: the rest of a document's metadata may be anything).
    pub(super) async fn keys_of_runs(&self, run_ids: &[String]) -> Result<Vec<Document>> {
        let wanted: BTreeSet<&str> = run_ids.iter().map(String::as_str).collect();
        let mut cursor = self
            .find(doc! { "metadata.run_id": { "$exists": true } })
            .projection(doc! {
                "_id": 0, "thread_id": 1, "checkpoint_ns": 1, "checkpoint_id": 1,
                "metadata.run_id": 1,
            })
            .open(&self.db, "finding the checkpoints of runs")
            .await?;
        let mut keys = Vec::new();
        while let Some(doc) = cursor.next().await? {
            let (thread, ns, id) = doc_key(&doc)?;
            let loc = Location::checkpoint(&thread, &ns, &id).part("metadata");
            let run = match doc
                .get_document("metadata")
                .ok()
                .and_then(|m| m.get("run_id"))
            {
                Some(Bson::Array(pair)) => match pair.as_slice() {
                    [Bson::String(tag), Bson::Binary(b)] => self
                        .serializer
                        .loads_typed(tag, &b.bytes)
                        .map_err(|e| Error::serialization(loc.clone(), e))?,
                    _ => {
                        return Err(backend::shape_error(
                            loc,
                            "run_id",
                            "not the pair [type, bytes]",
                        ));
                    }
                },
                Some(other) => {
                    return Err(backend::shape_error(
                        loc,
                        "run_id",
                        format!("not a [type, bytes] pair but {}", kind(other)),
                    ));
                }
                None => continue,
            };
            if matches!(&run, Value::Str(r) if wanted.contains(r.as_ref())) {
                keys.push(super::docs::key(&thread, &ns, &id));
            }
        }
        Ok(keys)
    }

    /// `copy_thread`: writes first, then checkpoints (oldest first), each document as it is
    /// stored (same ids, metadata and fields) under the new thread id.
    pub(super) async fn copy(&self, source: &str, target: &str) -> Result<()> {
        let doing = "copying a thread";
        let taken = self
            .find(doc! { "thread_id": target })
            .projection(doc! { "_id": 1 })
            .one(&self.db, doing)
            .await?
            .is_some();
        let checkpoints = self.all_of(self.checkpoints.name(), source, target).await?;
        copy_preflight(source, target, !checkpoints.is_empty(), taken)?;
        let writes = self.all_of(self.writes.name(), source, target).await?;
        if !writes.is_empty() {
            self.writes.insert_many(writes).await.map_err(db(doing))?;
        }
        self.checkpoints
            .insert_many(checkpoints)
            .await
            .map_err(db(doing))?;
        Ok(())
    }

    /// Every document of `thread` in `collection`, oldest first, re-addressed to `target`.
    async fn all_of(&self, collection: &str, thread: &str, target: &str) -> Result<Vec<Document>> {
        let mut docs = Find::new(collection, doc! { "thread_id": thread })
            .sort(doc! { "checkpoint_id": 1 })
            .projection(doc! { "_id": 0 })
            .all(&self.db, "reading a thread to copy")
            .await?;
        for doc in &mut docs {
            doc.insert("thread_id", target);
        }
        Ok(docs)
    }
}
