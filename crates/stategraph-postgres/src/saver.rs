//! `PostgresSaver`: LangGraph's Postgres checkpointer, in Rust.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use serde_json::Value as Json;
use stategraph_checkpoint::prune::{PruneRow, plan};
use stategraph_checkpoint::{
    Capabilities, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointTuple, DeltaChannelHistory, DeltaWalk, Error, ListOptions, Location,
    PendingWrite, PruneStrategy, Result, SaveOp, Serializer, StoredWrite, Value, sort_writes,
};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{GenericClient, NoTls};

use crate::config::PostgresConfig;
use crate::error::{db, pool};
use crate::read;
use crate::schema;
use crate::write::{self, Failure};
use stategraph_checkpoint::blob_layout::{EncodedSave as Encoded, restore_blob};

/// Stores checkpoints in PostgreSQL with LangGraph's own tables (`checkpoints`,
/// `checkpoint_blobs`, `checkpoint_writes`, `checkpoint_migrations` v0–v9) and row formats, so
/// Python's `PostgresSaver` and this one share a database.
///
/// - Primitive channel values (None, str, int, float, bool) stay inline in the checkpoint's
///   JSONB; every other value is a `checkpoint_blobs` row keyed by (channel, version), written
///   only when that channel's version changed — an unchanged value is never stored twice.
/// - A save is one transaction sent in one round trip (the conflict check, blobs, checkpoint
///   rows and writes of a whole batch of saves in one statement, pipelined with `BEGIN` and
///   `COMMIT`); the write statements are prepared once per pooled connection (turn that off
///   with [`PostgresConfig::prepared_statements`] behind a pooler that cannot carry them).
/// - A pool of connections (deadpool).
#[derive(Clone)]
pub struct PostgresSaver {
    pool: Pool,
    /// Whether statements are prepared once per connection (see
    /// [`PostgresConfig::prepared_statements`]).
    cache_statements: bool,
    serializer: Arc<dyn Serializer>,
    schema: Option<String>,
    /// Where it connects, password removed, for error messages.
    target: String,
}

impl fmt::Debug for PostgresSaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresSaver")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// A query parameter and its type (statements are sent unnamed, so types are explicit).
type Param<'a> = (&'a (dyn ToSql + Sync), Type);

/// A typed parameter.
fn p<T: ToSql + Sync>(value: &T, ty: Type) -> Param<'_> {
    (value, ty)
}

impl PostgresSaver {
    /// Connects to the database a `postgres://` URL names and creates or upgrades LangGraph's
    /// tables.
    pub async fn connect(url: &str) -> Result<Self> {
        PostgresConfig::from_url(url)?.connect().await
    }

    pub(crate) async fn connect_with(config: PostgresConfig) -> Result<Self> {
        let manager = Manager::from_config(
            config.pg.clone(),
            NoTls,
            ManagerConfig {
                // A pooled connection is handed out without a health query (that would cost a
                // round trip per operation): one the server dropped (restart, failover,
                // pg_terminate_backend) is seen as closed by the driver and replaced, and a
                // write that finds its connection closed before anything was sent is sent
                // again on a fresh one.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(config.pool_size)
            .build()
            .map_err(|e| Error::backend("postgres", "building the connection pool", e))?;
        let hosts = config.pg.get_hosts();
        let target = format!(
            "{hosts:?}:{:?}/{}",
            config.pg.get_ports(),
            config.pg.get_dbname().unwrap_or_default()
        );
        let saver = Self {
            pool,
            cache_statements: config.prepared_statements,
            serializer: config.serializer,
            schema: config.schema,
            target,
        };
        if config.run_setup {
            saver.setup().await?;
        } else {
            // Fail now, not at the first query, if the database cannot be reached.
            drop(saver.client().await?);
        }
        Ok(saver)
    }

    /// Creates or upgrades LangGraph's tables (idempotent; concurrent calls take turns).
    pub async fn setup(&self) -> Result<()> {
        let client = self.client().await?;
        schema::setup(&client, self.schema.as_deref()).await
    }

    /// A pooled connection; one the driver already knows to be closed is dropped and
    /// replaced.
    async fn client(&self) -> Result<deadpool_postgres::Object> {
        loop {
            let client = self.pool.get().await.map_err(|e| match e {
                deadpool_postgres::PoolError::Backend(inner) => Error::backend(
                    "postgres",
                    format!("cannot connect to PostgreSQL at {}", self.target),
                    inner,
                ),
                other => pool(other),
            })?;
            if !client.is_closed() {
                return Ok(client);
            }
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

/// The driver client behind a pooled connection.
fn client_of(c: &deadpool_postgres::Object) -> &tokio_postgres::Client {
    c
}

/// One `checkpoints` row.
struct Row {
    thread_id: String,
    checkpoint_ns: String,
    checkpoint_id: String,
    parent: Option<String>,
    checkpoint: Json,
    metadata: Json,
}

impl Row {
    fn from_pg(r: &tokio_postgres::Row) -> Self {
        Self {
            thread_id: r.get(0),
            checkpoint_ns: r.get(1),
            checkpoint_id: r.get(2),
            parent: r.get(3),
            checkpoint: r.get(4),
            metadata: r.get(5),
        }
    }
}

/// (thread, namespace, channel, version) of a blob row.
type BlobKey = (String, String, String, String);

const SELECT_ROWS: &str = "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, \
     checkpoint, metadata FROM checkpoints";

/// Reassembles rows into tuples: inline values, blobs by (channel, version), pending writes.
/// Two queries per (thread, namespace) for any number of checkpoints — no N+1.
async fn assemble<C: GenericClient>(
    client: &C,
    serde: &dyn Serializer,
    rows: Vec<Row>,
) -> Result<Vec<CheckpointTuple>> {
    let mut parsed = Vec::with_capacity(rows.len());
    for row in rows {
        let loc = Location::checkpoint(&row.thread_id, &row.checkpoint_ns, &row.checkpoint_id);
        let checkpoint = Checkpoint::from_value(Value::from(row.checkpoint.clone()))
            .map_err(|e| Error::serialization(loc.clone(), e))?;
        let metadata = read::metadata(row.metadata.clone(), &loc)?;
        parsed.push((row, checkpoint, metadata));
    }
    let mut groups: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (i, (row, _, _)) in parsed.iter().enumerate() {
        groups
            .entry((row.thread_id.clone(), row.checkpoint_ns.clone()))
            .or_default()
            .push(i);
    }
    let mut blobs: HashMap<BlobKey, (String, Option<Vec<u8>>)> = HashMap::new();
    let mut writes: HashMap<(String, String, String), Vec<PendingWrite>> = HashMap::new();
    for ((thread, ns), members) in &groups {
        let mut pairs: BTreeSet<(String, String)> = BTreeSet::new();
        for &i in members {
            for (ch, v) in &parsed[i].1.channel_versions {
                pairs.insert((ch.to_owned(), v.to_string()));
            }
        }
        let channels: Vec<&str> = pairs.iter().map(|(c, _)| c.as_str()).collect();
        let versions: Vec<&str> = pairs.iter().map(|(_, v)| v.as_str()).collect();
        let ids: Vec<&str> = members
            .iter()
            .map(|&i| parsed[i].0.checkpoint_id.as_str())
            .collect();
        // Both queries go out at once: the driver pipelines them on the one connection, so
        // reading a checkpoint costs one round trip for its row and one for blobs + writes.
        let blob_query = async {
            if pairs.is_empty() {
                return Ok(Vec::new());
            }
            client
                .query_typed(
                    "SELECT b.channel, b.version, b.type, b.blob \
                     FROM unnest($3::text[], $4::text[]) AS x(channel, version) \
                     JOIN checkpoint_blobs b ON b.thread_id = $1 AND b.checkpoint_ns = $2 \
                     AND b.channel = x.channel AND b.version = x.version",
                    &[
                        p(thread, Type::TEXT),
                        p(ns, Type::TEXT),
                        p(&channels, Type::TEXT_ARRAY),
                        p(&versions, Type::TEXT_ARRAY),
                    ],
                )
                .await
                .map_err(db("reading blobs"))
        };
        let write_query = async {
            client
                .query_typed(
                    "SELECT checkpoint_id, task_id, channel, type, blob, task_path, idx \
                     FROM checkpoint_writes \
                     WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = ANY($3)",
                    &[
                        p(thread, Type::TEXT),
                        p(ns, Type::TEXT),
                        p(&ids, Type::TEXT_ARRAY),
                    ],
                )
                .await
                .map_err(db("reading writes"))
        };
        let (blob_rows, rows) = tokio::try_join!(blob_query, write_query)?;
        for r in blob_rows {
            let key = (thread.clone(), ns.clone(), r.get(0), r.get(1));
            blobs.insert(key, (r.get(2), r.get(3)));
        }
        for r in rows {
            let checkpoint_id: String = r.get(0);
            let idx: i32 = r.get(6);
            let write = StoredWrite {
                task_id: r.get(1),
                channel: r.get(2),
                type_tag: r.get(3),
                value: r.get(4),
                task_path: r.get(5),
                idx: i64::from(idx),
            }
            .decode(serde, &Location::checkpoint(thread, ns, &checkpoint_id))?;
            writes
                .entry((thread.clone(), ns.clone(), checkpoint_id))
                .or_default()
                .push(write);
        }
    }
    let mut out = Vec::with_capacity(parsed.len());
    for (row, mut checkpoint, metadata) in parsed {
        for (ch, version) in &checkpoint.channel_versions.clone() {
            let key = (
                row.thread_id.clone(),
                row.checkpoint_ns.clone(),
                ch.to_owned(),
                version.to_string(),
            );
            if let Some((tag, blob)) = blobs.get(&key) {
                let loc =
                    Location::checkpoint(&row.thread_id, &row.checkpoint_ns, &row.checkpoint_id);
                restore_blob(
                    serde,
                    &loc,
                    &mut checkpoint,
                    ch.to_owned(),
                    tag,
                    blob.as_deref(),
                )?;
            }
        }
        let mut pending = writes
            .remove(&(
                row.thread_id.clone(),
                row.checkpoint_ns.clone(),
                row.checkpoint_id.clone(),
            ))
            .unwrap_or_default();
        sort_writes(&mut pending);
        let config = CheckpointConfig::new(row.thread_id.clone())
            .with_ns(row.checkpoint_ns.clone())
            .with_checkpoint_id(row.checkpoint_id.clone());
        let parent_config = row.parent.filter(|p| !p.is_empty()).map(|p| {
            CheckpointConfig::new(row.thread_id.clone())
                .with_ns(row.checkpoint_ns.clone())
                .with_checkpoint_id(p)
        });
        out.push(CheckpointTuple {
            config,
            checkpoint,
            metadata,
            parent_config,
            pending_writes: pending,
        });
    }
    Ok(out)
}

/// The walk of `get_delta_channel_history` in one statement: the target (`$3`, or the latest of
/// the namespace), then its ancestors nearest first by `parent_checkpoint_id`, each carrying the
/// requested channels (`$4`) still without a stored value; the walk stops after the checkpoint
/// where none is left. A channel is stored at a checkpoint when its JSON has the key (an inline
/// value, or the `true` marker of a snapshot) or a non-empty blob exists for its version. The
/// depth is capped at a million steps (far beyond LangGraph's 5,000-superstep bound between
/// snapshots), so a parent loop made by re-putting an id cannot run forever; the walk in Rust
/// stops at the first repeated id anyway.
/// Each step looks its parent up by primary key (`LATERAL`, so a planner without statistics
/// cannot turn it into a scan of the thread).
const DELTA_WALK: &str = "WITH RECURSIVE walk(thread_id, checkpoint_ns, checkpoint_id, \
    parent_checkpoint_id, checkpoint, metadata, remaining, depth, cap) AS ( \
      SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, \
        c.checkpoint, c.metadata, $4::text[], 0, 1000000 \
      FROM checkpoints c WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 \
        AND c.checkpoint_id = COALESCE($3, (SELECT max(m.checkpoint_id) FROM checkpoints m \
          WHERE m.thread_id = $1 AND m.checkpoint_ns = $2)) \
      UNION ALL \
      SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, \
        c.checkpoint, c.metadata, \
        ARRAY(SELECT ch FROM unnest(w.remaining) AS ch WHERE NOT ( \
          (c.checkpoint -> 'channel_values') ? ch OR EXISTS (SELECT 1 FROM checkpoint_blobs b \
            WHERE b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = ch \
              AND b.version = c.checkpoint -> 'channel_versions' ->> ch AND b.type <> 'empty'))), \
        w.depth + 1, w.cap \
      FROM walk w CROSS JOIN LATERAL (SELECT * FROM checkpoints p WHERE p.thread_id = $1 \
        AND p.checkpoint_ns = $2 AND p.checkpoint_id = w.parent_checkpoint_id LIMIT 1) c \
      WHERE cardinality(w.remaining) > 0 AND w.depth < w.cap) \
    SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata \
    FROM walk WHERE depth > 0 ORDER BY depth";

/// Deletes blobs of `thread` that no remaining checkpoint references.
const COLLECT_BLOBS: &str = "DELETE FROM checkpoint_blobs b WHERE b.thread_id = $1 AND NOT EXISTS (
    SELECT 1 FROM checkpoints c, jsonb_each_text(c.checkpoint -> 'channel_versions') v
    WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns
      AND v.key = b.channel AND v.value = b.version)";

async fn delete_thread_in<C: GenericClient>(client: &C, thread_id: &str) -> Result<()> {
    for table in ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] {
        client
            .query_typed(
                &format!("DELETE FROM {table} WHERE thread_id = $1"),
                &[p(&thread_id, Type::TEXT)],
            )
            .await
            .map_err(db("deleting a thread"))?;
    }
    Ok(())
}

async fn prune_by_plan<C: GenericClient>(
    client: &C,
    thread_id: &str,
    strategy: PruneStrategy,
) -> Result<()> {
    let rows = client
        .query_typed(
            "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata \
             FROM checkpoints WHERE thread_id = $1",
            &[p(&thread_id, Type::TEXT)],
        )
        .await
        .map_err(db("reading checkpoints to prune"))?;
    let mut prune_rows = Vec::new();
    let mut parents = Vec::new();
    for r in &rows {
        let ns: String = r.get(0);
        let id: String = r.get(1);
        let parent: Option<String> = r.get(2);
        let meta: Json = r.get(3);
        let metadata = CheckpointMetadata::from_json(meta).unwrap_or_default();
        parents.push((ns.clone(), id.clone(), parent.clone()));
        prune_rows.push(PruneRow {
            checkpoint_ns: ns,
            checkpoint_id: id,
            metadata,
            parent,
        });
    }
    let plan = plan(thread_id, strategy, &prune_rows)?;
    for (ns, id) in &plan.delete {
        for table in ["checkpoint_writes", "checkpoints"] {
            client
                .query_typed(
                    &format!(
                        "DELETE FROM {table} WHERE thread_id = $1 AND checkpoint_ns = $2 \
                         AND checkpoint_id = $3"
                    ),
                    &[
                        p(&thread_id, Type::TEXT),
                        p(ns, Type::TEXT),
                        p(id, Type::TEXT),
                    ],
                )
                .await
                .map_err(db("pruning"))?;
        }
    }
    for (ns, id, parent) in &parents {
        if plan.keep.contains(&(ns.clone(), id.clone()))
            && plan.parent_deleted(ns, parent.as_deref())
        {
            client
                .query_typed(
                    "UPDATE checkpoints SET parent_checkpoint_id = NULL \
                     WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3",
                    &[
                        p(&thread_id, Type::TEXT),
                        p(ns, Type::TEXT),
                        p(id, Type::TEXT),
                    ],
                )
                .await
                .map_err(db("unlinking pruned parents"))?;
        }
    }
    client
        .query_typed(COLLECT_BLOBS, &[p(&thread_id, Type::TEXT)])
        .await
        .map_err(db("deleting unreferenced blobs"))?;
    Ok(())
}

impl PostgresSaver {
    /// Stores a checkpoint and its changed blobs in one transaction, sent in one round trip;
    /// with `expected_latest`, only if the namespace's newest checkpoint is still that one
    /// (checked under a transaction-scoped advisory lock on the thread and namespace).
    async fn put_checked(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
        expected_latest: Option<Option<&str>>,
    ) -> Result<CheckpointConfig> {
        let op = Encoded::put(
            self.serializer.as_ref(),
            config,
            checkpoint,
            metadata,
            new_versions,
            expected_latest,
        )?;
        self.store_each(&[op]).await?;
        Ok(CheckpointConfig::new(config.thread_id.clone())
            .with_ns(config.checkpoint_ns.clone())
            .with_checkpoint_id(checkpoint.id.clone()))
    }

    /// Stores `ops` in one transaction (one round trip), on a pooled connection; a
    /// connection found closed before anything was sent is replaced (up to one try per
    /// pooled connection, plus a new one, as [`Self::retry_closed`]).
    async fn transact(&self, ops: &[Encoded]) -> std::result::Result<(), Failure> {
        let mut tries = self.pool.status().max_size + 1;
        loop {
            let client = self.client().await.map_err(Failure::NotSent)?;
            match write::commit(&client, self.cache_statements, ops).await {
                Err(Failure::NotSent(e)) => {
                    // Drop the dead connection instead of returning it to the pool.
                    drop(deadpool_postgres::Object::take(client));
                    tries -= 1;
                    if tries == 0 {
                        return Err(Failure::NotSent(e));
                    }
                }
                other => return other,
            }
        }
    }

    /// Stores `ops` one transaction each, in order, stopping at the first that fails (the
    /// ops before it stay stored): what applying them one by one means.
    async fn store_each(&self, ops: &[Encoded]) -> Result<()> {
        for op in ops {
            match self.transact(std::slice::from_ref(op)).await {
                Ok(()) => {}
                Err(Failure::RolledBack(e) | Failure::Unknown(e) | Failure::NotSent(e)) => {
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

impl PostgresSaver {
    /// Runs a read again on another connection while it finds its pooled connection closed
    /// (the server dropped it, and the driver saw that only when the read was about to be
    /// sent: nothing reached the server). Every pooled connection may have been dropped at
    /// once (a server restart), so up to one try per pooled connection, plus a new one.
    async fn retry_closed<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut tries = self.pool.status().max_size + 1;
        loop {
            match op().await {
                Err(e) if connection_closed(&e) && tries > 1 => tries -= 1,
                other => return other,
            }
        }
    }

    /// One round trip: the row, its blobs and its writes in one statement.
    async fn get_tuple_once(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        let client = self.client().await?;
        read::get_tuple(
            &client,
            self.cache_statements,
            self.serializer.as_ref(),
            config,
        )
        .await
    }

    /// Two round trips whatever the chain's length: the walk (one statement), then the
    /// walked checkpoints' blobs and writes (pipelined).
    async fn delta_history_once(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<BTreeMap<String, DeltaChannelHistory>> {
        if channels.is_empty() {
            return Ok(BTreeMap::new());
        }
        let client = self.client().await?;
        let rows = client
            .query_typed(
                DELTA_WALK,
                &[
                    p(&config.thread_id, Type::TEXT),
                    p(&config.checkpoint_ns, Type::TEXT),
                    p(&config.checkpoint_id, Type::TEXT),
                    p(&channels, Type::TEXT_ARRAY),
                ],
            )
            .await
            .map_err(db("walking checkpoint ancestors"))?;
        let rows = rows.iter().map(Row::from_pg).collect();
        let chain = assemble(client_of(&client), self.serializer.as_ref(), rows).await?;
        let mut walk = DeltaWalk::new(channels);
        for t in chain {
            let values = t.checkpoint.channel_values;
            if !walk.visit(&t.checkpoint.id, t.pending_writes, |ch| {
                values.get(ch).cloned()
            }) {
                break;
            }
        }
        Ok(walk.finish())
    }

    async fn list_once(&self, options: &ListOptions) -> Result<Vec<CheckpointTuple>> {
        let mut clauses: Vec<String> = Vec::new();
        let mut texts: Vec<String> = Vec::new();
        let mut kinds: Vec<&str> = Vec::new();
        for (column, value) in [
            ("thread_id = ", &options.thread_id),
            ("checkpoint_ns = ", &options.checkpoint_ns),
            ("checkpoint_id = ", &options.checkpoint_id),
            ("checkpoint_id < ", &options.before),
        ] {
            if let Some(v) = value {
                texts.push(v.clone());
                kinds.push(column);
            }
        }
        let filter = Json::Object(options.filter.clone());
        let limit = options.limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
        let mut params: Vec<Param<'_>> = Vec::new();
        for (i, column) in kinds.iter().enumerate() {
            params.push((&texts[i], Type::TEXT));
            clauses.push(format!("{column}${}", params.len()));
        }
        if !options.filter.is_empty() {
            params.push(p(&filter, Type::JSONB));
            clauses.push(format!("metadata @> ${}", params.len()));
        }
        let mut sql = SELECT_ROWS.to_owned();
        if !clauses.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&clauses.join(" AND "));
        }
        sql.push_str(" ORDER BY checkpoint_id DESC");
        if let Some(l) = &limit {
            params.push(p(l, Type::INT8));
            sql.push_str(&format!(" LIMIT ${}", params.len()));
        }
        let client = self.client().await?;
        let rows = client
            .query_typed(&sql, &params)
            .await
            .map_err(db("listing checkpoints"))?;
        let rows = rows.iter().map(Row::from_pg).collect();
        assemble(client_of(&client), self.serializer.as_ref(), rows).await
    }
}

/// Whether `e` says the connection was gone before the request was carried out: closed
/// before it was sent, or ended by the server instead of an answer (a `FATAL` error, such as
/// a terminated backend). A read that failed so had no effect and can be sent again.
fn connection_closed(e: &Error) -> bool {
    matches!(e, Error::Backend { source: Some(s), .. }
        if s.downcast_ref::<tokio_postgres::Error>().is_some_and(write::connection_lost))
}

#[async_trait]
impl CheckpointSaver for PostgresSaver {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    /// One round trip: the row, its blobs and its writes in one statement.
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        self.retry_closed(|| self.get_tuple_once(config)).await
    }

    /// Two round trips whatever the chain's length: the walk (one statement), then the
    /// walked checkpoints' blobs and writes (pipelined).
    async fn get_delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<BTreeMap<String, DeltaChannelHistory>> {
        self.retry_closed(|| self.delta_history_once(config, channels))
            .await
    }

    async fn list(&self, options: &ListOptions) -> Result<Vec<CheckpointTuple>> {
        self.retry_closed(|| self.list_once(options)).await
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
    ) -> Result<CheckpointConfig> {
        self.put_checked(config, checkpoint, metadata, new_versions, None)
            .await
    }

    async fn put_if_latest(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
        expected_latest: Option<&str>,
    ) -> Result<CheckpointConfig> {
        self.put_checked(
            config,
            checkpoint,
            metadata,
            new_versions,
            Some(expected_latest),
        )
        .await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        let op = Encoded::writes(self.serializer.as_ref(), config, writes, task_id, task_path)?;
        self.store_each(&[op]).await
    }

    /// Group commit: the whole batch in one transaction, sent in one round trip (one WAL
    /// flush instead of one per op). If any op fails the transaction is rolled back and the
    /// ops are applied one by one, so the ops before the failing one are stored and its
    /// error is the one returned, exactly as without batching. A value that does not
    /// serialize fails its op the same way, before anything is sent.
    async fn apply_batch(&self, ops: &[SaveOp]) -> Result<()> {
        let (encoded, unencodable) = Encoded::batch(self.serializer.as_ref(), ops);
        if encoded.len() > 1 && Encoded::combinable(&encoded) {
            match self.transact(&encoded).await {
                Ok(()) => return unencodable.map_or(Ok(()), Err),
                Err(Failure::Unknown(e)) => return Err(e),
                Err(Failure::RolledBack(_) | Failure::NotSent(_)) => {}
            }
        }
        self.store_each(&encoded).await?;
        unencodable.map_or(Ok(()), Err)
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(db("starting a delete"))?;
        delete_thread_in(&*tx, thread_id).await?;
        tx.commit().await.map_err(db("committing a delete"))
    }

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        if run_ids.is_empty() {
            return Ok(());
        }
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(db("starting a delete"))?;
        let threads = tx
            .query_typed(
                "SELECT DISTINCT thread_id FROM checkpoints WHERE metadata->>'run_id' = ANY($1)",
                &[p(&run_ids, Type::TEXT_ARRAY)],
            )
            .await
            .map_err(db("finding runs"))?;
        tx.query_typed(
            "DELETE FROM checkpoint_writes w USING checkpoints c \
             WHERE c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns \
             AND c.checkpoint_id = w.checkpoint_id AND c.metadata->>'run_id' = ANY($1)",
            &[p(&run_ids, Type::TEXT_ARRAY)],
        )
        .await
        .map_err(db("deleting writes of runs"))?;
        tx.query_typed(
            "DELETE FROM checkpoints WHERE metadata->>'run_id' = ANY($1)",
            &[p(&run_ids, Type::TEXT_ARRAY)],
        )
        .await
        .map_err(db("deleting checkpoints of runs"))?;
        for r in &threads {
            let thread: String = r.get(0);
            tx.query_typed(COLLECT_BLOBS, &[p(&thread, Type::TEXT)])
                .await
                .map_err(db("deleting unreferenced blobs"))?;
        }
        tx.commit().await.map_err(db("committing a delete"))
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db("starting a copy"))?;
        let exists = |rows: Vec<tokio_postgres::Row>| !rows.is_empty();
        let probe = "SELECT 1 FROM checkpoints WHERE thread_id = $1 LIMIT 1";
        let source_rows = tx
            .query_typed(probe, &[p(&source, Type::TEXT)])
            .await
            .map_err(db("checking a thread"))?;
        if !exists(source_rows) {
            return Err(Error::NotFound {
                what: format!("thread `{source}` to copy"),
            });
        }
        let target_rows = tx
            .query_typed(probe, &[p(&target, Type::TEXT)])
            .await
            .map_err(db("checking a thread"))?;
        if exists(target_rows) {
            return Err(Error::Conflict {
                message: format!("copy_thread target `{target}` already has checkpoints"),
            });
        }
        for sql in [
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, \
             type, checkpoint, metadata) SELECT $2, checkpoint_ns, checkpoint_id, \
             parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints WHERE thread_id = $1",
            "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) \
             SELECT $2, checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs \
             WHERE thread_id = $1",
            "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, \
             task_path, idx, channel, type, blob) SELECT $2, checkpoint_ns, checkpoint_id, task_id, \
             task_path, idx, channel, type, blob FROM checkpoint_writes WHERE thread_id = $1",
        ] {
            tx.query_typed(sql, &[p(&source, Type::TEXT), p(&target, Type::TEXT)])
                .await
                .map_err(db("copying a thread"))?;
        }
        tx.commit().await.map_err(db("committing a copy"))
    }

    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        let mut client = self.client().await?;
        // One transaction for all threads: a refused thread leaves every thread untouched.
        let tx = client.transaction().await.map_err(db("starting a prune"))?;
        for thread in thread_ids {
            match strategy {
                PruneStrategy::Delete => delete_thread_in(&*tx, thread).await?,
                _ => prune_by_plan(&*tx, thread, strategy).await?,
            }
        }
        tx.commit().await.map_err(db("committing a prune"))
    }
}
