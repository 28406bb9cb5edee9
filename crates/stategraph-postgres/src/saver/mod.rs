//! `PostgresSaver`: LangGraph's Postgres checkpointer, in Rust.

mod layout;
mod pruning;
mod read;
mod write;

use stategraph_checkpoint::backend::Timed as _;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::Pool;
use serde_json::Value as Json;
use stategraph_checkpoint::backend::{
    self, Expect, FetchedBlob, LayoutFetch, LayoutRow, ListSql, Placeholders, PrunePlan, PruneRow,
    PruneTarget, SqlArg, Timeouts, prune,
};
use stategraph_checkpoint::{
    Capabilities, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointId, CheckpointMetadata,
    CheckpointSaver, CheckpointTuple, DeltaChannelHistory, DeltaWalk, Error, ListOptions, Location,
    PruneStrategy, Result, SaveOp, Serializer, StoredWrite, Value,
};
use tokio_postgres::GenericClient;
use tokio_postgres::types::{ToSql, Type};

use crate::config::PostgresConfig;
use crate::error::{BACKEND, db};
use crate::schema;
use layout::*;
use pruning::*;
use stategraph_checkpoint::backend::{LayoutWriter, blob_layout};
use stategraph_checkpoint::blob_layout::EncodedSave as Encoded;
use stategraph_runs::{DatabaseId, FencingSaver, RunFence};
use write::Failure;

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
    timeouts: Timeouts,
    /// The run lease its writes are conditioned on, if any ([`FencingSaver::fenced`]).
    fence: Option<Arc<write::Fence>>,
    /// The database handle it was built from (for fences).
    database: DatabaseId,
    /// How the blob columns are compressed (applied by [`setup`](Self::setup)).
    compression: crate::BlobCompression,
}

impl fmt::Debug for PostgresSaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresSaver")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// A query parameter and its type (statements are sent unnamed, so types are explicit).
pub(super) type Param<'a> = (&'a (dyn ToSql + Sync), Type);

/// A typed parameter.
pub(super) fn p<T: ToSql + Sync>(value: &T, ty: Type) -> Param<'_> {
    (value, ty)
}

impl PostgresSaver {
    /// Connects to the database a `postgres://` URL names and creates or upgrades LangGraph's
    /// tables: shorthand for
    /// [`PostgresConfig::from_url`]`(url)?.`[`connect`](PostgresConfig::connect)`()`, which
    /// has every other setting.
    pub async fn connect(url: &str) -> Result<Self> {
        PostgresConfig::from_url(url)?.connect().await
    }

    pub(crate) async fn connect_with(config: PostgresConfig) -> Result<Self> {
        let db = config.open()?;
        let saver = Self {
            pool: db.pool().clone(),
            cache_statements: db.prepared_statements(),
            serializer: config.serializer,
            schema: db.schema().map(str::to_owned),
            target: db.target().to_owned(),
            timeouts: db.timeouts(),
            compression: config.compression,
            fence: None,
            database: db.id(),
        };
        if config.run_setup {
            saver
                .timeouts
                .statement(BACKEND, "setting up the tables", saver.setup())
                .await?;
        } else {
            // Fail now, not at the first query, if the database cannot be reached or lacks
            // the tables (nothing is created: a read-only tool reports what is missing).
            let client = saver.client().await?;
            let check = schema::check(&client, saver.schema.as_deref(), &saver.target);
            saver
                .timeouts
                .statement(BACKEND, "checking the tables", check)
                .await?;
        }
        Ok(saver)
    }

    /// Creates or upgrades LangGraph's tables (idempotent; concurrent calls take turns), and
    /// sets the blob columns' compression as configured ([`PostgresConfig::compression`]).
    pub async fn setup(&self) -> Result<()> {
        let client = self.client().await?;
        schema::setup(&client, self.schema.as_deref(), self.compression).await
    }

    /// A pooled connection; one the driver already knows to be closed is dropped and
    /// replaced.
    async fn client(&self) -> Result<deadpool_postgres::Object> {
        crate::error::pooled(&self.pool, &self.timeouts, &self.target, "saver").await
    }
}

/// Where a configuration connects, for messages: `host:port/dbname` (several hosts joined
/// with commas; a Unix socket by its path).
pub(crate) fn describe(pg: &tokio_postgres::Config) -> String {
    let ports = pg.get_ports();
    let hosts: Vec<String> = pg
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let host = match h {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            };
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            format!("{host}:{port}")
        })
        .collect();
    format!(
        "{}/{}",
        hosts.join(","),
        pg.get_dbname().unwrap_or_default()
    )
}

/// The driver client behind a pooled connection.
pub(super) fn client_of(c: &deadpool_postgres::Object) -> &tokio_postgres::Client {
    c
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
                    p(&config.checkpoint_id.as_deref(), Type::TEXT),
                    p(&channels, Type::TEXT_ARRAY),
                ],
            )
            .await
            .map_err(db("walking checkpoint ancestors"))?;
        let rows = rows.iter().map(layout_row).collect::<Result<_>>()?;
        let chain = backend::assemble(
            &mut Fetch(client_of(&client)),
            self.serializer.as_ref(),
            rows,
            false,
        )
        .await?;
        let mut walk = DeltaWalk::new(channels);
        for t in chain {
            let values = &t.checkpoint.channel_values;
            if !walk.visit(&t.checkpoint.id, t.pending_writes, |ch| {
                values.get(ch).cloned()
            }) {
                break;
            }
        }
        Ok(walk.finish())
    }

    async fn list_once(&self, options: &ListOptions) -> Result<Vec<CheckpointTuple>> {
        let (sql, args) =
            ListSql::build(SELECT_ROWS, options, Placeholders::Dollar, |q, filter| {
                let at = q.bind(SqlArg::Json(Json::Object(filter.clone())));
                q.clause(format!("metadata @> {at}"));
                Ok(())
            })?;
        // PostgreSQL's text and jsonb cannot hold U+0000, so no stored checkpoint matches a
        // listing that names it (the server would refuse the query instead of answering).
        if args.iter().any(|a| match a {
            SqlArg::Text(t) => t.contains('\0'),
            SqlArg::Json(j) => crate::nul_char::nul_at(j, "").is_some(),
            SqlArg::Int(_) | SqlArg::Real(_) => false,
        }) {
            return Ok(Vec::new());
        }
        let params: Vec<Param<'_>> = args
            .iter()
            .map(|a| match a {
                SqlArg::Text(t) => p(t, Type::TEXT),
                SqlArg::Int(i) => p(i, Type::INT8),
                SqlArg::Real(f) => p(f, Type::FLOAT8),
                SqlArg::Json(j) => p(j, Type::JSONB),
            })
            .collect();
        let client = self.client().await?;
        let rows = client
            .query_typed(&sql, &params)
            .await
            .map_err(db("listing checkpoints"))?;
        let rows = rows.iter().map(layout_row).collect::<Result<_>>()?;
        backend::assemble(
            &mut Fetch(client_of(&client)),
            self.serializer.as_ref(),
            rows,
            options.skip_values,
        )
        .await
    }
}

/// Whether `e` says the connection was gone before the request was carried out: closed
/// before it was sent, or ended by the server instead of an answer (a `FATAL` error, such as
/// a terminated backend). A read that failed so had no effect and can be sent again.
fn connection_closed(e: &Error) -> bool {
    matches!(e, Error::Backend { source: Some(s), .. }
        if s.downcast_ref::<tokio_postgres::Error>().is_some_and(write::connection_lost))
}

impl LayoutWriter for PostgresSaver {
    fn serializer(&self) -> &dyn Serializer {
        self.serializer.as_ref()
    }

    /// Stores `ops` in one transaction (one round trip), on a pooled connection; a
    /// connection found closed before anything was sent is replaced (up to one try per
    /// pooled connection, plus a new one, as reads are retried).
    async fn transact(&self, ops: &[Encoded]) -> std::result::Result<(), Failure> {
        let mut tries = self.pool.status().max_size + 1;
        loop {
            let client = self.client().await.map_err(Failure::NotSent)?;
            match write::commit(&client, self.cache_statements, self.fence.as_deref(), ops).await {
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
        self.timed("reading a checkpoint", async {
            self.retry_closed(|| self.get_tuple_once(config)).await
        })
        .await
    }

    /// Two round trips whatever the chain's length: the walk (one statement), then the
    /// walked checkpoints' blobs and writes (pipelined).
    async fn get_delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<BTreeMap<String, DeltaChannelHistory>> {
        self.timed("reading delta channel history", async {
            self.retry_closed(|| self.delta_history_once(config, channels))
                .await
        })
        .await
    }

    async fn list(&self, options: &ListOptions) -> Result<Vec<CheckpointTuple>> {
        self.timed("listing checkpoints", async {
            self.retry_closed(|| self.list_once(options)).await
        })
        .await
    }

    /// One transaction sent in one round trip: the checkpoint and its changed blobs; a
    /// conditional put is checked under a transaction-scoped advisory lock on the thread and
    /// namespace.
    async fn put_checked(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
        expect: Expect<&str>,
    ) -> Result<CheckpointConfig> {
        self.timed(
            "storing a checkpoint",
            blob_layout::put_checked(self, config, checkpoint, metadata, new_versions, expect),
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
        self.timed(
            "storing writes",
            blob_layout::put_writes(self, config, writes, task_id, task_path),
        )
        .await
    }

    /// Group commit: the whole batch in one transaction, sent in one round trip (one WAL
    /// flush instead of one per op). If any op fails the transaction is rolled back and the
    /// ops are applied one by one, so the ops before the failing one are stored and its
    /// error is the one returned, exactly as without batching. A value that does not
    /// serialize fails its op the same way, before anything is sent.
    async fn apply_batch(&self, ops: &[SaveOp]) -> Result<()> {
        self.timed(
            "storing a batch of saves",
            blob_layout::apply_batch(self, ops),
        )
        .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        self.timed("deleting a thread", async {
            let mut client = self.client().await?;
            let tx = client
                .transaction()
                .await
                .map_err(db("starting a delete"))?;
            delete_thread_in(&*tx, thread_id).await?;
            tx.commit().await.map_err(db("committing a delete"))
        })
        .await
    }

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        self.timed("deleting runs", async {
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
                let thread: String = read::column(r, 0, &Location::default())?;
                tx.query_typed(COLLECT_BLOBS, &[p(&thread, Type::TEXT)])
                    .await
                    .map_err(db("deleting unreferenced blobs"))?;
            }
            tx.commit().await.map_err(db("committing a delete"))
        })
        .await
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        self.timed("copying a thread", async {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(db("starting a copy"))?;
            let probe = "SELECT 1 FROM checkpoints WHERE thread_id = $1 LIMIT 1";
            let mut exists = [false; 2];
            for (found, thread) in exists.iter_mut().zip([source, target]) {
                *found = !tx
                    .query_typed(probe, &[p(&thread, Type::TEXT)])
                    .await
                    .map_err(db("checking a thread"))?
                    .is_empty();
            }
            backend::copy_preflight(source, target, exists[0], exists[1])?;
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
        })
        .await
    }

    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        self.timed("pruning", async {
            let mut client = self.client().await?;
            // One transaction for all threads: a refused thread leaves every thread untouched.
            let tx = client.transaction().await.map_err(db("starting a prune"))?;
            prune::run(&mut Pruning(&*tx), thread_ids, strategy).await?;
            tx.commit().await.map_err(db("committing a prune"))
        })
        .await
    }
}

impl FencingSaver for PostgresSaver {
    /// This saver with every write conditioned, in its own transaction, on the run's row of
    /// the queue's table (running, held by the fence's worker, lease not run out; locked
    /// `FOR SHARE` until the write commits, so no takeover slips in between); `None` for the
    /// fence of a queue not built from this saver's
    /// [`PostgresDatabase`](crate::PostgresDatabase).
    fn fenced(&self, fence: &RunFence) -> Option<Arc<dyn CheckpointSaver>> {
        if fence.database != self.database {
            return None;
        }
        let mut fenced = self.clone();
        fenced.fence = Some(Arc::new(write::Fence::new(fence)));
        Some(Arc::new(fenced))
    }
}

impl stategraph_checkpoint::backend::Timed for PostgresSaver {
    const BACKEND: &'static str = BACKEND;

    fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }
}
