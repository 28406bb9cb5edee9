//! `diff`: what changed between two checkpoints of a thread.

use std::sync::Arc;

use serde_json::{Map, Value as Json, json};
use stategraph::CheckpointSaver;

use crate::read::{reader, run_config};
use crate::{Failure, at, fail, table};

/// How one state key differs.
#[derive(Debug, PartialEq)]
pub(crate) enum Change {
    Added(Json),
    Removed(Json),
    /// A list that kept its items and gained these at the end.
    Appended(Vec<Json>),
    /// A map: keys added or changed (new values), keys removed.
    Merged {
        set: Map<String, Json>,
        removed: Vec<String>,
    },
    Replaced(Json, Json),
}

/// The changes from `a` to `b`, two snapshots' `values` objects, by key.
pub(crate) fn changes(a: &Map<String, Json>, b: &Map<String, Json>) -> Vec<(String, Change)> {
    let mut out = Vec::new();
    for (k, old) in a {
        match b.get(k) {
            None => out.push((k.clone(), Change::Removed(old.clone()))),
            Some(new) if new == old => {}
            Some(new) => out.push((k.clone(), change(old, new))),
        }
    }
    for (k, new) in b {
        if !a.contains_key(k) {
            out.push((k.clone(), Change::Added(new.clone())));
        }
    }
    out.sort_by(|x, y| x.0.cmp(&y.0));
    out
}

fn change(old: &Json, new: &Json) -> Change {
    if let (Json::Array(o), Json::Array(n)) = (old, new)
        && let Some(added) = n.strip_prefix(o.as_slice())
        && !added.is_empty()
    {
        return Change::Appended(added.to_vec());
    }
    match (old, new) {
        (Json::Object(o), Json::Object(n)) => Change::Merged {
            set: n
                .iter()
                .filter(|(k, v)| o.get(*k) != Some(*v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            removed: o.keys().filter(|k| !n.contains_key(*k)).cloned().collect(),
        },
        _ => Change::Replaced(old.clone(), new.clone()),
    }
}

fn to_json(c: &Change) -> Json {
    match c {
        Change::Added(v) => json!({"change": "added", "value": v}),
        Change::Removed(v) => json!({"change": "removed", "value": v}),
        Change::Appended(items) => json!({"change": "appended", "items": items}),
        Change::Merged { set, removed } => {
            json!({"change": "merged", "set": set, "removed": removed})
        }
        Change::Replaced(a, b) => json!({"change": "replaced", "from": a, "to": b}),
    }
}

fn describe(c: &Change) -> (&'static str, String) {
    let short = |j: &Json| table::shorten(&j.to_string(), 70);
    match c {
        Change::Added(v) => ("added", short(v)),
        Change::Removed(v) => ("removed", short(v)),
        Change::Appended(items) => (
            "appended",
            format!("+{}", short(&Json::from(items.clone()))),
        ),
        Change::Merged { set, removed } => {
            let mut s = format!("set {}", short(&Json::Object(set.clone())));
            if !removed.is_empty() {
                s.push_str(&format!(", removed {}", removed.join(", ")));
            }
            ("merged", s)
        }
        Change::Replaced(a, b) => (
            "changed",
            format!(
                "{} → {}",
                table::shorten(&a.to_string(), 34),
                table::shorten(&b.to_string(), 34)
            ),
        ),
    }
}

/// The state values of checkpoint `id` and its step.
async fn values_at(
    graph: &stategraph::CompiledGraph<stategraph::DynState>,
    thread: &str,
    ns: &str,
    id: &str,
) -> Result<(Map<String, Json>, Json), Failure> {
    let snapshot = graph
        .get_state(&run_config(thread, ns, Some(id.into())))
        .await
        .map_err(fail)?;
    if snapshot.config.is_none() {
        return Err(format!("no checkpoint `{id}` in thread `{thread}`"));
    }
    let j = snapshot.to_json();
    Ok((
        at(&j, "/values").as_object().cloned().unwrap_or_default(),
        at(&j, "/metadata/step").clone(),
    ))
}

/// The `diff` command.
pub(crate) async fn run(
    saver: Arc<dyn CheckpointSaver>,
    thread: &str,
    ns: &str,
    from: &str,
    to: &str,
    as_json: bool,
) -> Result<String, Failure> {
    let graph = reader(saver, thread, ns, Some(to)).await?;
    let (from_values, from_step) = values_at(&graph, thread, ns, from).await?;
    let (to_values, to_step) = values_at(&graph, thread, ns, to).await?;
    let found = changes(&from_values, &to_values);
    if as_json {
        let changed: Map<String, Json> =
            found.iter().map(|(k, c)| (k.clone(), to_json(c))).collect();
        return Ok(json!({"from": from, "to": to, "from_step": from_step,
                         "to_step": to_step, "changes": changed})
        .to_string());
    }
    let header = format!(
        "{from} (step {from_step}) → {to} (step {to_step}): {} key(s) changed\n",
        found.len()
    );
    Ok(header
        + &table::render(
            &["KEY", "CHANGE", "DETAIL"],
            found
                .iter()
                .map(|(k, c)| {
                    let (kind, detail) = describe(c);
                    vec![k.clone(), kind.to_owned(), detail]
                })
                .collect(),
        ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn classifies_changes() {
        let a = json!({"foo": "a", "bar": ["a"], "m": {"x": 1, "y": 2}, "gone": 1});
        let b = json!({"foo": "b", "bar": ["a", "b"], "m": {"x": 1, "y": 3, "z": 4}, "new": true});
        let found = changes(a.as_object().unwrap(), b.as_object().unwrap());
        let keys: Vec<&str> = found.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["bar", "foo", "gone", "m", "new"]);
        assert_eq!(found[0].1, Change::Appended(vec![json!("b")]));
        assert_eq!(found[1].1, Change::Replaced(json!("a"), json!("b")));
        assert_eq!(found[2].1, Change::Removed(json!(1)));
        assert_eq!(
            found[3].1,
            Change::Merged {
                set: json!({"y": 3, "z": 4}).as_object().unwrap().clone(),
                removed: vec![]
            }
        );
        assert_eq!(found[4].1, Change::Added(json!(true)));
        // A list that lost items is a replacement, not an append.
        let shrunk = changes(
            json!({"l": [1, 2]}).as_object().unwrap(),
            json!({"l": [1]}).as_object().unwrap(),
        );
        assert_eq!(shrunk[0].1, Change::Replaced(json!([1, 2]), json!([1])));
    }
}
