//! `MySqlSaver`: checkpoints in MySQL / MariaDB.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Pool, Row as MyRow, TxOpts, Value as My};
use serde_json::Value as Json;
use stategraph_checkpoint::blob_layout::{EncodedSave, restore_blobs};
use stategraph_checkpoint::prune::{PruneRow, plan};
use stategraph_checkpoint::{
    Capabilities, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointTuple, Error, ListOptions, Location, PendingWrite, PruneStrategy,
    Result, SaveOp, SerdeError, Serializer, StoredWrite, Value, sort_writes,
};

use crate::config::MySqlConfig;
use crate::error::db;
use crate::schema;
use crate::write;

/// Stores checkpoints in MySQL or MariaDB: three tables linked by `thread_id` and
/// `checkpoint_ns_hash` (MD5 of the namespace) with `gmt_create`/`gmt_modified`, in
/// LangGraph's value layout (primitives inline in the checkpoint JSON, other values as blobs
/// per channel version written only when the version changed) and serializer.
#[derive(Clone)]
pub struct MySqlSaver {
    pool: Pool,
    serializer: Arc<dyn Serializer>,
}

impl fmt::Debug for MySqlSaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MySqlSaver").finish_non_exhaustive()
    }
}

fn s(v: &str) -> My {
    My::from(v)
}

/// `?, ?, …` for `n` placeholders.
fn marks(n: usize) -> String {
    vec!["?"; n].join(", ")
}

impl MySqlSaver {
    /// Connects to the database a `mysql://` URL names and creates the tables if missing.
    pub async fn connect(url: &str) -> Result<Self> {
        MySqlConfig::from_url(url)?.connect().await
    }

    pub(crate) async fn connect_with(config: MySqlConfig) -> Result<Self> {
        let pool = Pool::new(config.opts.clone());
        let saver = Self {
            pool,
            serializer: config.serializer,
        };
        let mut conn = saver.conn().await?;
        schema::setup(&mut conn).await?;
        Ok(saver)
    }

    async fn conn(&self) -> Result<Conn> {
        self.pool
            .get_conn()
            .await
            .map_err(db("cannot connect to MySQL"))
    }

    async fn put_checked(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        new_versions: &ChannelVersions,
        expected_latest: Option<Option<&str>>,
    ) -> Result<CheckpointConfig> {
        let op = EncodedSave::put(
            self.serializer.as_ref(),
            config,
            checkpoint,
            metadata,
            new_versions,
            expected_latest,
        )?;
        self.store_each(std::slice::from_ref(&op)).await?;
        Ok(CheckpointConfig::new(config.thread_id.clone())
            .with_ns(config.checkpoint_ns.clone())
            .with_checkpoint_id(checkpoint.id.clone()))
    }

    /// Stores `ops` one transaction each, in order, stopping at the first that fails.
    async fn store_each(&self, ops: &[EncodedSave]) -> Result<()> {
        let mut conn = self.conn().await?;
        for op in ops {
            write::store(&mut conn, std::slice::from_ref(op))
                .await
                .map_err(write::Failure::into_error)?;
        }
        Ok(())
    }
}

/// (thread, namespace, channel, version) of a blob row.
type BlobKey = (String, String, String, String);

const SELECT_ROWS: &str = "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, \
     checkpoint, metadata FROM checkpoints";

struct Row {
    thread_id: String,
    checkpoint_ns: String,
    checkpoint_id: String,
    parent: Option<String>,
    checkpoint: String,
    metadata: String,
}

impl Row {
    fn from_my(mut r: MyRow) -> Self {
        Self {
            thread_id: r.take(0).unwrap_or_default(),
            checkpoint_ns: r.take(1).unwrap_or_default(),
            checkpoint_id: r.take(2).unwrap_or_default(),
            parent: r.take::<Option<String>, _>(3).flatten(),
            checkpoint: r.take(4).unwrap_or_default(),
            metadata: r.take(5).unwrap_or_default(),
        }
    }
}

fn shape_error(loc: Location, message: String) -> Error {
    Error::serialization(
        loc,
        SerdeError::Shape {
            path: String::new(),
            message,
        },
    )
}

/// Reassembles rows: two queries per (thread, namespace), whatever the number of rows.
async fn assemble(
    conn: &mut Conn,
    serde: &dyn Serializer,
    rows: Vec<Row>,
) -> Result<Vec<CheckpointTuple>> {
    let mut parsed = Vec::with_capacity(rows.len());
    for row in rows {
        let loc = Location::checkpoint(&row.thread_id, &row.checkpoint_ns, &row.checkpoint_id);
        let json: Json = serde_json::from_str(&row.checkpoint)
            .map_err(|e| shape_error(loc.clone(), format!("invalid JSON: {e}")))?;
        let checkpoint = Checkpoint::from_value(Value::from(json))
            .map_err(|e| Error::serialization(loc.clone(), e))?;
        let meta: Json = serde_json::from_str(&row.metadata)
            .map_err(|e| shape_error(loc.clone().part("metadata"), format!("invalid JSON: {e}")))?;
        let metadata = CheckpointMetadata::from_json(meta)
            .map_err(|e| shape_error(loc.clone().part("metadata"), e.to_string()))?;
        parsed.push((row, checkpoint, metadata, loc));
    }
    let mut groups: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (i, (row, ..)) in parsed.iter().enumerate() {
        groups
            .entry((row.thread_id.clone(), row.checkpoint_ns.clone()))
            .or_default()
            .push(i);
    }
    let mut blobs: HashMap<BlobKey, (String, Option<Vec<u8>>)> = HashMap::new();
    let mut writes: HashMap<(String, String, String), Vec<PendingWrite>> = HashMap::new();
    for ((thread, ns), members) in &groups {
        let pairs: BTreeSet<(String, String)> = members
            .iter()
            .flat_map(|&i| {
                parsed[i]
                    .1
                    .channel_versions
                    .iter()
                    .map(|(c, v)| (c.to_owned(), v.to_string()))
            })
            .collect();
        if !pairs.is_empty() {
            let mut params = vec![s(thread), s(ns)];
            for (c, v) in &pairs {
                params.extend([s(c), s(v)]);
            }
            let sql = format!(
                "SELECT channel, version, type, blob_data FROM checkpoint_blobs \
                 WHERE thread_id = ? AND checkpoint_ns_hash = MD5(?) AND (channel, version) IN ({})",
                vec!["(?, ?)"; pairs.len()].join(", ")
            );
            let rows: Vec<MyRow> = conn
                .exec(sql, Params::Positional(params))
                .await
                .map_err(db("reading blobs"))?;
            for mut r in rows {
                let key = (
                    thread.clone(),
                    ns.clone(),
                    r.take::<String, _>(0).unwrap_or_default(),
                    r.take::<String, _>(1).unwrap_or_default(),
                );
                let tag: String = r.take(2).unwrap_or_default();
                let data: Option<Vec<u8>> = r.take::<Option<Vec<u8>>, _>(3).flatten();
                blobs.insert(key, (tag, data));
            }
        }
        let mut params = vec![s(thread), s(ns)];
        params.extend(members.iter().map(|&i| s(&parsed[i].0.checkpoint_id)));
        let sql = format!(
            "SELECT checkpoint_id, task_id, channel, type, blob_data, task_path, idx \
             FROM checkpoint_writes WHERE thread_id = ? AND checkpoint_ns_hash = MD5(?) \
             AND checkpoint_id IN ({})",
            marks(members.len())
        );
        let rows: Vec<MyRow> = conn
            .exec(sql, Params::Positional(params))
            .await
            .map_err(db("reading writes"))?;
        for mut r in rows {
            let checkpoint_id: String = r.take(0).unwrap_or_default();
            let write = StoredWrite {
                task_id: r.take(1).unwrap_or_default(),
                channel: r.take(2).unwrap_or_default(),
                type_tag: r.take::<Option<String>, _>(3).flatten(),
                value: r.take(4).unwrap_or_default(),
                task_path: r.take(5).unwrap_or_default(),
                idx: r.take(6).unwrap_or_default(),
            }
            .decode(serde, &Location::checkpoint(thread, ns, &checkpoint_id))?;
            writes
                .entry((thread.clone(), ns.clone(), checkpoint_id))
                .or_default()
                .push(write);
        }
    }
    let mut out = Vec::with_capacity(parsed.len());
    for (row, mut checkpoint, metadata, loc) in parsed {
        restore_blobs(serde, &loc, &mut checkpoint, |c, v| {
            blobs
                .get(&(
                    row.thread_id.clone(),
                    row.checkpoint_ns.clone(),
                    c.to_owned(),
                    v.to_owned(),
                ))
                .cloned()
        })?;
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

/// Deletes blobs of `thread` that no remaining checkpoint references (computed here: MariaDB
/// has no `jsonb_each_text`).
async fn collect_blobs<Q: Queryable>(q: &mut Q, thread: &str) -> Result<()> {
    let rows: Vec<(String, String, String)> = q
        .exec(
            "SELECT checkpoint_ns_hash, checkpoint_ns, checkpoint FROM checkpoints WHERE thread_id = ?",
            (thread,),
        )
        .await
        .map_err(db("reading checkpoints"))?;
    let mut referenced: BTreeSet<(String, String, String)> = BTreeSet::new();
    for (hash, _ns, body) in rows {
        if let Ok(Json::Object(o)) = serde_json::from_str::<Json>(&body)
            && let Some(Json::Object(versions)) = o.get("channel_versions")
        {
            for (ch, v) in versions {
                let v = match v {
                    Json::String(s) => s.clone(),
                    other => other.to_string(),
                };
                referenced.insert((hash.clone(), ch.clone(), v));
            }
        }
    }
    let stored: Vec<(String, String, String)> = q
        .exec(
            "SELECT checkpoint_ns_hash, channel, version FROM checkpoint_blobs WHERE thread_id = ?",
            (thread,),
        )
        .await
        .map_err(db("reading blobs"))?;
    for key in stored.into_iter().filter(|k| !referenced.contains(k)) {
        q.exec_drop(
            "DELETE FROM checkpoint_blobs WHERE thread_id = ? AND checkpoint_ns_hash = ? \
             AND channel = ? AND version = ?",
            (thread, key.0, key.1, key.2),
        )
        .await
        .map_err(db("deleting unreferenced blobs"))?;
    }
    Ok(())
}

async fn delete_thread_in<Q: Queryable>(q: &mut Q, thread: &str) -> Result<()> {
    for table in ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] {
        q.exec_drop(
            format!("DELETE FROM {table} WHERE thread_id = ?"),
            (thread,),
        )
        .await
        .map_err(db("deleting a thread"))?;
    }
    Ok(())
}

async fn prune_by_plan<Q: Queryable>(
    q: &mut Q,
    thread: &str,
    strategy: PruneStrategy,
) -> Result<()> {
    let rows: Vec<(String, String, Option<String>, String)> = q
        .exec(
            "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata \
             FROM checkpoints WHERE thread_id = ?",
            (thread,),
        )
        .await
        .map_err(db("reading checkpoints to prune"))?;
    let prune_rows: Vec<PruneRow> = rows
        .iter()
        .map(|(ns, id, parent, meta)| PruneRow {
            checkpoint_ns: ns.clone(),
            checkpoint_id: id.clone(),
            metadata: serde_json::from_str(meta)
                .ok()
                .and_then(|j| CheckpointMetadata::from_json(j).ok())
                .unwrap_or_default(),
            parent: parent.clone(),
        })
        .collect();
    let plan = plan(thread, strategy, &prune_rows)?;
    for (ns, id) in &plan.delete {
        for table in ["checkpoint_writes", "checkpoints"] {
            q.exec_drop(
                format!(
                    "DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns_hash = MD5(?) \
                     AND checkpoint_id = ?"
                ),
                (thread, ns, id),
            )
            .await
            .map_err(db("pruning"))?;
        }
    }
    for (ns, id, parent, _) in &rows {
        if plan.keep.contains(&(ns.clone(), id.clone()))
            && plan.parent_deleted(ns, parent.as_deref())
        {
            q.exec_drop(
                "UPDATE checkpoints SET parent_checkpoint_id = NULL \
                 WHERE thread_id = ? AND checkpoint_ns_hash = MD5(?) AND checkpoint_id = ?",
                (thread, ns, id),
            )
            .await
            .map_err(db("unlinking pruned parents"))?;
        }
    }
    collect_blobs(q, thread).await
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
        let rows = rows.into_iter().map(Row::from_my).collect();
        Ok(assemble(&mut conn, self.serializer.as_ref(), rows)
            .await?
            .into_iter()
            .next())
    }

    async fn list(&self, options: &ListOptions) -> Result<Vec<CheckpointTuple>> {
        let mut clauses = Vec::new();
        let mut params = Vec::new();
        if let Some(t) = &options.thread_id {
            clauses.push("thread_id = ?");
            params.push(s(t));
        }
        if let Some(ns) = &options.checkpoint_ns {
            clauses.push("checkpoint_ns_hash = MD5(?)");
            params.push(s(ns));
        }
        if let Some(id) = &options.checkpoint_id {
            clauses.push("checkpoint_id = ?");
            params.push(s(id));
        }
        if !options.filter.is_empty() {
            clauses.push("JSON_CONTAINS(metadata, ?)");
            params.push(My::from(Json::Object(options.filter.clone()).to_string()));
        }
        if let Some(b) = &options.before {
            clauses.push("checkpoint_id < ?");
            params.push(s(b));
        }
        let mut sql = SELECT_ROWS.to_owned();
        if !clauses.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&clauses.join(" AND "));
        }
        sql.push_str(" ORDER BY checkpoint_id DESC");
        if let Some(l) = options.limit {
            sql.push_str(" LIMIT ?");
            params.push(My::from(u64::try_from(l).unwrap_or(u64::MAX)));
        }
        let mut conn = self.conn().await?;
        let rows: Vec<MyRow> = conn
            .exec(sql, Params::Positional(params))
            .await
            .map_err(db("listing checkpoints"))?;
        let rows = rows.into_iter().map(Row::from_my).collect();
        assemble(&mut conn, self.serializer.as_ref(), rows).await
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
        let op = EncodedSave::writes(self.serializer.as_ref(), config, writes, task_id, task_path)?;
        self.store_each(std::slice::from_ref(&op)).await
    }

    /// Group commit: the whole batch in one transaction of multi-row statements (one lock,
    /// one check, one log flush). If it fails, nothing of it is stored and the ops are
    /// applied one by one, so the ops before the failing one are stored and its error is the
    /// one returned, exactly as without batching (a failed commit is returned as it is: its
    /// outcome is unknown).
    async fn apply_batch(&self, ops: &[SaveOp]) -> Result<()> {
        let (encoded, unencodable) = EncodedSave::batch(self.serializer.as_ref(), ops);
        if encoded.len() > 1 && EncodedSave::combinable(&encoded) {
            let mut conn = self.conn().await?;
            match write::store(&mut conn, &encoded).await {
                Ok(()) => return unencodable.map_or(Ok(()), Err),
                Err(write::Failure::Unknown(e)) => return Err(e),
                Err(write::Failure::RolledBack(_)) => {}
            }
        }
        self.store_each(&encoded).await?;
        unencodable.map_or(Ok(()), Err)
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        let mut conn = self.conn().await?;
        let mut tx = conn
            .start_transaction(TxOpts::default())
            .await
            .map_err(db("starting a delete"))?;
        delete_thread_in(&mut tx, thread_id).await?;
        tx.commit().await.map_err(db("committing a delete"))
    }

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
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
        let doomed: Vec<(String, String, String)> = tx
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
        for (thread, hash, id) in &doomed {
            for table in ["checkpoint_writes", "checkpoints"] {
                tx.exec_drop(
                    format!(
                        "DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns_hash = ? \
                         AND checkpoint_id = ?"
                    ),
                    (thread, hash, id),
                )
                .await
                .map_err(db("deleting runs"))?;
            }
            threads.insert(thread.clone());
        }
        for thread in threads {
            collect_blobs(&mut tx, &thread).await?;
        }
        tx.commit().await.map_err(db("committing a delete"))
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        let mut conn = self.conn().await?;
        let mut tx = conn
            .start_transaction(TxOpts::default())
            .await
            .map_err(db("starting a copy"))?;
        let probe = "SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1";
        let found: Option<i64> = tx
            .exec_first(probe, (source,))
            .await
            .map_err(db("checking a thread"))?;
        if found.is_none() {
            return Err(Error::NotFound {
                what: format!("thread `{source}` to copy"),
            });
        }
        let taken: Option<i64> = tx
            .exec_first(probe, (target,))
            .await
            .map_err(db("checking a thread"))?;
        if taken.is_some() {
            return Err(Error::Conflict {
                message: format!("copy_thread target `{target}` already has checkpoints"),
            });
        }
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
    }

    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        let mut conn = self.conn().await?;
        let mut tx = conn
            .start_transaction(TxOpts::default())
            .await
            .map_err(db("starting a prune"))?;
        for thread in thread_ids {
            match strategy {
                PruneStrategy::Delete => delete_thread_in(&mut tx, thread).await?,
                _ => prune_by_plan(&mut tx, thread, strategy).await?,
            }
        }
        tx.commit().await.map_err(db("committing a prune"))
    }
}
