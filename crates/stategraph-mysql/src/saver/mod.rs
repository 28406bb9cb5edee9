//! `MySqlSaver`: checkpoints in MySQL / MariaDB.

mod layout;
mod pruning;
mod write;

use stategraph_checkpoint::backend::Timed as _;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use mysql_async::prelude::FromValue;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Pool, Row as MyRow, TxOpts, Value as My};
use serde_json::Value as Json;
use stategraph_checkpoint::backend::{
    self, EncodedSave, Expect, FetchedBlob, LayoutFetch, LayoutRow, LayoutWriter, ListSql,
    Placeholders, PrunePlan, PruneRow, PruneTarget, SqlArg, Timeouts, WriteFailure, blob_layout,
    prune,
};
use stategraph_checkpoint::{
    Capabilities, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointId, CheckpointMetadata,
    CheckpointSaver, CheckpointTuple, Error, ListOptions, Location, PruneStrategy, Result, SaveOp,
    Serializer, StoredWrite, Value,
};

use crate::config::MySqlConfig;
use crate::error::{BACKEND, db};
use crate::schema;
use layout::*;
use pruning::*;

/// Stores checkpoints in MySQL or MariaDB: three tables linked by `thread_id` and
/// `checkpoint_ns_hash` (MD5 of the namespace) with `gmt_create`/`gmt_modified`, in
/// LangGraph's value layout (primitives inline in the checkpoint JSON, other values as blobs
/// per channel version written only when the version changed) and serializer.
#[derive(Clone)]
pub struct MySqlSaver {
    pool: Pool,
    serializer: Arc<dyn Serializer>,
    timeouts: Timeouts,
    /// Where it connects, for errors.
    target: String,
}

impl fmt::Debug for MySqlSaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MySqlSaver").finish_non_exhaustive()
    }
}

pub(super) fn s(v: &str) -> My {
    My::from(v)
}

/// `?, ?, …` for `n` placeholders.
pub(super) fn marks(n: usize) -> String {
    vec!["?"; n].join(", ")
}

impl MySqlSaver {
    /// Connects to the database a `mysql://` URL names and creates the database and tables
    /// if missing: shorthand for
    /// [`MySqlConfig::from_url`]`(url)?.`[`connect`](MySqlConfig::connect)`()`, which has
    /// every other setting.
    pub async fn connect(url: &str) -> Result<Self> {
        MySqlConfig::from_url(url)?.connect().await
    }

    pub(crate) async fn connect_with(config: MySqlConfig) -> Result<Self> {
        let (pool, target) = match &config.pool {
            Some(pool) => (pool.clone(), "the pool's database".to_owned()),
            None => {
                let opts = &config.opts;
                let target = format!(
                    "{}:{}/{}",
                    opts.ip_or_hostname(),
                    opts.tcp_port(),
                    opts.db_name().unwrap_or_default()
                );
                // Pooled connections idle for longer than the limit are closed, not reused.
                let opts = mysql_async::OptsBuilder::from_opts(config.opts.clone())
                    .conn_ttl(config.timeouts.idle)
                    .into();
                (Pool::new::<mysql_async::Opts>(opts), target)
            }
        };
        let saver = Self {
            pool,
            serializer: config.serializer,
            timeouts: config.timeouts,
            target,
        };
        let mut conn = saver.conn().await?;
        let setup = async {
            if config.run_setup {
                schema::setup(&mut conn).await
            } else {
                schema::check(&mut conn, &saver.target).await
            }
        };
        saver
            .timeouts
            .statement(BACKEND, "checking the tables", setup)
            .await?;
        Ok(saver)
    }

    async fn conn(&self) -> Result<Conn> {
        let get = async {
            self.pool.get_conn().await.map_err(|e| {
                if unknown_database(&e) {
                    Error::NotFound {
                        what: format!("MySQL database at {}", self.target),
                    }
                } else {
                    db("cannot connect to MySQL")(e)
                }
            })
        };
        self.timeouts.connect(BACKEND, &self.target, get).await
    }
}

/// Whether the server refused the connection because its database does not exist.
fn unknown_database(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if s.code == 1049)
}

impl LayoutWriter for MySqlSaver {
    fn serializer(&self) -> &dyn Serializer {
        self.serializer.as_ref()
    }

    async fn transact(&self, ops: &[EncodedSave]) -> std::result::Result<(), WriteFailure> {
        let mut conn = self.conn().await.map_err(WriteFailure::NotSent)?;
        write::store(&mut conn, ops).await
    }
}

#[async_trait]
impl CheckpointSaver for MySqlSaver {
    fn name(&self) -> &'static str {
        "mysql"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        self.timed("reading a checkpoint", async {
            let mut conn = self.conn().await?;
            let (thread, ns) = (config.thread_id.as_str(), config.checkpoint_ns.as_str());
            let rows: Vec<MyRow> = match &config.checkpoint_id {
                Some(id) => {
                    conn.exec(
                        format!(
                            "{SELECT_ROWS} WHERE thread_id = ? AND checkpoint_ns_hash = MD5(?) \
                             AND checkpoint_id = ?"
                        ),
                        (thread, ns, id.as_str()),
                    )
                    .await
                }
                None => {
                    conn.exec(
                        format!(
                            "{SELECT_ROWS} WHERE thread_id = ? AND checkpoint_ns_hash = MD5(?) \
                             ORDER BY checkpoint_id DESC LIMIT 1"
                        ),
                        (thread, ns),
                    )
                    .await
                }
            }
            .map_err(db("reading a checkpoint"))?;
            let rows = rows.into_iter().map(layout_row).collect::<Result<_>>()?;
            Ok(
                backend::assemble(&mut Fetch(&mut conn), self.serializer.as_ref(), rows, false)
                    .await?
                    .into_iter()
                    .next(),
            )
        })
        .await
    }

    async fn list(&self, options: &ListOptions) -> Result<Vec<CheckpointTuple>> {
        self.timed("listing checkpoints", async {
            let (sql, args) = ListSql::build_with(
                SELECT_ROWS,
                options,
                Placeholders::Question,
                |at| format!("checkpoint_ns_hash = MD5({at})"),
                |q, filter| {
                    let at = q.bind(SqlArg::Json(Json::Object(filter.clone())));
                    q.clause(format!("JSON_CONTAINS(metadata, {at})"));
                    Ok(())
                },
            )?;
            let params = args
                .into_iter()
                .map(|a| match a {
                    SqlArg::Text(t) => s(t),
                    SqlArg::Int(i) => My::from(i),
                    SqlArg::Real(f) => My::from(f),
                    SqlArg::Json(j) => My::from(j.to_string()),
                })
                .collect();
            let mut conn = self.conn().await?;
            let rows: Vec<MyRow> = conn
                .exec(sql, Params::Positional(params))
                .await
                .map_err(db("listing checkpoints"))?;
            let rows = rows.into_iter().map(layout_row).collect::<Result<_>>()?;
            backend::assemble(
                &mut Fetch(&mut conn),
                self.serializer.as_ref(),
                rows,
                options.skip_values,
            )
            .await
        })
        .await
    }

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

    /// Group commit: the whole batch in one transaction of multi-row statements (one lock,
    /// one check, one log flush). If it fails, nothing of it is stored and the ops are
    /// applied one by one, so the ops before the failing one are stored and its error is the
    /// one returned, exactly as without batching (a failed commit is returned as it is: its
    /// outcome is unknown).
    async fn apply_batch(&self, ops: &[SaveOp]) -> Result<()> {
        self.timed(
            "storing a batch of saves",
            blob_layout::apply_batch(self, ops),
        )
        .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        self.timed("deleting a thread", async {
            let mut conn = self.conn().await?;
            let mut tx = conn
                .start_transaction(TxOpts::default())
                .await
                .map_err(db("starting a delete"))?;
            delete_thread_in(&mut tx, thread_id).await?;
            tx.commit().await.map_err(db("committing a delete"))
        })
        .await
    }

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        self.timed("deleting runs", async {
            if run_ids.is_empty() {
                return Ok(());
            }
            let mut conn = self.conn().await?;
            let mut tx = conn
                .start_transaction(TxOpts::default())
                .await
                .map_err(db("starting a delete"))?;
            let run_of = "JSON_UNQUOTE(JSON_EXTRACT(metadata, '$.run_id'))";
            let ids: Vec<My> = run_ids.iter().map(|r| s(r)).collect();
            let doomed: Vec<MyRow> = tx
                .exec(
                    format!(
                        "SELECT thread_id, checkpoint_ns_hash, checkpoint_id FROM checkpoints \
                         WHERE {run_of} IN ({})",
                        marks(ids.len())
                    ),
                    Params::Positional(ids),
                )
                .await
                .map_err(db("finding runs"))?;
            let mut threads = BTreeSet::new();
            for mut r in doomed {
                let at = Location::default();
                let (thread, hash, id): (String, String, String) = (
                    column(&mut r, 0, &at)?,
                    column(&mut r, 1, &at)?,
                    column(&mut r, 2, &at)?,
                );
                for table in ["checkpoint_writes", "checkpoints"] {
                    tx.exec_drop(
                        format!(
                            "DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns_hash = ? \
                             AND checkpoint_id = ?"
                        ),
                        (&thread, &hash, &id),
                    )
                    .await
                    .map_err(db("deleting runs"))?;
                }
                threads.insert(thread);
            }
            for thread in threads {
                collect_blobs(&mut tx, &thread).await?;
            }
            tx.commit().await.map_err(db("committing a delete"))
        })
        .await
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        self.timed("copying a thread", async {
            let mut conn = self.conn().await?;
            let mut tx = conn
                .start_transaction(TxOpts::default())
                .await
                .map_err(db("starting a copy"))?;
            let probe = "SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1";
            let mut exists = [false; 2];
            for (found, thread) in exists.iter_mut().zip([source, target]) {
                let row: Option<MyRow> = tx
                    .exec_first(probe, (thread,))
                    .await
                    .map_err(db("checking a thread"))?;
                *found = row.is_some();
            }
            backend::copy_preflight(source, target, exists[0], exists[1])?;
            for sql in [
                "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_ns_hash, checkpoint_id, \
                 parent_checkpoint_id, type, checkpoint, metadata) SELECT ?, checkpoint_ns, \
                 checkpoint_ns_hash, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata \
                 FROM checkpoints WHERE thread_id = ?",
                "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns_hash, channel, version, type, \
                 blob_data) SELECT ?, checkpoint_ns_hash, channel, version, type, blob_data \
                 FROM checkpoint_blobs WHERE thread_id = ?",
                "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_ns_hash, \
                 checkpoint_id, task_id, task_path, idx, channel, type, blob_data) SELECT ?, \
                 checkpoint_ns, checkpoint_ns_hash, checkpoint_id, task_id, task_path, idx, channel, \
                 type, blob_data FROM checkpoint_writes WHERE thread_id = ?",
            ] {
                tx.exec_drop(sql, (target, source))
                    .await
                    .map_err(db("copying a thread"))?;
            }
            tx.commit().await.map_err(db("committing a copy"))
        })
        .await
    }

    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        self.timed("pruning", async {
            let mut conn = self.conn().await?;
            let mut tx = conn
                .start_transaction(TxOpts::default())
                .await
                .map_err(db("starting a prune"))?;
            prune::run(&mut Pruning(&mut tx), thread_ids, strategy).await?;
            tx.commit().await.map_err(db("committing a prune"))
        })
        .await
    }
}

impl stategraph_checkpoint::backend::Timed for MySqlSaver {
    const BACKEND: &'static str = BACKEND;

    fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }
}
