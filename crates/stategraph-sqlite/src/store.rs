//! `SqliteStore`: LangGraph's SQLite store (`langgraph.store.sqlite.SqliteStore`), in Rust.
//!
//! The schema is exactly the one Python's `SqliteStore.setup()` creates (tables `store`,
//! `store_migrations`, and with an index `store_vectors` and `vector_migrations`), with the
//! migrations recorded the same way, so both can open one file. The semantics are those of
//! [`InMemoryStore`](stategraph_checkpoint::store::InMemoryStore), which the shared
//! conformance suite checks:
//!
//! - values are JSON text in `value` (Python's orjson BLOBs are read too); the namespace is
//!   the `prefix` column, its labels joined by `.`;
//! - timestamps are written from Rust as `YYYY-MM-DD HH:MM:SS.ffffff` (UTC), so that text order
//!   is time order and writes made one after the other order the same way; Python's
//!   `CURRENT_TIMESTAMP` text (`YYYY-MM-DD HH:MM:SS`) is read too;
//! - filters are evaluated by a Rust SQL function (`sg_store_filter`) that runs the shared
//!   [`filter::matches`], so they mean exactly what they mean on every other store;
//! - vectors are little-endian `f32` blobs (`sqlite_vec.serialize_float32`), scored with the
//!   sqlite-vec extension's `vec_distance_cosine`, registered on each connection.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{CStr, c_char, c_int, c_void};
use std::fmt;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::{Value as Sql, ValueRef};
use rusqlite::{
    Connection, OptionalExtension, Transaction, TransactionBehavior, params, params_from_iter,
};
use serde_json::{Map, Value as Json};
use stategraph_checkpoint::BoxError;
use stategraph_checkpoint::store::path::FieldPath;
use stategraph_checkpoint::store::{
    BatchStep, GetOp, IndexConfig, Item, ListNamespacesOp, MatchType, Namespace, Op, OpResult,
    PutOp, ReadOp, SearchItem, SearchOp, Store, StoreError, Timestamp, TtlConfig, VectorPlan,
    filter, finish_list_namespaces, plan_batch,
};

use crate::config::{Location, SqliteConfig};
use crate::error::BACKEND;

/// LangGraph's `MIGRATIONS` for the `store` table, by version (`store_migrations.v`).
const STORE_MIGRATIONS: [&str; 5] = [
    "CREATE TABLE IF NOT EXISTS store (
    -- 'prefix' represents the doc's 'namespace'
    prefix text NOT NULL,
    key text NOT NULL,
    value text NOT NULL,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (prefix, key)
);",
    "CREATE INDEX IF NOT EXISTS store_prefix_idx ON store (prefix);",
    "ALTER TABLE store ADD COLUMN expires_at TIMESTAMP;",
    "ALTER TABLE store ADD COLUMN ttl_minutes REAL;",
    "CREATE INDEX IF NOT EXISTS idx_store_expires_at ON store (expires_at)
WHERE expires_at IS NOT NULL;",
];

/// LangGraph's `VECTOR_MIGRATIONS` (`vector_migrations.v`), run when the store has an index.
const VECTOR_MIGRATIONS: [&str; 1] = ["CREATE TABLE IF NOT EXISTS store_vectors (
    prefix text NOT NULL,
    key text NOT NULL,
    field_name text NOT NULL,
    embedding BLOB,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (prefix, key, field_name),
    FOREIGN KEY (prefix, key) REFERENCES store(prefix, key) ON DELETE CASCADE
);"];

/// The SQL function `sg_store_filter(value, filter_json)`: whether a stored value matches.
const FILTER_FN: &str = "sg_store_filter";

/// The collation that orders `prefix` label by label, as namespaces (`Vec<String>`) order.
const NAMESPACE_COLLATION: &str = "sg_namespace";

/// How often a put run is re-planned when other writers keep changing its items while their
/// texts are embedded.
const MAX_PUT_ATTEMPTS: usize = 8;

/// A rusqlite error and what we were doing.
#[derive(Debug)]
struct DbError {
    doing: &'static str,
    source: rusqlite::Error,
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.doing, self.source)
    }
}

impl std::error::Error for DbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Wraps a rusqlite error with what we were doing.
fn db(doing: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |source| StoreError::backend(BACKEND, DbError { doing, source })
}

/// A [`Store`] in a SQLite database, on LangGraph's SQLite store schema: JSON documents under
/// hierarchical namespaces, with TTLs and (after [`SqliteStore::with_index`]) semantic search.
///
/// Like [`SqliteSaver`](crate::SqliteSaver): one writer connection and a small pool of reader
/// connections (WAL lets them read while the writer writes); every database call runs on
/// tokio's blocking pool. Embedding happens outside any lock or transaction; the rows and
/// vectors of a put are then written in one transaction, so a failure never half-writes.
///
/// ```
/// use std::sync::Arc;
/// use serde_json::json;
/// use stategraph_checkpoint::store::*;
/// use stategraph_sqlite::SqliteStore;
///
/// # tokio::runtime::Builder::new_multi_thread().build().unwrap().block_on(async {
/// # let dir = std::env::temp_dir().join(format!("sg-store-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let index = IndexConfig::new(64, Arc::new(HashingEmbeddings::new(64))).with_fields(["text"]);
/// let store = SqliteStore::open(dir.join("store.sqlite"))?.with_index(index)?;
/// let ns = ["user-1", "memories"];
/// store.put(&ns, "m1", json!({"text": "I like pizza"})).await?;
/// store.put(&ns, "m2", json!({"text": "I climb on weekends"})).await?;
///
/// let hits = store.search(&["user-1"], SearchOptions::new().query("pizza").limit(1)).await?;
/// assert_eq!(hits[0].key, "m1");
/// assert_eq!(store.get(&ns, "m2").await?.unwrap().value["text"], "I climb on weekends");
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), StoreError>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    db: Arc<Db>,
    index: Option<IndexConfig>,
    ttl: TtlConfig,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("location", &self.db.config.location)
            .field("index", &self.index)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database file at `path` and brings the store tables up
    /// to date.
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<Self, StoreError> {
        Self::with_config(SqliteConfig::file(path))
    }

    /// Opens the database a `sqlite:` URL names (see [`SqliteConfig::from_url`]).
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        let config =
            SqliteConfig::from_url(url).map_err(|e| StoreError::InvalidConfig(e.to_string()))?;
        Self::with_config(config)
    }

    /// A private in-memory database.
    pub fn in_memory() -> Result<Self, StoreError> {
        Self::with_config(SqliteConfig::memory())
    }

    /// Opens the database `config` describes (its location, `synchronous`, readers and busy
    /// timeout; the serializer is not used by the store) and runs the store migrations.
    pub fn with_config(config: SqliteConfig) -> Result<Self, StoreError> {
        let mut writer = open_connection(&config, false)?;
        migrate(&mut writer, "store_migrations", &STORE_MIGRATIONS)
            .map_err(db("creating the store tables"))?;
        Ok(Self {
            db: Arc::new(Db {
                writer: Mutex::new(writer),
                readers: Mutex::new(Vec::new()),
                config,
            }),
            index: None,
            ttl: TtlConfig::default(),
        })
    }

    /// Embeds documents with `index` so `search` can rank by meaning: validates the
    /// configuration and creates the `store_vectors` table if it is missing.
    pub fn with_index(mut self, index: IndexConfig) -> Result<Self, StoreError> {
        index.validate()?;
        self.db.write(|conn| {
            migrate(conn, "vector_migrations", &VECTOR_MIGRATIONS)
                .map_err(db("creating the store_vectors table"))
        })?;
        self.index = Some(index);
        Ok(self)
    }

    /// Uses `ttl` for default TTLs and read refresh.
    pub fn with_ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }

    /// Runs `f` with the database on tokio's blocking pool.
    async fn blocking<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Db) -> Result<T, StoreError> + Send + 'static,
    {
        let db = Arc::clone(&self.db);
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(|e| StoreError::backend(BACKEND, e))?
    }

    /// Runs consecutive non-put ops in one read transaction, then applies the TTL refreshes
    /// they asked for on the writer.
    async fn read_segment(&self, ops: Vec<ReadOp>) -> Result<Vec<OpResult>, StoreError> {
        let dims = self.index.as_ref().map_or(0, |i| i.dims);
        self.blocking(move |db| {
            let (results, refreshes) = db.read(|conn| run_reads(conn, &ops, dims))?;
            if !refreshes.is_empty() {
                db.write(|conn| apply_refreshes(conn, &refreshes))?;
            }
            Ok(results)
        })
        .await
    }

    /// Applies a run of consecutive puts (one per address, see [`BatchStep::Puts`]): one
    /// embedding call for all new texts, one transaction for every row and vector.
    async fn put_run(&self, order: Vec<PutOp>) -> Result<(), StoreError> {
        let mut tasks = Vec::with_capacity(order.len());
        for op in order {
            let paths = match (&self.index, &op.value) {
                (Some(index), Some(_)) => index.paths_for(&op.index)?,
                _ => Vec::new(),
            };
            tasks.push(PutTask {
                prefix: op.namespace.join("."),
                op,
                paths,
            });
        }
        let tasks = Arc::new(tasks);
        let indexed = self.index.is_some();
        // Plan and write in one transaction; when texts need embedding, the transaction is
        // abandoned, the texts are embedded with no lock held, and the run is planned again
        // (only texts that are still missing are embedded on a later attempt).
        let mut vectors: BTreeMap<String, Vec<f32>> = BTreeMap::new();
        for _ in 0..MAX_PUT_ATTEMPTS {
            let t = Arc::clone(&tasks);
            let (outcome, back) = self
                .blocking(move |db| {
                    db.write(|conn| write_put_run(conn, &t, indexed, &vectors))
                        .map(|o| (o, vectors))
                })
                .await?;
            vectors = back;
            match outcome {
                RunOutcome::Done => return Ok(()),
                RunOutcome::Missing(texts) => {
                    let index = self.index.as_ref().ok_or_else(|| {
                        StoreError::InvalidConfig("vectors planned without an index".into())
                    })?;
                    vectors.extend(index.embed_texts(&texts).await?);
                }
            }
        }
        Err(StoreError::backend(
            BACKEND,
            format!(
                "other writers kept changing the items of a put while their texts were \
                 embedded; gave up after {MAX_PUT_ATTEMPTS} attempts"
            ),
        ))
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, StoreError> {
        let mut results = Vec::new();
        for step in plan_batch(ops, self.index.as_ref()).await? {
            match step {
                BatchStep::Puts { ops, given } => {
                    self.put_run(ops).await?;
                    results.extend((0..given).map(|_| OpResult::Put));
                }
                BatchStep::Reads(reads) => results.extend(self.read_segment(reads).await?),
            }
        }
        Ok(results)
    }

    fn ttl_config(&self) -> &TtlConfig {
        &self.ttl
    }

    fn index_config(&self) -> Option<&IndexConfig> {
        self.index.as_ref()
    }

    async fn sweep_ttl(&self) -> Result<usize, StoreError> {
        self.blocking(|db| db.write(sweep)).await
    }
}

/// The connections.
struct Db {
    writer: Mutex<Connection>,
    /// Idle reader connections; empty and unused for in-memory databases.
    readers: Mutex<Vec<Connection>>,
    config: SqliteConfig,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A connection stays consistent even if a panic happened while it was held: SQLite rolls
    // back any open transaction when its handle is next used.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Db {
    /// Runs `f` on the writer connection.
    fn write<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        f(&mut lock(&self.writer))
    }

    /// Runs `f` on a reader connection (the writer for in-memory databases).
    fn read<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if self.config.location == Location::Memory {
            return self.write(f);
        }
        let pooled = lock(&self.readers).pop();
        let mut conn = match pooled {
            Some(c) => c,
            None => open_connection(&self.config, true)?,
        };
        let out = f(&mut conn);
        let mut idle = lock(&self.readers);
        if idle.len() < self.config.max_readers {
            idle.push(conn);
        }
        out
    }
}

fn open_connection(config: &SqliteConfig, read_only: bool) -> Result<Connection, StoreError> {
    let conn =
        crate::config::open_connection(config, read_only).map_err(|(doing, e)| db(doing)(e))?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(db("enabling foreign keys"))?;
    register_sqlite_vec(&conn)?;
    conn.create_collation(NAMESPACE_COLLATION, |a: &str, b: &str| {
        a.split('.').cmp(b.split('.'))
    })
    .map_err(db("registering the namespace collation"))?;
    conn.create_scalar_function(
        FILTER_FN,
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        filter_fn,
    )
    .map_err(db("registering the filter function"))?;
    Ok(conn)
}

/// The C signature of `sqlite3_vec_init` (an SQLite extension entry point), which the
/// `sqlite-vec` crate declares without parameters.
type ExtensionInit =
    unsafe extern "C" fn(*mut rusqlite::ffi::sqlite3, *mut *mut c_char, *const c_void) -> c_int;

/// Registers the sqlite-vec functions (`vec_distance_cosine`, …) on this connection only.
#[allow(unsafe_code)]
fn register_sqlite_vec(conn: &Connection) -> Result<(), StoreError> {
    let mut message: *mut c_char = std::ptr::null_mut();
    // SAFETY: `sqlite3_vec_init` is an SQLite extension entry point,
    // `int (sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi)`; the crate
    // declares it as `fn()`, so the pointer is cast back to that true signature. It is
    // compiled with SQLITE_CORE (see the crate's build.rs), so it never reads `pApi` and
    // calls the SQLite that rusqlite links directly: a null `pApi` is allowed. `conn.handle()`
    // is the open connection, valid for the duration of the call, and no other thread uses it
    // meanwhile (we hold `conn`). `message` is a valid out-pointer; an error message SQLite
    // allocated there is copied and released with `sqlite3_free`.
    let (rc, text) = unsafe {
        let init: ExtensionInit = std::mem::transmute::<*const (), ExtensionInit>(
            sqlite_vec::sqlite3_vec_init as *const (),
        );
        let rc = init(conn.handle(), &mut message, std::ptr::null());
        let text = if message.is_null() {
            None
        } else {
            let t = CStr::from_ptr(message).to_string_lossy().into_owned();
            rusqlite::ffi::sqlite3_free(message.cast());
            Some(t)
        };
        (rc, text)
    };
    if rc == rusqlite::ffi::SQLITE_OK {
        return Ok(());
    }
    Err(StoreError::backend(
        BACKEND,
        format!(
            "registering the sqlite-vec extension failed (code {rc}): {}",
            text.unwrap_or_default()
        ),
    ))
}

/// `sg_store_filter(value, filter_json)`: the shared filter semantics, as an SQL function.
/// The filter is parsed once per statement (SQLite keeps it as the argument's auxiliary data).
/// A value that is not a JSON object is let through, so that reading the row reports it as
/// corrupt instead of a filter silently hiding it.
fn filter_fn(ctx: &Context<'_>) -> rusqlite::Result<bool> {
    let conditions = ctx.get_or_create_aux(1, |v: ValueRef<'_>| -> Result<_, BoxError> {
        let map: Map<String, Json> = serde_json::from_str(v.as_str()?)?;
        Ok(filter::parse_filter(&map)?)
    })?;
    let value = match ctx.get_raw(0) {
        ValueRef::Text(b) | ValueRef::Blob(b) => serde_json::from_slice::<Json>(b).ok(),
        _ => None,
    };
    Ok(match value {
        Some(v) if v.is_object() => filter::matches(&v, &conditions),
        _ => true,
    })
}

/// Runs `migrations` not yet recorded in `table` (LangGraph's scheme: `v` is the index of
/// the last one applied), all in one transaction.
fn migrate(conn: &mut Connection, table: &str, migrations: &[&str]) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {table} (v INTEGER PRIMARY KEY)"
    ))?;
    let current: Option<i64> = tx
        .query_row(
            &format!("SELECT v FROM {table} ORDER BY v DESC LIMIT 1"),
            [],
            |r| r.get(0),
        )
        .optional()?;
    let next = current.map_or(0, |v| usize::try_from(v.saturating_add(1)).unwrap_or(0));
    for (v, sql) in migrations.iter().enumerate().skip(next) {
        tx.execute_batch(sql)?;
        tx.execute(
            &format!("INSERT INTO {table} (v) VALUES (?1)"),
            [i64::try_from(v).unwrap_or(i64::MAX)],
        )?;
    }
    tx.commit()
}

fn table_exists(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1")?
        .exists([name])
}

/// `\`, `%` and `_` escaped for `LIKE … ESCAPE '\'`.
fn escape_like(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | '%' | '_') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Appends `(column is the namespace `labels` or under it)`, label-wise: `a.b` matches `a.b`
/// and `a.b.c`, not `a.bc`. SQLite's `LIKE` ignores ASCII case, so a case-sensitive check
/// of the leading text is added to it.
fn push_prefix_condition(sql: &mut String, params: &mut Vec<Sql>, column: &str, labels: &[String]) {
    let exact = labels.join(".");
    let under = format!("{exact}.");
    let _ = write!(
        sql,
        "({column} = ? OR ({column} LIKE ? ESCAPE '\\' AND substr({column}, 1, length(?)) = ?))"
    );
    params.push(Sql::Text(exact));
    params.push(Sql::Text(format!("{}%", escape_like(&under))));
    params.push(Sql::Text(under.clone()));
    params.push(Sql::Text(under));
}

fn sql_int(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A text column, or `None` when it is NULL or not text.
fn text_column(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => std::str::from_utf8(b).ok().map(str::to_owned),
        _ => None,
    }
}

/// A number column (`ttl_minutes`), or `None`.
fn real_column(v: ValueRef<'_>) -> Option<f64> {
    match v {
        ValueRef::Real(f) => Some(f),
        ValueRef::Integer(i) => Some(i as f64),
        _ => None,
    }
}

/// The JSON text or bytes of a `value` column.
fn bytes_column(v: ValueRef<'_>) -> Option<Vec<u8>> {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(b.to_vec()),
        _ => None,
    }
}

/// One `store` row as read, before decoding.
struct RawRow {
    prefix: String,
    key: String,
    value: Option<Vec<u8>>,
    created_at: Option<String>,
    updated_at: Option<String>,
    ttl_minutes: Option<f64>,
}

impl RawRow {
    fn namespace(&self) -> Namespace {
        self.prefix.split('.').map(str::to_owned).collect()
    }

    /// The item, or [`StoreError::Corrupt`] naming it.
    fn decode(&self) -> Result<Item, StoreError> {
        let corrupt = |reason: String| StoreError::Corrupt {
            namespace: self.namespace(),
            key: self.key.clone(),
            reason,
        };
        let bytes = self
            .value
            .as_deref()
            .ok_or_else(|| corrupt("the value is NULL or not text".into()))?;
        let value: Json = serde_json::from_slice(bytes)
            .map_err(|e| corrupt(format!("the value is not JSON: {e}")))?;
        if !value.is_object() {
            return Err(corrupt("the value is not a JSON object".into()));
        }
        let time = |name: &str, text: &Option<String>| {
            text.as_deref()
                .and_then(Timestamp::parse)
                .ok_or_else(|| corrupt(format!("{name} {text:?} is not a timestamp")))
        };
        Ok(Item {
            value,
            key: self.key.clone(),
            namespace: self.namespace(),
            created_at: time("created_at", &self.created_at)?,
            updated_at: time("updated_at", &self.updated_at)?,
        })
    }

    /// The refresh this row gets when read with `refresh_ttl`, if it has a TTL.
    fn refresh(&self, now: Timestamp) -> Option<Refresh> {
        self.ttl_minutes.map(|ttl| Refresh {
            prefix: self.prefix.clone(),
            key: self.key.clone(),
            ttl,
            now,
        })
    }
}

/// A TTL refresh: `expires_at = now + ttl` for a row read at `now`.
struct Refresh {
    prefix: String,
    key: String,
    ttl: f64,
    now: Timestamp,
}

/// Applies TTL refreshes. A row whose TTL changed or that expired since it was read (another
/// writer got there first) is left alone.
fn apply_refreshes(conn: &mut Connection, refreshes: &[Refresh]) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db("starting a TTL refresh"))?;
    {
        let mut stmt = tx
            .prepare_cached(
                "UPDATE store SET expires_at = ?1 WHERE prefix = ?2 AND key = ?3 \
                 AND ttl_minutes = ?4 AND (expires_at IS NULL OR expires_at > ?5)",
            )
            .map_err(db("preparing a TTL refresh"))?;
        for r in refreshes {
            stmt.execute(params![
                r.now.plus_minutes(r.ttl).to_sql_text(),
                r.prefix,
                r.key,
                r.ttl,
                r.now.to_sql_text(),
            ])
            .map_err(db("refreshing a TTL"))?;
        }
    }
    tx.commit().map_err(db("committing a TTL refresh"))
}

/// Runs read ops in one read transaction; returns their results and the TTL refreshes asked
/// for.
fn run_reads(
    conn: &mut Connection,
    ops: &[ReadOp],
    dims: usize,
) -> Result<(Vec<OpResult>, Vec<Refresh>), StoreError> {
    let tx = conn.transaction().map_err(db("starting a read"))?;
    let mut refreshes = Vec::new();
    let mut results = Vec::with_capacity(ops.len());
    for r in ops {
        let now = Timestamp::now();
        results.push(match r {
            ReadOp::Get(g) => OpResult::Get(get(&tx, g, now, &mut refreshes)?),
            ReadOp::Search(s, query) => {
                OpResult::Search(search(&tx, s, query.as_deref(), dims, now, &mut refreshes)?)
            }
            ReadOp::ListNamespaces(l) => OpResult::ListNamespaces(list_namespaces(&tx, l, now)?),
        });
    }
    tx.commit().map_err(db("finishing a read"))?;
    Ok((results, refreshes))
}

fn get(
    tx: &Transaction<'_>,
    op: &GetOp,
    now: Timestamp,
    refreshes: &mut Vec<Refresh>,
) -> Result<Option<Item>, StoreError> {
    let prefix = op.namespace.join(".");
    let row = tx
        .prepare_cached(
            "SELECT value, created_at, updated_at, ttl_minutes FROM store \
             WHERE prefix = ?1 AND key = ?2 AND (expires_at IS NULL OR expires_at > ?3)",
        )
        .map_err(db("preparing a get"))?
        .query_row(params![prefix, op.key, now.to_sql_text()], |r| {
            Ok(RawRow {
                prefix: prefix.clone(),
                key: op.key.clone(),
                value: bytes_column(r.get_ref(0)?),
                created_at: text_column(r.get_ref(1)?),
                updated_at: text_column(r.get_ref(2)?),
                ttl_minutes: real_column(r.get_ref(3)?),
            })
        })
        .optional()
        .map_err(db("reading an item"))?;
    let Some(row) = row else { return Ok(None) };
    let item = row.decode()?;
    if op.refresh_ttl {
        refreshes.extend(row.refresh(now));
    }
    Ok(Some(item))
}

fn f32_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// One query: namespace prefix, liveness and filter in `WHERE`; with a query vector, each
/// item's score is the best `1 - cosine distance` of its vectors (of the index's dimensions;
/// a zero vector scores 0, as [`cosine`](stategraph_checkpoint::store::cosine) says), scored
/// items first; then newest first, then by address.
fn search(
    tx: &Transaction<'_>,
    op: &SearchOp,
    query: Option<&[f32]>,
    dims: usize,
    now: Timestamp,
    refreshes: &mut Vec<Refresh>,
) -> Result<Vec<SearchItem>, StoreError> {
    let mut params: Vec<Sql> = Vec::new();
    let score = match query {
        Some(q) => {
            params.push(Sql::Blob(f32_blob(q)));
            params.push(Sql::Integer(sql_int(dims.saturating_mul(4))));
            "(SELECT MAX(COALESCE(1.0 - vec_distance_cosine(v.embedding, ?), 0.0)) \
             FROM store_vectors v WHERE v.prefix = s.prefix AND v.key = s.key \
             AND length(v.embedding) = ?)"
        }
        None => "NULL",
    };
    let mut sql = format!(
        "SELECT s.prefix, s.key, s.value, s.created_at, s.updated_at, s.ttl_minutes, \
         {score} AS score FROM store s WHERE (s.expires_at IS NULL OR s.expires_at > ?)"
    );
    params.push(Sql::Text(now.to_sql_text()));
    if !op.namespace_prefix.is_empty() {
        sql.push_str(" AND ");
        push_prefix_condition(&mut sql, &mut params, "s.prefix", &op.namespace_prefix);
    }
    if let Some(f) = op.filter.as_ref().filter(|f| !f.is_empty()) {
        let _ = write!(sql, " AND {FILTER_FN}(s.value, ?)");
        let text = serde_json::to_string(f).map_err(|e| StoreError::InvalidFilter {
            key: String::new(),
            reason: e.to_string(),
        })?;
        params.push(Sql::Text(text));
    }
    sql.push_str(" ORDER BY ");
    if query.is_some() {
        sql.push_str("score DESC NULLS LAST, ");
    }
    let _ = write!(
        sql,
        "s.updated_at DESC, s.prefix COLLATE {NAMESPACE_COLLATION}, s.key LIMIT ? OFFSET ?"
    );
    params.push(Sql::Integer(sql_int(op.limit)));
    params.push(Sql::Integer(sql_int(op.offset)));

    let mut stmt = tx.prepare_cached(&sql).map_err(db("preparing a search"))?;
    let rows = stmt
        .query_map(params_from_iter(params), |r| {
            Ok((
                RawRow {
                    prefix: r.get(0)?,
                    key: r.get(1)?,
                    value: bytes_column(r.get_ref(2)?),
                    created_at: text_column(r.get_ref(3)?),
                    updated_at: text_column(r.get_ref(4)?),
                    ttl_minutes: real_column(r.get_ref(5)?),
                },
                r.get::<_, Option<f64>>(6)?,
            ))
        })
        .map_err(db("searching"))?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db("searching"))?;
    let mut out = Vec::with_capacity(rows.len());
    for (row, score) in &rows {
        out.push(SearchItem {
            item: row.decode()?,
            score: *score,
        });
    }
    if op.refresh_ttl {
        refreshes.extend(rows.iter().filter_map(|(row, _)| row.refresh(now)));
    }
    Ok(out)
}

fn list_namespaces(
    tx: &Transaction<'_>,
    op: &ListNamespacesOp,
    now: Timestamp,
) -> Result<Vec<Namespace>, StoreError> {
    let mut sql =
        "SELECT DISTINCT prefix FROM store WHERE (expires_at IS NULL OR expires_at > ?)".to_owned();
    let mut params = vec![Sql::Text(now.to_sql_text())];
    // Narrow by the literal labels before any `*` of each prefix condition; the conditions are
    // then checked exactly by `finish_list_namespaces`.
    for c in &op.match_conditions {
        if c.match_type != MatchType::Prefix {
            continue;
        }
        let literal: Vec<String> = c.path.iter().take_while(|l| *l != "*").cloned().collect();
        if !literal.is_empty() {
            sql.push_str(" AND ");
            push_prefix_condition(&mut sql, &mut params, "prefix", &literal);
        }
    }
    let mut stmt = tx
        .prepare_cached(&sql)
        .map_err(db("preparing list_namespaces"))?;
    let prefixes = stmt
        .query_map(params_from_iter(params), |r| r.get::<_, String>(0))
        .map_err(db("listing namespaces"))?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db("listing namespaces"))?;
    Ok(finish_list_namespaces(
        prefixes
            .iter()
            .map(|p| p.split('.').map(str::to_owned).collect()),
        op,
    ))
}

/// One address of a put run (the last op for it) and the index paths it embeds.
struct PutTask {
    prefix: String,
    op: PutOp,
    paths: Vec<FieldPath>,
}

enum RunOutcome {
    /// Written and committed.
    Done,
    /// Nothing written: these texts must be embedded first.
    Missing(Vec<String>),
}

/// Plans a put run against the stored rows and, if every text to embed is in `vectors`,
/// writes it, all in one transaction.
fn write_put_run(
    conn: &mut Connection,
    tasks: &[PutTask],
    indexed: bool,
    vectors: &BTreeMap<String, Vec<f32>>,
) -> Result<RunOutcome, StoreError> {
    let now = Timestamp::now();
    let now_text = now.to_sql_text();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db("starting a put"))?;
    let has_vectors = table_exists(&tx, "store_vectors").map_err(db("reading the schema"))?;

    struct Planned {
        live: bool,
        fields: BTreeSet<String>,
        plan: VectorPlan,
    }
    let mut planned = Vec::with_capacity(tasks.len());
    let mut missing = BTreeSet::new();
    for t in tasks {
        let old = tx
            .prepare_cached(
                "SELECT value, (expires_at IS NULL OR expires_at > ?3) FROM store \
                 WHERE prefix = ?1 AND key = ?2",
            )
            .map_err(db("preparing a put"))?
            .query_row(params![t.prefix, t.op.key, now_text], |r| {
                Ok((bytes_column(r.get_ref(0)?), r.get::<_, bool>(1)?))
            })
            .optional()
            .map_err(db("reading the stored item"))?;
        let live = old.as_ref().is_some_and(|(_, l)| *l);
        let fields: BTreeSet<String> = if has_vectors {
            tx.prepare_cached("SELECT field_name FROM store_vectors WHERE prefix = ?1 AND key = ?2")
                .map_err(db("preparing a put"))?
                .query_map(params![t.prefix, t.op.key], |r| r.get(0))
                .map_err(db("reading the stored vectors"))?
                .collect::<rusqlite::Result<_>>()
                .map_err(db("reading the stored vectors"))?
        } else {
            BTreeSet::new()
        };
        let plan = match &t.op.value {
            Some(value) if indexed => {
                // An unreadable old value is planned as absent: every text is embedded again.
                let old_value: Option<Json> = old
                    .as_ref()
                    .filter(|_| live)
                    .and_then(|(b, _)| b.as_deref())
                    .and_then(|b| serde_json::from_slice(b).ok());
                let plan =
                    VectorPlan::new(value, &t.paths, old_value.as_ref().map(|v| (v, &fields)));
                missing.extend(
                    plan.embed
                        .iter()
                        .filter(|(_, text)| !vectors.contains_key(text))
                        .map(|(_, text)| text.clone()),
                );
                plan
            }
            _ => VectorPlan::default(),
        };
        planned.push(Planned { live, fields, plan });
    }
    if !missing.is_empty() {
        // Dropping `tx` rolls back; nothing was written.
        return Ok(RunOutcome::Missing(missing.into_iter().collect()));
    }

    for (t, p) in tasks.iter().zip(planned) {
        if has_vectors {
            let mut stmt = tx
                .prepare_cached(
                    "DELETE FROM store_vectors WHERE prefix = ?1 AND key = ?2 AND field_name = ?3",
                )
                .map_err(db("preparing a put"))?;
            for field in p.fields.iter().filter(|f| !p.plan.keep.contains(f)) {
                stmt.execute(params![t.prefix, t.op.key, field])
                    .map_err(db("deleting stale vectors"))?;
            }
        }
        let Some(value) = &t.op.value else {
            tx.prepare_cached("DELETE FROM store WHERE prefix = ?1 AND key = ?2")
                .map_err(db("preparing a delete"))?
                .execute(params![t.prefix, t.op.key])
                .map_err(db("deleting an item"))?;
            continue;
        };
        let text = serde_json::to_string(value).map_err(|e| StoreError::InvalidValue {
            namespace: t.op.namespace.clone(),
            key: t.op.key.clone(),
            reason: e.to_string(),
        })?;
        let expires_at = t.op.ttl.map(|m| now.plus_minutes(m).to_sql_text());
        tx.prepare_cached(
            "INSERT INTO store (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes) \
             VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6) \
             ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value, \
             created_at = CASE WHEN ?7 THEN store.created_at ELSE excluded.created_at END, \
             updated_at = excluded.updated_at, expires_at = excluded.expires_at, \
             ttl_minutes = excluded.ttl_minutes",
        )
        .map_err(db("preparing a put"))?
        .execute(params![t.prefix, t.op.key, text, now_text, expires_at, t.op.ttl, p.live])
        .map_err(db("writing an item"))?;
        if !p.plan.embed.is_empty() {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO store_vectors \
                     (prefix, key, field_name, embedding, created_at, updated_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                )
                .map_err(db("preparing a put"))?;
            for (field, text) in &p.plan.embed {
                if let Some(v) = vectors.get(text) {
                    stmt.execute(params![t.prefix, t.op.key, field, f32_blob(v), now_text])
                        .map_err(db("writing a vector"))?;
                }
            }
        }
    }
    tx.commit().map_err(db("committing a put"))?;
    Ok(RunOutcome::Done)
}

/// Deletes expired rows and their vectors; returns how many rows.
fn sweep(conn: &mut Connection) -> Result<usize, StoreError> {
    let now = Timestamp::now().to_sql_text();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db("starting a TTL sweep"))?;
    if table_exists(&tx, "store_vectors").map_err(db("reading the schema"))? {
        tx.execute(
            "DELETE FROM store_vectors WHERE (prefix, key) IN (SELECT prefix, key FROM store \
             WHERE expires_at IS NOT NULL AND expires_at <= ?1)",
            [&now],
        )
        .map_err(db("sweeping expired vectors"))?;
    }
    let n = tx
        .execute(
            "DELETE FROM store WHERE expires_at IS NOT NULL AND expires_at <= ?1",
            [&now],
        )
        .map_err(db("sweeping expired items"))?;
    tx.commit().map_err(db("committing a TTL sweep"))?;
    Ok(n)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn prefix_condition_is_label_wise_and_case_sensitive() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (prefix TEXT)").unwrap();
        for p in [
            "a.b", "a.b.c", "a.bc", "A.B.c", "a.b_", "a_b.c", "x%.y", "xz.y",
        ] {
            conn.execute("INSERT INTO t VALUES (?1)", [p]).unwrap();
        }
        let matching = |labels: &[&str]| {
            let mut sql = "SELECT prefix FROM t WHERE ".to_owned();
            let mut params = Vec::new();
            let labels: Vec<String> = labels.iter().map(|l| (*l).to_owned()).collect();
            push_prefix_condition(&mut sql, &mut params, "prefix", &labels);
            sql.push_str(" ORDER BY prefix");
            let mut stmt = conn.prepare(&sql).unwrap();
            stmt.query_map(params_from_iter(params), |r| r.get::<_, String>(0))
                .unwrap()
                .collect::<rusqlite::Result<Vec<_>>>()
                .unwrap()
        };
        assert_eq!(matching(&["a", "b"]), ["a.b", "a.b.c"]);
        assert_eq!(matching(&["a_b"]), ["a_b.c"]);
        assert_eq!(matching(&["x%"]), ["x%.y"]);
    }

    #[test]
    fn namespace_collation_orders_label_by_label() {
        let conn = open_connection(&SqliteConfig::memory(), false).unwrap();
        conn.execute_batch("CREATE TABLE t (prefix TEXT)").unwrap();
        for p in ["a-x", "a.b", "a", "a.b.c", "a!"] {
            conn.execute("INSERT INTO t VALUES (?1)", [p]).unwrap();
        }
        let got: Vec<String> = conn
            .prepare("SELECT prefix FROM t ORDER BY prefix COLLATE sg_namespace")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let mut want: Vec<Vec<&str>> = got.iter().map(|p| p.split('.').collect()).collect();
        want.sort();
        let want: Vec<String> = want.into_iter().map(|l| l.join(".")).collect();
        assert_eq!(got, want);
        assert_eq!(got, ["a", "a.b", "a.b.c", "a!", "a-x"]);
    }

    #[test]
    fn sqlite_vec_is_registered_per_connection() {
        let conn = open_connection(&SqliteConfig::memory(), false).unwrap();
        let d: f64 = conn
            .query_row(
                "SELECT vec_distance_cosine(?1, ?2)",
                params![f32_blob(&[1.0, 0.0]), f32_blob(&[0.0, 2.0])],
                |r| r.get(0),
            )
            .unwrap();
        assert!((d - 1.0).abs() < 1e-6);
        // A zero vector has no direction: NaN, which SQLite turns into NULL.
        let z: Option<f64> = conn
            .query_row(
                "SELECT vec_distance_cosine(?1, ?2)",
                params![f32_blob(&[0.0, 0.0]), f32_blob(&[0.0, 2.0])],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(z, None);
        let plain = Connection::open_in_memory().unwrap();
        assert!(
            plain
                .query_row("SELECT vec_version()", [], |r| r.get::<_, String>(0))
                .is_err()
        );
    }
}
