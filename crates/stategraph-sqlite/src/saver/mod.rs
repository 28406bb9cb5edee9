//! `SqliteSaver`: LangGraph's SQLite checkpointer, in Rust.

mod fence;
mod pruning;
mod read;
mod write;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Transaction, params, types::Value as Sql};
use serde_json::Value as Json;
use stategraph_checkpoint::backend::{
    self, Expect, ListSql, Placeholders, PrunePlan, PruneRow, PruneTarget, SqlArg, prune,
};
use stategraph_checkpoint::{
    Capabilities, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointId, CheckpointMetadata,
    CheckpointSaver, CheckpointTuple, DecodeCache, DeltaChannelHistory, DeltaWalk, EncodedWrites,
    Error, ListOptions, Location, PendingWrite, PruneStrategy, Result, SaveOp, SerdeError,
    Serializer, StoredWrite, Value, checkpoint_value_ranges, checkpoint_without_values,
    encode_writes, latest_conflict, sort_writes, tags, validate_put,
};
use stategraph_runs::{FencingSaver, RunFence};

use crate::config::{self, SqliteConfig};
use crate::error::{db, join};
use crate::pool::{OpenError, Pool};
use crate::schema;

use pruning::*;
use read::*;
use write::*;

/// Stores checkpoints in a SQLite database, in LangGraph's own schema and byte formats, so
/// that Python's `SqliteSaver` and this one can share a file.
///
/// One writer connection (SQLite allows one writer at a time) and a small pool of reader
/// connections (WAL lets them read while the writer writes); every database call runs on
/// tokio's blocking pool, never on the async threads.
///
/// Open one with [`SqliteSaver::connect`]`(url)` or, for every setting,
/// [`SqliteConfig`].
#[derive(Clone)]
pub struct SqliteSaver {
    inner: Arc<Inner>,
    /// The run lease its checkpoint writes are conditioned on, if any
    /// ([`FencingSaver::fenced`]).
    fence: Option<Arc<fence::Fence>>,
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
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
}

impl SqliteSaver {
    /// Opens the database a `sqlite:` URL names (`sqlite::memory:` for a private in-memory
    /// one), creating the file and LangGraph's tables as needed: shorthand for
    /// [`SqliteConfig::from_url`]`(url)?.`[`connect`](SqliteConfig::connect)`()`, which has
    /// every other setting.
    pub async fn connect(url: &str) -> Result<Self> {
        SqliteConfig::from_url(url)?.connect().await
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
        let (run_setup, busy_timeout) = (config.run_setup, config.busy_timeout);
        let pool = Pool::new(config, no_preparation);
        pool.exclusive(|writer| {
            if run_setup {
                schema::setup(writer, busy_timeout).map_err(db("creating the checkpoint tables"))
            } else {
                schema::check(writer, &what)
            }
        })?;
        Ok(Self {
            inner: Arc::new(pool),
            fence: None,
        })
    }

    /// Runs `f` on the writer connection, on the blocking pool.
    async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &dyn Serializer) -> Result<T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        let arrival = inner.arrival();
        tokio::task::spawn_blocking(move || {
            inner.write_arrived(arrival, |conn| f(conn, inner.config().serializer.as_ref()))
        })
        .await
        .map_err(join)?
    }

    /// Runs the checkpoint write `f` on the writer connection, on the blocking pool, after
    /// the fence's check in the same transaction for a fenced saver.
    async fn save<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &dyn Serializer) -> Result<T> + Send + 'static,
    {
        let fence = self.fence.clone();
        self.write(move |conn, serde| {
            if let Some(fence) = &fence {
                fence.check(conn)?;
            }
            f(conn, serde)
        })
        .await
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
            let reading = db("reading a checkpoint");
            let sql = match config.checkpoint_id {
                Some(_) => format!(
                    "SELECT {CHECKPOINT_COLUMNS} FROM checkpoints \
                     WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3"
                ),
                None => format!(
                    "SELECT {CHECKPOINT_COLUMNS} FROM checkpoints \
                     WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
                     ORDER BY checkpoint_id DESC LIMIT 1"
                ),
            };
            let mut stmt = tx.prepare_cached(&sql).map_err(&reading)?;
            let mut rows = match &config.checkpoint_id {
                Some(id) => {
                    stmt.query(params![config.thread_id, config.checkpoint_ns, id.as_str()])
                }
                None => stmt.query(params![config.thread_id, config.checkpoint_ns]),
            }
            .map_err(&reading)?;
            let Some(r) = rows.next().map_err(&reading)? else {
                return Ok(None);
            };
            let row = Row::read(r, "reading a checkpoint", serde, None, false)?;
            let writes = load_writes(
                &tx,
                serde,
                &row.thread_id,
                &row.checkpoint_ns,
                &row.checkpoint_id,
            )?;
            Ok(Some(row.into_tuple(writes)))
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
        let skip_values = options.skip_values;
        let contiguous = options.filter.is_empty();
        self.read(move |conn, serde| {
            let tx = conn.transaction().map_err(db("starting a read"))?;
            // One cache for the listing: what checkpoints repeat of each other (every
            // earlier message of a chat) is decoded once. Each row is decoded as it is read.
            let mut cache = DecodeCache::new();
            let mut listed = Vec::new();
            {
                let mut stmt = tx.prepare(&sql).map_err(db("listing checkpoints"))?;
                let mut rows = stmt
                    .query(rusqlite::params_from_iter(args))
                    .map_err(db("listing checkpoints"))?;
                while let Some(r) = rows.next().map_err(db("listing checkpoints"))? {
                    listed.push(Row::read(
                        r,
                        "listing checkpoints",
                        serde,
                        Some(&mut cache),
                        skip_values,
                    )?);
                }
            }
            // Without a metadata filter a listing holds every checkpoint of a (thread,
            // namespace) between its first and last: their writes are one range.
            let writes = read::load_writes_of(&tx, serde, &listed, &mut cache, contiguous)?;
            Ok(listed
                .into_iter()
                .zip(writes)
                .map(|(r, w)| r.into_tuple(w))
                .collect())
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
        self.save(move |conn, _| {
            let tx = conn
                .savepoint()
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
        self.save(move |conn, _| {
            let tx = conn.savepoint().map_err(db("starting a write"))?;
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
                self.save(move |conn, _| {
                    let tx = conn.savepoint().map_err(db("starting a batch of writes"))?;
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
            let tx = conn.savepoint().map_err(db("starting a delete"))?;
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
            let tx = conn.savepoint().map_err(db("starting a delete"))?;
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
            let tx = conn.savepoint().map_err(db("starting a copy"))?;
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
            let tx = conn.savepoint().map_err(db("starting a prune"))?;
            prune::run_now(&mut Pruning(&tx), &thread_ids, strategy)?;
            tx.commit().map_err(db("committing a prune"))
        })
        .await
    }
}

impl FencingSaver for SqliteSaver {
    /// This saver with its checkpoint writes (puts, writes, batches) conditioned on the run's
    /// row in the queue's `stategraph_runs` of the same file (running, held by the fence's
    /// worker, lease not run out), checked in each write's own transaction; `None` for a
    /// fence of a queue not built from this saver's [`SqliteDatabase`](crate::SqliteDatabase).
    fn fenced(&self, fence: &RunFence) -> Option<Arc<dyn CheckpointSaver>> {
        if fence.database != self.inner.id() || fence.relation != crate::runs::RUNS_TABLE {
            return None;
        }
        Some(Arc::new(Self {
            inner: Arc::clone(&self.inner),
            fence: Some(Arc::new(fence::Fence::new(fence))),
        }))
    }
}
