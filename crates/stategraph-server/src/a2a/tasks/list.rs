//! `tasks/list`: the tasks of a context (or of every context), filtered and paged.

use super::*;

/// An ISO 8601 time as Python's `fromisoformat` reads it (a date, a time without zone as
/// UTC).
pub(super) fn parse_time(text: &str) -> Option<DateTime<FixedOffset>> {
    let text = text.replace('Z', "+00:00");
    DateTime::parse_from_rfc3339(&text)
        .or_else(|_| DateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M:%S%.f%:z"))
        .ok()
        .or_else(|| {
            NaiveDateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M:%S%.f")
                .ok()
                .or_else(|| {
                    NaiveDate::parse_from_str(&text, "%Y-%m-%d")
                        .ok()
                        .and_then(|d| d.and_hms_opt(0, 0, 0))
                })
                .map(|t| t.and_utc().fixed_offset())
        })
}

/// `ListTasks`: the assistant's tasks, newest first, filtered and paged.
pub(crate) async fn list(call: &Call) -> RpcResult {
    let p = &call.params;
    let page_size = match p.get("pageSize") {
        None | Some(Json::Null) => 50,
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=100).contains(n))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| RpcError::params("pageSize must be an integer between 1 and 100."))?,
    };
    let length = history_length(p.get("historyLength"))?;
    let scope = history_scope(p, call)?;
    let wanted_state = match p.get("status") {
        None | Some(Json::Null) => None,
        Some(v) => Some(v.as_str().and_then(v1_state).ok_or_else(|| {
            RpcError::params(format!(
                "Invalid status value: '{}'.",
                v.as_str().unwrap_or(&v.to_string())
            ))
        })?),
    };
    let after = match p.get("statusTimestampAfter") {
        None | Some(Json::Null) => None,
        Some(v) => Some(v.as_str().and_then(parse_time).ok_or_else(|| {
            RpcError::params("statusTimestampAfter must be a valid ISO 8601 timestamp.")
        })?),
    };
    let offset = match p.get("pageToken") {
        None | Some(Json::Null) => 0,
        Some(Json::String(t)) if t.is_empty() => 0,
        Some(Json::String(t)) => t
            .parse::<usize>()
            .map_err(|_| RpcError::params("Invalid pageToken."))?,
        Some(_) => return Err(RpcError::params("pageToken must be a string.")),
    };
    let include_artifacts = p
        .get("includeArtifacts")
        .and_then(Json::as_bool)
        .unwrap_or(false);
    let state = &call.state;
    let internal = |e: crate::error::ApiError| RpcError::internal("listing tasks", &e.detail);
    let threads = match p.get("contextId") {
        None | Some(Json::Null) => {
            let mut all = crate::threads::search_threads(state, Default::default())
                .await
                .map_err(internal)?;
            all.sort_by(|a, b| b.updated_at.cmp(&a.updated_at));
            all.truncate(CONTEXT_SCAN_LIMIT);
            all
        }
        Some(Json::String(c)) => match load(state, c).await {
            Ok(t) => vec![t],
            Err(e) if e.status.is_client_error() => Vec::new(),
            Err(e) => return Err(internal(e)),
        },
        Some(_) => return Err(RpcError::params("contextId must be a string.")),
    };
    let mut found: Vec<(Json, Task)> = Vec::new();
    for thread in &threads {
        let context_id = &thread.thread_id;
        let runs = runs_of(state, context_id).await?;
        let newest = runs.first().map(|r| r.run_id.clone());
        let by_start = ids_by_start(&runs, context_id, &call.assistant_id);
        let mut seen = std::collections::HashSet::new();
        for run in runs.iter().filter(|r| r.assistant_id == call.assistant_id) {
            let id = task_of(context_id, run);
            if !seen.insert(id.clone()) {
                continue;
            }
            let is_newest = newest.as_deref() == Some(run.run_id.as_str());
            let task_state = state_of(run, is_newest.then_some(thread));
            if wanted_state.is_some_and(|w| w != task_state) {
                continue;
            }
            if let Some(after) = after
                && parse_time(&run.updated_at).is_some_and(|t| t < after)
            {
                continue;
            }
            let mut task = json!({
                "kind": "task",
                "id": id,
                "contextId": context_id,
                "status": { "state": task_state, "timestamp": run.updated_at },
            });
            if !include_artifacts {
                set(&mut task, "artifacts", json!([]));
            }
            let found_task = Task {
                task_id: id,
                context_id: context_id.clone(),
                run: run.clone(),
                state: task_state,
                ids_by_start: by_start.clone(),
            };
            found.push((task, found_task));
        }
    }
    found.sort_by(|a, b| {
        let t = |x: &(Json, Task)| x.1.run.updated_at.clone();
        t(b).cmp(&t(a))
    });
    let total = found.len();
    let mut page = Vec::new();
    for (mut task, t) in found.into_iter().skip(offset).take(page_size) {
        if let Some(h) = task_history(state, &t, HistoryOptions { length, scope }).await? {
            set(&mut task, "history", Json::Array(h));
        }
        page.push(task);
    }
    let next = offset + page.len();
    Ok(json!({
        "tasks": page,
        "totalSize": total,
        "pageSize": page.len(),
        "nextPageToken": if next < total { next.to_string() } else { String::new() },
    }))
}
