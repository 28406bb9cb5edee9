//! [`PostgresStore`]: LangGraph's Postgres `BaseStore`, in Rust, on LangGraph's own schema.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::time::SystemTime;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use serde_json::Value as Json;
use stategraph_checkpoint::BoxError;
use stategraph_checkpoint::store::filter::{Condition, parse_filter};
use stategraph_checkpoint::store::{
    BatchStep, GetOp, IndexConfig, Item, ListNamespacesOp, MatchType, Namespace, Op, OpResult,
    PutOp, ReadOp, SearchItem, SearchOp, Store, StoreError, Timestamp, TtlConfig, VectorPlan,
    finish_list_namespaces, plan_batch,
};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{GenericClient, NoTls};

use crate::config::PostgresConfig;
use crate::error::BACKEND;
use crate::migrate::{SetupFailure, create_schema, run_migrations, with_setup_lock};

/// LangGraph's `store_migrations` v0–v3 (`langgraph-checkpoint-postgres`), indexed by
/// version. Recorded in `store_migrations` exactly as Python records them, never beyond v3.
const STORE_MIGRATIONS: [&str; 4] = [
    "CREATE TABLE IF NOT EXISTS store (
    prefix text NOT NULL,
    key text NOT NULL,
    value jsonb NOT NULL,
    created_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (prefix, key)
)",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS store_prefix_idx ON store USING btree (prefix text_pattern_ops)",
    "ALTER TABLE store
ADD COLUMN IF NOT EXISTS expires_at TIMESTAMP WITH TIME ZONE,
ADD COLUMN IF NOT EXISTS ttl_minutes INT",
    "CREATE INDEX IF NOT EXISTS idx_store_expires_at ON store (expires_at)
WHERE expires_at IS NOT NULL",
];

/// LangGraph's `vector_migrations` v0–v2 for an index of `dims` dimensions with its defaults
/// (`vector` type, cosine distance, HNSW without parameters).
fn vector_migrations(dims: usize) -> [String; 3] {
    [
        "DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
        CREATE EXTENSION vector;
    END IF;
END $$"
            .to_owned(),
        format!(
            "CREATE TABLE IF NOT EXISTS store_vectors (
    prefix text NOT NULL,
    key text NOT NULL,
    field_name text NOT NULL,
    embedding vector({dims}),
    created_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (prefix, key, field_name),
    FOREIGN KEY (prefix, key) REFERENCES store(prefix, key) ON DELETE CASCADE
)"
        ),
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS store_vectors_embedding_idx ON store_vectors
    USING hnsw (embedding vector_cosine_ops)"
            .to_owned(),
    ]
}

/// stategraph's own additions, versioned in `stategraph_store_migrations` (never in LangGraph's
/// tables, so Python's `setup()` keeps running its own future migrations).
const OWN_MIGRATIONS: [&str; 1] = [
    // The exact TTL of items put with a fractional number of minutes (`store.ttl_minutes` is an
    // INT). A row counts only while its `updated_at` equals the store row's, so a later put by
    // Python (which does not know this table) makes it void.
    "CREATE TABLE IF NOT EXISTS stategraph_store_ttl (
    prefix text NOT NULL,
    key text NOT NULL,
    ttl_minutes double precision NOT NULL,
    updated_at TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (prefix, key),
    FOREIGN KEY (prefix, key) REFERENCES store(prefix, key) ON DELETE CASCADE
)",
];

/// Seed of the session advisory-lock key that serialises concurrent store `setup()` calls on
/// one schema (hashed with the schema name; distinct from the saver's).
const SETUP_LOCK_SEED: i64 = 0x5354_4752_5354_4f31; // "STGRSTO1"

/// The latest expiry stored (9999-12-31T23:59:59.999999Z): far-future TTLs are clamped to it.
const MAX_EXPIRY: Timestamp = Timestamp::from_unix_micros(253_402_300_799_999_999);

/// Largest TTL, in minutes, a refresh adds (about 9,500 years; keeps timestamps in range).
const MAX_REFRESH_MINUTES: f64 = 5e9;

/// Default of [`PostgresStore::with_exact_search_limit`].
const DEFAULT_EXACT_SEARCH_LIMIT: u64 = 10_000;

/// A store failure with what we were doing.
#[derive(Debug)]
struct DbError {
    context: &'static str,
    source: BoxError,
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.context, self.source)
    }
}

impl std::error::Error for DbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

fn backend(context: &'static str, source: impl Into<BoxError>) -> StoreError {
    StoreError::backend(
        BACKEND,
        DbError {
            context,
            source: source.into(),
        },
    )
}

/// Wraps a tokio-postgres error with what we were doing.
fn db(context: &'static str) -> impl Fn(tokio_postgres::Error) -> StoreError {
    move |e| backend(context, e)
}

/// Query parameters, owned, with explicit types (statements are sent unnamed).
#[derive(Default)]
struct Params {
    values: Vec<(Box<dyn ToSql + Sync + Send>, Type)>,
}

impl Params {
    /// Adds a parameter and returns its placeholder (`$n`).
    fn push<T: ToSql + Sync + Send + 'static>(&mut self, value: T, ty: Type) -> String {
        self.values.push((Box::new(value), ty));
        format!("${}", self.values.len())
    }

    fn refs(&self) -> Vec<(&(dyn ToSql + Sync), Type)> {
        self.values
            .iter()
            .map(|(v, t)| (v.as_ref() as &(dyn ToSql + Sync), t.clone()))
            .collect()
    }
}

/// A [`Store`] on PostgreSQL with LangGraph's own schema and row formats, so Python
/// LangGraph's `PostgresStore` and this one share a database.
///
/// # Schema
///
/// [`setup`](Self::setup) runs LangGraph's `store_migrations` v0–v3 (`store` with a JSONB
/// `value`, `created_at`/`updated_at`/`expires_at` TIMESTAMPTZ and an INT `ttl_minutes`;
/// `store_prefix_idx`; `idx_store_expires_at`) and, with an index, `vector_migrations` v0–v2
/// (the `vector` extension; `store_vectors` with one `vector(dims)` per embedded field,
/// cascading on delete; an HNSW index with `vector_cosine_ops`), recording versions as Python
/// does. Its one addition, `stategraph_store_ttl`, is versioned separately in
/// `stategraph_store_migrations`. A namespace is stored as its labels joined by `.`.
///
/// # Clock
///
/// Every timestamp (`created_at`, `updated_at`, `expires_at`, and the "now" that expiry is
/// compared with) comes from this process's clock ([`Timestamp::now`]), never from the
/// server's `NOW()`, so ordering and TTLs behave exactly as in
/// [`InMemoryStore`](stategraph_checkpoint::store::InMemoryStore) even when the clocks differ.
/// Expired items are never read, swept or not (Python's store returns them until a sweep
/// unless `omit_expired` is set), and putting an expired item again starts a new `created_at`.
///
/// # TTL precision
///
/// TTLs are fractional minutes, but LangGraph's `ttl_minutes` column is an INT. A put stores
/// `expires_at` exactly (put time + TTL, to the microsecond) and `ttl_minutes` rounded **up**
/// (so Python, which refreshes by `ttl_minutes`, never expires an item earlier than its TTL);
/// a fractional TTL is also kept exactly in `stategraph_store_ttl`, which refreshes use. That
/// row is tied to the put that wrote it (by `updated_at`): after a put by Python, refreshes use
/// the INT column, as Python's do.
///
/// # Filters
///
/// Filters are SQL with bound parameters: `{"k": v}` and `$eq` → `value->k = v::jsonb`;
/// `$ne` → `IS DISTINCT FROM` (a missing field differs); an object without operators →
/// `@>`; `$gt`/`$gte`/`$lt`/`$lte` with a number compare numerically, and only fields that are
/// numbers (`jsonb_typeof`); with a string, only string fields, byte-wise (`COLLATE "C"`).
/// **LangGraph's Postgres store compares these as text** (`value->>k > '6'`, so `10 > 6` is
/// false there); stategraph deliberately compares numbers as numbers, like every stategraph
/// store.
///
/// # Semantic search and the HNSW index
///
/// With a query and an index, an item's score is the best cosine similarity
/// (`1 - (embedding <=> query)`) of its vectors to the query (a zero vector scores 0). Scored
/// items come first (best first), then items without vectors (newest first); `offset` and
/// `limit` apply to that combined order. While `store_vectors` holds fewer vectors than
/// [`with_exact_search_limit`](Self::with_exact_search_limit) (by the planner's estimate,
/// default 10,000), the search is exact: every matching item is scored. Above it, the HNSW
/// index picks candidates (`ORDER BY embedding <=> query LIMIT n` with
/// `hnsw.iterative_scan = relaxed_order`, so namespace and value filters do not starve the
/// scan), the candidates are then scored exactly and ordered as above; if fewer candidates
/// than `offset + limit` come back, the search falls back to the exact path. Large stores
/// thus get approximate (HNSW) recall at index speed, small ones exact results. (Iterative
/// index scans need pgvector 0.8; older versions scan only `hnsw.ef_search` candidates, which
/// this store raises to cover the page, and fall back to the exact path when that is short.)
///
/// # Connections
///
/// A [`deadpool_postgres`] pool, as [`PostgresSaver`](crate::PostgresSaver)'s, with unnamed
/// statements only. A batch runs on one connection, its ops in order. A run of consecutive
/// puts (the last per address wins) plans its vectors against the stored items with
/// [`VectorPlan`] (only new or changed texts are embedded), embeds all its new texts in one
/// call outside any transaction, then writes rows and vectors in one transaction, after
/// locking the rows and checking the plan still holds; if a concurrent writer changed a text
/// meanwhile, it embeds the difference and tries again (after a few tries it embeds while
/// holding the locks, so it always completes). Rows are locked in one order by every writer.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    schema: Option<String>,
    /// Where it connects, password removed, for error messages.
    target: String,
    index: Option<IndexConfig>,
    ttl: TtlConfig,
    exact_search_limit: u64,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("schema", &self.schema)
            .field("target", &self.target)
            .field("index", &self.index)
            .field("ttl", &self.ttl)
            .field("exact_search_limit", &self.exact_search_limit)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects to the database a `postgres://` URL names and runs [`setup`](Self::setup)
    /// (without an index; to add one, use [`from_url`](Self::from_url), then
    /// [`with_index`](Self::with_index), then `setup`).
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let store = Self::from_url(url)?;
        store.setup().await?;
        Ok(store)
    }

    /// A store on the database a `postgres://` URL names (see [`PostgresConfig::from_url`]).
    /// Connects lazily: call [`setup`](Self::setup) before first use.
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        let config =
            PostgresConfig::from_url(url).map_err(|e| StoreError::InvalidConfig(e.to_string()))?;
        Self::from_config(&config)
    }

    /// A store with a [`PostgresConfig`]'s connection settings and pool size. With
    /// [`PostgresConfig::schema`], its tables live in that schema (created by `setup`) and the
    /// connections' `search_path` is that schema, then `public` (where the `vector` extension
    /// usually lives). Connects lazily: call [`setup`](Self::setup) before first use.
    pub fn from_config(config: &PostgresConfig) -> Result<Self, StoreError> {
        let mut pg = config.pg.clone();
        if let Some(schema) = &config.schema {
            pg.options(format!(
                "-c search_path=\"{}\",public",
                schema.replace('"', "")
            ));
        }
        let manager = Manager::from_config(
            pg.clone(),
            NoTls,
            ManagerConfig {
                // As the saver's: a connection the server dropped is replaced, not handed out.
                recycling_method: RecyclingMethod::Verified,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(config.pool_size)
            .build()
            .map_err(|e| backend("building the connection pool", e))?;
        let target = format!(
            "{:?}:{:?}/{}",
            pg.get_hosts(),
            pg.get_ports(),
            pg.get_dbname().unwrap_or_default()
        );
        let mut store = Self::from_pool(pool);
        store.schema = config.schema.clone();
        store.target = target;
        Ok(store)
    }

    /// A store on an existing pool (for example one shared with other code). Its connections'
    /// `search_path` decides where the tables are; `setup` creates no schema. Call
    /// [`setup`](Self::setup) before first use.
    pub fn from_pool(pool: Pool) -> Self {
        Self {
            pool,
            schema: None,
            target: "the pool's database".to_owned(),
            index: None,
            ttl: TtlConfig::default(),
            exact_search_limit: DEFAULT_EXACT_SEARCH_LIMIT,
        }
    }

    /// Embeds documents with `index` so `search` can rank by meaning (run
    /// [`setup`](Self::setup) afterwards: it creates the vector table for `index.dims`).
    pub fn with_index(mut self, index: IndexConfig) -> Self {
        self.index = Some(index);
        self
    }

    /// Uses `ttl` for default TTLs and read refresh.
    pub fn with_ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }

    /// Semantic searches are exact while `store_vectors` holds fewer than `vectors` vectors
    /// (the planner's estimate); at or above it they use the HNSW index for candidates (see
    /// the type's docs). Default 10,000; `u64::MAX` keeps every search exact, `0` always uses
    /// the index.
    pub fn with_exact_search_limit(mut self, vectors: u64) -> Self {
        self.exact_search_limit = vectors;
        self
    }

    /// The connection pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Creates or upgrades the tables: LangGraph's store migrations, with an index its vector
    /// migrations, and stategraph's own. Idempotent; concurrent calls (from several processes
    /// too) take turns on an advisory lock. Fails if the index's dimensions differ from an
    /// existing `store_vectors` table's.
    pub async fn setup(&self) -> Result<(), StoreError> {
        if let Some(index) = &self.index {
            index.validate()?;
        }
        let client = self.client().await?;
        if let Some(schema) = &self.schema {
            create_schema(&client, schema).await?;
        }
        with_setup_lock(&client, SETUP_LOCK_SEED, self.migrate(&client)).await
    }

    async fn migrate(&self, client: &tokio_postgres::Client) -> Result<(), StoreError> {
        run_migrations(client, "store_migrations", &STORE_MIGRATIONS).await?;
        if let Some(index) = &self.index {
            run_migrations(client, "vector_migrations", &vector_migrations(index.dims)).await?;
            let rows = client
                .query_typed(
                    "SELECT a.atttypmod FROM pg_attribute a \
                     WHERE a.attrelid = to_regclass('store_vectors') AND a.attname = 'embedding'",
                    &[],
                )
                .await
                .map_err(db("reading the vector dimensions"))?;
            let dims: Option<i32> = rows.first().map(|r| r.get(0));
            if let Some(d) = dims
                && usize::try_from(d).ok() != Some(index.dims)
            {
                return Err(StoreError::InvalidConfig(format!(
                    "store_vectors.embedding has {d} dimensions, the index is configured for {}",
                    index.dims
                )));
            }
        }
        Ok(run_migrations(client, "stategraph_store_migrations", &OWN_MIGRATIONS).await?)
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(inner) => backend(
                "cannot connect to PostgreSQL",
                format!("{} ({inner})", self.target),
            ),
            other => backend("getting a connection from the pool", other),
        })
    }
}

impl From<SetupFailure> for StoreError {
    fn from(f: SetupFailure) -> Self {
        backend(f.context, f.source)
    }
}

/// The driver client behind a pooled connection.
fn client_of(c: &deadpool_postgres::Object) -> &tokio_postgres::Client {
    c
}

/// `(prefix, key)` of a stored item.
type Address = (String, String);

/// A namespace as stored: its labels joined by `.`.
fn prefix_of(namespace: &[String]) -> String {
    namespace.join(".")
}

fn namespace_of(prefix: &str) -> Namespace {
    prefix.split('.').map(str::to_owned).collect()
}

/// Escapes `LIKE` metacharacters (with `ESCAPE '\'`).
fn escape_like(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

/// A label as a literal in a PostgreSQL regular expression (ASCII punctuation escaped).
fn escape_regex(label: &str) -> String {
    let mut out = String::with_capacity(label.len());
    for c in label.chars() {
        if c.is_ascii() && !c.is_ascii_alphanumeric() {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A POSIX regex on the stored prefix for a match condition (`*` = one label).
fn match_regex(path: &[String], match_type: MatchType) -> String {
    let body = path
        .iter()
        .map(|l| {
            if l == "*" {
                "[^.]+".to_owned()
            } else {
                escape_regex(l)
            }
        })
        .collect::<Vec<_>>()
        .join("\\.");
    match match_type {
        MatchType::Prefix => format!("^{body}(\\.|$)"),
        MatchType::Suffix => format!("(^|\\.){body}$"),
    }
}

/// `col` is under the namespace prefix, label-wise (`a` matches `a` and `a.b`, not `ab`).
fn namespace_condition(prefix: &[String], col: &str, p: &mut Params) -> String {
    if prefix.is_empty() {
        return "TRUE".to_owned();
    }
    let text = prefix_of(prefix);
    let pattern = format!("{}.%", escape_like(&text));
    let a = p.push(text, Type::TEXT);
    let b = p.push(pattern, Type::TEXT);
    format!("({col} = {a} OR {col} LIKE {b} ESCAPE '\\')")
}

/// The filter as SQL conditions on the JSONB column `col`, each prefixed by ` AND `.
fn filter_conditions(conditions: &[Condition], col: &str, p: &mut Params) -> String {
    let mut sql = String::new();
    for c in conditions {
        let clause = match c {
            Condition::Eq(k, v) => {
                let (k, v) = (
                    p.push(k.clone(), Type::TEXT),
                    p.push(v.clone(), Type::JSONB),
                );
                format!("{col} -> {k} = {v}")
            }
            Condition::Ne(k, v) => {
                let (k, v) = (
                    p.push(k.clone(), Type::TEXT),
                    p.push(v.clone(), Type::JSONB),
                );
                format!("{col} -> {k} IS DISTINCT FROM {v}")
            }
            Condition::Contains(k, v) => {
                let (k, v) = (
                    p.push(k.clone(), Type::TEXT),
                    p.push(v.clone(), Type::JSONB),
                );
                format!("{col} -> {k} @> {v}")
            }
            Condition::CmpNumber(k, op, n) => {
                let (k, n) = (p.push(k.clone(), Type::TEXT), p.push(*n, Type::FLOAT8));
                format!(
                    "(CASE WHEN jsonb_typeof({col} -> {k}) = 'number' \
                     THEN ({col} -> {k})::float8 {} {n} ELSE false END)",
                    op.sql()
                )
            }
            Condition::CmpString(k, op, s) => {
                let (k, s) = (p.push(k.clone(), Type::TEXT), p.push(s.clone(), Type::TEXT));
                format!(
                    "(CASE WHEN jsonb_typeof({col} -> {k}) = 'string' \
                     THEN ({col} ->> {k}) COLLATE \"C\" {} {s} ELSE false END)",
                    op.sql()
                )
            }
        };
        sql.push_str(" AND ");
        sql.push_str(&clause);
    }
    sql
}

/// `s` (a `store` row) has not expired at `now`.
fn live(now: &str) -> String {
    format!("(s.expires_at IS NULL OR s.expires_at > {now})")
}

/// The order of results: score (scored first), newest first, then namespace label by label
/// and key, byte-wise.
const ORDER: &str = "ORDER BY score DESC NULLS LAST, s.updated_at DESC, \
     string_to_array(s.prefix, '.') COLLATE \"C\", s.key COLLATE \"C\"";

/// The columns [`ItemRow::from_pg`] reads, for `store s` and a `score` expression.
fn item_columns(score: &str) -> String {
    format!(
        "s.prefix, s.key, s.value, s.created_at, s.updated_at, {score} AS score, \
         s.ttl_minutes IS NOT NULL AS has_ttl"
    )
}

/// An item read back, with its score and whether it has a TTL.
struct ItemRow {
    item: Item,
    score: Option<f64>,
    has_ttl: bool,
}

impl ItemRow {
    fn from_pg(r: &tokio_postgres::Row) -> Result<Self, StoreError> {
        let prefix: String = r.get(0);
        let key: String = r.get(1);
        let value: Json = r.get(2);
        let namespace = namespace_of(&prefix);
        let time = |i: usize| -> Result<Timestamp, StoreError> {
            let t: Option<SystemTime> = r.get(i);
            t.map(Timestamp::from_system_time)
                .ok_or_else(|| StoreError::Corrupt {
                    namespace: namespace.clone(),
                    key: key.clone(),
                    reason: format!("{} is NULL", r.columns()[i].name()),
                })
        };
        let (created_at, updated_at) = (time(3)?, time(4)?);
        if !value.is_object() {
            return Err(StoreError::Corrupt {
                namespace,
                key,
                reason: "the value is not a JSON object".into(),
            });
        }
        Ok(Self {
            item: Item {
                value,
                key,
                namespace,
                created_at,
                updated_at,
            },
            score: r.get(5),
            has_ttl: r.get(6),
        })
    }
}

fn time_param(t: Timestamp) -> SystemTime {
    t.min(MAX_EXPIRY).to_system_time()
}

/// The stored state of an address, for planning vectors.
struct OldRow {
    value: Json,
    live: bool,
    fields: BTreeSet<String>,
}

impl PostgresStore {
    async fn get<C: GenericClient>(
        &self,
        client: &C,
        op: &GetOp,
        now: Timestamp,
    ) -> Result<Option<Item>, StoreError> {
        let now_p = time_param(now);
        let rows = client
            .query_typed(
                &format!(
                    "SELECT {} FROM store s WHERE s.prefix = $1 AND s.key = $2 AND {}",
                    item_columns("NULL::float8"),
                    live("$3")
                ),
                &[
                    (&prefix_of(&op.namespace), Type::TEXT),
                    (&op.key, Type::TEXT),
                    (&now_p, Type::TIMESTAMPTZ),
                ],
            )
            .await
            .map_err(db("reading an item"))?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let row = ItemRow::from_pg(row)?;
        if op.refresh_ttl && row.has_ttl {
            refresh(client, &[(prefix_of(&op.namespace), op.key.clone())], now).await?;
        }
        Ok(Some(row.item))
    }

    async fn search(
        &self,
        client: &mut deadpool_postgres::Object,
        op: &SearchOp,
        query: Option<&Vec<f32>>,
        now: Timestamp,
    ) -> Result<Vec<SearchItem>, StoreError> {
        let conditions = match &op.filter {
            Some(f) => parse_filter(f)?,
            None => Vec::new(),
        };
        let limit = i64::try_from(op.limit).unwrap_or(i64::MAX);
        let offset = i64::try_from(op.offset).unwrap_or(i64::MAX);
        let rows = match (query, &self.index) {
            (Some(q), Some(index)) => {
                let mut found = None;
                if self.use_ann(client_of(client)).await? {
                    found = self
                        .search_ann(client, op, &conditions, q, index, now)
                        .await?;
                }
                match found {
                    Some(rows) => rows,
                    None => {
                        let mut p = Params::default();
                        let now_p = p.push(time_param(now), Type::TIMESTAMPTZ);
                        let q = p.push(q.clone(), Type::FLOAT4_ARRAY);
                        let ns = namespace_condition(&op.namespace_prefix, "s.prefix", &mut p);
                        let filters = filter_conditions(&conditions, "s.value", &mut p);
                        let (l, o) = (p.push(limit, Type::INT8), p.push(offset, Type::INT8));
                        let sql = format!(
                            "WITH q AS (SELECT {q}::real[]::vector AS v) \
                             SELECT {} FROM store s \
                             LEFT JOIN LATERAL (SELECT max(COALESCE(1 - NULLIF(sv.embedding <=> \
                             (SELECT v FROM q), 'NaN'::float8), 0)) AS score FROM store_vectors sv \
                             WHERE sv.prefix = s.prefix AND sv.key = s.key) sc ON TRUE \
                             WHERE {} AND {ns}{filters} {ORDER} LIMIT {l} OFFSET {o}",
                            item_columns("sc.score"),
                            live(&now_p),
                        );
                        client
                            .query_typed(&sql, &p.refs())
                            .await
                            .map_err(db("searching by meaning"))?
                    }
                }
            }
            _ => {
                let mut p = Params::default();
                let now_p = p.push(time_param(now), Type::TIMESTAMPTZ);
                let ns = namespace_condition(&op.namespace_prefix, "s.prefix", &mut p);
                let filters = filter_conditions(&conditions, "s.value", &mut p);
                let (l, o) = (p.push(limit, Type::INT8), p.push(offset, Type::INT8));
                let sql = format!(
                    "SELECT {} FROM store s WHERE {} AND {ns}{filters} {ORDER} \
                     LIMIT {l} OFFSET {o}",
                    item_columns("NULL::float8"),
                    live(&now_p),
                );
                client
                    .query_typed(&sql, &p.refs())
                    .await
                    .map_err(db("searching"))?
            }
        };
        let rows = rows
            .iter()
            .map(ItemRow::from_pg)
            .collect::<Result<Vec<_>, _>>()?;
        if op.refresh_ttl {
            let stale: Vec<Address> = rows
                .iter()
                .filter(|r| r.has_ttl)
                .map(|r| (prefix_of(&r.item.namespace), r.item.key.clone()))
                .collect();
            if !stale.is_empty() {
                refresh(client_of(client), &stale, now).await?;
            }
        }
        Ok(rows
            .into_iter()
            .map(|r| SearchItem {
                item: r.item,
                score: r.score,
            })
            .collect())
    }

    /// Whether `store_vectors` is large enough (planner's estimate) for index-backed search.
    async fn use_ann<C: GenericClient>(&self, client: &C) -> Result<bool, StoreError> {
        if self.exact_search_limit == 0 {
            return Ok(true);
        }
        if self.exact_search_limit == u64::MAX {
            return Ok(false);
        }
        let rows = client
            .query_typed(
                "SELECT reltuples::float8 FROM pg_class WHERE oid = to_regclass('store_vectors')",
                &[],
            )
            .await
            .map_err(db("estimating the vector count"))?;
        let estimate: f64 = rows.first().map_or(0.0, |r| r.get(0));
        Ok(estimate >= self.exact_search_limit as f64)
    }

    /// Index-backed search: HNSW candidates, then exact scores. `None` when the candidates
    /// cannot fill the page (the caller then searches exactly).
    async fn search_ann(
        &self,
        client: &mut deadpool_postgres::Object,
        op: &SearchOp,
        conditions: &[Condition],
        q: &[f32],
        index: &IndexConfig,
        now: Timestamp,
    ) -> Result<Option<Vec<tokio_postgres::Row>>, StoreError> {
        let wanted = op.offset.saturating_add(op.limit);
        if wanted == 0 {
            return Ok(Some(Vec::new()));
        }
        let per_item = index.fields.len().max(1);
        let candidates = wanted.saturating_mul(per_item).saturating_mul(2) + 1;
        let ef_search = candidates.clamp(40, 1000);
        let tx = client
            .transaction()
            .await
            .map_err(db("starting a search"))?;
        tx.batch_execute(&format!(
            "SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.ef_search = {ef_search}"
        ))
        .await
        .map_err(db("configuring the index scan"))?;
        let mut p = Params::default();
        let now_p = p.push(time_param(now), Type::TIMESTAMPTZ);
        let qv = p.push(q.to_vec(), Type::FLOAT4_ARRAY);
        let ns = namespace_condition(&op.namespace_prefix, "sv.prefix", &mut p);
        let filters = filter_conditions(conditions, "s.value", &mut p);
        let n = p.push(i64::try_from(candidates).unwrap_or(i64::MAX), Type::INT8);
        let sql = format!(
            "SELECT sv.prefix, sv.key FROM store_vectors sv \
             JOIN store s ON s.prefix = sv.prefix AND s.key = sv.key \
             WHERE {} AND {ns}{filters} \
             ORDER BY sv.embedding <=> {qv}::real[]::vector LIMIT {n}",
            live(&now_p)
        );
        let rows = tx
            .query_typed(&sql, &p.refs())
            .await
            .map_err(db("searching the vector index"))?;
        let mut seen = BTreeSet::new();
        let (mut prefixes, mut keys) = (Vec::new(), Vec::new());
        for r in &rows {
            let addr: Address = (r.get(0), r.get(1));
            if seen.insert(addr.clone()) {
                prefixes.push(addr.0);
                keys.push(addr.1);
            }
        }
        if prefixes.len() < wanted {
            return Ok(None);
        }
        let limit = i64::try_from(op.limit).unwrap_or(i64::MAX);
        let offset = i64::try_from(op.offset).unwrap_or(i64::MAX);
        let sql = format!(
            "WITH q AS (SELECT $1::real[]::vector AS v) \
             SELECT {} FROM store s \
             JOIN unnest($2::text[], $3::text[]) AS c(prefix, key) \
               ON s.prefix = c.prefix AND s.key = c.key \
             LEFT JOIN LATERAL (SELECT max(COALESCE(1 - NULLIF(sv.embedding <=> \
             (SELECT v FROM q), 'NaN'::float8), 0)) AS score FROM store_vectors sv \
             WHERE sv.prefix = s.prefix AND sv.key = s.key) sc ON TRUE \
             {ORDER} LIMIT $4 OFFSET $5",
            item_columns("sc.score")
        );
        let q = q.to_vec();
        let rows = tx
            .query_typed(
                &sql,
                &[
                    (&q, Type::FLOAT4_ARRAY),
                    (&prefixes, Type::TEXT_ARRAY),
                    (&keys, Type::TEXT_ARRAY),
                    (&limit, Type::INT8),
                    (&offset, Type::INT8),
                ],
            )
            .await
            .map_err(db("scoring search candidates"))?;
        tx.commit().await.map_err(db("finishing a search"))?;
        Ok(Some(rows))
    }

    /// Applies a run of consecutive puts: last one wins per address; vectors planned against
    /// what is stored, new texts embedded in one call, then rows and vectors written in one
    /// transaction.
    ///
    /// Embedding happens outside the write transaction: the run plans against a plain read and
    /// embeds, then locks the rows (`FOR UPDATE`) and plans again. If a concurrent writer
    /// changed a text meanwhile, the new texts are embedded (reusing every vector computed so
    /// far) and the run tries again; after a few tries it embeds while holding the locks, so
    /// it always goes through.
    async fn put_run(
        &self,
        client: &mut deadpool_postgres::Object,
        mut ops: Vec<PutOp>,
    ) -> Result<(), StoreError> {
        // One lock order for every writer (rows are written in this order), so concurrent runs
        // over the same items wait for each other instead of deadlocking.
        ops.sort_by(|a, b| (&a.namespace, &a.key).cmp(&(&b.namespace, &b.key)));
        let mut vectors: BTreeMap<String, Vec<f32>> = BTreeMap::new();
        if let Some(index) = &self.index {
            let plans =
                plan_vectors(client_of(client), index, &ops, Timestamp::now(), false).await?;
            let missing = missing_texts(&plans, &vectors);
            if !missing.is_empty() {
                vectors.extend(index.embed_texts(&missing).await?);
            }
        }
        const OPTIMISTIC_TRIES: usize = 3;
        let mut tries = 0;
        loop {
            tries += 1;
            let now = Timestamp::now();
            let tx = client.transaction().await.map_err(db("starting a put"))?;
            let plans = match &self.index {
                None => vec![VectorPlan::default(); ops.len()],
                Some(index) => {
                    let plans = plan_vectors(&*tx, index, &ops, now, true).await?;
                    let missing = missing_texts(&plans, &vectors);
                    if !missing.is_empty() {
                        if tries < OPTIMISTIC_TRIES {
                            tx.rollback().await.map_err(db("retrying a put"))?;
                            vectors.extend(index.embed_texts(&missing).await?);
                            continue;
                        }
                        vectors.extend(index.embed_texts(&missing).await?);
                    }
                    plans
                }
            };
            self.write_run(&tx, &ops, &plans, &vectors, now).await?;
            tx.commit().await.map_err(db("committing a put"))?;
            return Ok(());
        }
    }

    /// Writes a planned run in the transaction `tx`.
    async fn write_run(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        ops: &[PutOp],
        plans: &[VectorPlan],
        vectors: &BTreeMap<String, Vec<f32>>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let now_p = time_param(now);
        let (mut del_p, mut del_k) = (Vec::new(), Vec::new());
        let (mut up_p, mut up_k, mut up_v) = (Vec::new(), Vec::new(), Vec::new());
        let (mut up_exp, mut up_ttl) = (Vec::new(), Vec::new());
        let (mut exact_p, mut exact_k, mut exact_ttl) = (Vec::new(), Vec::new(), Vec::new());
        let (mut want_p, mut want_k, mut want_f) = (Vec::new(), Vec::new(), Vec::new());
        let (mut vec_p, mut vec_k, mut vec_f, mut vec_v) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (op, plan) in ops.iter().zip(plans) {
            let prefix = prefix_of(&op.namespace);
            let Some(value) = &op.value else {
                del_p.push(prefix);
                del_k.push(op.key.clone());
                continue;
            };
            up_p.push(prefix.clone());
            up_k.push(op.key.clone());
            up_v.push(value.clone());
            up_exp.push(op.ttl.map(|t| time_param(now.plus_minutes(t))));
            up_ttl.push(op.ttl.map(|t| t.ceil().min(f64::from(i32::MAX)) as i32));
            if let Some(t) = op.ttl
                && t.fract() != 0.0
            {
                exact_p.push(prefix.clone());
                exact_k.push(op.key.clone());
                exact_ttl.push(t);
            }
            for field in plan.keep.iter().chain(plan.embed.iter().map(|(f, _)| f)) {
                want_p.push(prefix.clone());
                want_k.push(op.key.clone());
                want_f.push(field.clone());
            }
            for (field, text) in &plan.embed {
                if let Some(v) = vectors.get(text) {
                    vec_p.push(prefix.clone());
                    vec_k.push(op.key.clone());
                    vec_f.push(field.clone());
                    vec_v.push(vector_literal(v));
                }
            }
        }
        if !del_p.is_empty() {
            tx.query_typed(
                "DELETE FROM store s USING unnest($1::text[], $2::text[]) AS a(prefix, key) \
                 WHERE s.prefix = a.prefix AND s.key = a.key",
                &[(&del_p, Type::TEXT_ARRAY), (&del_k, Type::TEXT_ARRAY)],
            )
            .await
            .map_err(db("deleting items"))?;
        }
        if !up_p.is_empty() {
            tx.query_typed(
                "INSERT INTO store AS s \
                   (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes) \
                 SELECT a.prefix, a.key, a.value, $1, $1, a.expires_at, a.ttl \
                 FROM unnest($2::text[], $3::text[], $4::jsonb[], $5::timestamptz[], $6::int4[]) \
                   AS a(prefix, key, value, expires_at, ttl) \
                 ON CONFLICT (prefix, key) DO UPDATE SET \
                   value = EXCLUDED.value, \
                   created_at = CASE WHEN s.expires_at IS NOT NULL AND s.expires_at <= $1 \
                     THEN EXCLUDED.created_at ELSE s.created_at END, \
                   updated_at = EXCLUDED.updated_at, \
                   expires_at = EXCLUDED.expires_at, \
                   ttl_minutes = EXCLUDED.ttl_minutes",
                &[
                    (&now_p, Type::TIMESTAMPTZ),
                    (&up_p, Type::TEXT_ARRAY),
                    (&up_k, Type::TEXT_ARRAY),
                    (&up_v, Type::JSONB_ARRAY),
                    (&up_exp, Type::TIMESTAMPTZ_ARRAY),
                    (&up_ttl, Type::INT4_ARRAY),
                ],
            )
            .await
            .map_err(db("storing items"))?;
        }
        if !exact_p.is_empty() {
            // Rows of other puts are tied to older `updated_at`s and so ignored; no need to
            // delete them here.
            tx.query_typed(
                "INSERT INTO stategraph_store_ttl (prefix, key, ttl_minutes, updated_at) \
                 SELECT a.prefix, a.key, a.ttl, $1 \
                 FROM unnest($2::text[], $3::text[], $4::float8[]) AS a(prefix, key, ttl) \
                 ON CONFLICT (prefix, key) DO UPDATE SET \
                   ttl_minutes = EXCLUDED.ttl_minutes, updated_at = EXCLUDED.updated_at",
                &[
                    (&now_p, Type::TIMESTAMPTZ),
                    (&exact_p, Type::TEXT_ARRAY),
                    (&exact_k, Type::TEXT_ARRAY),
                    (&exact_ttl, Type::FLOAT8_ARRAY),
                ],
            )
            .await
            .map_err(db("storing exact TTLs"))?;
        }
        if self.index.is_some() && !up_p.is_empty() {
            tx.query_typed(
                "DELETE FROM store_vectors sv \
                 USING unnest($1::text[], $2::text[]) AS a(prefix, key) \
                 WHERE sv.prefix = a.prefix AND sv.key = a.key \
                 AND NOT EXISTS (SELECT 1 FROM unnest($3::text[], $4::text[], $5::text[]) \
                   AS w(prefix, key, field) \
                   WHERE w.prefix = sv.prefix AND w.key = sv.key AND w.field = sv.field_name)",
                &[
                    (&up_p, Type::TEXT_ARRAY),
                    (&up_k, Type::TEXT_ARRAY),
                    (&want_p, Type::TEXT_ARRAY),
                    (&want_k, Type::TEXT_ARRAY),
                    (&want_f, Type::TEXT_ARRAY),
                ],
            )
            .await
            .map_err(db("deleting stale vectors"))?;
            if !vec_p.is_empty() {
                tx.query_typed(
                    "INSERT INTO store_vectors \
                       (prefix, key, field_name, embedding, created_at, updated_at) \
                     SELECT a.prefix, a.key, a.field, a.embedding::vector, $1, $1 \
                     FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) \
                       AS a(prefix, key, field, embedding) \
                     ON CONFLICT (prefix, key, field_name) DO UPDATE SET \
                       embedding = EXCLUDED.embedding, updated_at = EXCLUDED.updated_at",
                    &[
                        (&now_p, Type::TIMESTAMPTZ),
                        (&vec_p, Type::TEXT_ARRAY),
                        (&vec_k, Type::TEXT_ARRAY),
                        (&vec_f, Type::TEXT_ARRAY),
                        (&vec_v, Type::TEXT_ARRAY),
                    ],
                )
                .await
                .map_err(db("storing vectors"))?;
            }
        }
        Ok(())
    }

    async fn list_namespaces<C: GenericClient>(
        &self,
        client: &C,
        op: &ListNamespacesOp,
        now: Timestamp,
    ) -> Result<Vec<Namespace>, StoreError> {
        let mut p = Params::default();
        let now_p = p.push(time_param(now), Type::TIMESTAMPTZ);
        let mut sql = format!(
            "SELECT DISTINCT s.prefix FROM store s WHERE {}",
            live(&now_p)
        );
        for c in &op.match_conditions {
            if c.path.is_empty() {
                continue;
            }
            let re = p.push(match_regex(&c.path, c.match_type), Type::TEXT);
            sql.push_str(&format!(" AND s.prefix ~ {re}"));
        }
        let rows = client
            .query_typed(&sql, &p.refs())
            .await
            .map_err(db("listing namespaces"))?;
        let namespaces = rows.iter().map(|r| namespace_of(r.get(0)));
        Ok(finish_list_namespaces(namespaces, op))
    }
}

/// pgvector's text form of a vector (`[0.1,-2,…]`; Rust's shortest round-trip floats).
fn vector_literal(v: &[f32]) -> String {
    let mut s = String::with_capacity(v.len() * 12 + 2);
    s.push('[');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&x.to_string());
    }
    s.push(']');
    s
}

/// The texts of `plans` that have no vector in `vectors` yet.
fn missing_texts(plans: &[VectorPlan], vectors: &BTreeMap<String, Vec<f32>>) -> Vec<String> {
    plans
        .iter()
        .flat_map(|p| p.embed.iter().map(|(_, t)| t))
        .filter(|t| !vectors.contains_key(*t))
        .cloned()
        .collect()
}

/// Plans the vectors of a run's puts against the stored rows, read now (with `lock`, locked
/// `FOR UPDATE` in the run's order).
async fn plan_vectors<C: GenericClient>(
    client: &C,
    index: &IndexConfig,
    ops: &[PutOp],
    now: Timestamp,
    lock: bool,
) -> Result<Vec<VectorPlan>, StoreError> {
    let (mut prefixes, mut keys) = (Vec::new(), Vec::new());
    for op in ops.iter().filter(|o| o.value.is_some()) {
        prefixes.push(prefix_of(&op.namespace));
        keys.push(op.key.clone());
    }
    let mut old: HashMap<Address, OldRow> = HashMap::new();
    if !prefixes.is_empty() {
        let now_p = time_param(now);
        let sql = format!(
            "SELECT s.prefix, s.key, s.value, (s.expires_at IS NULL OR s.expires_at > $1), \
               ARRAY(SELECT v.field_name FROM store_vectors v \
                 WHERE v.prefix = s.prefix AND v.key = s.key) \
             FROM store s \
             JOIN unnest($2::text[], $3::text[]) WITH ORDINALITY AS a(prefix, key, ord) \
               ON s.prefix = a.prefix AND s.key = a.key{}",
            if lock {
                " ORDER BY a.ord FOR UPDATE OF s"
            } else {
                ""
            }
        );
        let rows = client
            .query_typed(
                &sql,
                &[
                    (&now_p, Type::TIMESTAMPTZ),
                    (&prefixes, Type::TEXT_ARRAY),
                    (&keys, Type::TEXT_ARRAY),
                ],
            )
            .await
            .map_err(db("reading items to update"))?;
        for r in &rows {
            let fields: Vec<String> = r.get(4);
            old.insert(
                (r.get(0), r.get(1)),
                OldRow {
                    value: r.get(2),
                    live: r.get(3),
                    fields: fields.into_iter().collect(),
                },
            );
        }
    }
    let mut plans = Vec::with_capacity(ops.len());
    for op in ops {
        let Some(value) = &op.value else {
            plans.push(VectorPlan::default());
            continue;
        };
        let paths = index.paths_for(&op.index)?;
        let addr = (prefix_of(&op.namespace), op.key.clone());
        let before = old
            .get(&addr)
            .filter(|o| o.live)
            .map(|o| (&o.value, &o.fields));
        plans.push(VectorPlan::new(value, &paths, before));
    }
    Ok(plans)
}

/// Pushes the expiry of live rows with a TTL back by their TTL: the exact one a put by this
/// store recorded in `stategraph_store_ttl`, else `ttl_minutes`.
async fn refresh<C: GenericClient>(
    client: &C,
    rows: &[Address],
    now: Timestamp,
) -> Result<(), StoreError> {
    let prefixes: Vec<&str> = rows.iter().map(|(p, _)| p.as_str()).collect();
    let keys: Vec<&str> = rows.iter().map(|(_, k)| k.as_str()).collect();
    let now_p = time_param(now);
    client
        .query_typed(
            "UPDATE store s SET expires_at = $1 + make_interval(secs => LEAST(COALESCE( \
               (SELECT t.ttl_minutes FROM stategraph_store_ttl t \
                WHERE t.prefix = s.prefix AND t.key = s.key AND t.updated_at = s.updated_at), \
               s.ttl_minutes::float8), $4) * 60) \
             FROM unnest($2::text[], $3::text[]) AS a(prefix, key) \
             WHERE s.prefix = a.prefix AND s.key = a.key AND s.ttl_minutes IS NOT NULL \
               AND (s.expires_at IS NULL OR s.expires_at > $1)",
            &[
                (&now_p, Type::TIMESTAMPTZ),
                (&prefixes, Type::TEXT_ARRAY),
                (&keys, Type::TEXT_ARRAY),
                (&MAX_REFRESH_MINUTES, Type::FLOAT8),
            ],
        )
        .await
        .map_err(db("refreshing TTLs"))?;
    Ok(())
}

#[async_trait]
impl Store for PostgresStore {
    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, StoreError> {
        let steps = plan_batch(ops, self.index.as_ref()).await?;
        if steps.is_empty() {
            return Ok(Vec::new());
        }
        let mut client = self.client().await?;
        let mut results = Vec::new();
        for step in steps {
            match step {
                BatchStep::Puts { ops, given } => {
                    self.put_run(&mut client, ops).await?;
                    results.extend((0..given).map(|_| OpResult::Put));
                }
                BatchStep::Reads(reads) => {
                    for read in reads {
                        let now = Timestamp::now();
                        results.push(match &read {
                            ReadOp::Get(g) => {
                                OpResult::Get(self.get(client_of(&client), g, now).await?)
                            }
                            ReadOp::Search(s, query) => OpResult::Search(
                                self.search(&mut client, s, query.as_ref(), now).await?,
                            ),
                            ReadOp::ListNamespaces(l) => OpResult::ListNamespaces(
                                self.list_namespaces(client_of(&client), l, now).await?,
                            ),
                        });
                    }
                }
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
        let client = self.client().await?;
        let now = time_param(Timestamp::now());
        let rows = client
            .query_typed(
                "WITH d AS (DELETE FROM store WHERE expires_at IS NOT NULL AND expires_at <= $1 \
                 RETURNING 1) SELECT count(*) FROM d",
                &[(&now, Type::TIMESTAMPTZ)],
            )
            .await
            .map_err(db("sweeping expired items"))?;
        let n: i64 = rows.first().map_or(0, |r| r.get(0));
        Ok(usize::try_from(n).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert_eq!(escape_like(r"a_b%c\d"), r"a\_b\%c\\d");
        let path = vec!["users".to_owned(), "*".to_owned(), "a-b".to_owned()];
        assert_eq!(
            match_regex(&path, MatchType::Prefix),
            r"^users\.[^.]+\.a\-b(\.|$)"
        );
        assert_eq!(match_regex(&path[2..], MatchType::Suffix), r"(^|\.)a\-b$");
        assert_eq!(escape_regex("ü(x)"), r"ü\(x\)");
        assert_eq!(vector_literal(&[0.5, -1.0, 1e-7]), "[0.5,-1,0.0000001]");
        assert_eq!(namespace_of("a.b"), vec!["a".to_owned(), "b".to_owned()]);
    }
}
