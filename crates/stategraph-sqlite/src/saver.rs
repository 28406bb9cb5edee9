//! `SqliteSaver`: LangGraph's SQLite checkpointer, in Rust.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::{
    Connection, OptionalExtension, Transaction, TransactionBehavior, params, types::Value as Sql,
};
use serde_json::Value as Json;
use stategraph_checkpoint::backend::{
    self, Expect, ListSql, Placeholders, PrunePlan, PruneRow, PruneTarget, SqlArg, prune,
};
use stategraph_checkpoint::{
    Capabilities, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointTuple, DeltaChannelHistory, DeltaWalk, EncodedWrites, Error,
    ListOptions, Location, PendingWrite, PruneStrategy, Result, SaveOp, SerdeError, Serializer,
    StoredWrite, Value, checkpoint_value_ranges, encode_writes, latest_conflict, sort_writes, tags,
    validate_put,
};

use crate::config::{self, SqliteConfig};
use crate::error::{db, join};
use crate::pool::{OpenError, Pool};
use crate::schema;

/// Stores checkpoints in a SQLite database, in LangGraph's own schema and byte formats, so
/// that Python's `SqliteSaver` and this one can share a file.
///
/// One writer connection (SQLite allows one writer at a time) and a small pool of reader
/// connections (WAL lets them read while the writer writes); every database call runs on
/// tokio's blocking pool, never on the async threads.
#[derive(Clone)]
pub struct SqliteSaver {
    inner: Arc<Inner>,
}

/// The saver's connections (see [`Pool`]): nothing beyond SQLite's defaults is prepared.
type Inner = Pool;

fn no_preparation(_: &Connection) -> std::result::Result<(), OpenError> {
    Ok(())
}

impl fmt::Debug for SqliteSaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteSaver")
            .field("location", &self.inner.config().location)
            .finish_non_exhaustive()
    }
}

impl SqliteSaver {
    /// Opens (creating if needed) the database file at `path`.
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<Self> {
        SqliteConfig::file(path).open()
    }

    /// Opens the database a `sqlite:` URL names (see [`SqliteConfig::from_url`]).
    pub fn from_url(url: &str) -> Result<Self> {
        SqliteConfig::from_url(url)?.open()
    }

    /// A private in-memory database.
    pub fn in_memory() -> Result<Self> {
        SqliteConfig::memory().open()
    }

    /// A builder with every setting.
    pub fn builder(path: impl AsRef<std::path::Path>) -> SqliteConfig {
        SqliteConfig::file(path)
    }

    pub(crate) fn open_with(config: SqliteConfig) -> Result<Self> {
        if let (false, config::Location::File(path)) = (config.run_setup, &config.location)
            && !path.exists()
        {
            return Err(Error::NotFound {
                what: format!("SQLite database {}", path.display()),
            });
        }
        let what = match &config.location {
            config::Location::File(path) => format!("SQLite database {}", path.display()),
            config::Location::Memory => "the in-memory SQLite database".to_owned(),
        };
        let run_setup = config.run_setup;
        let pool = Pool::new(config, no_preparation);
        pool.write(|writer| {
            if run_setup {
                schema::setup(writer).map_err(db("creating the checkpoint tables"))
            } else {
                schema::check(writer, &what)
            }
        })?;
        Ok(Self {
            inner: Arc::new(pool),
        })
    }

    /// Runs `f` on the writer connection, on the blocking pool.
    async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &dyn Serializer) -> Result<T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            inner.write(|conn| f(conn, inner.config().serializer.as_ref()))
        })
        .await
        .map_err(join)?
    }

    /// Runs `f` on a reader connection (the writer for in-memory databases), on the blocking
    /// pool.
    async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &dyn Serializer) -> Result<T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            inner.read(|conn| f(conn, inner.config().serializer.as_ref()))
        })
        .await
        .map_err(join)?
    }
}

/// The columns every checkpoint query selects, in this order.
const CHECKPOINT_COLUMNS: &str =
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata";

/// A BLOB column that may also hold TEXT (SQLite does not enforce column types, and other
/// writers, or hand edits, may store text): both are read as bytes.
fn bytes_column(r: &rusqlite::Row<'_>, idx: usize) -> rusqlite::Result<Option<Vec<u8>>> {
    use rusqlite::types::ValueRef;
    match r.get_ref(idx)? {
        ValueRef::Null => Ok(None),
        ValueRef::Blob(b) | ValueRef::Text(b) => Ok(Some(b.to_vec())),
        other => Err(rusqlite::Error::InvalidColumnType(
            idx,
            "a blob column".into(),
            other.data_type(),
        )),
    }
}

/// One raw `checkpoints` row.
struct Row {
    thread_id: String,
    checkpoint_ns: String,
    checkpoint_id: String,
    parent: Option<String>,
    type_tag: Option<String>,
    checkpoint: Option<Vec<u8>>,
    metadata: Option<Vec<u8>>,
}

impl Row {
    fn from_sql(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            thread_id: r.get(0)?,
            checkpoint_ns: r.get(1)?,
            checkpoint_id: r.get(2)?,
            parent: r.get(3)?,
            type_tag: r.get(4)?,
            checkpoint: bytes_column(r, 5)?,
            metadata: bytes_column(r, 6)?,
        })
    }

    fn location(&self) -> Location {
        Location::checkpoint(&self.thread_id, &self.checkpoint_ns, &self.checkpoint_id)
    }

    /// Decodes the row and loads its writes.
    fn into_tuple(self, conn: &Connection, serde: &dyn Serializer) -> Result<CheckpointTuple> {
        let loc = self.location();
        let tag = self.type_tag.as_deref().ok_or_else(|| {
            Error::serialization(loc.clone(), SerdeError::UnknownType("NULL".into()))
        })?;
        let bytes = self.checkpoint.as_deref().unwrap_or_default();
        let value = serde
            .loads_typed(tag, bytes)
            .map_err(|e| located(loc.clone(), e))?;
        let checkpoint = Checkpoint::from_value(value).map_err(|e| located(loc.clone(), e))?;
        let metadata = decode_metadata(self.metadata.as_deref(), &loc)?;
        let pending_writes = load_writes(
            conn,
            serde,
            &self.thread_id,
            &self.checkpoint_ns,
            &self.checkpoint_id,
        )?;
        Ok(CheckpointTuple::from_parts(
            self.thread_id,
            self.checkpoint_ns,
            self.checkpoint_id,
            self.parent,
            checkpoint,
            metadata,
            pending_writes,
        ))
    }
}

/// Attaches a location to a serializer error, naming the channel when the failure is inside
/// one (`channel_values.<channel>…`).
fn located(loc: Location, e: SerdeError) -> Error {
    let channel = e
        .path()
        .and_then(|p| p.strip_prefix("channel_values."))
        .map(|rest| rest.split(['.', '[']).next().unwrap_or(rest).to_owned());
    let loc = match channel {
        Some(ch) => loc.channel(ch),
        None => loc,
    };
    Error::serialization(loc, e)
}

fn decode_metadata(bytes: Option<&[u8]>, loc: &Location) -> Result<CheckpointMetadata> {
    let Some(bytes) = bytes else {
        return Ok(CheckpointMetadata::default());
    };
    let text = std::str::from_utf8(bytes).map_err(|e| {
        backend::shape_error(
            loc.clone().part("metadata"),
            "",
            format!("not UTF-8 at byte {}", e.valid_up_to()),
        )
    })?;
    let json = backend::json_from_text(text, loc.clone().part("metadata"))?;
    backend::metadata_from_json(json, loc)
}

/// A write row's columns from `first` on: task_id, channel, type, value, task_path, idx.
fn stored_write(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<StoredWrite> {
    Ok(StoredWrite {
        task_id: r.get(first)?,
        channel: r.get(first + 1)?,
        type_tag: r.get(first + 2)?,
        value: bytes_column(r, first + 3)?.unwrap_or_default(),
        task_path: r.get(first + 4)?,
        idx: r.get(first + 5)?,
    })
}

fn load_writes(
    conn: &Connection,
    serde: &dyn Serializer,
    thread_id: &str,
    ns: &str,
    checkpoint_id: &str,
) -> Result<Vec<PendingWrite>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT task_id, channel, type, value, task_path, idx FROM writes \
             WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3",
        )
        .map_err(db("reading writes"))?;
    let rows = stmt
        .query_map(params![thread_id, ns, checkpoint_id], |r| {
            stored_write(r, 0)
        })
        .map_err(db("reading writes"))?;
    let at = Location::checkpoint(thread_id, ns, checkpoint_id);
    let mut writes = Vec::new();
    for row in rows {
        writes.push(row.map_err(db("reading writes"))?.decode(serde, &at)?);
    }
    sort_writes(&mut writes);
    Ok(writes)
}

/// The target checkpoint's ancestors' ids, nearest first, by following
/// `parent_checkpoint_id` (ids are not ordered across processes, so no range scan), at most
/// `?6` levels up. `CROSS JOIN` keeps `ancestors` the outer loop: one primary-key lookup per
/// level. Only ids travel through the recursion; a query reads the (large) checkpoint column
/// by joining it, for the rows it actually steps through.
const ANCESTORS: &str = "WITH RECURSIVE ancestors(checkpoint_id, parent_checkpoint_id, depth) AS ( \
      SELECT checkpoint_id, parent_checkpoint_id, 0 FROM checkpoints \
      WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3 \
      UNION ALL \
      SELECT c.checkpoint_id, c.parent_checkpoint_id, a.depth + 1 \
      FROM ancestors a CROSS JOIN checkpoints c ON c.checkpoint_id = a.parent_checkpoint_id \
      WHERE c.thread_id = ?4 AND c.checkpoint_ns = ?5 AND a.depth < ?6)";

/// The values a stored checkpoint holds for `channels`. A msgpack checkpoint is not decoded:
/// only the requested values are, found by skipping over the rest; anything else (an
/// encrypted checkpoint, bytes laid out otherwise) is decoded in full, which also names what
/// is wrong with it.
fn stored_values(
    serde: &dyn Serializer,
    tag: &str,
    bytes: &[u8],
    channels: &std::collections::BTreeSet<&str>,
    loc: &Location,
) -> Result<BTreeMap<String, Value>> {
    let wanted: Vec<&str> = channels.iter().copied().collect();
    if tag == tags::MSGPACK
        && let Some(found) = checkpoint_value_ranges(bytes, &wanted)
    {
        let mut out = BTreeMap::new();
        for (channel, range) in found {
            // The ranges are within `bytes` (where they were found); were one not, its empty
            // slice would fail to decode, located like any corrupt value.
            let value = serde
                .loads_typed(tags::MSGPACK, bytes.get(range).unwrap_or_default())
                .map_err(|e| located(loc.clone().channel(channel.clone()), e))?;
            out.insert(channel, value);
        }
        return Ok(out);
    }
    let value = serde
        .loads_typed(tag, bytes)
        .map_err(|e| located(loc.clone(), e))?;
    let mut checkpoint = Checkpoint::from_value(value).map_err(|e| located(loc.clone(), e))?;
    Ok(wanted
        .iter()
        .filter_map(|ch| Some(((*ch).to_owned(), checkpoint.channel_values.remove(*ch)?)))
        .collect())
}

/// `get_delta_channel_history` in two queries: the walk up the chain (stopping at the last
/// seed), then every requested channel's writes on that stretch of the chain.
fn delta_history(
    tx: &Transaction<'_>,
    serde: &dyn Serializer,
    config: &CheckpointConfig,
    channels: &[String],
) -> Result<std::collections::BTreeMap<String, DeltaChannelHistory>> {
    let (thread, ns) = (config.thread_id.as_str(), config.checkpoint_ns.as_str());
    let target: Option<String> = match &config.checkpoint_id {
        Some(id) => Some(id.clone()),
        None => tx
            .query_row(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?1 \
                 AND checkpoint_ns = ?2 ORDER BY checkpoint_id DESC LIMIT 1",
                params![thread, ns],
                |r| r.get(0),
            )
            .optional()
            .map_err(db("reading a checkpoint"))?,
    };
    let Some(target) = target.filter(|_| !channels.is_empty()) else {
        return Ok(DeltaWalk::new(channels).finish());
    };
    // Stage 1: the ancestors the walk visits, with what each stores.
    let mut chain: Vec<(String, BTreeMap<String, Value>)> = Vec::new();
    {
        let mut active: std::collections::BTreeSet<&str> =
            channels.iter().map(String::as_str).collect();
        // The target counts as seen: a chain looping back to it stops there.
        let mut seen = std::collections::HashSet::from([target.clone()]);
        let mut stmt = tx
            .prepare_cached(&format!(
                "{ANCESTORS} SELECT a.checkpoint_id, c.type, c.checkpoint, a.depth FROM ancestors a \
                 CROSS JOIN checkpoints c ON c.thread_id = ?4 AND c.checkpoint_ns = ?5 \
                 AND c.checkpoint_id = a.checkpoint_id WHERE a.depth > 0"
            ))
            .map_err(db("walking checkpoint ancestors"))?;
        let mut rows = stmt
            .query(params![thread, ns, target, thread, ns, i64::MAX])
            .map_err(db("walking checkpoint ancestors"))?;
        while let Some(r) = rows.next().map_err(db("walking checkpoint ancestors"))? {
            let id: String = r.get(0).map_err(db("walking checkpoint ancestors"))?;
            if !seen.insert(id.clone()) {
                break;
            }
            // The recursion yields nearest first (a FIFO queue, no ORDER BY: sorting would
            // read every ancestor's checkpoint); the walk relies on it.
            let depth: i64 = r.get(3).map_err(db("walking checkpoint ancestors"))?;
            if usize::try_from(depth).ok() != Some(chain.len() + 1) {
                return Err(Error::Backend {
                    backend: "sqlite",
                    message: format!("ancestors of {target} came back out of order"),
                    source: None,
                });
            }
            let loc = Location::checkpoint(thread, ns, &id);
            let tag: Option<String> = r.get(1).map_err(db("walking checkpoint ancestors"))?;
            let tag = tag.ok_or_else(|| {
                Error::serialization(loc.clone(), SerdeError::UnknownType("NULL".into()))
            })?;
            let bytes = bytes_column(r, 2).map_err(db("walking checkpoint ancestors"))?;
            let bytes = bytes.as_deref().unwrap_or_default();
            let stored = stored_values(serde, &tag, bytes, &active, &loc)?;
            active.retain(|ch| !stored.contains_key(*ch));
            chain.push((id, stored));
            if active.is_empty() {
                break;
            }
        }
    }
    // Stage 2: the requested channels' writes on that stretch of the chain.
    let mut writes: std::collections::HashMap<String, Vec<PendingWrite>> =
        std::collections::HashMap::new();
    if !chain.is_empty() {
        let marks = vec!["?"; channels.len()].join(", ");
        let sql = format!(
            "{ANCESTORS} SELECT w.checkpoint_id, w.task_id, w.channel, w.type, w.value, \
             w.task_path, w.idx FROM ancestors a CROSS JOIN writes w \
             ON w.checkpoint_id = a.checkpoint_id \
             WHERE a.depth > 0 AND w.thread_id = ?4 AND w.checkpoint_ns = ?5 \
             AND w.channel IN ({marks})"
        );
        let mut args: Vec<Sql> = vec![
            Sql::Text(thread.to_owned()),
            Sql::Text(ns.to_owned()),
            Sql::Text(target),
            Sql::Text(thread.to_owned()),
            Sql::Text(ns.to_owned()),
            Sql::Integer(i64::try_from(chain.len()).unwrap_or(i64::MAX)),
        ];
        args.extend(channels.iter().map(|c| Sql::Text(c.clone())));
        let mut stmt = tx
            .prepare_cached(&sql)
            .map_err(db("reading delta channel writes"))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args), |r| {
                Ok((r.get::<_, String>(0)?, stored_write(r, 1)?))
            })
            .map_err(db("reading delta channel writes"))?;
        for row in rows {
            let (cid, w) = row.map_err(db("reading delta channel writes"))?;
            let w = w.decode(serde, &Location::checkpoint(thread, ns, &cid))?;
            writes.entry(cid).or_default().push(w);
        }
    }
    let mut walk = DeltaWalk::new(channels);
    for (id, values) in chain {
        let here = writes.remove(&id).unwrap_or_default();
        walk.visit(&id, here, |ch| values.get(ch).cloned());
    }
    Ok(walk.finish())
}

/// Metadata filter keys become a JSON path; LangGraph allows only these characters.
fn valid_filter_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Builds the `list` query and its parameters; the metadata filter compares each key's JSON
/// path (as LangGraph's SQLite saver does).
fn list_query(options: &ListOptions) -> Result<(String, Vec<Sql>)> {
    let select = format!("SELECT {CHECKPOINT_COLUMNS} FROM checkpoints");
    let (sql, args) = ListSql::build(&select, options, Placeholders::Question, |q, filter| {
        for (key, want) in filter {
            if !valid_filter_key(key) {
                return Err(Error::invalid(
                    "metadata filter key",
                    format!("`{key}` (allowed: letters, digits, `_`, `.`, `-`)"),
                ));
            }
            let path = format!("json_extract(CAST(metadata AS TEXT), '$.{key}')");
            let arg = match want {
                Json::Null => {
                    q.clause(format!("{path} IS NULL"));
                    continue;
                }
                Json::Bool(b) => SqlArg::Int(i64::from(*b)),
                Json::Number(n) => match n.as_i64() {
                    Some(i) => SqlArg::Int(i),
                    None => SqlArg::Real(n.as_f64().unwrap_or(f64::NAN)),
                },
                Json::String(s) => SqlArg::Text(s),
                other => {
                    let at = q.bind(SqlArg::Json(other.clone()));
                    q.clause(format!("{path} = json({at})"));
                    continue;
                }
            };
            let at = q.bind(arg);
            q.clause(format!("{path} = {at}"));
        }
        Ok(())
    })?;
    let args = args
        .into_iter()
        .map(|a| match a {
            SqlArg::Text(t) => Sql::Text(t.to_owned()),
            SqlArg::Int(i) => Sql::Integer(i),
            SqlArg::Real(f) => Sql::Real(f),
            SqlArg::Json(j) => Sql::Text(j.to_string()),
        })
        .collect();
    Ok((sql, args))
}

/// A checkpoint put, serialized and ready for a transaction.
struct EncodedPut {
    /// The stored checkpoint's config (what `put` returns).
    out: CheckpointConfig,
    /// The config the put was made with (for conflict errors).
    target: CheckpointConfig,
    parent: Option<String>,
    tag: String,
    bytes: Vec<u8>,
    meta: Vec<u8>,
    /// What the namespace's newest checkpoint must be.
    expect: Expect<String>,
}

/// A `put_writes`, serialized and ready for a transaction.
struct EncodedWriteCall {
    sql: &'static str,
    thread_id: String,
    ns: String,
    checkpoint_id: String,
    task_id: String,
    task_path: String,
    rows: Vec<stategraph_checkpoint::EncodedWrite>,
}

impl SqliteSaver {
    fn encode_put(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        expect: Expect<String>,
    ) -> Result<EncodedPut> {
        validate_put(config, checkpoint)?;
        let (tag, bytes) = self
            .inner
            .config()
            .serializer
            .dumps_typed(&checkpoint.to_value())
            .map_err(|e| {
                Error::serialization(
                    Location::checkpoint(&config.thread_id, &config.checkpoint_ns, &checkpoint.id),
                    e,
                )
            })?;
        Ok(EncodedPut {
            out: CheckpointConfig::new(config.thread_id.clone())
                .with_ns(config.checkpoint_ns.clone())
                .with_checkpoint_id(checkpoint.id.clone()),
            target: config.clone(),
            parent: config.checkpoint_id.clone(),
            tag,
            bytes,
            meta: metadata.to_python_json_bytes(),
            expect,
        })
    }

    fn encode_write_call(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<EncodedWriteCall> {
        let EncodedWrites {
            checkpoint_id,
            replace,
            rows,
        } = encode_writes(
            self.inner.config().serializer.as_ref(),
            config,
            writes,
            task_id,
        )?;
        let sql = if replace {
            "INSERT OR REPLACE INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, \
             task_path, idx, channel, type, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
        } else {
            "INSERT OR IGNORE INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, \
             task_path, idx, channel, type, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
        };
        Ok(EncodedWriteCall {
            sql,
            thread_id: config.thread_id.clone(),
            ns: config.checkpoint_ns.clone(),
            checkpoint_id: checkpoint_id.to_owned(),
            task_id: task_id.to_owned(),
            task_path: task_path.to_owned(),
            rows,
        })
    }
}

/// A checkpoint put inside `tx` (its conflict check first).
fn put_in(tx: &Transaction<'_>, put: &EncodedPut) -> Result<()> {
    let row = &put.out;
    if let Expect::Latest(expected) = &put.expect {
        let latest: Option<String> = tx
            .prepare_cached(
                "SELECT max(checkpoint_id) FROM checkpoints \
                 WHERE thread_id = ?1 AND checkpoint_ns = ?2",
            )
            .and_then(|mut s| s.query_row(params![row.thread_id, row.checkpoint_ns], |r| r.get(0)))
            .map_err(db("reading the latest checkpoint"))?;
        if latest != *expected {
            return Err(latest_conflict(
                &put.target,
                expected.as_deref(),
                latest.as_deref(),
            ));
        }
    }
    tx.prepare_cached(
        "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, \
         parent_checkpoint_id, type, checkpoint, metadata) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut s| {
        s.execute(params![
            row.thread_id,
            row.checkpoint_ns,
            row.checkpoint_id,
            put.parent,
            put.tag,
            put.bytes,
            put.meta
        ])
    })
    .map_err(db("storing a checkpoint"))?;
    Ok(())
}

/// A `put_writes` inside `tx`.
fn writes_in(tx: &Transaction<'_>, call: &EncodedWriteCall) -> Result<()> {
    let mut stmt = tx.prepare_cached(call.sql).map_err(db("storing writes"))?;
    for row in &call.rows {
        stmt.execute(params![
            call.thread_id,
            call.ns,
            call.checkpoint_id,
            call.task_id,
            call.task_path,
            row.idx,
            row.channel,
            row.tag,
            row.bytes
        ])
        .map_err(db("storing writes"))?;
    }
    Ok(())
}

/// One op of a batch, serialized.
enum EncodedOp {
    Put(EncodedPut),
    Writes(EncodedWriteCall),
}

fn delete_thread_in(tx: &Transaction<'_>, thread_id: &str) -> Result<()> {
    tx.execute("DELETE FROM checkpoints WHERE thread_id = ?1", [thread_id])
        .map_err(db("deleting checkpoints"))?;
    tx.execute("DELETE FROM writes WHERE thread_id = ?1", [thread_id])
        .map_err(db("deleting writes"))?;
    Ok(())
}

/// `prune` inside one transaction.
struct Pruning<'t, 'c>(&'t Transaction<'c>);

impl PruneTarget for Pruning<'_, '_> {
    async fn rows(&mut self, thread_id: &str) -> Result<Vec<PruneRow>> {
        let reading = || db("reading checkpoints to prune");
        let mut stmt = self
            .0
            .prepare(
                "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata \
                 FROM checkpoints WHERE thread_id = ?1",
            )
            .map_err(reading())?;
        let mut q = stmt.query([thread_id]).map_err(reading())?;
        let mut rows = Vec::new();
        while let Some(r) = q.next().map_err(reading())? {
            let ns: String = r.get(0).map_err(reading())?;
            let id: String = r.get(1).map_err(reading())?;
            let parent: Option<String> = r.get(2).map_err(reading())?;
            let meta = bytes_column(r, 3).map_err(reading())?;
            let loc = Location::checkpoint(thread_id, &ns, &id);
            let metadata = decode_metadata(meta.as_deref(), &loc)?;
            rows.push(PruneRow {
                checkpoint_ns: ns,
                checkpoint_id: id,
                metadata,
                parent,
            });
        }
        Ok(rows)
    }

    async fn delete_thread(&mut self, thread_id: &str) -> Result<()> {
        delete_thread_in(self.0, thread_id)
    }

    async fn delete_checkpoint(&mut self, thread_id: &str, ns: &str, id: &str) -> Result<()> {
        for (table, doing) in [
            ("writes", "pruning writes"),
            ("checkpoints", "pruning checkpoints"),
        ] {
            self.0
                .execute(
                    &format!(
                        "DELETE FROM {table} WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
                         AND checkpoint_id = ?3"
                    ),
                    params![thread_id, ns, id],
                )
                .map_err(db(doing))?;
        }
        Ok(())
    }

    async fn unlink_parent(&mut self, thread_id: &str, ns: &str, id: &str) -> Result<()> {
        self.0
            .execute(
                "UPDATE checkpoints SET parent_checkpoint_id = NULL \
                 WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3",
                params![thread_id, ns, id],
            )
            .map_err(db("unlinking pruned parents"))?;
        Ok(())
    }

    async fn collect_garbage(&mut self, _thread_id: &str, _plan: &PrunePlan) -> Result<()> {
        // Values live inside the checkpoint rows: nothing is left behind.
        Ok(())
    }
}

#[async_trait]
impl CheckpointSaver for SqliteSaver {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        let config = config.clone();
        self.read(move |conn, serde| {
            let tx = conn.transaction().map_err(db("starting a read"))?;
            let row = match &config.checkpoint_id {
                Some(id) => tx
                    .prepare_cached(&format!(
                        "SELECT {CHECKPOINT_COLUMNS} FROM checkpoints \
                         WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3"
                    ))
                    .and_then(|mut s| {
                        s.query_row(
                            params![config.thread_id, config.checkpoint_ns, id],
                            Row::from_sql,
                        )
                        .optional()
                    }),
                None => tx
                    .prepare_cached(&format!(
                        "SELECT {CHECKPOINT_COLUMNS} FROM checkpoints \
                         WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
                         ORDER BY checkpoint_id DESC LIMIT 1"
                    ))
                    .and_then(|mut s| {
                        s.query_row(
                            params![config.thread_id, config.checkpoint_ns],
                            Row::from_sql,
                        )
                        .optional()
                    }),
            }
            .map_err(db("reading a checkpoint"))?;
            row.map(|r| r.into_tuple(&tx, serde)).transpose()
        })
        .await
    }

    async fn get_delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<std::collections::BTreeMap<String, DeltaChannelHistory>> {
        let (config, channels) = (config.clone(), channels.to_vec());
        self.read(move |conn, serde| {
            let tx = conn.transaction().map_err(db("starting a read"))?;
            delta_history(&tx, serde, &config, &channels)
        })
        .await
    }

    async fn list(&self, options: &ListOptions) -> Result<Vec<CheckpointTuple>> {
        let (sql, args) = list_query(options)?;
        self.read(move |conn, serde| {
            let tx = conn.transaction().map_err(db("starting a read"))?;
            let rows: Vec<Row> = {
                let mut stmt = tx.prepare(&sql).map_err(db("listing checkpoints"))?;
                let mapped = stmt
                    .query_map(rusqlite::params_from_iter(args), Row::from_sql)
                    .map_err(db("listing checkpoints"))?;
                mapped
                    .collect::<rusqlite::Result<_>>()
                    .map_err(db("listing checkpoints"))?
            };
            rows.into_iter().map(|r| r.into_tuple(&tx, serde)).collect()
        })
        .await
    }

    /// Stores a checkpoint; a conditional put is checked and written in one `BEGIN
    /// IMMEDIATE` transaction (which takes SQLite's write lock first, so the check holds
    /// across processes too).
    async fn put_checked(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        _new_versions: &ChannelVersions,
        expect: Expect<&str>,
    ) -> Result<CheckpointConfig> {
        let put = self.encode_put(config, checkpoint, metadata, expect.to_owned())?;
        let out = put.out.clone();
        self.write(move |conn, _| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db("starting a checkpoint write"))?;
            put_in(&tx, &put)?;
            tx.commit().map_err(db("committing a checkpoint"))
        })
        .await?;
        Ok(out)
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        let call = self.encode_write_call(config, writes, task_id, task_path)?;
        self.write(move |conn, _| {
            let tx = conn.transaction().map_err(db("starting a write"))?;
            writes_in(&tx, &call)?;
            tx.commit().map_err(db("committing writes"))
        })
        .await
    }

    /// Group commit: the whole batch in one `BEGIN IMMEDIATE` transaction (one fsync instead
    /// of one per op). If any op fails — a conflict, a value that does not serialize — the
    /// transaction is rolled back and the ops are applied one by one, so the ops before the
    /// failing one are stored and its error is the one returned, exactly as without batching.
    async fn apply_batch(&self, ops: &[SaveOp]) -> Result<()> {
        let encoded: Result<Vec<EncodedOp>> = ops
            .iter()
            .map(|op| match op {
                SaveOp::Put {
                    config,
                    checkpoint,
                    metadata,
                    expected_latest,
                    ..
                } => self
                    .encode_put(
                        config,
                        checkpoint,
                        metadata,
                        Expect::Latest(expected_latest.clone()),
                    )
                    .map(EncodedOp::Put),
                SaveOp::Writes {
                    config,
                    writes,
                    task_id,
                    task_path,
                } => self
                    .encode_write_call(config, writes, task_id, task_path)
                    .map(EncodedOp::Writes),
            })
            .collect();
        let together = match encoded {
            Ok(encoded) => {
                self.write(move |conn, _| {
                    let tx = conn
                        .transaction_with_behavior(TransactionBehavior::Immediate)
                        .map_err(db("starting a batch of writes"))?;
                    for op in &encoded {
                        let done = match op {
                            EncodedOp::Put(put) => put_in(&tx, put),
                            EncodedOp::Writes(call) => writes_in(&tx, call),
                        };
                        if done.is_err() {
                            // Dropping `tx` rolls the batch back.
                            return Ok(false);
                        }
                    }
                    tx.commit().map_err(db("committing a batch of writes"))?;
                    Ok(true)
                })
                .await?
            }
            Err(_) => false,
        };
        if together {
            Ok(())
        } else {
            SaveOp::apply_each(ops, self).await
        }
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        let thread_id = thread_id.to_owned();
        self.write(move |conn, _| {
            let tx = conn.transaction().map_err(db("starting a delete"))?;
            delete_thread_in(&tx, &thread_id)?;
            tx.commit().map_err(db("committing a delete"))
        })
        .await
    }

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        if run_ids.is_empty() {
            return Ok(());
        }
        let ids = serde_json::to_string(run_ids).unwrap_or_else(|_| "[]".into());
        self.write(move |conn, _| {
            let tx = conn.transaction().map_err(db("starting a delete"))?;
            const DOOMED: &str = "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints \
                WHERE json_extract(CAST(metadata AS TEXT), '$.run_id') IN (SELECT value FROM json_each(?1))";
            tx.execute(
                &format!(
                    "DELETE FROM writes WHERE (thread_id, checkpoint_ns, checkpoint_id) IN ({DOOMED})"
                ),
                [&ids],
            )
            .map_err(db("deleting writes of runs"))?;
            tx.execute(
                "DELETE FROM checkpoints WHERE json_extract(CAST(metadata AS TEXT), '$.run_id') \
                 IN (SELECT value FROM json_each(?1))",
                [&ids],
            )
            .map_err(db("deleting checkpoints of runs"))?;
            tx.commit().map_err(db("committing a delete"))
        })
        .await
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        let (source, target) = (source.to_owned(), target.to_owned());
        self.write(move |conn, _| {
            let tx = conn.transaction().map_err(db("starting a copy"))?;
            let exists = |t: &str| -> Result<bool> {
                tx.prepare_cached("SELECT 1 FROM checkpoints WHERE thread_id = ?1 LIMIT 1")
                    .and_then(|mut s| s.exists([t]))
                    .map_err(db("checking a thread"))
            };
            backend::copy_preflight(&source, &target, exists(&source)?, exists(&target)?)?;
            tx.execute(
                "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, \
                 parent_checkpoint_id, type, checkpoint, metadata) \
                 SELECT ?2, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, \
                 metadata FROM checkpoints WHERE thread_id = ?1",
                params![source, target],
            )
            .map_err(db("copying checkpoints"))?;
            tx.execute(
                "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, \
                 idx, channel, type, value) SELECT ?2, checkpoint_ns, checkpoint_id, task_id, \
                 task_path, idx, channel, type, value FROM writes WHERE thread_id = ?1",
                params![source, target],
            )
            .map_err(db("copying writes"))?;
            tx.commit().map_err(db("committing a copy"))
        })
        .await
    }

    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        let thread_ids = thread_ids.to_vec();
        self.write(move |conn, _| {
            // One transaction for all threads: a refused thread leaves every thread untouched.
            let tx = conn.transaction().map_err(db("starting a prune"))?;
            prune::run_now(&mut Pruning(&tx), &thread_ids, strategy)?;
            tx.commit().map_err(db("committing a prune"))
        })
        .await
    }
}
