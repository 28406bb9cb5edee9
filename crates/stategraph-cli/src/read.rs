//! The read-only views: `threads`, `history`, `state`, `writes`.

use std::sync::Arc;

use serde_json::{Value as Json, json};
use stategraph::graph::inspect::reader_graph;
use stategraph::{
    CheckpointConfig, CheckpointSaver, JsonPlusSerializer, ListOptions, RunConfig, StateSnapshot,
};

use crate::{Failure, fail, table};

pub(crate) async fn threads(saver: &dyn CheckpointSaver, as_json: bool) -> Result<String, Failure> {
    let all = saver.list(&ListOptions::all()).await.map_err(fail)?;
    // Newest first already: the first tuple seen of a thread is its latest.
    let mut rows: Vec<(String, usize, String, Option<i64>, String)> = Vec::new();
    for t in &all {
        match rows.iter_mut().find(|r| r.0 == t.config.thread_id) {
            Some(r) => r.1 += 1,
            None => rows.push((
                t.config.thread_id.clone(),
                1,
                t.checkpoint.id.clone(),
                t.metadata.step,
                t.checkpoint.ts.clone(),
            )),
        }
    }
    rows.sort_by(|a, b| b.4.cmp(&a.4).then_with(|| a.0.cmp(&b.0)));
    if as_json {
        let list: Vec<Json> = rows
            .iter()
            .map(|(thread, n, id, step, ts)| {
                json!({"thread_id": thread, "checkpoints": n, "latest_checkpoint_id": id,
                       "step": step, "updated_at": ts})
            })
            .collect();
        return Ok(Json::Array(list).to_string());
    }
    Ok(table::render(
        &["THREAD", "CHECKPOINTS", "LATEST", "STEP", "UPDATED"],
        rows.iter()
            .map(|(thread, n, id, step, ts)| {
                vec![
                    thread.clone(),
                    n.to_string(),
                    id.clone(),
                    step.map_or_else(String::new, |s| s.to_string()),
                    ts.clone(),
                ]
            })
            .collect(),
    ))
}

/// The reader graph for `thread`/`ns`, attached to `saver`; `None` when the thread is empty.
pub(crate) async fn reader(
    saver: Arc<dyn CheckpointSaver>,
    thread: &str,
    ns: &str,
) -> Result<stategraph::CompiledGraph<stategraph::DynState>, Failure> {
    let mut at = CheckpointConfig::new(thread);
    at.checkpoint_ns = ns.to_owned();
    let latest = saver.get_tuple(&at).await.map_err(fail)?.ok_or_else(|| {
        if ns.is_empty() {
            format!("no thread `{thread}` in this database")
        } else {
            format!("thread `{thread}` has no namespace `{ns}`")
        }
    })?;
    Ok(reader_graph(&latest.checkpoint)
        .map_err(fail)?
        .with_checkpointer(saver))
}

pub(crate) fn run_config(thread: &str, ns: &str, checkpoint: Option<String>) -> RunConfig {
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
    let graph = reader(saver, thread, ns).await?;
    let options = ListOptions {
        limit,
        ..ListOptions::default()
    };
    let snapshots = graph
        .get_state_history(&run_config(thread, ns, None), options)
        .await
        .map_err(fail)?;
    if as_json {
        let list: Vec<Json> = snapshots.iter().map(StateSnapshot::to_json).collect();
        return Ok(Json::Array(list).to_string());
    }
    Ok(table::render(
        &["CHECKPOINT", "STEP", "SOURCE", "NEXT", "VALUES"],
        snapshots
            .iter()
            .map(|s| {
                let meta = s.metadata.as_ref();
                vec![
                    s.config
                        .as_ref()
                        .and_then(|c| c.checkpoint_id.clone())
                        .unwrap_or_default(),
                    meta.and_then(|m| m.step)
                        .map_or_else(String::new, |s| s.to_string()),
                    meta.and_then(|m| m.source)
                        .map_or_else(String::new, |s| s.to_string()),
                    s.next.join(","),
                    table::shorten(&s.to_json()["values"].to_string(), 60),
                ]
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
    let graph = reader(saver, thread, ns).await?;
    let snapshot = graph
        .get_state(&run_config(thread, ns, checkpoint))
        .await
        .map_err(fail)?;
    let j = snapshot.to_json();
    if as_json {
        return Ok(j.to_string());
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    if let Some(values) = j["values"].as_object() {
        for (k, v) in values {
            rows.push(vec![k.clone(), table::shorten(&v.to_string(), 100)]);
        }
    }
    let header = format!(
        "checkpoint {}  step {}  next [{}]\n",
        j["config"]["configurable"]["checkpoint_id"]
            .as_str()
            .unwrap_or("-"),
        j["metadata"]["step"],
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
    at.checkpoint_id = Some(checkpoint.to_owned());
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
