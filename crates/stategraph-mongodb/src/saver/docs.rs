//! The documents of the two collections, written and read as Python's
//! `langgraph-checkpoint-mongodb` does, and read strictly (a field of the wrong type is an
//! error naming the checkpoint and the field).
//!
//! `checkpoints`: `thread_id`, `checkpoint_ns`, `checkpoint_id`, `parent_checkpoint_id`
//! (null for the first), `type` + `checkpoint` (the serializer's tag and bytes of the whole
//! checkpoint), `metadata` (a document of the metadata's keys, nested maps as nested
//! documents, every other value as the array `[tag, bytes]`), `created_at` with a TTL; a
//! checkpoint stored by a conditional put has its claim as `_id` (see [`claim`]).
//!
//! `checkpoint_writes`: the three ids, `task_id`, `task_path`, `idx`, `channel`, `type`,
//! `value`, `created_at` with a TTL.

use mongodb::bson::spec::BinarySubtype;
use mongodb::bson::{Binary, Bson, Document, doc};
use serde_json::Value as Json;
use stategraph_checkpoint::backend::{self, EncodedWrite, StoredWrite};
use stategraph_checkpoint::{
    CheckpointMetadata, Location, PendingWrite, Result, Serializer, Value,
};

/// The `_id` with which a conditional put claims the checkpoint it was written after:
/// `{thread_id, checkpoint_ns, stategraph_after}` (`""` for the first of a namespace). `_id`
/// is unique in every collection, so a second writer claiming the same predecessor is
/// refused by the server, atomically, with no index of the saver's own.
pub(crate) fn claim(thread: &str, ns: &str, after: Option<&str>) -> Document {
    doc! {
        "thread_id": thread,
        "checkpoint_ns": ns,
        "stategraph_after": after.unwrap_or_default(),
    }
}

/// Bytes as BSON binary (subtype 0, as pymongo stores `bytes`).
pub(crate) fn binary(bytes: Vec<u8>) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    })
}

/// An integer as pymongo stores a Python `int`: int32 when it fits.
pub(crate) fn int(i: i64) -> Bson {
    i32::try_from(i).map_or(Bson::Int64(i), Bson::Int32)
}

/// The key of one checkpoint.
pub(crate) fn key(thread: &str, ns: &str, id: &str) -> Document {
    doc! { "thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": id }
}

/// Metadata as the Python saver stores it: maps as documents (recursively), every other
/// value as `[tag, bytes]` of the serializer.
pub(crate) fn metadata_doc(
    serializer: &dyn Serializer,
    metadata: &CheckpointMetadata,
    loc: &Location,
) -> Result<Document> {
    match metadata_bson(serializer, &metadata.to_json(), loc)? {
        Bson::Document(d) => Ok(d),
        _ => Ok(Document::new()),
    }
}

fn metadata_bson(serializer: &dyn Serializer, json: &Json, loc: &Location) -> Result<Bson> {
    match json {
        Json::Object(map) => {
            let mut doc = Document::new();
            for (k, v) in map {
                doc.insert(k.clone(), metadata_bson(serializer, v, loc)?);
            }
            Ok(Bson::Document(doc))
        }
        leaf => {
            let (tag, bytes) = serializer
                .dumps_typed(&Value::from(leaf.clone()))
                .map_err(|e| {
                    stategraph_checkpoint::Error::serialization(loc.clone().part("metadata"), e)
                })?;
            Ok(Bson::Array(vec![Bson::String(tag), binary(bytes)]))
        }
    }
}

/// Reads stored metadata back (strictly: anything but documents and `[tag, bytes]` pairs is
/// an error naming the key).
pub(crate) fn read_metadata(
    serializer: &dyn Serializer,
    stored: Option<&Bson>,
    loc: &Location,
) -> Result<CheckpointMetadata> {
    let at = loc.clone().part("metadata");
    let json = match stored {
        None | Some(Bson::Null) => return Ok(CheckpointMetadata::default()),
        Some(b @ Bson::Document(_)) => metadata_json(serializer, b, &at, "")?,
        Some(other) => {
            return Err(backend::shape_error(
                at,
                "",
                format!("not a document but {}", kind(other)),
            ));
        }
    };
    backend::metadata_from_json(json, loc)
}

fn metadata_json(
    serializer: &dyn Serializer,
    stored: &Bson,
    at: &Location,
    path: &str,
) -> Result<Json> {
    match stored {
        Bson::Document(d) => {
            let mut map = serde_json::Map::new();
            for (k, v) in d {
                let inner = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                map.insert(k.clone(), metadata_json(serializer, v, at, &inner)?);
            }
            Ok(Json::Object(map))
        }
        Bson::Array(pair) => match pair.as_slice() {
            [Bson::String(tag), Bson::Binary(b)] => serializer
                .loads_typed(tag, &b.bytes)
                .map(|v| v.to_json())
                .map_err(|e| stategraph_checkpoint::Error::serialization(at.clone(), e)),
            _ => Err(backend::shape_error(
                at.clone(),
                path,
                "not the pair [type, bytes]",
            )),
        },
        other => Err(backend::shape_error(
            at.clone(),
            path,
            format!("not a document or a [type, bytes] pair but {}", kind(other)),
        )),
    }
}

/// A BSON value's kind, for errors.
pub(crate) fn kind(b: &Bson) -> &'static str {
    match b {
        Bson::Double(_) => "a double",
        Bson::String(_) => "a string",
        Bson::Array(_) => "an array",
        Bson::Document(_) => "a document",
        Bson::Boolean(_) => "a boolean",
        Bson::Null => "null",
        Bson::Int32(_) | Bson::Int64(_) => "an integer",
        Bson::Binary(_) => "binary data",
        Bson::DateTime(_) => "a date",
        _ => "another BSON type",
    }
}

/// A required string field.
pub(crate) fn string<'d>(
    doc: &'d Document,
    field: &'static str,
    loc: &Location,
) -> Result<&'d str> {
    match doc.get(field) {
        Some(Bson::String(s)) => Ok(s),
        Some(other) => Err(backend::shape_error(
            loc.clone(),
            field,
            format!("not a string but {}", kind(other)),
        )),
        None => Err(backend::shape_error(loc.clone(), field, "missing")),
    }
}

/// An optional string field (missing or null: `None`).
pub(crate) fn opt_string<'d>(
    doc: &'d Document,
    field: &'static str,
    loc: &Location,
) -> Result<Option<&'d str>> {
    match doc.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(_) => string(doc, field, loc).map(Some),
    }
}

/// A required binary field.
pub(crate) fn bytes<'d>(
    doc: &'d Document,
    field: &'static str,
    loc: &Location,
) -> Result<&'d [u8]> {
    match doc.get(field) {
        Some(Bson::Binary(b)) => Ok(&b.bytes),
        Some(other) => Err(backend::shape_error(
            loc.clone(),
            field,
            format!("not binary data but {}", kind(other)),
        )),
        None => Err(backend::shape_error(loc.clone(), field, "missing")),
    }
}

/// A write document for [`PendingWrite`] decoding.
pub(crate) fn read_write(
    serializer: &dyn Serializer,
    doc: &Document,
    at: &Location,
) -> Result<PendingWrite> {
    let loc = at.clone().part("write");
    let task_id = string(doc, "task_id", &loc)?;
    let loc = loc.task(task_id);
    let channel = string(doc, "channel", &loc)?;
    let loc = loc.channel(channel);
    let idx = match doc.get("idx") {
        Some(Bson::Int32(i)) => i64::from(*i),
        Some(Bson::Int64(i)) => *i,
        Some(other) => {
            return Err(backend::shape_error(
                loc,
                "idx",
                format!("not an integer but {}", kind(other)),
            ));
        }
        None => return Err(backend::shape_error(loc, "idx", "missing")),
    };
    let stored = StoredWrite {
        task_id: task_id.to_owned(),
        channel: channel.to_owned(),
        type_tag: Some(string(doc, "type", &loc)?.to_owned()),
        value: bytes(doc, "value", &loc)?.to_vec(),
        task_path: opt_string(doc, "task_path", &loc)?
            .unwrap_or_default()
            .to_owned(),
        idx,
    };
    stored.decode(serializer, at)
}

/// The `update` statement that stores one write (an upsert keyed like Python's: the ids,
/// task, path and idx; `$set` replaces an existing row, `$setOnInsert` keeps it).
pub(crate) fn write_statement(
    key: &Document,
    task_id: &str,
    task_path: &str,
    row: EncodedWrite,
    replace: bool,
    created_at: Option<mongodb::bson::DateTime>,
) -> Document {
    let mut q = key.clone();
    q.insert("task_id", task_id);
    q.insert("task_path", task_path);
    q.insert("idx", int(row.idx));
    let mut set = doc! {
        "channel": row.channel,
        "type": row.tag,
        "value": binary(row.bytes),
    };
    if let Some(at) = created_at {
        set.insert("created_at", at);
    }
    let op = if replace { "$set" } else { "$setOnInsert" };
    doc! { "q": q, "u": { op: set }, "upsert": true }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph_checkpoint::{CheckpointSource, JsonPlusSerializer};

    #[test]
    fn metadata_round_trips_as_python_stores_it() {
        let s = JsonPlusSerializer::new();
        let loc = Location::checkpoint("t", "", "1");
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, 3)
            .with("writes", serde_json::json!({"node": {"x": [1, 2]}}))
            .with("none", Json::Null);
        let doc = metadata_doc(&s, &meta, &loc).unwrap();
        assert_eq!(
            doc.get("source"),
            Some(&Bson::Array(vec![
                Bson::String("msgpack".into()),
                binary(b"\xa4loop".to_vec())
            ]))
        );
        assert_eq!(
            doc.get_document("writes")
                .unwrap()
                .get_document("node")
                .unwrap()
                .get("x"),
            Some(&Bson::Array(vec![
                Bson::String("msgpack".into()),
                binary(vec![0x92, 1, 2])
            ]))
        );
        assert_eq!(
            doc.get("none"),
            Some(&Bson::Array(vec![
                Bson::String("null".into()),
                binary(vec![])
            ]))
        );
        let back = read_metadata(&s, Some(&Bson::Document(doc)), &loc).unwrap();
        assert_eq!(back, meta);
    }

    fn any_bson() -> impl proptest::strategy::Strategy<Value = Bson> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Bson::Null),
            any::<bool>().prop_map(Bson::Boolean),
            any::<i32>().prop_map(Bson::Int32),
            any::<i64>().prop_map(Bson::Int64),
            "[a-z]{0,3}|msgpack|null|bytes".prop_map(Bson::String),
            proptest::collection::vec(any::<u8>(), 0..12).prop_map(binary),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Bson::Array),
                proptest::collection::vec(("[a-z.$]{0,3}", inner), 0..3)
                    .prop_map(|kv| Bson::Document(kv.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Whatever another program stored as metadata or a write, reading it gives a value or
        /// a typed error, never a panic.
        #[test]
        fn reading_any_stored_document_never_panics(meta in any_bson(), write in any_bson()) {
            let s = JsonPlusSerializer::new();
            let loc = Location::checkpoint("t", "", "1");
            let _ = read_metadata(&s, Some(&meta), &loc);
            if let Bson::Document(d) = &write {
                let _ = read_write(&s, d, &loc);
            }
        }
    }

    #[test]
    fn damaged_metadata_names_the_key() {
        let s = JsonPlusSerializer::new();
        let loc = Location::checkpoint("t", "", "1");
        let bad = doc! { "writes": { "node": 5 } };
        let err = read_metadata(&s, Some(&Bson::Document(bad)), &loc).unwrap_err();
        assert!(err.to_string().contains("writes.node"), "{err}");
        let err = read_metadata(&s, Some(&binary(b"x".to_vec())), &loc).unwrap_err();
        assert!(err.to_string().contains("not a document"), "{err}");
    }
}
