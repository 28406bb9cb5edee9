//! Reading checkpoints: rows, their writes, the delta walk and the `list` query.

use super::*;

/// The columns every checkpoint query selects, in this order.
pub(super) const CHECKPOINT_COLUMNS: &str =
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata";

/// A BLOB column that may also hold TEXT (SQLite does not enforce column types, and other
/// writers, or hand edits, may store text): both are read as bytes.
pub(super) fn bytes_column(r: &rusqlite::Row<'_>, idx: usize) -> rusqlite::Result<Option<Vec<u8>>> {
    Ok(bytes_ref(r, idx)?.map(<[u8]>::to_vec))
}

/// [`bytes_column`] without the copy: the bytes where SQLite holds them, valid until the
/// statement steps on.
pub(super) fn bytes_ref<'a>(
    r: &'a rusqlite::Row<'_>,
    idx: usize,
) -> rusqlite::Result<Option<&'a [u8]>> {
    use rusqlite::types::ValueRef;
    match r.get_ref(idx)? {
        ValueRef::Null => Ok(None),
        ValueRef::Blob(b) | ValueRef::Text(b) => Ok(Some(b)),
        other => Err(rusqlite::Error::InvalidColumnType(
            idx,
            "a blob column".into(),
            other.data_type(),
        )),
    }
}

/// A `checkpoints` row, decoded as it is read: its bytes are decoded where SQLite holds
/// them, not copied out first (a listing of a long thread reads tens of MB).
pub(super) struct Row {
    pub(super) thread_id: String,
    pub(super) checkpoint_ns: String,
    pub(super) checkpoint_id: CheckpointId,
    parent: Option<CheckpointId>,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
}

impl Row {
    /// Reads and decodes a row of [`CHECKPOINT_COLUMNS`] (a driver error names `doing`),
    /// sharing with `cache`, if any, what earlier rows of a listing decoded; without values
    /// if `skip_values`.
    pub(super) fn read(
        r: &rusqlite::Row<'_>,
        doing: &'static str,
        serde: &dyn Serializer,
        cache: Option<&mut DecodeCache>,
        skip_values: bool,
    ) -> Result<Self> {
        let reading = db(doing);
        // Text columns read in place where they are only compared or shared.
        let text = |i: usize| -> Result<Option<&str>> {
            r.get_ref(i)
                .map_err(&reading)?
                .as_str_or_null()
                .map_err(|e| reading(e.into()))
        };
        let (thread_id, checkpoint_ns): (String, String) =
            (r.get(0).map_err(&reading)?, r.get(1).map_err(&reading)?);
        let id: &str = r
            .get_ref(2)
            .map_err(&reading)?
            .as_str()
            .map_err(|e| reading(e.into()))?;
        // Built only for an error.
        let loc = || Location::checkpoint(&thread_id, &checkpoint_ns, id);
        let (checkpoint, metadata) = decode_checkpoint(
            &loc,
            text(4)?,
            bytes_ref(r, 5).map_err(&reading)?.unwrap_or_default(),
            bytes_ref(r, 6).map_err(&reading)?,
            serde,
            cache,
            skip_values,
        )?;
        // The row's id is the checkpoint's own: one shared text for both.
        let checkpoint_id = if checkpoint.id.as_str() == id {
            checkpoint.id.clone()
        } else {
            id.into()
        };
        Ok(Self {
            parent: text(3)?.map(CheckpointId::from),
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            checkpoint,
            metadata,
        })
    }

    /// The tuple, with the checkpoint's writes.
    pub(super) fn into_tuple(self, mut writes: Vec<PendingWrite>) -> CheckpointTuple {
        sort_writes(&mut writes);
        CheckpointTuple::from_parts(
            self.thread_id,
            self.checkpoint_ns,
            self.checkpoint_id,
            self.parent,
            self.checkpoint,
            self.metadata,
            writes,
        )
    }
}

/// A stored checkpoint (type tag and bytes) and its metadata, decoded; without values if
/// `skip_values`; sharing with `cache`, if any, what earlier rows of a read decoded. `loc`
/// locates an error, and is called only for one.
fn decode_checkpoint(
    loc: &dyn Fn() -> Location,
    tag: Option<&str>,
    bytes: &[u8],
    metadata: Option<&[u8]>,
    serde: &dyn Serializer,
    cache: Option<&mut DecodeCache>,
    skip_values: bool,
) -> Result<(Checkpoint, CheckpointMetadata)> {
    let tag =
        tag.ok_or_else(|| Error::serialization(loc(), SerdeError::UnknownType("NULL".into())))?;
    // Without values, a msgpack checkpoint's values are skipped over, not decoded.
    let bare = (skip_values && tag == tags::MSGPACK)
        .then(|| checkpoint_without_values(bytes))
        .flatten();
    let bytes = bare.as_deref().unwrap_or(bytes);
    let mut checkpoint = serde
        .loads_checkpoint(tag, bytes, cache)
        .map_err(|e| located(loc(), e))?;
    if skip_values {
        checkpoint.channel_values.clear();
    }
    let metadata = decode_metadata(metadata, loc)?;
    Ok((checkpoint, metadata))
}

/// Attaches a location to a serializer error, naming the channel when the failure is inside
/// one (`channel_values.<channel>…`).
pub(super) fn located(loc: Location, e: SerdeError) -> Error {
    let channel = e
        .path()
        .and_then(|p| p.strip_prefix("channel_values."))
        .map(|rest| rest.split(['.', '[']).next().unwrap_or(rest).to_owned());
    let loc = match channel {
        Some(ch) => loc.channel(ch),
        None => loc,
    };
    Error::serialization(loc, e)
}

/// Stored metadata (JSON text) decoded; `loc` locates an error, and is called only for one.
pub(super) fn decode_metadata(
    bytes: Option<&[u8]>,
    loc: &dyn Fn() -> Location,
) -> Result<CheckpointMetadata> {
    let Some(bytes) = bytes else {
        return Ok(CheckpointMetadata::default());
    };
    let text = std::str::from_utf8(bytes).map_err(|e| {
        backend::shape_error(
            loc().part("metadata"),
            "",
            format!("not UTF-8 at byte {}", e.valid_up_to()),
        )
    })?;
    match CheckpointMetadata::from_json_text(text) {
        Ok(metadata) => Ok(metadata),
        // Read again the located way, which says what is wrong and where.
        Err(_) => {
            let loc = loc();
            let json = backend::json_from_text(text, loc.clone().part("metadata"))?;
            backend::metadata_from_json(json, &loc)
        }
    }
}

/// A write row's columns from `first` on: task_id, channel, type, value, task_path, idx.
pub(super) fn stored_write(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<StoredWrite> {
    Ok(StoredWrite {
        task_id: r.get(first)?,
        channel: r.get(first + 1)?,
        type_tag: r.get(first + 2)?,
        value: bytes_column(r, first + 3)?.unwrap_or_default(),
        task_path: r.get(first + 4)?,
        idx: r.get(first + 5)?,
    })
}

/// The writes of one checkpoint, in stored order ([`Row::into_tuple`] sorts them).
pub(super) fn load_writes(
    conn: &Connection,
    serde: &dyn Serializer,
    thread_id: &str,
    ns: &str,
    checkpoint_id: &str,
) -> Result<Vec<PendingWrite>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT task_id, channel, type, value, task_path, idx FROM writes \
             WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3",
        )
        .map_err(db("reading writes"))?;
    let rows = stmt
        .query_map(params![thread_id, ns, checkpoint_id], |r| {
            stored_write(r, 0)
        })
        .map_err(db("reading writes"))?;
    let at = Location::checkpoint(thread_id, ns, checkpoint_id);
    let mut writes = Vec::new();
    for row in rows {
        let row = row.map_err(db("reading writes"))?;
        writes.push(row.decode(serde, &at)?);
    }
    Ok(writes)
}

/// How many checkpoint ids one batched writes query names.
const WRITES_BATCH: usize = 500;

/// The writes of many listed checkpoints (`rows`), decoded through the listing's `cache`:
/// the writes of `rows[i]` at index `i`, in stored order ([`Row::into_tuple`] sorts them).
///
/// When the listing holds every checkpoint of a (thread, namespace) between its oldest and
/// newest listed ids (`contiguous`: no metadata filter left any out), one range scan of the
/// primary key reads that group's writes. Otherwise a query names the ids, 500 at a time.
pub(super) fn load_writes_of(
    conn: &Connection,
    serde: &dyn Serializer,
    rows: &[Row],
    cache: &mut DecodeCache,
    contiguous: bool,
) -> Result<Vec<Vec<PendingWrite>>> {
    // (thread, namespace) → (checkpoint id, its row's index), sorted by id: found by binary
    // search (a listing's rows come sorted, newest first, so sorting is one pass).
    let mut groups: BTreeMap<(&str, &str), Vec<(&str, usize)>> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        groups
            .entry((&r.thread_id, &r.checkpoint_ns))
            .or_default()
            .push((&r.checkpoint_id, i));
    }
    let mut out: Vec<Vec<PendingWrite>> =
        std::iter::repeat_with(Vec::new).take(rows.len()).collect();
    let row = |r: &rusqlite::Row<'_>| Ok((r.get::<_, String>(0)?, stored_write(r, 1)?));
    for ((thread, ns), mut ids) in groups {
        ids.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let row_of = |id: &str| {
            ids.binary_search_by(|(k, _)| (*k).cmp(id))
                .ok()
                .and_then(|j| ids.get(j))
                .map(|&(_, i)| i)
        };
        // A row of the group's writes: kept if its checkpoint is listed (in a range scan, a
        // checkpoint stored meanwhile by another connection is not in this read's snapshot;
        // the check keeps the answer exact all the same).
        let mut add = |(id, w): (String, StoredWrite)| -> Result<()> {
            if let Some(writes) = row_of(&id).and_then(|i| out.get_mut(i)) {
                let at = || Location::checkpoint(thread, ns, &id);
                writes.push(w.decode_shared(serde, at, cache)?);
            }
            Ok(())
        };
        if contiguous && ids.len() > 1 {
            let (Some(&(first, _)), Some(&(last, _))) = (ids.first(), ids.last()) else {
                continue;
            };
            let mut stmt = conn
                .prepare_cached(
                    "SELECT checkpoint_id, task_id, channel, type, value, task_path, idx \
                     FROM writes WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
                     AND checkpoint_id >= ?3 AND checkpoint_id <= ?4",
                )
                .map_err(db("reading writes"))?;
            let found = stmt
                .query_map(params![thread, ns, first, last], row)
                .map_err(db("reading writes"))?;
            for r in found {
                add(r.map_err(db("reading writes"))?)?;
            }
            continue;
        }
        let listed: Vec<&str> = ids.iter().map(|&(id, _)| id).collect();
        for chunk in listed.chunks(WRITES_BATCH) {
            let marks = vec!["?"; chunk.len()].join(", ");
            // Not cached: the text changes with the number of ids.
            let mut stmt = conn
                .prepare(&format!(
                    "SELECT checkpoint_id, task_id, channel, type, value, task_path, idx \
                     FROM writes WHERE thread_id = ? AND checkpoint_ns = ? \
                     AND checkpoint_id IN ({marks})"
                ))
                .map_err(db("reading writes"))?;
            let args = [thread, ns].into_iter().chain(chunk.iter().copied());
            let found = stmt
                .query_map(rusqlite::params_from_iter(args), row)
                .map_err(db("reading writes"))?;
            for r in found {
                add(r.map_err(db("reading writes"))?)?;
            }
        }
    }
    Ok(out)
}

/// The target checkpoint's ancestors' ids, nearest first, by following
/// `parent_checkpoint_id` (ids are not ordered across processes, so no range scan), at most
/// `?6` levels up. `CROSS JOIN` keeps `ancestors` the outer loop: one primary-key lookup per
/// level. Only ids travel through the recursion; a query reads the (large) checkpoint column
/// by joining it, for the rows it actually steps through.
pub(super) const ANCESTORS: &str = "WITH RECURSIVE ancestors(checkpoint_id, parent_checkpoint_id, depth) AS ( \
      SELECT checkpoint_id, parent_checkpoint_id, 0 FROM checkpoints \
      WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3 \
      UNION ALL \
      SELECT c.checkpoint_id, c.parent_checkpoint_id, a.depth + 1 \
      FROM ancestors a CROSS JOIN checkpoints c ON c.checkpoint_id = a.parent_checkpoint_id \
      WHERE c.thread_id = ?4 AND c.checkpoint_ns = ?5 AND a.depth < ?6)";

/// The values a stored checkpoint holds for `channels`. A msgpack checkpoint is not decoded:
/// only the requested values are, found by skipping over the rest; anything else (an
/// encrypted checkpoint, bytes laid out otherwise) is decoded in full, which also names what
/// is wrong with it.
pub(super) fn stored_values(
    serde: &dyn Serializer,
    tag: &str,
    bytes: &[u8],
    channels: &std::collections::BTreeSet<&str>,
    loc: &Location,
) -> Result<BTreeMap<String, Value>> {
    let wanted: Vec<&str> = channels.iter().copied().collect();
    if tag == tags::MSGPACK
        && let Some(found) = checkpoint_value_ranges(bytes, &wanted)
    {
        let mut out = BTreeMap::new();
        for (channel, range) in found {
            // The ranges are within `bytes` (where they were found); were one not, its empty
            // slice would fail to decode, located like any corrupt value.
            let value = serde
                .loads_typed(tags::MSGPACK, bytes.get(range).unwrap_or_default())
                .map_err(|e| located(loc.clone().channel(channel.clone()), e))?;
            out.insert(channel, value);
        }
        return Ok(out);
    }
    let mut checkpoint = serde
        .loads_checkpoint(tag, bytes, None)
        .map_err(|e| located(loc.clone(), e))?;
    Ok(wanted
        .iter()
        .filter_map(|ch| Some(((*ch).to_owned(), checkpoint.channel_values.remove(*ch)?)))
        .collect())
}

/// `get_delta_channel_history` in two queries: the walk up the chain (stopping at the last
/// seed), then every requested channel's writes on that stretch of the chain.
pub(super) fn delta_history(
    tx: &Transaction<'_>,
    serde: &dyn Serializer,
    config: &CheckpointConfig,
    channels: &[String],
) -> Result<std::collections::BTreeMap<String, DeltaChannelHistory>> {
    let (thread, ns) = (config.thread_id.as_str(), config.checkpoint_ns.as_str());
    let target: Option<String> = match &config.checkpoint_id {
        Some(id) => Some(id.to_string()),
        None => tx
            .query_row(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?1 \
                 AND checkpoint_ns = ?2 ORDER BY checkpoint_id DESC LIMIT 1",
                params![thread, ns],
                |r| r.get(0),
            )
            .optional()
            .map_err(db("reading a checkpoint"))?,
    };
    let Some(target) = target.filter(|_| !channels.is_empty()) else {
        return Ok(DeltaWalk::new(channels).finish());
    };
    // Stage 1: the ancestors the walk visits, with what each stores.
    let mut chain: Vec<(String, BTreeMap<String, Value>)> = Vec::new();
    {
        let mut active: std::collections::BTreeSet<&str> =
            channels.iter().map(String::as_str).collect();
        // The target counts as seen: a chain looping back to it stops there.
        let mut seen = std::collections::HashSet::from([target.clone()]);
        let mut stmt = tx
            .prepare_cached(&format!(
                "{ANCESTORS} SELECT a.checkpoint_id, c.type, c.checkpoint, a.depth FROM ancestors a \
                 CROSS JOIN checkpoints c ON c.thread_id = ?4 AND c.checkpoint_ns = ?5 \
                 AND c.checkpoint_id = a.checkpoint_id WHERE a.depth > 0"
            ))
            .map_err(db("walking checkpoint ancestors"))?;
        let mut rows = stmt
            .query(params![thread, ns, target, thread, ns, i64::MAX])
            .map_err(db("walking checkpoint ancestors"))?;
        while let Some(r) = rows.next().map_err(db("walking checkpoint ancestors"))? {
            let id: String = r.get(0).map_err(db("walking checkpoint ancestors"))?;
            if !seen.insert(id.clone()) {
                break;
            }
            // The recursion yields nearest first (a FIFO queue, no ORDER BY: sorting would
            // read every ancestor's checkpoint); the walk relies on it.
            let depth: i64 = r.get(3).map_err(db("walking checkpoint ancestors"))?;
            if usize::try_from(depth).ok() != Some(chain.len() + 1) {
                return Err(Error::Backend {
                    backend: "sqlite",
                    message: format!("ancestors of {target} came back out of order"),
                    source: None,
                });
            }
            let loc = Location::checkpoint(thread, ns, &id);
            let tag: Option<String> = r.get(1).map_err(db("walking checkpoint ancestors"))?;
            let tag = tag.ok_or_else(|| {
                Error::serialization(loc.clone(), SerdeError::UnknownType("NULL".into()))
            })?;
            let bytes = bytes_column(r, 2).map_err(db("walking checkpoint ancestors"))?;
            let bytes = bytes.as_deref().unwrap_or_default();
            let stored = stored_values(serde, &tag, bytes, &active, &loc)?;
            active.retain(|ch| !stored.contains_key(*ch));
            chain.push((id, stored));
            if active.is_empty() {
                break;
            }
        }
    }
    // Stage 2: the requested channels' writes on that stretch of the chain.
    let mut writes: std::collections::HashMap<String, Vec<PendingWrite>> =
        std::collections::HashMap::new();
    if !chain.is_empty() {
        let marks = vec!["?"; channels.len()].join(", ");
        let sql = format!(
            "{ANCESTORS} SELECT w.checkpoint_id, w.task_id, w.channel, w.type, w.value, \
             w.task_path, w.idx FROM ancestors a CROSS JOIN writes w \
             ON w.checkpoint_id = a.checkpoint_id \
             WHERE a.depth > 0 AND w.thread_id = ?4 AND w.checkpoint_ns = ?5 \
             AND w.channel IN ({marks})"
        );
        let mut args: Vec<Sql> = vec![
            Sql::Text(thread.to_owned()),
            Sql::Text(ns.to_owned()),
            Sql::Text(target),
            Sql::Text(thread.to_owned()),
            Sql::Text(ns.to_owned()),
            Sql::Integer(i64::try_from(chain.len()).unwrap_or(i64::MAX)),
        ];
        args.extend(channels.iter().map(|c| Sql::Text(c.clone())));
        let mut stmt = tx
            .prepare_cached(&sql)
            .map_err(db("reading delta channel writes"))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args), |r| {
                Ok((r.get::<_, String>(0)?, stored_write(r, 1)?))
            })
            .map_err(db("reading delta channel writes"))?;
        for row in rows {
            let (cid, w) = row.map_err(db("reading delta channel writes"))?;
            let w = w.decode(serde, &Location::checkpoint(thread, ns, &cid))?;
            writes.entry(cid).or_default().push(w);
        }
    }
    let mut walk = DeltaWalk::new(channels);
    for (id, values) in chain {
        let here = writes.remove(&id).unwrap_or_default();
        walk.visit(&id, here, |ch| values.get(ch).cloned());
    }
    Ok(walk.finish())
}

/// Metadata filter keys become a JSON path; LangGraph allows only these characters.
pub(super) fn valid_filter_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Builds the `list` query and its parameters; the metadata filter compares each key's JSON
/// path (as LangGraph's SQLite saver does).
pub(super) fn list_query(options: &ListOptions) -> Result<(String, Vec<Sql>)> {
    let select = format!("SELECT {CHECKPOINT_COLUMNS} FROM checkpoints");
    let (sql, args) = ListSql::build(&select, options, Placeholders::Question, |q, filter| {
        for (key, want) in filter {
            if !valid_filter_key(key) {
                return Err(Error::invalid(
                    "metadata filter key",
                    format!("`{key}` (allowed: letters, digits, `_`, `.`, `-`)"),
                ));
            }
            let path = format!("json_extract(CAST(metadata AS TEXT), '$.{key}')");
            let arg = match want {
                Json::Null => {
                    q.clause(format!("{path} IS NULL"));
                    continue;
                }
                Json::Bool(b) => SqlArg::Int(i64::from(*b)),
                Json::Number(n) => match n.as_i64() {
                    Some(i) => SqlArg::Int(i),
                    None => SqlArg::Real(n.as_f64().unwrap_or(f64::NAN)),
                },
                Json::String(s) => SqlArg::Text(s),
                other => {
                    let at = q.bind(SqlArg::Json(other.clone()));
                    q.clause(format!("{path} = json({at})"));
                    continue;
                }
            };
            let at = q.bind(arg);
            q.clause(format!("{path} = {at}"));
        }
        Ok(())
    })?;
    let args = args
        .into_iter()
        .map(|a| match a {
            SqlArg::Text(t) => Sql::Text(t.to_owned()),
            SqlArg::Int(i) => Sql::Integer(i),
            SqlArg::Real(f) => Sql::Real(f),
            SqlArg::Json(j) => Sql::Text(j.to_string()),
        })
        .collect();
    Ok((sql, args))
}
