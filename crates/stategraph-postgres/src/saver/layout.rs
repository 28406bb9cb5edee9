//! LangGraph's blob layout read back: checkpoint rows, their blobs and writes (pipelined),
//! and the delta walk.

use super::*;

/// A `checkpoints` row (`SELECT_ROWS` order) of the blob layout, read strictly.
pub(super) fn layout_row(r: &tokio_postgres::Row) -> Result<LayoutRow> {
    let unknown = Location::default();
    let thread_id: String = read::column(r, 0, &unknown)?;
    let checkpoint_ns: String = read::column(r, 1, &unknown)?;
    let checkpoint_id: String = read::column(r, 2, &unknown)?;
    let loc = Location::checkpoint(&thread_id, &checkpoint_ns, &checkpoint_id);
    let parent: Option<String> = read::column(r, 3, &loc)?;
    Ok(LayoutRow {
        parent: parent.map(Into::into),
        checkpoint: read::column(r, 4, &loc)?,
        metadata: read::column(r, 5, &loc)?,
        thread_id,
        checkpoint_ns,
        checkpoint_id: checkpoint_id.into(),
    })
}

pub(super) const SELECT_ROWS: &str = "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, \
     checkpoint, metadata FROM checkpoints";

/// Blobs and writes for [`backend::assemble`]: both queries go out at once, pipelined on the
/// one connection, so reading checkpoints costs one round trip for the rows and one for
/// blobs + writes per (thread, namespace).
pub(super) struct Fetch<'c, C>(pub(super) &'c C);

impl<C: GenericClient + Sync> LayoutFetch for Fetch<'_, C> {
    async fn fetch(
        &mut self,
        thread: &str,
        ns: &str,
        pairs: &[(String, String)],
        ids: &[&str],
    ) -> Result<(Vec<FetchedBlob>, Vec<(CheckpointId, StoredWrite)>)> {
        let client = self.0;
        let channels: Vec<&str> = pairs.iter().map(|(c, _)| c.as_str()).collect();
        let versions: Vec<&str> = pairs.iter().map(|(_, v)| v.as_str()).collect();
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
                        p(&thread, Type::TEXT),
                        p(&ns, Type::TEXT),
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
                        p(&thread, Type::TEXT),
                        p(&ns, Type::TEXT),
                        p(&ids, Type::TEXT_ARRAY),
                    ],
                )
                .await
                .map_err(db("reading writes"))
        };
        let (blob_rows, write_rows) = tokio::try_join!(blob_query, write_query)?;
        let at = Location::checkpoint(thread, ns, "").part("blob");
        let mut blobs = Vec::with_capacity(blob_rows.len());
        for r in &blob_rows {
            blobs.push(FetchedBlob {
                channel: read::column(r, 0, &at)?,
                version: read::column(r, 1, &at)?,
                type_tag: read::column(r, 2, &at)?,
                data: read::column(r, 3, &at)?,
            });
        }
        let mut writes = Vec::with_capacity(write_rows.len());
        for r in &write_rows {
            let checkpoint_id: String = read::column(r, 0, &at)?;
            let loc = Location::checkpoint(thread, ns, &checkpoint_id).part("writes");
            let idx: i32 = read::column(r, 6, &loc)?;
            let write = StoredWrite {
                task_id: read::column(r, 1, &loc)?,
                channel: read::column(r, 2, &loc)?,
                type_tag: read::column(r, 3, &loc)?,
                value: read::column(r, 4, &loc)?,
                task_path: read::column(r, 5, &loc)?,
                idx: i64::from(idx),
            };
            writes.push((checkpoint_id.into(), write));
        }
        Ok((blobs, writes))
    }
}

/// The walk of `get_delta_channel_history` in one statement: the target (`$3`, or the latest of
/// the namespace), then its ancestors nearest first by `parent_checkpoint_id`, each carrying the
/// requested channels (`$4`) still without a stored value; the walk stops after the checkpoint
/// where none is left. A channel is stored at a checkpoint when its JSON has the key (an inline
/// value, or the `true` marker of a snapshot) or a non-empty blob exists for its version.
///
/// A parent chain that loops (an edited row, or an id put again under a later checkpoint)
/// stops inside the query, in bounded memory: ids are time-ordered, so every loop has a hop to
/// a parent whose id is not smaller than its child's. The walk records the children of such
/// hops (`back`, empty on ordinary chains) and stops when it would take one a second time, so
/// it ships at most two turns of the loop (the walk in Rust stops at the first repeated id);
/// it never comes back to the target (`start`).
/// Each step looks its parent up by primary key (`LATERAL`, so a planner without statistics
/// cannot turn it into a scan of the thread).
pub(super) const DELTA_WALK: &str = "WITH RECURSIVE walk(thread_id, checkpoint_ns, checkpoint_id, \
    parent_checkpoint_id, checkpoint, metadata, remaining, depth, back, start) AS ( \
      SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, \
        c.checkpoint, c.metadata, $4::text[], 0, ARRAY[]::text[], c.checkpoint_id \
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
        w.depth + 1, \
        CASE WHEN c.checkpoint_id >= w.checkpoint_id THEN w.back || w.checkpoint_id \
          ELSE w.back END, w.start \
      FROM walk w CROSS JOIN LATERAL (SELECT * FROM checkpoints p WHERE p.thread_id = $1 \
        AND p.checkpoint_ns = $2 AND p.checkpoint_id = w.parent_checkpoint_id LIMIT 1) c \
      WHERE cardinality(w.remaining) > 0 AND c.checkpoint_id <> w.start \
        AND NOT (c.checkpoint_id >= w.checkpoint_id AND w.checkpoint_id = ANY(w.back))) \
    SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata \
    FROM walk WHERE depth > 0 ORDER BY depth";
