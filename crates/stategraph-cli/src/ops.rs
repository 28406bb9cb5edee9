//! The commands that change a database: `prune` and `repair` (both show a plan unless
//! `--apply`).

use std::sync::Arc;

use serde_json::{Value as Json, json};
use stategraph::backend::prune::{PruneRow, plan_lenient};
use stategraph::{ChannelRepair, CheckpointSaver, ListOptions, PruneStrategy};

use crate::read::{reader, run_config};
use crate::table::{self, Progress};
use crate::{Failure, fail};

/// `90s`, `30m`, `12h`, `7d` as a duration.
pub(crate) fn parse_age(text: &str) -> Result<std::time::Duration, String> {
    let (number, unit) = text.split_at(text.trim_end_matches(char::is_alphabetic).len());
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}`: expected a number and a unit (s, m, h, d), e.g. 7d"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        other => return Err(format!("`{other}` is not a unit: use s, m, h or d")),
    };
    Ok(std::time::Duration::from_secs(n.saturating_mul(seconds)))
}

/// The `prune` command.
pub(crate) async fn prune(
    saver: Arc<dyn CheckpointSaver>,
    mut threads: Vec<String>,
    all: bool,
    strategy: PruneStrategy,
    apply: bool,
    as_json: bool,
) -> Result<String, Failure> {
    if all {
        let mut ids: Vec<String> = saver
            .list(&ListOptions::all())
            .await
            .map_err(fail)?
            .into_iter()
            .map(|t| t.config.thread_id)
            .collect();
        ids.sort();
        ids.dedup();
        threads = ids;
    }
    let mut rows = Vec::new();
    let mut progress = Progress::new(if apply { "prune" } else { "plan" }, threads.len());
    for thread in &threads {
        progress.tick();
        let stored: Vec<PruneRow> = saver
            .list(&ListOptions::thread(thread.clone()))
            .await
            .map_err(fail)?
            .iter()
            .map(PruneRow::from_tuple)
            .collect();
        if stored.is_empty() {
            return Err(format!("no thread `{thread}` in this database"));
        }
        let plan = plan_lenient(strategy, &stored);
        // Delta keys the kept checkpoint rebuilds from the history about to go are first
        // written into it as snapshots (the default merge: lists concatenate).
        let note = if plan.needs_history.is_empty() {
            String::new()
        } else {
            "re-snapshots delta keys first".to_owned()
        };
        if apply && !plan.delete.is_empty() {
            if plan.needs_history.is_empty() {
                saver
                    .prune(std::slice::from_ref(thread), strategy)
                    .await
                    .map_err(fail)?;
            } else {
                reader(Arc::clone(&saver), thread, "", None)
                    .await?
                    .prune(thread, strategy)
                    .await
                    .map_err(fail)?;
            }
        }
        let (kept, deleted) = (plan.keep.len(), plan.delete.len());
        rows.push((thread.clone(), kept, deleted, note));
    }
    drop(progress);
    let deleted: usize = rows.iter().map(|r| r.2).sum();
    if as_json {
        let list: Vec<Json> = rows
            .iter()
            .map(|(t, k, d, note)| {
                json!({"thread_id": t, "kept": k, "deleted": d,
                       "note": (!note.is_empty()).then_some(note)})
            })
            .collect();
        return Ok(json!({"applied": apply, "deleted": deleted, "threads": list}).to_string());
    }
    let verb = if apply { "deleted" } else { "would delete" };
    Ok(format!(
        "{}\n\n{verb} {deleted} checkpoint(s){}",
        table::render(
            &["THREAD", "KEPT", "DELETED", "NOTE"],
            rows.iter()
                .map(|(t, k, d, n)| vec![t.clone(), k.to_string(), d.to_string(), n.clone()])
                .collect(),
        ),
        if apply { "" } else { " (run with --apply)" }
    ))
}

/// The `repair` command: rebuild missing values of a checkpoint with the default merge rules
/// (lists concatenate, maps merge, anything else takes the last write).
pub(crate) async fn repair(
    saver: Arc<dyn CheckpointSaver>,
    thread: &str,
    ns: &str,
    checkpoint: Option<String>,
    apply: bool,
    as_json: bool,
) -> Result<String, Failure> {
    let graph = reader(saver, thread, ns, checkpoint.as_deref()).await?;
    let plan = graph
        .plan_repair(&run_config(thread, ns, checkpoint.map(Into::into)))
        .await
        .map_err(fail)?;
    if apply {
        graph.apply_repair(&plan).await.map_err(fail)?;
    }
    let id = plan.target.checkpoint.id.clone();
    let rows: Vec<(String, &'static str, Json, Option<Json>)> = plan
        .channels
        .iter()
        .filter(|(k, _)| !k.starts_with("branch:") && !k.starts_with("__"))
        .map(|(k, c)| match c {
            ChannelRepair::Restore(v) => (k.clone(), "restore", v.to_json(), None),
            ChannelRepair::Intact => (k.clone(), "intact", Json::Null, None),
            ChannelRepair::Differs { stored, rebuilt } => (
                k.clone(),
                "differs (kept)",
                rebuilt.to_json(),
                Some(stored.to_json()),
            ),
        })
        .collect();
    let restored = plan.restored().count();
    if as_json {
        let channels: serde_json::Map<String, Json> = rows
            .iter()
            .map(|(k, status, v, stored)| {
                let mut o = serde_json::Map::new();
                o.insert("status".to_owned(), json!(status.split(' ').next()));
                if !v.is_null() {
                    o.insert("value".to_owned(), v.clone());
                }
                if let Some(s) = stored {
                    o.insert("stored".to_owned(), s.clone());
                }
                (k.clone(), Json::Object(o))
            })
            .collect();
        return Ok(
            json!({"checkpoint_id": id, "applied": apply, "restored": restored,
                         "channels": channels})
            .to_string(),
        );
    }
    let verb = match (restored, apply) {
        (0, _) => "nothing to restore".to_owned(),
        (n, true) => format!("restored {n} channel(s)"),
        (n, false) => format!("would restore {n} channel(s) (run with --apply)"),
    };
    Ok(format!(
        "checkpoint {id}: {verb}\n{}",
        table::render(
            &["CHANNEL", "STATUS", "REBUILT VALUE"],
            rows.iter()
                .map(|(k, s, v, _)| {
                    let shown = if v.is_null() {
                        String::new()
                    } else {
                        table::shorten(&v.to_string(), 80)
                    };
                    vec![k.clone(), (*s).to_owned(), shown]
                })
                .collect(),
        )
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages() {
        assert_eq!(parse_age("90s"), Ok(std::time::Duration::from_secs(90)));
        assert_eq!(
            parse_age("7d"),
            Ok(std::time::Duration::from_secs(7 * 86_400))
        );
        assert!(parse_age("7w").is_err());
        assert!(parse_age("d").is_err());
        assert!(parse_age("").is_err());
        assert!(parse_age("7é").is_err());
        assert!(parse_age("é7d").is_err());
        assert_eq!(
            parse_age("99999999999999999999d").ok(),
            None,
            "a number too large for u64 is not an age"
        );
        assert_eq!(
            parse_age(&format!("{}d", u64::MAX)),
            Ok(std::time::Duration::from_secs(u64::MAX))
        );
    }

    proptest::proptest! {
        #[test]
        fn ages_never_panic(text in proptest::arbitrary::any::<String>()) {
            let _ = parse_age(&text);
        }

        #[test]
        fn ages_near_the_format_never_panic(text in "[0-9]{0,22}[smhdwé\\p{L}]{0,3}") {
            let _ = parse_age(&text);
        }

        #[test]
        fn ages_read_number_and_unit(n in 0u64..1_000_000, unit in "[smhd]") {
            let seconds = match unit.as_str() {
                "s" => 1,
                "m" => 60,
                "h" => 3600,
                _ => 86_400,
            };
            proptest::prop_assert_eq!(
                parse_age(&format!("{n}{unit}")),
                Ok(std::time::Duration::from_secs(n * seconds))
            );
        }
    }
}
