//! `PostgresSaver`: LangGraph's Postgres checkpointer, in Rust.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use serde_json::Value as Json;
use stategraph_checkpoint::blob_layout::{metadata_json, split_checkpoint};
use stategraph_checkpoint::prune::{PruneRow, plan};
use stategraph_checkpoint::{
    Capabilities, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointTuple, DeltaChannelHistory, DeltaWalk, EncodedWrites, Error,
    ListOptions, Location, PendingWrite, PruneStrategy, Result, SaveOp, SerdeError, Serializer,
    StoredWrite, Value, encode_writes, latest_conflict, sort_writes, tags, validate_put,
};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{GenericClient, NoTls};

use crate::config::PostgresConfig;
use crate::error::{db, pool};
use crate::schema;

/// Stores checkpoints in PostgreSQL with LangGraph's own tables (`checkpoints`,
/// `checkpoint_blobs`, `checkpoint_writes`, `checkpoint_migrations` v0–v9) and row formats, so
/// Python's `PostgresSaver` and this one share a database.
///
/// - Primitive channel values (None, str, int, float, bool) stay inline in the checkpoint's
///   JSONB; every other value is a `checkpoint_blobs` row keyed by (channel, version), written
///   only when that channel's version changed — an unchanged value is never stored twice.
/// - Statements are unnamed (no server-side prepared statements, no session state), so a
///   transaction-mode pooler such as PgBouncer works in front of it.
/// - A pool of connections (deadpool); each write is one transaction.
#[derive(Clone)]
pub struct PostgresSaver {
    pool: Pool,
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
                // Check a pooled connection before handing it out, so a connection the server
                // dropped (restart, failover, pg_terminate_backend) is replaced instead of
                // failing the next operation. Costs one empty round trip per checkout.
                recycling_method: RecyclingMethod::Verified,
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

    async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(inner) => Error::backend(
                "postgres",
                format!("cannot connect to PostgreSQL at {}", self.target),
                inner,
            ),
            other => pool(other),
        })
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
        let metadata = CheckpointMetadata::from_json(row.metadata.clone()).map_err(|e| {
            Error::serialization(
                loc.clone().part("metadata"),
                SerdeError::Shape {
                    path: String::new(),
                    message: e.to_string(),
                },
            )
        })?;
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
                if tag == tags::EMPTY {
                    continue;
                }
                let loc =
                    Location::checkpoint(&row.thread_id, &row.checkpoint_ns, &row.checkpoint_id)
                        .part("blob")
                        .channel(ch.to_owned());
                let value = serde
                    .loads_typed(tag, blob.as_deref().unwrap_or_default())
                    .map_err(|e| Error::serialization(loc, e))?;
                checkpoint.channel_values.insert(ch.to_owned(), value);
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
    /// Stores a checkpoint and its changed blobs in one transaction; with `expected_latest`,
    /// only if the namespace's newest checkpoint is still that one (checked under a
    /// transaction-scoped advisory lock on the thread and namespace).
    async fn put_checked(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
        expected_latest: Option<Option<&str>>,
    ) -> Result<CheckpointConfig> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(db("starting a checkpoint write"))?;
        self.put_in(
            &*tx,
            config,
            checkpoint,
            metadata,
            new_versions,
            expected_latest,
        )
        .await?;
        tx.commit().await.map_err(db("committing a checkpoint"))?;
        Ok(CheckpointConfig::new(config.thread_id.clone())
            .with_ns(config.checkpoint_ns.clone())
            .with_checkpoint_id(checkpoint.id.clone()))
    }

    /// A checkpoint put inside the caller's transaction.
    async fn put_in<C: GenericClient>(
        &self,
        tx: &C,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
        expected_latest: Option<Option<&str>>,
    ) -> Result<()> {
        validate_put(config, checkpoint)?;
        let split = split_checkpoint(self.serializer.as_ref(), config, checkpoint, new_versions)?;
        let meta = metadata_json(metadata);
        let (thread, ns) = (&config.thread_id, &config.checkpoint_ns);
        if let Some(expected) = expected_latest {
            tx.query_typed(
                "SELECT pg_advisory_xact_lock(hashtextextended($1 || chr(31) || $2, 7))",
                &[p(thread, Type::TEXT), p(ns, Type::TEXT)],
            )
            .await
            .map_err(db("locking the thread"))?;
            let rows = tx
                .query_typed(
                    "SELECT max(checkpoint_id) FROM checkpoints \
                     WHERE thread_id = $1 AND checkpoint_ns = $2",
                    &[p(thread, Type::TEXT), p(ns, Type::TEXT)],
                )
                .await
                .map_err(db("reading the latest checkpoint"))?;
            let latest: Option<String> = rows.first().and_then(|r| r.get(0));
            if latest.as_deref() != expected {
                return Err(latest_conflict(config, expected, latest.as_deref()));
            }
        }
        if !split.blobs.is_empty() {
            let channels: Vec<&str> = split.blobs.iter().map(|b| b.channel.as_str()).collect();
            let versions: Vec<&str> = split.blobs.iter().map(|b| b.version.as_str()).collect();
            let types: Vec<&str> = split.blobs.iter().map(|b| b.type_tag.as_str()).collect();
            let data: Vec<&[u8]> = split.blobs.iter().map(|b| b.data.as_slice()).collect();
            tx.query_typed(
                "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) \
                 SELECT $1, $2, c, v, t, b FROM unnest($3::text[], $4::text[], $5::text[], $6::bytea[]) \
                 AS x(c, v, t, b) \
                 ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING",
                &[
                    p(thread, Type::TEXT),
                    p(ns, Type::TEXT),
                    p(&channels, Type::TEXT_ARRAY),
                    p(&versions, Type::TEXT_ARRAY),
                    p(&types, Type::TEXT_ARRAY),
                    p(&data, Type::BYTEA_ARRAY),
                ],
            )
            .await
            .map_err(db("storing blobs"))?;
        }
        tx.query_typed(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, \
             parent_checkpoint_id, checkpoint, metadata) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) \
             DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata",
            &[
                p(thread, Type::TEXT),
                p(ns, Type::TEXT),
                p(&checkpoint.id, Type::TEXT),
                p(&config.checkpoint_id, Type::TEXT),
                p(&split.checkpoint, Type::JSONB),
                p(&meta, Type::JSONB),
            ],
        )
        .await
        .map_err(db("storing a checkpoint"))?;
        Ok(())
    }

    /// A `put_writes` inside the caller's transaction (or on a plain connection).
    async fn writes_in<C: GenericClient>(
        &self,
        client: &C,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        let EncodedWrites {
            checkpoint_id,
            replace,
            rows,
        } = encode_writes(self.serializer.as_ref(), config, writes, task_id)?;
        if rows.is_empty() {
            return Ok(());
        }
        let idxs: Vec<i32> = rows
            .iter()
            .map(|r| i32::try_from(r.idx).unwrap_or(i32::MAX))
            .collect();
        let channels: Vec<&str> = rows.iter().map(|r| r.channel.as_str()).collect();
        let types: Vec<&str> = rows.iter().map(|r| r.tag.as_str()).collect();
        let blobs: Vec<&[u8]> = rows.iter().map(|r| r.bytes.as_slice()).collect();
        let conflict = if replace {
            "DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob"
        } else {
            "DO NOTHING"
        };
        let sql = format!(
            "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, \
             task_path, idx, channel, type, blob) \
             SELECT $1, $2, $3, $4, $5, i, c, t, b \
             FROM unnest($6::int4[], $7::text[], $8::text[], $9::bytea[]) AS x(i, c, t, b) \
             ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) {conflict}"
        );
        client
            .query_typed(
                &sql,
                &[
                    p(&config.thread_id, Type::TEXT),
                    p(&config.checkpoint_ns, Type::TEXT),
                    p(&checkpoint_id, Type::TEXT),
                    p(&task_id, Type::TEXT),
                    p(&task_path, Type::TEXT),
                    p(&idxs, Type::INT4_ARRAY),
                    p(&channels, Type::TEXT_ARRAY),
                    p(&types, Type::TEXT_ARRAY),
                    p(&blobs, Type::BYTEA_ARRAY),
                ],
            )
            .await
            .map_err(db("storing writes"))?;
        Ok(())
    }
}

impl PostgresSaver {
    /// Applies `ops` in one transaction: `Ok(Err(()))` when an op failed (rolled back,
    /// nothing stored), `Err` when the commit itself failed (its outcome is unknown, so the
    /// ops are not retried).
    async fn batch_in_one_transaction(&self, ops: &[SaveOp]) -> Result<Result<(), ()>> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(db("starting a batch of writes"))?;
        for op in ops {
            let done = match op {
                SaveOp::Put {
                    config,
                    checkpoint,
                    metadata,
                    new_versions,
                    expected_latest,
                } => {
                    self.put_in(
                        &*tx,
                        config,
                        checkpoint,
                        metadata,
                        new_versions,
                        Some(expected_latest.as_deref()),
                    )
                    .await
                }
                SaveOp::Writes {
                    config,
                    writes,
                    task_id,
                    task_path,
                } => {
                    self.writes_in(&*tx, config, writes, task_id, task_path)
                        .await
                }
            };
            if done.is_err() {
                // Dropping `tx` rolls the batch back.
                return Ok(Err(()));
            }
        }
        tx.commit()
            .await
            .map_err(db("committing a batch of writes"))?;
        Ok(Ok(()))
    }
}

#[async_trait]
impl CheckpointSaver for PostgresSaver {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        let client = self.client().await?;
        let rows = match &config.checkpoint_id {
            Some(id) => {
                client
                    .query_typed(
                        &format!(
                            "{SELECT_ROWS} WHERE thread_id = $1 AND checkpoint_ns = $2 \
                             AND checkpoint_id = $3"
                        ),
                        &[
                            p(&config.thread_id, Type::TEXT),
                            p(&config.checkpoint_ns, Type::TEXT),
                            p(id, Type::TEXT),
                        ],
                    )
                    .await
            }
            None => {
                client
                    .query_typed(
                        &format!(
                            "{SELECT_ROWS} WHERE thread_id = $1 AND checkpoint_ns = $2 \
                             ORDER BY checkpoint_id DESC LIMIT 1"
                        ),
                        &[
                            p(&config.thread_id, Type::TEXT),
                            p(&config.checkpoint_ns, Type::TEXT),
                        ],
                    )
                    .await
            }
        }
        .map_err(db("reading a checkpoint"))?;
        let rows = rows.iter().map(Row::from_pg).collect();
        Ok(assemble(client_of(&client), self.serializer.as_ref(), rows)
            .await?
            .into_iter()
            .next())
    }

    /// Two round trips whatever the chain's length: the walk (one statement), then the
    /// walked checkpoints' blobs and writes (pipelined).
    async fn get_delta_channel_history(
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

    async fn list(&self, options: &ListOptions) -> Result<Vec<CheckpointTuple>> {
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
        let client = self.client().await?;
        self.writes_in(&**client, config, writes, task_id, task_path)
            .await
    }

    /// Group commit: the whole batch in one transaction (one WAL flush instead of one per
    /// op). If any op fails the transaction is rolled back and the ops are applied one by
    /// one, so the ops before the failing one are stored and its error is the one returned,
    /// exactly as without batching.
    async fn apply_batch(&self, ops: &[SaveOp]) -> Result<()> {
        if ops.len() > 1 && self.batch_in_one_transaction(ops).await?.is_ok() {
            return Ok(());
        }
        SaveOp::apply_each(ops, self).await
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
