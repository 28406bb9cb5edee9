//! Writing checkpoints and writes in one round trip.
//!
//! A save is a transaction: the conflict check of a conditional put, the blob rows, the
//! checkpoint row, the pending writes, the commit. Sent one statement at a time that is one
//! network round trip per statement; here every statement of a transaction (and of a whole
//! batch of saves) is sent at once — tokio-postgres pipelines requests issued together on one
//! connection — so a save costs one round trip plus the server's commit.
//!
//! A conflict must abort the transaction inside the server, since the commit is already on
//! its way when the check runs: the check statement fails on a mismatch (a text that is not a
//! boolean, naming the checkpoint found), which aborts the transaction, and the pipelined
//! `COMMIT` then ends it as a rollback. The error is recognised by its marker and reported as
//! [`Error::Conflict`].

use serde_json::Value as Json;
use stategraph_checkpoint::blob_layout::EncodedSave;
use stategraph_checkpoint::{Error, latest_conflict};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};

use crate::error::BACKEND;

/// What the check statement's failure says before the id it found.
const CONFLICT_MARKER: &str = "stategraph-conflict:";

pub(crate) use stategraph_checkpoint::backend::WriteFailure as Failure;

/// What the fence check's failure says before the run's id.
const LEASE_LOST_MARKER: &str = "stategraph-lease-lost:";

/// A run's lease as a condition on a saver's writes: a statement, first in each write's
/// transaction, that locks the run's row `FOR SHARE` while the worker holds it (running, its
/// worker, its lease not run out) and otherwise fails (a text that is not a boolean), which
/// aborts the transaction: the pipelined `COMMIT` rolls the write back.
#[derive(Debug)]
pub(crate) struct Fence {
    sql: String,
    run_id: String,
    worker: String,
}

impl Fence {
    pub(crate) fn new(fence: &stategraph_runs::RunFence) -> Self {
        Self {
            sql: format!(
                // The failing cast depends on the count, so the planner cannot fold it into
                // a constant (and fail) before the row is read.
                "SELECT CASE WHEN count(*) = 1 THEN true \
                   ELSE ('{LEASE_LOST_MARKER}' || $1 || ' ' || count(*))::boolean END \
                 FROM (SELECT 1 FROM {} WHERE run_id = $1 AND worker = $2 \
                   AND status = 'running' AND lease_until > now() FOR SHARE) AS held",
                fence.relation
            ),
            run_id: fence.run_id.clone(),
            worker: fence.worker.clone(),
        }
    }

    /// The error of a refused write.
    fn lost(&self) -> Error {
        Error::LeaseLost {
            run_id: self.run_id.clone(),
            worker: self.worker.clone(),
        }
    }

    /// Whether `e` is this fence's refusal.
    fn refused(e: &tokio_postgres::Error) -> bool {
        e.as_db_error().is_some_and(|db| {
            *db.code() == SqlState::INVALID_TEXT_REPRESENTATION
                && db.message().contains(LEASE_LOST_MARKER)
        })
    }
}

/// Takes the thread's lock for a conditional put: held until the transaction ends, so the
/// check in the statement after it sees every put that committed before.
const LOCK: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1 || chr(31) || $2, 7))";

/// Everything a batch stores, in one statement: the conflict check (`guard`: when `$3`, the
/// namespace's newest checkpoint must be `$4`; a mismatch casts a text that is not a boolean,
/// which fails the statement, naming what it found), the blobs, the checkpoint rows and the
/// writes (kept: first write wins; replaced: last wins). The sub-statements all read the
/// snapshot from before the statement, so the guard sees only what committed earlier.
const STORE: &str = "WITH guard AS (\
      SELECT CASE WHEN NOT $3::boolean OR max(checkpoint_id) IS NOT DISTINCT FROM $4 THEN true \
        ELSE ('stategraph-conflict:' || coalesce(max(checkpoint_id), ''))::boolean END AS ok \
      FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2), \
    blobs AS (INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) \
      SELECT $1, $2, * FROM unnest($5::text[], $6::text[], $7::text[], $8::bytea[]) \
      ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING), \
    rows AS (INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, \
        parent_checkpoint_id, checkpoint, metadata) \
      SELECT $1, $2, * FROM unnest($9::text[], $10::text[], $11::jsonb[], $12::jsonb[]) \
      ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) \
      DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata), \
    kept AS (INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, \
        task_path, idx, channel, type, blob) \
      SELECT $1, $2, * FROM unnest($13::text[], $14::text[], $15::text[], $16::int4[], \
        $17::text[], $18::text[], $19::bytea[]) \
      ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING), \
    replaced AS (INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, \
        task_id, task_path, idx, channel, type, blob) \
      SELECT $1, $2, * FROM unnest($20::text[], $21::text[], $22::text[], $23::int4[], \
        $24::text[], $25::text[], $26::bytea[]) \
      ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) \
      DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob) \
    SELECT ok FROM guard";

/// The parameter types of a `put_writes` half of [`STORE`].
const WRITE_TYPES: [Type; 7] = [
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::INT4_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::BYTEA_ARRAY,
];

/// The parameter types of [`STORE`].
fn store_types() -> Vec<Type> {
    let mut types = vec![
        Type::TEXT,
        Type::TEXT,
        Type::BOOL,
        Type::TEXT,
        Type::TEXT_ARRAY,
        Type::TEXT_ARRAY,
        Type::TEXT_ARRAY,
        Type::BYTEA_ARRAY,
        Type::TEXT_ARRAY,
        Type::TEXT_ARRAY,
        Type::JSONB_ARRAY,
        Type::JSONB_ARRAY,
    ];
    types.extend(WRITE_TYPES);
    types.extend(WRITE_TYPES);
    types
}

/// The parameters of [`STORE`] for `ops` (which must be [`EncodedSave::combinable`]).
struct StoreParams<'a> {
    thread: &'a str,
    ns: &'a str,
    /// The put whose expectation is checked (the first conditional one).
    checked: Option<usize>,
    checked_flag: bool,
    expected: Option<&'a str>,
    blob_channels: Vec<&'a str>,
    blob_versions: Vec<&'a str>,
    blob_types: Vec<&'a str>,
    blob_data: Vec<&'a [u8]>,
    ids: Vec<&'a str>,
    parents: Vec<Option<&'a str>>,
    checkpoints: Vec<&'a Json>,
    metadata: Vec<&'a Json>,
    /// Kept (first wins) and replaced (last wins) writes.
    writes: [WriteColumns<'a>; 2],
}

#[derive(Default)]
struct WriteColumns<'a> {
    checkpoint_ids: Vec<&'a str>,
    task_ids: Vec<&'a str>,
    paths: Vec<&'a str>,
    idxs: Vec<i32>,
    channels: Vec<&'a str>,
    types: Vec<&'a str>,
    data: Vec<&'a [u8]>,
}

impl<'a> StoreParams<'a> {
    fn new(ops: &'a [EncodedSave]) -> Option<Self> {
        let (thread, ns) = ops.first()?.thread_ns();
        let mut out = StoreParams {
            thread,
            ns,
            checked: None,
            checked_flag: false,
            expected: None,
            blob_channels: Vec::new(),
            blob_versions: Vec::new(),
            blob_types: Vec::new(),
            blob_data: Vec::new(),
            ids: Vec::new(),
            parents: Vec::new(),
            checkpoints: Vec::new(),
            metadata: Vec::new(),
            writes: Default::default(),
        };
        for (i, op) in ops.iter().enumerate() {
            match op {
                EncodedSave::Put(p) => {
                    if let (None, Some(expected)) = (out.checked, p.expect.latest()) {
                        out.checked = Some(i);
                        out.checked_flag = true;
                        out.expected = expected;
                    }
                    for b in &p.blobs {
                        out.blob_channels.push(&b.channel);
                        out.blob_versions.push(&b.version);
                        out.blob_types.push(&b.type_tag);
                        out.blob_data.push(&b.data);
                    }
                    // One row per checkpoint id: a later put of an id replaces an earlier
                    // one, as when they are stored one by one.
                    if let Some(j) = out.ids.iter().position(|id| *id == p.id) {
                        // The four columns grow together, so row `j` is in each.
                        if let (Some(parent), Some(checkpoint), Some(metadata)) = (
                            out.parents.get_mut(j),
                            out.checkpoints.get_mut(j),
                            out.metadata.get_mut(j),
                        ) {
                            *parent = p.parent.as_deref();
                            *checkpoint = &p.checkpoint;
                            *metadata = &p.metadata;
                        }
                    } else {
                        out.ids.push(&p.id);
                        out.parents.push(p.parent.as_deref());
                        out.checkpoints.push(&p.checkpoint);
                        out.metadata.push(&p.metadata);
                    }
                }
                EncodedSave::Writes(w) => {
                    let [kept, replaced] = &mut out.writes;
                    let cols = if w.replace { replaced } else { kept };
                    for r in &w.rows {
                        cols.checkpoint_ids.push(&w.checkpoint_id);
                        cols.task_ids.push(&w.task_id);
                        cols.paths.push(&w.task_path);
                        cols.idxs.push(i32::try_from(r.idx).unwrap_or(i32::MAX));
                        cols.channels.push(&r.channel);
                        cols.types.push(&r.tag);
                        cols.data.push(&r.bytes);
                    }
                }
            }
        }
        Some(out)
    }

    fn as_params(&self) -> Vec<&(dyn ToSql + Sync)> {
        let mut out: Vec<&(dyn ToSql + Sync)> = vec![
            &self.thread,
            &self.ns,
            &self.checked_flag,
            &self.expected,
            &self.blob_channels,
            &self.blob_versions,
            &self.blob_types,
            &self.blob_data,
            &self.ids,
            &self.parents,
            &self.checkpoints,
            &self.metadata,
        ];
        for w in &self.writes {
            out.extend([
                &w.checkpoint_ids as &(dyn ToSql + Sync),
                &w.task_ids,
                &w.paths,
                &w.idxs,
                &w.channels,
                &w.types,
                &w.data,
            ]);
        }
        out
    }
}

/// Prepares `sql` (cached per connection) when the saver uses prepared statements.
async fn prepare(
    client: &deadpool_postgres::ClientWrapper,
    cache: bool,
    sql: &str,
    types: &[Type],
) -> std::result::Result<Option<tokio_postgres::Statement>, tokio_postgres::Error> {
    if cache {
        client.prepare_typed_cached(sql, types).await.map(Some)
    } else {
        Ok(None)
    }
}

/// Runs `sql` with `params`, prepared (`statement`) or not.
async fn run(
    client: &tokio_postgres::Client,
    statement: Option<&tokio_postgres::Statement>,
    sql: &str,
    types: &[Type],
    params: &[&(dyn ToSql + Sync)],
) -> std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    match statement {
        Some(s) => client.query(s, params).await,
        None => {
            let typed: Vec<(&(dyn ToSql + Sync), Type)> = params
                .iter()
                .zip(types)
                .map(|(p, t)| (*p, t.clone()))
                .collect();
            client.query_typed(sql, &typed).await
        }
    }
}

/// A write's driver error: [`Error::ConnectionLost`] when the connection was gone (the
/// server ended it, the network dropped it), else a backend error.
fn written(operation: &str, e: tokio_postgres::Error) -> Error {
    if connection_lost(&e) {
        Error::ConnectionLost {
            backend: BACKEND,
            operation: operation.to_owned(),
            source: Some(Box::new(e)),
        }
    } else {
        Error::backend(BACKEND, operation.to_owned(), e)
    }
}

pub(crate) use crate::error::connection_lost;

/// Stores `ops` (which must be [`EncodedSave::combinable`]) in one transaction, sent in one
/// round trip:
/// `BEGIN`, the fence check (for a fenced saver), the lock (for a conditional put),
/// [`STORE`], `COMMIT`.
pub(crate) async fn commit(
    client: &deadpool_postgres::ClientWrapper,
    cache_statements: bool,
    fence: Option<&Fence>,
    ops: &[EncodedSave],
) -> std::result::Result<(), Failure> {
    let Some(params) = StoreParams::new(ops) else {
        return Ok(());
    };
    let not_sent = |e: tokio_postgres::Error| {
        if connection_lost(&e) {
            Failure::NotSent(Error::backend(BACKEND, "preparing a checkpoint write", e))
        } else {
            Failure::RolledBack(Error::backend(BACKEND, "preparing a checkpoint write", e))
        }
    };
    // Statements are prepared (once per connection) before anything is sent, so that the
    // transaction then goes out in order, at once.
    let text = [Type::TEXT, Type::TEXT];
    let lock = prepare(client, cache_statements, LOCK, &text)
        .await
        .map_err(not_sent)?;
    let store_types = store_types();
    let store = prepare(client, cache_statements, STORE, &store_types)
        .await
        .map_err(not_sent)?;
    let fence_statement = match fence {
        Some(f) => prepare(client, cache_statements, &f.sql, &text)
            .await
            .map_err(not_sent)?,
        None => None,
    };
    let lock_params: [&(dyn ToSql + Sync); 2] = [&params.thread, &params.ns];
    let store_params = params.as_params();
    let locked = params.checked.is_some();
    let (begin, fence_result, lock_result, store_result, end) = tokio::join!(
        client.query_typed("BEGIN", &[]),
        async {
            match fence {
                Some(f) => {
                    let fence_params: [&(dyn ToSql + Sync); 2] = [&f.run_id, &f.worker];
                    run(
                        client,
                        fence_statement.as_ref(),
                        &f.sql,
                        &text,
                        &fence_params,
                    )
                    .await
                    .map(Some)
                }
                None => Ok(None),
            }
        },
        async {
            if locked {
                run(client, lock.as_ref(), LOCK, &text, &lock_params)
                    .await
                    .map(Some)
            } else {
                Ok(None)
            }
        },
        run(client, store.as_ref(), STORE, &store_types, &store_params),
        client.query_typed("COMMIT", &[]),
    );
    if let Err(e) = begin {
        return Err(if connection_lost(&e) {
            Failure::NotSent(Error::backend(BACKEND, "starting a checkpoint write", e))
        } else {
            Failure::RolledBack(Error::backend(BACKEND, "starting a checkpoint write", e))
        });
    }
    // A statement that failed aborted the transaction: the commit rolled it back.
    let failed = match (fence_result, lock_result, store_result) {
        (Err(e), _, _) if Fence::refused(&e) => fence.map(Fence::lost),
        (Err(e), _, _) => Some(written("checking the run's lease", e)),
        (_, Err(e), _) => Some(written("locking the thread", e)),
        (_, _, Err(e)) if connection_lost(&e) => Some(written("storing a checkpoint", e)),
        (_, _, Err(e)) => Some(store_error(ops, &params, e)),
        _ => None,
    };
    match (failed, end) {
        (Some(e), _) => Err(Failure::RolledBack(e)),
        (None, Err(e)) => Err(Failure::Unknown(written("committing a checkpoint", e))),
        (None, Ok(_)) => Ok(()),
    }
}

/// The error a failed [`STORE`] stands for: a conflict when the guard failed, else a
/// database error.
fn store_error(ops: &[EncodedSave], params: &StoreParams<'_>, e: tokio_postgres::Error) -> Error {
    if let Some(db) = e.as_db_error()
        && *db.code() == SqlState::INVALID_TEXT_REPRESENTATION
        && let Some((_, found)) = db.message().split_once(CONFLICT_MARKER)
        && let Some(EncodedSave::Put(p)) = params.checked.and_then(|i| ops.get(i))
    {
        let found = found.trim_end_matches('"').to_owned();
        let found = (!found.is_empty()).then_some(found);
        return latest_conflict(&p.config, params.expected, found.as_deref());
    }
    Error::backend(BACKEND, "storing a checkpoint", e)
}
