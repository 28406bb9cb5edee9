//! `RedisSaver`: checkpoints on plain Redis hashes, sorted sets and sets.

mod pruning;
mod storage;

use stategraph_checkpoint::backend::Timed as _;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use stategraph_checkpoint::backend::{
    self, Expect, PrunePlan, PruneRow, PruneTarget, Timeouts, prune,
};

use crate::config::RedisConfig;
use crate::error::{BACKEND, db};

use pruning::*;
use stategraph_checkpoint::{
    Capabilities, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointTuple, EncodedWrites, Error, ListOptions, Location, PendingWrite,
    PruneStrategy, Result, SerdeError, Serializer, Value, encode_writes, latest_conflict,
    validate_put,
};
use stategraph_value::{decode, encode};

/// A stored field that must be text, read strictly (bytes that are not UTF-8 are an error
/// naming the field and the byte offset, never replaced).
fn utf8(bytes: Vec<u8>, loc: &Location, field: &'static str) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        backend::shape_error(
            loc.clone().part(field),
            "",
            format!("not UTF-8 at byte {}", e.utf8_error().valid_up_to()),
        )
    })
}

/// A hash's fields and values.
type HashFields = Vec<(String, Vec<u8>)>;

/// Stores checkpoints in Redis using only core data structures (any Redis ≥ 6.2 or Valkey;
/// no RediSearch/RedisJSON):
///
/// | key | type | holds |
/// | --- | --- | --- |
/// | `{prefix}:threads` | set | thread ids |
/// | `{prefix}:ns:{thread}` | set | the thread's namespaces |
/// | `{prefix}:idx:{thread}:{ns}` | sorted set (lexicographic) | checkpoint ids |
/// | `{prefix}:cp:{thread}:{ns}:{id}` | hash | `type`, `checkpoint`, `metadata`, `parent` |
/// | `{prefix}:w:{thread}:{ns}:{id}` | hash | `{task_id}\x1f{idx}` → write |
///
/// A checkpoint is written by one Lua script (atomic, and the conditional put checks the
/// latest id inside it). With a thread TTL, every key of the thread expires that long after
/// its last write.
#[derive(Clone)]
pub struct RedisSaver {
    conn: MultiplexedConnection,
    prefix: String,
    ttl: Option<Duration>,
    serializer: Arc<dyn Serializer>,
    timeouts: Timeouts,
}

impl fmt::Debug for RedisSaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSaver")
            .field("prefix", &self.prefix)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

/// Writes a checkpoint hash and indexes it. KEYS: idx, cp, threads, ns-set.
/// ARGV: expected latest (`*` = unconditional, empty = none), id, type, checkpoint, metadata,
/// parent, ns, thread, ttl seconds (0 = none).
const PUT_SCRIPT: &str = r"
if ARGV[1] ~= '*' then
  local latest = redis.call('ZRANGE', KEYS[1], '+', '-', 'BYLEX', 'REV', 'LIMIT', 0, 1)
  local current = latest[1] or ''
  if current ~= ARGV[1] then
    return {'conflict', current}
  end
end
redis.call('HSET', KEYS[2], 'type', ARGV[3], 'checkpoint', ARGV[4], 'metadata', ARGV[5], 'parent', ARGV[6])
redis.call('ZADD', KEYS[1], 0, ARGV[2])
redis.call('SADD', KEYS[3], ARGV[8])
redis.call('SADD', KEYS[4], ARGV[7])
local ttl = tonumber(ARGV[9])
if ttl > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
  redis.call('EXPIRE', KEYS[4], ttl)
end
return {'ok', ARGV[2]}
";

impl RedisSaver {
    /// Connects to the server a `redis://` URL names (keys under the prefix `stategraph`,
    /// unless the URL sets `prefix`): shorthand for
    /// [`RedisConfig::from_url`]`(url)?.`[`connect`](RedisConfig::connect)`()`, which has
    /// every other setting.
    pub async fn connect(url: &str) -> Result<Self> {
        RedisConfig::from_url(url)?.connect().await
    }

    pub(crate) fn new(
        conn: MultiplexedConnection,
        prefix: String,
        ttl: Option<Duration>,
        serializer: Arc<dyn Serializer>,
        timeouts: Timeouts,
    ) -> Self {
        Self {
            conn,
            prefix,
            ttl,
            serializer,
            timeouts,
        }
    }

    pub(super) fn threads_key(&self) -> String {
        format!("{}:threads", self.prefix)
    }
    pub(super) fn ns_key(&self, thread: &str) -> String {
        format!("{}:ns:{thread}", self.prefix)
    }
    pub(super) fn idx_key(&self, thread: &str, ns: &str) -> String {
        format!("{}:idx:{thread}:{ns}", self.prefix)
    }
    pub(super) fn cp_key(&self, thread: &str, ns: &str, id: &str) -> String {
        format!("{}:cp:{thread}:{ns}:{id}", self.prefix)
    }
    pub(super) fn w_key(&self, thread: &str, ns: &str, id: &str) -> String {
        format!("{}:w:{thread}:{ns}:{id}", self.prefix)
    }

    pub(super) fn ttl_secs(&self) -> u64 {
        self.ttl.map_or(0, |t| t.as_secs().max(1))
    }
}

#[async_trait]
impl CheckpointSaver for RedisSaver {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        self.timed("reading a checkpoint", async {
            let (thread, ns) = (config.thread_id.as_str(), config.checkpoint_ns.as_str());
            let id = match &config.checkpoint_id {
                Some(id) => id.to_string(),
                None => match self.latest_id(thread, ns).await? {
                    Some(id) => id,
                    None => return Ok(None),
                },
            };
            self.load(thread, ns, &id).await
        })
        .await
    }

    async fn list(&self, options: &ListOptions) -> Result<Vec<CheckpointTuple>> {
        self.timed("listing checkpoints", async {
            let threads: Vec<String> = match &options.thread_id {
                Some(t) => vec![t.clone()],
                None => {
                    let mut conn = self.conn.clone();
                    conn.smembers(self.threads_key())
                        .await
                        .map_err(db("listing threads"))?
                }
            };
            let mut candidates: Vec<(String, String, String)> = Vec::new();
            for thread in &threads {
                let namespaces = match &options.checkpoint_ns {
                    Some(ns) => vec![ns.clone()],
                    None => self.namespaces(thread).await?,
                };
                for ns in namespaces {
                    for id in self.ids(thread, &ns, options.before.as_deref()).await? {
                        if options.checkpoint_id.as_ref().is_none_or(|c| *c == id) {
                            candidates.push((id, thread.clone(), ns.clone()));
                        }
                    }
                }
            }
            candidates.sort_by(|a, b| b.0.cmp(&a.0));
            let limit = options.limit.unwrap_or(usize::MAX);
            let mut out = Vec::new();
            for (id, thread, ns) in candidates {
                if out.len() >= limit {
                    break;
                }
                if let Some(mut t) = self.load(&thread, &ns, &id).await?
                    && t.metadata.matches(&options.filter)
                {
                    if options.skip_values {
                        std::sync::Arc::make_mut(&mut t.checkpoint)
                            .channel_values
                            .clear();
                    }
                    out.push(t);
                }
            }
            Ok(out)
        })
        .await
    }

    async fn put_checked(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        metadata: &CheckpointMetadata,
        _new_versions: &ChannelVersions,
        expect: Expect<&str>,
    ) -> Result<CheckpointConfig> {
        self.timed("storing a checkpoint", async {
            validate_put(config, checkpoint)?;
            let (thread, ns) = (config.thread_id.as_str(), config.checkpoint_ns.as_str());
            let (tag, bytes) = self
                .serializer
                .dumps_typed(&checkpoint.to_value())
                .map_err(|e| {
                    Error::serialization(Location::checkpoint(thread, ns, &checkpoint.id), e)
                })?;
            // `*`: unconditional; empty: the namespace must have no checkpoint yet.
            let expected = match expect {
                Expect::Any => "*",
                Expect::Latest(None) => "",
                Expect::Latest(Some(id)) => id,
            };
            let mut conn = self.conn.clone();
            let reply: Vec<String> = redis::Script::new(PUT_SCRIPT)
                .key(self.idx_key(thread, ns))
                .key(self.cp_key(thread, ns, &checkpoint.id))
                .key(self.threads_key())
                .key(self.ns_key(thread))
                .arg(expected)
                .arg(checkpoint.id.as_str())
                .arg(tag)
                .arg(bytes)
                .arg(metadata.to_json().to_string())
                .arg(config.checkpoint_id.as_deref().unwrap_or_default())
                .arg(ns)
                .arg(thread)
                .arg(self.ttl_secs())
                .invoke_async(&mut conn)
                .await
                .map_err(db("storing a checkpoint"))?;
            if reply.first().map(String::as_str) == Some("conflict") {
                let found = reply.get(1).filter(|s| !s.is_empty()).map(String::as_str);
                return Err(latest_conflict(config, expect.latest().flatten(), found));
            }
            Ok(config.clone().with_checkpoint_id(checkpoint.id.clone()))
        })
        .await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: &[(String, Value)],
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        self.timed("storing writes", async {
            let EncodedWrites {
                checkpoint_id,
                replace,
                rows,
            } = encode_writes(self.serializer.as_ref(), config, writes, task_id)?;
            let (thread, ns) = (config.thread_id.as_str(), config.checkpoint_ns.as_str());
            let key = self.w_key(thread, ns, checkpoint_id);
            let mut pipe = redis::pipe();
            pipe.atomic();
            for row in rows {
                let field = format!("{task_id}\u{1f}{}", row.idx);
                let raw = encode(&Value::from(vec![
                    Value::from(task_path),
                    Value::from(row.channel),
                    Value::from(row.tag),
                    Value::Bytes(row.bytes),
                ]));
                if replace {
                    pipe.hset(&key, field, raw).ignore();
                } else {
                    pipe.hset_nx(&key, field, raw).ignore();
                }
            }
            if self.ttl_secs() > 0 {
                pipe.expire(&key, i64::try_from(self.ttl_secs()).unwrap_or(i64::MAX))
                    .ignore();
            }
            let mut conn = self.conn.clone();
            pipe.query_async::<()>(&mut conn)
                .await
                .map_err(db("storing writes"))
        })
        .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        self.timed("deleting a thread", async {
            let keys = self.thread_keys(thread_id).await?;
            let mut conn = self.conn.clone();
            redis::pipe()
                .atomic()
                .del(keys)
                .srem(self.threads_key(), thread_id)
                .query_async::<()>(&mut conn)
                .await
                .map_err(db("deleting a thread"))
        })
        .await
    }

    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        self.timed("deleting runs", async {
            if run_ids.is_empty() {
                return Ok(());
            }
            for t in self.list(&ListOptions::all()).await? {
                if t.metadata
                    .run_id()
                    .is_some_and(|r| run_ids.iter().any(|x| x == r))
                {
                    let c = &t.config;
                    let id = c.checkpoint_id.clone().unwrap_or_default();
                    self.remove_checkpoint(&c.thread_id, &c.checkpoint_ns, &id)
                        .await?;
                }
            }
            Ok(())
        })
        .await
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        self.timed("copying a thread", async {
            let mut conn = self.conn.clone();
            let exists: bool = conn
                .sismember(self.threads_key(), target)
                .await
                .map_err(db("checking a thread"))?;
            let tuples = self.list(&ListOptions::thread(source)).await?;
            let taken = exists && !self.list(&ListOptions::thread(target)).await?.is_empty();
            backend::copy_preflight(source, target, !tuples.is_empty(), taken)?;
            // Copy the stored hashes as they are (same ids, same write fields and idx).
            let mut conn = self.conn.clone();
            for ns in self.namespaces(source).await? {
                for id in self.ids(source, &ns, None).await? {
                    let (cp, writes): (HashFields, HashFields) = redis::pipe()
                        .hgetall(self.cp_key(source, &ns, &id))
                        .hgetall(self.w_key(source, &ns, &id))
                        .query_async(&mut conn)
                        .await
                        .map_err(db("reading a thread to copy"))?;
                    let mut pipe = redis::pipe();
                    pipe.atomic();
                    if !cp.is_empty() {
                        pipe.hset_multiple(self.cp_key(target, &ns, &id), &cp)
                            .ignore();
                    }
                    if !writes.is_empty() {
                        pipe.hset_multiple(self.w_key(target, &ns, &id), &writes)
                            .ignore();
                    }
                    pipe.zadd(self.idx_key(target, &ns), &id, 0).ignore();
                    pipe.sadd(self.ns_key(target), &ns).ignore();
                    pipe.sadd(self.threads_key(), target).ignore();
                    pipe.query_async::<()>(&mut conn)
                        .await
                        .map_err(db("copying a thread"))?;
                }
            }
            drop(tuples);
            Ok(())
        })
        .await
    }

    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        self.timed("pruning", async {
            // Redis has no multi-key transaction to plan under: every thread is planned first,
            // so a refused thread leaves all of them untouched, then each plan is applied.
            prune::run(&mut Pruning(self), thread_ids, strategy).await
        })
        .await
    }
}

impl stategraph_checkpoint::backend::Timed for RedisSaver {
    const BACKEND: &'static str = BACKEND;

    fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }
}
