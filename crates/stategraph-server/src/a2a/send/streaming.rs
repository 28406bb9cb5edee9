//! `message/stream`: a task's progress as server-sent events, one JSON-RPC answer each.

use super::*;

/// One JSON-RPC answer of a stream, as its SSE event (`message`). U+0085, U+2028 and U+2029
/// are escaped: some clients split lines on them.
pub(super) fn sse(answer: &Json) -> Event {
    let data = answer
        .to_string()
        .replace('\u{85}', "\\u0085")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029");
    Event::default().event("message").data(data)
}

/// `SendStreamingMessage`: the task as server-sent events, each a JSON-RPC answer — the
/// task submitted, `working` with each message the run streams, the answer (or the
/// interrupts) as an artifact, and the final status.
pub(crate) async fn stream(call: Call, id: Json) -> Response {
    let (tx, rx) = mpsc::channel::<Json>(32);
    let keep_alive = call.state.keep_alive;
    tokio::spawn(produce(call, id, tx));
    let events = stream::unfold(rx, |mut rx| async move {
        let answer = rx.recv().await?;
        Some((Ok::<_, Infallible>(sse(&answer)), rx))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keep_alive).text("heartbeat"))
        .into_response()
}

/// Sends a stream's answers to `tx` (stopping when the client has gone; the run goes on).
pub(super) async fn produce(call: Call, id: Json, tx: mpsc::Sender<Json>) {
    let dialect = call.dialect;
    let result =
        |event: Json| json!({ "jsonrpc": "2.0", "id": id, "result": dialect.streamed(event) });
    let error = |e: RpcError| json!({ "jsonrpc": "2.0", "id": id, "error": e.to_json() });
    match follow(&call, &tx, &result).await {
        Ok(()) => {}
        Err(e) => {
            let _ = tx.send(error(e)).await;
        }
    }
}

/// The stream's body; an error ends it with a JSON-RPC error.
pub(super) async fn follow(
    call: &Call,
    tx: &mpsc::Sender<Json>,
    result: &impl Fn(Json) -> Json,
) -> Result<(), RpcError> {
    let gone = || RpcError::new(code::INTERNAL_ERROR, "the client has gone");
    let send = |event: Json| async move { tx.send(result(event)).await.map_err(|_| gone()) };
    let mut p = prepare(call).await?;
    p.body.stream_mode = Some(json!(["messages", "values"]));
    let (started, task_id) = start(call, &mut p, Follow::Stream).await?;
    let run_id = started.run_id().to_owned();
    let context_id = p.context_id.clone();
    send(submitted(&p, &task_id)).await?;
    let Started {
        mut events, done, ..
    } = started;
    while let Some(event) = events.recv().await {
        if event.name.starts_with("messages")
            && let Some(items) = event.data.as_array()
            && let Some(update) = parts::working_update(items, &task_id, &context_id)
        {
            send(update).await?;
        }
    }
    let outcome = done
        .await
        .map_err(|_| RpcError::internal("following a run", &"the run stopped before it ended"))?;
    let status = |state: &str, message: Option<Json>| {
        let mut status = json!({ "state": state, "timestamp": now_iso() });
        if let Some(m) = message {
            set(&mut status, "message", m);
        }
        json!({
            "taskId": task_id,
            "contextId": context_id,
            "kind": "status-update",
            "status": status,
            "final": true,
        })
    };
    if let Some(e) = &outcome.error {
        let text = e
            .get("message")
            .and_then(Json::as_str)
            .filter(|m| !m.is_empty())
            .or_else(|| e.get("error").and_then(Json::as_str))
            .unwrap_or_default();
        let message = parts::agent_message(vec![parts::text_part(text)], &task_id, &context_id);
        return send(status("TASK_STATE_FAILED", Some(message))).await;
    }
    if outcome.interrupts.is_empty() {
        let result_json = outcome.to_wait_json();
        let turn = added_turn(&call.state, &p, &run_id, &task_id).await?;
        let answer = parts::answer(&result_json, turn.as_deref())
            .map_err(|e| RpcError::new(code::INVALID_AGENT_RESPONSE, e))?;
        send(json!({
            "taskId": task_id,
            "contextId": context_id,
            "kind": "artifact-update",
            "artifact": parts::answer_artifact(answer, &call.assistant_id),
            "append": false,
            "lastChunk": true,
        }))
        .await?;
        return send(status("TASK_STATE_COMPLETED", None)).await;
    }
    send(json!({
        "taskId": task_id,
        "contextId": context_id,
        "kind": "artifact-update",
        "artifact": parts::interrupt_artifact(&outcome.interrupts),
    }))
    .await?;
    send(status("TASK_STATE_INPUT_REQUIRED", None)).await
}
