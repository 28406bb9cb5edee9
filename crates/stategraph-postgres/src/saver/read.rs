//! Reading one checkpoint in one round trip: its row, the blobs of its channel versions and
//! its pending writes come back in a single statement (lateral joins aggregating blobs and
//! writes into arrays next to the row), as Python's saver reads them.

use serde_json::Value as Json;
use stategraph_checkpoint::backend::{self, restore_blob};
use stategraph_checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointTuple, Error, Location, PendingWrite, Result,
    Serializer, StoredWrite, Value,
};
use tokio_postgres::types::Type;

use crate::error::db;

/// The row, then blobs (channel, type, bytes) and writes (task, channel, type, bytes, path,
/// idx) as arrays; `{where}` picks the checkpoint.
const SELECT_ONE: &str = "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, \
    c.parent_checkpoint_id, c.checkpoint, c.metadata, \
    b.channels, b.types, b.data, \
    w.task_ids, w.channels, w.types, w.data, w.paths, w.idxs \
    FROM ({pick}) c \
    LEFT JOIN LATERAL (SELECT array_agg(bl.channel) AS channels, array_agg(bl.type) AS types, \
        array_agg(bl.blob) AS data \
      FROM jsonb_each_text(c.checkpoint -> 'channel_versions') v \
      JOIN checkpoint_blobs bl ON bl.thread_id = c.thread_id \
        AND bl.checkpoint_ns = c.checkpoint_ns AND bl.channel = v.key AND bl.version = v.value \
    ) b ON true \
    LEFT JOIN LATERAL (SELECT array_agg(cw.task_id) AS task_ids, \
        array_agg(cw.channel) AS channels, array_agg(cw.type) AS types, \
        array_agg(cw.blob) AS data, array_agg(cw.task_path) AS paths, array_agg(cw.idx) AS idxs \
      FROM checkpoint_writes cw WHERE cw.thread_id = c.thread_id \
        AND cw.checkpoint_ns = c.checkpoint_ns AND cw.checkpoint_id = c.checkpoint_id \
    ) w ON true";

/// The newest checkpoint of a namespace.
const LATEST: &str = "SELECT * FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 \
    ORDER BY checkpoint_id DESC LIMIT 1";

/// One checkpoint by id.
const BY_ID: &str = "SELECT * FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 \
    AND checkpoint_id = $3";

/// The checkpoint `config` addresses (the latest of its namespace without an id), whole.
pub(crate) async fn get_tuple(
    client: &deadpool_postgres::ClientWrapper,
    cache_statements: bool,
    serde: &dyn Serializer,
    config: &CheckpointConfig,
) -> Result<Option<CheckpointTuple>> {
    type Params<'a> = &'a [&'a (dyn tokio_postgres::types::ToSql + Sync)];
    let (sql, types, params): (String, &[Type], Params<'_>) = match &config.checkpoint_id {
        Some(id) => (
            SELECT_ONE.replace("{pick}", BY_ID),
            &[Type::TEXT, Type::TEXT, Type::TEXT],
            &[&config.thread_id, &config.checkpoint_ns, &id.as_str()],
        ),
        None => (
            SELECT_ONE.replace("{pick}", LATEST),
            &[Type::TEXT, Type::TEXT],
            &[&config.thread_id, &config.checkpoint_ns],
        ),
    };
    let rows = if cache_statements {
        let statement = client
            .prepare_typed_cached(&sql, types)
            .await
            .map_err(db("reading a checkpoint"))?;
        client.query(&statement, params).await
    } else {
        let typed: Vec<_> = params
            .iter()
            .zip(types)
            .map(|(p, t)| (*p, t.clone()))
            .collect();
        client.query_typed(&sql, &typed).await
    }
    .map_err(db("reading a checkpoint"))?;
    rows.first().map(|r| tuple(serde, r)).transpose()
}

/// A column that may be NULL, read as a typed error (never a panic) when its type is off:
/// [`backend::column_error`] naming the column, as every backend reports it.
pub(crate) fn column<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a tokio_postgres::Row,
    idx: usize,
    loc: &Location,
) -> Result<T> {
    row.try_get(idx).map_err(|e| {
        let name = row.columns().get(idx).map_or("?", |c| c.name());
        backend::column_error(loc, name, e)
    })
}

fn tuple(serde: &dyn Serializer, row: &tokio_postgres::Row) -> Result<CheckpointTuple> {
    let unknown = Location::default();
    let thread: String = column(row, 0, &unknown)?;
    let ns: String = column(row, 1, &unknown)?;
    let id: String = column(row, 2, &unknown)?;
    let loc = Location::checkpoint(&thread, &ns, &id);
    let parent: Option<String> = column(row, 3, &loc)?;
    let json: Json = column(row, 4, &loc)?;
    let meta: Json = column(row, 5, &loc)?;
    let mut checkpoint = Checkpoint::from_value(Value::from(json))
        .map_err(|e| Error::serialization(loc.clone(), e))?;
    let metadata = backend::metadata_from_json(meta, &loc)?;
    let channels: Option<Vec<String>> = column(row, 6, &loc)?;
    let types: Option<Vec<String>> = column(row, 7, &loc)?;
    let data: Option<Vec<Option<Vec<u8>>>> = column(row, 8, &loc)?;
    for ((channel, tag), bytes) in channels
        .unwrap_or_default()
        .into_iter()
        .zip(types.unwrap_or_default())
        .zip(data.unwrap_or_default())
    {
        restore_blob(
            serde,
            &loc,
            &mut checkpoint,
            channel,
            &tag,
            bytes.as_deref(),
        )?;
    }
    let task_ids: Option<Vec<String>> = column(row, 9, &loc)?;
    let channels: Option<Vec<String>> = column(row, 10, &loc)?;
    let types: Option<Vec<Option<String>>> = column(row, 11, &loc)?;
    let data: Option<Vec<Option<Vec<u8>>>> = column(row, 12, &loc)?;
    let paths: Option<Vec<String>> = column(row, 13, &loc)?;
    let idxs: Option<Vec<i32>> = column(row, 14, &loc)?;
    let mut pending: Vec<PendingWrite> = Vec::new();
    let task_ids = task_ids.unwrap_or_default();
    let mut channels = channels.unwrap_or_default().into_iter();
    let mut types = types.unwrap_or_default().into_iter();
    let mut data = data.unwrap_or_default().into_iter();
    let mut paths = paths.unwrap_or_default().into_iter();
    let mut idxs = idxs.unwrap_or_default().into_iter();
    for task_id in task_ids {
        let (Some(channel), Some(type_tag), Some(value), Some(task_path), Some(idx)) = (
            channels.next(),
            types.next(),
            data.next(),
            paths.next(),
            idxs.next(),
        ) else {
            break;
        };
        pending.push(
            StoredWrite {
                task_id,
                channel,
                type_tag,
                value: value.ok_or_else(|| {
                    backend::column_error(&loc.clone().part("writes"), "blob", "NULL")
                })?,
                task_path,
                idx: i64::from(idx),
            }
            .decode(serde, &loc)?,
        );
    }
    Ok(CheckpointTuple::from_parts(
        thread,
        ns,
        id,
        parent.map(Into::into),
        checkpoint,
        metadata,
        pending,
    ))
}
