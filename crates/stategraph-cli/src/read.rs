//! The read-only views: `threads`, `history`, `state`, `writes`.

use std::sync::Arc;

use serde_json::{Value as Json, json};
use stategraph::graph::inspect::reader_graph;
use stategraph::{
    CheckpointConfig, CheckpointId, CheckpointSaver, CheckpointTuple, HistoryOptions,
    JsonPlusSerializer, ListOptions, RunConfig, StateSnapshot,
};

use crate::{Failure, at, fail, table};

/// One row of `threads`: a thread, its checkpoints, and its newest one.
struct ThreadRow {
    thread: String,
    checkpoints: usize,
    latest: String,
    step: Option<i64>,
    /// The newest checkpoint's time; `None` when it is damaged.
    updated_at: Option<String>,
    /// Why the newest checkpoint does not read, when it does not.
    damaged: Option<String>,
}

/// Every thread with its checkpoint count and newest checkpoint. A thread whose newest
/// checkpoint is damaged is listed, marked damaged with the error, instead of failing the
/// listing (as `history` lists a damaged checkpoint and goes on).
pub(crate) async fn threads(saver: &dyn CheckpointSaver, as_json: bool) -> Result<String, Failure> {
    // Ids, steps and times only: the values are not read.
    let all = listing(saver, ListOptions::all().without_values(), None).await?;
    // Newest first already: the first entry seen of a thread is its latest.
    let mut rows: Vec<ThreadRow> = Vec::new();
    for entry in &all {
        let thread = match entry {
            Entry::Readable(t) => &t.config.thread_id,
            Entry::Damaged { thread, .. } => thread,
        };
        if let Some(r) = rows.iter_mut().find(|r| &r.thread == thread) {
            r.checkpoints += 1;
            continue;
        }
        rows.push(match entry {
            Entry::Readable(t) => ThreadRow {
                thread: thread.clone(),
                checkpoints: 1,
                latest: t.checkpoint.id.to_string(),
                step: t.metadata.step,
                updated_at: Some(t.checkpoint.ts.clone()),
                damaged: None,
            },
            Entry::Damaged { id, error, .. } => ThreadRow {
                thread: thread.clone(),
                checkpoints: 1,
                latest: id.to_string(),
                step: None,
                updated_at: None,
                damaged: Some(error.clone()),
            },
        });
    }
    // Newest first; threads whose newest checkpoint is damaged (no readable time) last.
    rows.sort_by(|a, b| {
        b.updated_at
            .cmp(&a.updated_at)
            .then_with(|| a.thread.cmp(&b.thread))
    });
    if as_json {
        let list: Vec<Json> = rows
            .iter()
            .map(|r| {
                let mut row = serde_json::Map::new();
                row.insert("thread_id".into(), json!(r.thread));
                row.insert("checkpoints".into(), json!(r.checkpoints));
                row.insert("latest_checkpoint_id".into(), json!(r.latest));
                row.insert("step".into(), json!(r.step));
                row.insert("updated_at".into(), json!(r.updated_at));
                if let Some(error) = &r.damaged {
                    row.insert("damaged".into(), json!(error));
                }
                Json::Object(row)
            })
            .collect();
        return Ok(Json::Array(list).to_string());
    }
    Ok(table::render(
        &["THREAD", "CHECKPOINTS", "LATEST", "STEP", "UPDATED"],
        rows.iter()
            .map(|r| {
                vec![
                    r.thread.clone(),
                    r.checkpoints.to_string(),
                    r.latest.clone(),
                    r.step.map_or_else(String::new, |s| s.to_string()),
                    match &r.damaged {
                        Some(error) => format!("DAMAGED: {error}"),
                        None => r.updated_at.clone().unwrap_or_default(),
                    },
                ]
            })
            .collect(),
    ))
}

/// One checkpoint of a listing: readable, or damaged with the typed error reading it gave.
pub(crate) enum Entry {
    /// A checkpoint that reads.
    Readable(Box<CheckpointTuple>),
    /// A checkpoint that does not, and why.
    Damaged {
        /// Its thread.
        thread: String,
        /// Its id.
        id: CheckpointId,
        /// The error reading it, one line.
        error: String,
    },
}

/// The id of the stored checkpoint an error says could not be read, if it says so.
fn damaged_id(e: &stategraph::CheckpointError) -> Option<CheckpointId> {
    damaged_at(e).map(|(_, id)| id)
}

/// The thread and id of the stored checkpoint an error says could not be read.
fn damaged_at(e: &stategraph::CheckpointError) -> Option<(String, CheckpointId)> {
    e.location()
        .and_then(|l| Some((l.thread_id.clone(), l.checkpoint_id.clone()?)))
}

fn no_thread(thread: &str, ns: &str) -> Failure {
    if ns.is_empty() {
        format!("no thread `{thread}` in this database")
    } else {
        format!("thread `{thread}` has no namespace `{ns}`")
    }
}

/// The checkpoints of `thread`/`ns`, newest first (at most `limit`), with their channel
/// values or (`values: false`, for views of ids, steps and parents) without. A damaged
/// checkpoint does not hide the others: it is listed with its error and the listing goes on
/// past it (one checkpoint per query from there, which only damaged threads pay).
pub(crate) async fn entries(
    saver: &dyn CheckpointSaver,
    thread: &str,
    ns: &str,
    limit: Option<usize>,
    values: bool,
) -> Result<Vec<Entry>, Failure> {
    let mut options = ListOptions::thread(thread).ns(ns);
    options.skip_values = !values;
    listing(saver, options, limit).await
}

/// The checkpoints `options` selects, newest first (at most `limit`), damaged ones listed
/// with their errors (see [`entries`]).
async fn listing(
    saver: &dyn CheckpointSaver,
    options: ListOptions,
    limit: Option<usize>,
) -> Result<Vec<Entry>, Failure> {
    let mut all = options.clone();
    all.limit = limit;
    match saver.list(&all).await {
        Ok(tuples) => {
            return Ok(tuples
                .into_iter()
                .map(|t| Entry::Readable(Box::new(t)))
                .collect());
        }
        Err(e) if damaged_id(&e).is_some() => {}
        Err(e) => return Err(fail(e)),
    }
    let mut out = Vec::new();
    let mut before: Option<CheckpointId> = None;
    while limit.is_none_or(|l| out.len() < l) {
        let mut one = options.clone().limit(1);
        one.before.clone_from(&before);
        let next = match saver.list(&one).await {
            Ok(tuples) => match tuples.into_iter().next() {
                Some(t) => {
                    let id = t.checkpoint.id.clone();
                    out.push(Entry::Readable(Box::new(t)));
                    id
                }
                None => break,
            },
            Err(e) => match damaged_at(&e) {
                Some((thread, id)) => {
                    out.push(Entry::Damaged {
                        thread,
                        id: id.clone(),
                        error: fail(e),
                    });
                    id
                }
                None => return Err(fail(e)),
            },
        };
        // Ids only go down; anything else would not end.
        if before.as_ref().is_some_and(|b| next >= *b) {
            return Err(format!("the listing did not move past checkpoint {next}"));
        }
        before = Some(next);
    }
    Ok(out)
}

/// The reader graph for `thread`/`ns`, attached to `saver`, inferred from the newest
/// checkpoint that reads. With `checkpoint`, that checkpoint must exist and read: a missing
/// or damaged one is an error naming it.
pub(crate) async fn reader(
    saver: Arc<dyn CheckpointSaver>,
    thread: &str,
    ns: &str,
    checkpoint: Option<&str>,
) -> Result<stategraph::CompiledGraph<stategraph::DynState>, Failure> {
    let mut at = CheckpointConfig::new(thread);
    at.checkpoint_ns = ns.to_owned();
    if let Some(id) = checkpoint {
        let mut there = at.clone();
        there.checkpoint_id = Some(id.into());
        if saver.get_tuple(&there).await.map_err(fail)?.is_none() {
            return Err(format!("no checkpoint `{id}` in thread `{thread}`"));
        }
    }
    let base = match saver.get_tuple(&at).await {
        Ok(Some(t)) => t,
        Ok(None) => return Err(no_thread(thread, ns)),
        // The newest checkpoint is damaged: infer from the newest that reads.
        Err(e) if damaged_id(&e).is_some() => entries(saver.as_ref(), thread, ns, None, true)
            .await?
            .into_iter()
            .find_map(|e| match e {
                Entry::Readable(t) => Some(*t),
                Entry::Damaged { .. } => None,
            })
            .ok_or_else(|| {
                format!(
                    "no checkpoint of thread `{thread}` can be read: {}",
                    fail(e)
                )
            })?,
        Err(e) => return Err(fail(e)),
    };
    Ok(reader_graph(&base.checkpoint)
        .map_err(fail)?
        .with_checkpointer(saver))
}

pub(crate) fn run_config(thread: &str, ns: &str, checkpoint: Option<CheckpointId>) -> RunConfig {
    let mut config = RunConfig::thread(thread);
    config.checkpoint_ns = ns.to_owned();
    config.checkpoint_id = checkpoint;
    config
}

pub(crate) async fn history(
    saver: Arc<dyn CheckpointSaver>,
    thread: &str,
    ns: &str,
    limit: Option<usize>,
    as_json: bool,
) -> Result<String, Failure> {
    let graph = reader(Arc::clone(&saver), thread, ns, None).await?;
    let options = HistoryOptions {
        limit,
        ..HistoryOptions::default()
    };
    // A snapshot, or a damaged checkpoint's id and error.
    let rows: Vec<Result<StateSnapshot, (CheckpointId, String)>> = match graph
        .get_state_history(&run_config(thread, ns, None), options)
        .await
    {
        Ok(snapshots) => snapshots.into_iter().map(Ok).collect(),
        // Damage somewhere: list around it, each readable checkpoint as its snapshot.
        Err(stategraph::GraphError::Checkpoint(e)) if damaged_id(&e).is_some() => {
            let mut rows = Vec::new();
            // Each readable checkpoint is read again, whole, as its snapshot.
            for entry in entries(saver.as_ref(), thread, ns, limit, false).await? {
                rows.push(match entry {
                    Entry::Readable(t) => {
                        let id = t.checkpoint.id.clone();
                        match graph
                            .get_state(&run_config(thread, ns, Some(id.clone())))
                            .await
                        {
                            Ok(s) => Ok(s),
                            Err(e) => Err((id, fail(e))),
                        }
                    }
                    Entry::Damaged { id, error, .. } => Err((id, error)),
                });
            }
            rows
        }
        Err(e) => return Err(fail(e)),
    };
    if as_json {
        let list: Vec<Json> = rows
            .iter()
            .map(|r| match r {
                Ok(s) => s.to_json(),
                Err((id, error)) => json!({
                    "config": {"configurable": {"thread_id": thread, "checkpoint_ns": ns,
                                                "checkpoint_id": id}},
                    "error": error,
                }),
            })
            .collect();
        return Ok(Json::Array(list).to_string());
    }
    Ok(table::render(
        &["CHECKPOINT", "STEP", "SOURCE", "NEXT", "VALUES"],
        rows.iter()
            .map(|r| match r {
                Ok(s) => {
                    let meta = s.metadata.as_ref();
                    vec![
                        s.config
                            .as_ref()
                            .and_then(|c| c.checkpoint_id.clone())
                            .unwrap_or_default()
                            .into_string(),
                        meta.and_then(|m| m.step)
                            .map_or_else(String::new, |s| s.to_string()),
                        meta.and_then(|m| m.source)
                            .map_or_else(String::new, |s| s.to_string()),
                        s.next.join(","),
                        table::shorten(&at(&s.to_json(), "/values").to_string(), 60),
                    ]
                }
                Err((id, error)) => vec![
                    id.to_string(),
                    String::new(),
                    String::new(),
                    String::new(),
                    format!("DAMAGED: {error}"),
                ],
            })
            .collect(),
    ))
}

pub(crate) async fn state(
    saver: Arc<dyn CheckpointSaver>,
    thread: &str,
    ns: &str,
    checkpoint: Option<String>,
    as_json: bool,
) -> Result<String, Failure> {
    let graph = reader(saver, thread, ns, checkpoint.as_deref()).await?;
    let snapshot = graph
        .get_state(&run_config(thread, ns, checkpoint.map(Into::into)))
        .await
        .map_err(fail)?;
    let j = snapshot.to_json();
    if as_json {
        return Ok(j.to_string());
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    if let Some(values) = at(&j, "/values").as_object() {
        for (k, v) in values {
            rows.push(vec![k.clone(), table::shorten(&v.to_string(), 100)]);
        }
    }
    let header = format!(
        "checkpoint {}  step {}  next [{}]\n",
        at(&j, "/config/configurable/checkpoint_id")
            .as_str()
            .unwrap_or("-"),
        at(&j, "/metadata/step"),
        snapshot.next.join(", ")
    );
    Ok(header + &table::render(&["KEY", "VALUE"], rows))
}

pub(crate) async fn writes(
    saver: &dyn CheckpointSaver,
    thread: &str,
    ns: &str,
    checkpoint: &str,
    as_json: bool,
) -> Result<String, Failure> {
    let mut at = CheckpointConfig::new(thread);
    at.checkpoint_ns = ns.to_owned();
    at.checkpoint_id = Some(checkpoint.into());
    let tuple = saver
        .get_tuple(&at)
        .await
        .map_err(fail)?
        .ok_or_else(|| format!("no checkpoint `{checkpoint}` in thread `{thread}`"))?;
    let serde = JsonPlusSerializer::new();
    let mut rows = Vec::new();
    for w in &tuple.pending_writes {
        rows.push((w, crate::audit::size(&serde, &w.value)?));
    }
    if as_json {
        let list: Vec<Json> = rows
            .iter()
            .map(|(w, bytes)| {
                json!({"task_id": w.task_id, "idx": w.idx, "channel": w.channel,
                       "bytes": bytes, "task_path": w.task_path,
                       "value": w.value.to_json()})
            })
            .collect();
        return Ok(Json::Array(list).to_string());
    }
    Ok(table::render(
        &["TASK", "IDX", "CHANNEL", "BYTES", "TASK_PATH"],
        rows.iter()
            .map(|(w, bytes)| {
                vec![
                    w.task_id.clone(),
                    w.idx.to_string(),
                    w.channel.clone(),
                    bytes.to_string(),
                    w.task_path.clone(),
                ]
            })
            .collect(),
    ))
}
