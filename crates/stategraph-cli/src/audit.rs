//! The audit views: `stats` (rows and bytes per table and per thread, writes
//! versus values) and `analyze` (writes and bytes per node and channel across threads).
//!
//! Sizes are the serialized sizes of the stored values with LangGraph's serializer, each
//! channel version counted once (as the blob tables of Postgres and MySQL store them), so the
//! figures mean the same on every backend.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value as Json, json};
use stategraph::{CheckpointSaver, CheckpointTuple, JsonPlusSerializer, ListOptions, Serializer};

use crate::table::{self, Progress};
use crate::{Failure, fail};

/// Rows and bytes of one thread, or of the whole database.
#[derive(Default, Clone, Copy)]
struct Volume {
    checkpoints: u64,
    writes: u64,
    write_bytes: u64,
    values: u64,
    value_bytes: u64,
}

impl Volume {
    fn add(&mut self, o: &Volume) {
        self.checkpoints += o.checkpoints;
        self.writes += o.writes;
        self.write_bytes += o.write_bytes;
        self.values += o.values;
        self.value_bytes += o.value_bytes;
    }
}

/// The serialized size of a stored value, with LangGraph's serializer.
pub(crate) fn size(serde: &JsonPlusSerializer, v: &stategraph::Value) -> Result<u64, Failure> {
    let (_, bytes) = serde.dumps_typed(v).map_err(fail)?;
    Ok(bytes.len() as u64)
}

/// The `stats` command.
pub(crate) async fn stats(
    saver: &dyn CheckpointSaver,
    thread: Option<String>,
    as_json: bool,
) -> Result<String, Failure> {
    let options = match &thread {
        Some(t) => ListOptions::thread(t.clone()),
        None => ListOptions::all(),
    };
    let tuples = saver.list(&options).await.map_err(fail)?;
    if let (Some(t), true) = (&thread, tuples.is_empty()) {
        return Err(format!("no thread `{t}` in this database"));
    }
    let serde = JsonPlusSerializer::new();
    let mut per_thread: BTreeMap<String, Volume> = BTreeMap::new();
    let mut seen: BTreeSet<(String, String, String, String)> = BTreeSet::new();
    let mut progress = Progress::new("stats", tuples.len());
    for t in &tuples {
        progress.tick();
        let v = per_thread.entry(t.config.thread_id.clone()).or_default();
        v.checkpoints += 1;
        for w in &t.pending_writes {
            v.writes += 1;
            v.write_bytes += size(&serde, &w.value)?;
        }
        for (channel, value) in &t.checkpoint.channel_values {
            let version = t
                .checkpoint
                .channel_versions
                .get(channel)
                .map(ToString::to_string)
                .unwrap_or_default();
            let key = (
                t.config.thread_id.clone(),
                t.config.checkpoint_ns.clone(),
                channel.clone(),
                version,
            );
            if seen.insert(key) {
                v.values += 1;
                v.value_bytes += size(&serde, value)?;
            }
        }
    }
    drop(progress);
    let mut total = Volume::default();
    for v in per_thread.values() {
        total.add(v);
    }
    #[allow(clippy::cast_precision_loss)]
    let ratio = if total.value_bytes == 0 {
        None
    } else {
        Some(total.write_bytes as f64 / total.value_bytes as f64)
    };
    if as_json {
        let threads: Vec<Json> = per_thread
            .iter()
            .map(|(id, v)| {
                json!({"thread_id": id, "checkpoints": v.checkpoints, "writes": v.writes,
                       "write_bytes": v.write_bytes, "values": v.values,
                       "value_bytes": v.value_bytes})
            })
            .collect();
        return Ok(json!({
            "tables": {
                "checkpoints": {"rows": total.checkpoints},
                "writes": {"rows": total.writes, "bytes": total.write_bytes},
                "values": {"rows": total.values, "bytes": total.value_bytes},
            },
            "threads": threads,
            "writes_to_values": ratio,
        })
        .to_string());
    }
    let tables = table::render(
        &["TABLE", "ROWS", "BYTES"],
        vec![
            vec![
                "checkpoints".into(),
                total.checkpoints.to_string(),
                String::new(),
            ],
            vec![
                "writes".into(),
                total.writes.to_string(),
                table::bytes(total.write_bytes),
            ],
            vec![
                "values (blobs)".into(),
                total.values.to_string(),
                table::bytes(total.value_bytes),
            ],
        ],
    );
    let threads = table::render(
        &[
            "THREAD",
            "CHECKPOINTS",
            "WRITES",
            "WRITE BYTES",
            "VALUES",
            "VALUE BYTES",
        ],
        per_thread
            .iter()
            .map(|(id, v)| {
                vec![
                    id.clone(),
                    v.checkpoints.to_string(),
                    v.writes.to_string(),
                    table::bytes(v.write_bytes),
                    v.values.to_string(),
                    table::bytes(v.value_bytes),
                ]
            })
            .collect(),
    );
    let ratio_line = match ratio {
        Some(r) if r > 1.0 => format!(
            "writes / values = {r:.2}: several tasks wrote the same channels, merged into fewer stored values"
        ),
        Some(r) => format!(
            "writes / values = {r:.2}: stored values repeat what earlier steps wrote (full values per version)"
        ),
        None => "no stored values".to_owned(),
    };
    Ok(format!("{tables}\n\n{threads}\n\n{ratio_line}"))
}

/// Which checkpoints `analyze` looks at.
pub(crate) struct Range {
    pub(crate) thread_prefix: Option<String>,
    pub(crate) since: Option<String>,
    pub(crate) until: Option<String>,
}

impl Range {
    fn contains(&self, t: &CheckpointTuple) -> bool {
        let ts = t.checkpoint.ts.as_str();
        self.thread_prefix
            .as_deref()
            .is_none_or(|p| t.config.thread_id.starts_with(p))
            && self.since.as_deref().is_none_or(|s| ts >= s)
            && self.until.as_deref().is_none_or(|u| ts < u)
    }
}

/// The node a stored write came from, by its task path.
fn task_name(task_path: &str) -> String {
    let parts: Vec<&str> = task_path.trim_start_matches('~').split(", ").collect();
    match parts.as_slice() {
        [""] => "(input)".to_owned(),
        ["__pregel_pull", node, ..] => (*node).to_owned(),
        ["__interrupt__", ..] => "(update_state)".to_owned(),
        _ => task_path.to_owned(),
    }
}

#[derive(Default)]
struct Tally {
    writes: u64,
    bytes: u64,
}

fn tally_rows(map: &BTreeMap<String, Tally>) -> Vec<(&String, &Tally)> {
    let mut rows: Vec<(&String, &Tally)> = map.iter().collect();
    rows.sort_by(|a, b| b.1.writes.cmp(&a.1.writes).then_with(|| a.0.cmp(b.0)));
    rows
}

/// The `analyze` command.
pub(crate) async fn analyze(
    saver: &dyn CheckpointSaver,
    range: &Range,
    as_json: bool,
) -> Result<String, Failure> {
    let tuples = saver.list(&ListOptions::all()).await.map_err(fail)?;
    let serde = JsonPlusSerializer::new();
    let mut by_node: BTreeMap<String, Tally> = BTreeMap::new();
    let mut by_channel: BTreeMap<String, Tally> = BTreeMap::new();
    let mut threads = BTreeSet::new();
    let mut checkpoints = 0u64;
    for t in tuples.iter().filter(|t| range.contains(t)) {
        checkpoints += 1;
        threads.insert(t.config.thread_id.clone());
        for w in &t.pending_writes {
            let bytes = size(&serde, &w.value)?;
            for (map, key) in [
                (&mut by_node, task_name(&w.task_path)),
                (&mut by_channel, w.channel.clone()),
            ] {
                let e = map.entry(key).or_default();
                e.writes += 1;
                e.bytes += bytes;
            }
        }
    }
    if as_json {
        let list = |map: &BTreeMap<String, Tally>, name: &str| -> Vec<Json> {
            tally_rows(map)
                .into_iter()
                .map(|(k, t)| {
                    json!({name: k, "writes": t.writes, "bytes": t.bytes,
                                     "avg_bytes": t.bytes / t.writes.max(1)})
                })
                .collect()
        };
        return Ok(json!({"threads": threads.len(), "checkpoints": checkpoints,
                         "by_node": list(&by_node, "node"),
                         "by_channel": list(&by_channel, "channel")})
        .to_string());
    }
    let render = |map: &BTreeMap<String, Tally>, head: &str| {
        table::render(
            &[head, "WRITES", "BYTES", "AVG BYTES"],
            tally_rows(map)
                .into_iter()
                .map(|(k, t)| {
                    vec![
                        k.clone(),
                        t.writes.to_string(),
                        table::bytes(t.bytes),
                        (t.bytes / t.writes.max(1)).to_string(),
                    ]
                })
                .collect(),
        )
    };
    Ok(format!(
        "{} thread(s), {checkpoints} checkpoint(s)\n\n{}\n\n{}",
        threads.len(),
        render(&by_node, "NODE"),
        render(&by_channel, "CHANNEL")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_tasks_by_path() {
        assert_eq!(task_name("~__pregel_pull, node_a"), "node_a");
        assert_eq!(task_name("~__interrupt__, 0000000000"), "(update_state)");
        assert_eq!(task_name(""), "(input)");
        assert_eq!(task_name("~__pregel_push, 0"), "~__pregel_push, 0");
    }
}
