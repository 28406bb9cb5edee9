//! LangGraph's blob layout read back: checkpoint rows (their JSON text parsed strictly),
//! their blobs and writes.

use super::*;

pub(super) const SELECT_ROWS: &str = "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, \
     checkpoint, metadata FROM checkpoints";

/// Column `idx` of a stored row as `T`: a missing column, a NULL where a value belongs or a
/// value of another type is an [`Error::Serialization`] at `loc` naming the column, never a
/// panic or a default.
pub(super) fn column<T: FromValue>(r: &mut MyRow, idx: usize, loc: &Location) -> Result<T> {
    let name = r
        .columns_ref()
        .get(idx)
        .map_or_else(|| format!("#{idx}"), |c| c.name_str().into_owned());
    match r.take_opt::<T, _>(idx) {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(backend::column_error(loc, &name, e)),
        None => Err(backend::column_error(loc, &name, "missing")),
    }
}

/// A `checkpoints` row (`SELECT_ROWS` order) of the blob layout, its JSON text parsed.
pub(super) fn layout_row(mut r: MyRow) -> Result<LayoutRow> {
    let unknown = Location::default();
    let thread_id: String = column(&mut r, 0, &unknown)?;
    let checkpoint_ns: String = column(&mut r, 1, &unknown)?;
    let checkpoint_id: String = column(&mut r, 2, &unknown)?;
    let loc = Location::checkpoint(&thread_id, &checkpoint_ns, &checkpoint_id);
    let parent: Option<String> = column(&mut r, 3, &loc)?;
    let checkpoint: String = column(&mut r, 4, &loc)?;
    let metadata: String = column(&mut r, 5, &loc)?;
    Ok(LayoutRow {
        parent: parent.map(Into::into),
        checkpoint: backend::json_from_text(&checkpoint, loc.clone())?,
        metadata: backend::json_from_text(&metadata, loc.part("metadata"))?,
        thread_id,
        checkpoint_ns,
        checkpoint_id: checkpoint_id.into(),
    })
}

/// Blobs and writes for [`backend::assemble`], two statements per (thread, namespace).
pub(super) struct Fetch<'c, Q>(pub(super) &'c mut Q);

impl<Q: Queryable> LayoutFetch for Fetch<'_, Q> {
    async fn fetch(
        &mut self,
        thread: &str,
        ns: &str,
        pairs: &[(String, String)],
        ids: &[&str],
    ) -> Result<(Vec<FetchedBlob>, Vec<(CheckpointId, StoredWrite)>)> {
        let mut blobs = Vec::new();
        let at = Location::checkpoint(thread, ns, "").part("blob");
        if !pairs.is_empty() {
            let mut params = vec![s(thread), s(ns)];
            for (c, v) in pairs {
                params.extend([s(c), s(v)]);
            }
            let sql = format!(
                "SELECT channel, version, type, blob_data FROM checkpoint_blobs \
                 WHERE thread_id = ? AND checkpoint_ns_hash = MD5(?) AND (channel, version) IN ({})",
                vec!["(?, ?)"; pairs.len()].join(", ")
            );
            let rows: Vec<MyRow> = self
                .0
                .exec(sql, Params::Positional(params))
                .await
                .map_err(db("reading blobs"))?;
            for mut r in rows {
                blobs.push(FetchedBlob {
                    channel: column(&mut r, 0, &at)?,
                    version: column(&mut r, 1, &at)?,
                    type_tag: column(&mut r, 2, &at)?,
                    data: column(&mut r, 3, &at)?,
                });
            }
        }
        let mut params = vec![s(thread), s(ns)];
        params.extend(ids.iter().map(|id| s(id)));
        let sql = format!(
            "SELECT checkpoint_id, task_id, channel, type, blob_data, task_path, idx \
             FROM checkpoint_writes WHERE thread_id = ? AND checkpoint_ns_hash = MD5(?) \
             AND checkpoint_id IN ({})",
            marks(ids.len())
        );
        let rows: Vec<MyRow> = self
            .0
            .exec(sql, Params::Positional(params))
            .await
            .map_err(db("reading writes"))?;
        let mut writes = Vec::with_capacity(rows.len());
        for mut r in rows {
            let checkpoint_id: String = column(&mut r, 0, &at)?;
            let loc = Location::checkpoint(thread, ns, &checkpoint_id).part("writes");
            let write = StoredWrite {
                task_id: column(&mut r, 1, &loc)?,
                channel: column(&mut r, 2, &loc)?,
                type_tag: column(&mut r, 3, &loc)?,
                value: column(&mut r, 4, &loc)?,
                task_path: column(&mut r, 5, &loc)?,
                idx: column(&mut r, 6, &loc)?,
            };
            writes.push((checkpoint_id.into(), write));
        }
        Ok((blobs, writes))
    }
}
