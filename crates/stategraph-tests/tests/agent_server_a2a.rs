//! `/a2a/{assistant_id}`: the official A2A Python SDK (`a2a-sdk`, pinned; `sdk/a2a_flow.py`)
//! talks to a stategraph server with an API key: it resolves an assistant's agent card,
//! sends messages and gets the run's answer (waited for, streamed, and returned at once then
//! polled), answers an interrupt in the same task, cancels a task awaiting input, reads and
//! lists tasks, and meets the protocol's errors; A2A 0.3's method names get 0.3's shapes.
//!
//! Needs the pinned Python environment (`scripts/python-env.sh`; `scripts/test.sh` runs it).
//! Fails, never skips, without it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use common::seed_server::{chat_graph, echo_graph, run_sdk_script, seed_graph, serve};
use serde_json::{Value as Json, json};

fn texts(history: &Json) -> Vec<(String, String)> {
    history
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m[0].as_str().unwrap().into(), m[1].as_str().unwrap().into()))
        .collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| ((*a).into(), (*b).into()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_a2a_client_sends_messages_and_gets_the_runs_answers() {
    let (base, serving, _dir) = serve(|b| {
        b.graph("echo", echo_graph())
            .graph("chat", chat_graph())
            .graph("seed", seed_graph())
            .api_key("a2a-secret")
    })
    .await;
    let out = run_sdk_script("a2a_flow.py", vec![base.clone(), "a2a-secret".into()]).await;
    serving.abort();
    let echo_id = out["echo_id"].as_str().unwrap();

    // The card: where to talk to the assistant, in A2A 1.0 over JSON-RPC.
    let card = &out["card"];
    assert_eq!(card["name"], "echo", "{card:#}");
    assert_eq!(card["description"], "echo assistant");
    let url = format!("{base}/a2a/{echo_id}");
    assert_eq!(
        card["supportedInterfaces"],
        json!([{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
    );
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["skills"][0]["id"], format!("{echo_id}-main"));
    assert_eq!(card["skills"][0]["name"], "echo Capabilities");

    // Waited for: the answer as the artifact, the conversation as history.
    let send = &out["send"];
    assert_eq!(send["state"], "TASK_STATE_COMPLETED", "{send:#}");
    assert_eq!(send["answer"], json!(["echo: hello"]));
    assert_eq!(send["artifacts"][0]["name"], "Assistant Response");
    let (context, run) = send["id"].as_str().unwrap().split_once(':').unwrap();
    assert_eq!(context, send["context_id"]);
    assert_eq!(run.len(), 36, "a run id: {run}");
    assert_eq!(
        texts(&send["history"]),
        pairs(&[("ROLE_USER", "hello"), ("ROLE_AGENT", "echo: hello")])
    );
    // The same context, a new task: the whole conversation, each message under its task.
    let again = &out["send_again"];
    assert_eq!(again["context_id"], send["context_id"]);
    assert_ne!(again["id"], send["id"]);
    assert_eq!(again["answer"], json!(["echo: again"]));
    let history = again["history"].as_array().unwrap();
    assert_eq!(history.len(), 4, "{again:#}");
    assert_eq!(history[0][2], send["id"]);
    assert_eq!(history[3][2], again["id"]);

    // Streamed: submitted, working with the message the run streamed, the answer, completed.
    let stream = out["stream"].as_array().unwrap();
    assert_eq!(stream.len(), 4, "{stream:#?}");
    assert_eq!(stream[0], json!(["task", "TASK_STATE_SUBMITTED"]));
    assert_eq!(
        stream[1],
        json!(["status", "TASK_STATE_WORKING", "echo: streamed"])
    );
    let n = stream.len();
    assert_eq!(
        stream[n - 2],
        json!(["artifact", "Assistant Response", [{"text": "echo: streamed"}]])
    );
    assert_eq!(stream[n - 1], json!(["status", "TASK_STATE_COMPLETED", ""]));

    // Returned at once, then polled.
    assert_eq!(out["polled_first"], "TASK_STATE_SUBMITTED");
    assert_eq!(out["polled"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        texts(&out["polled"]["history"]),
        pairs(&[("ROLE_USER", "later"), ("ROLE_AGENT", "echo: later")])
    );

    // Read back: the conversation as each task's run left it (the newest two messages).
    let got = &out["get"];
    assert_eq!(got["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        texts(&got["history"]),
        pairs(&[("ROLE_USER", "again"), ("ROLE_AGENT", "echo: again")])
    );
    assert_eq!(
        texts(&out["get_first"]["history"]),
        pairs(&[("ROLE_USER", "hello"), ("ROLE_AGENT", "echo: hello")])
    );
    assert_eq!(out["list"]["total"], 2, "{:#}", out["list"]);
    assert_eq!(
        out["list"]["tasks"],
        json!([
            [again["id"], "TASK_STATE_COMPLETED"],
            [send["id"], "TASK_STATE_COMPLETED"]
        ])
    );

    // An interrupt: the task awaits input; the answer resumes it as the same task.
    let asked = &out["asked"];
    assert_eq!(asked["state"], "TASK_STATE_INPUT_REQUIRED", "{asked:#}");
    let interrupt = &asked["artifacts"][0];
    assert_eq!(interrupt["name"], "Interrupt");
    assert_eq!(
        interrupt["parts"][0]["data"]["value"],
        json!({"question": "send?", "draft": "echo: draft one"})
    );
    let resumed = &out["resumed"];
    assert_eq!(resumed["id"], asked["id"]);
    assert_eq!(resumed["state"], "TASK_STATE_COMPLETED", "{resumed:#}");
    assert_eq!(resumed["answer"], json!(["sent"]));
    let asked_stream = out["asked_stream"].as_array().unwrap();
    let n = asked_stream.len();
    assert_eq!(asked_stream[n - 2][1], "Interrupt", "{asked_stream:#?}");
    assert_eq!(
        asked_stream[n - 1],
        json!(["status", "TASK_STATE_INPUT_REQUIRED", ""])
    );
    assert_eq!(out["cancelled"], "TASK_STATE_CANCELED");
    assert_eq!(out["after_cancel"], "TASK_STATE_CANCELED");

    // Errors, as the SDK raises them.
    let errors = &out["errors"];
    let error = |k: &str| errors[k].as_str().unwrap().to_owned();
    assert!(
        error("cancel_completed").contains("not cancelable"),
        "{errors:#}"
    );
    assert!(
        error("unknown_task").contains("Task not found"),
        "{errors:#}"
    );
    assert!(
        error("terminal_task").contains("terminal task"),
        "{errors:#}"
    );
    assert!(
        error("no_messages").contains("does not support A2A conversational messages"),
        "{errors:#}"
    );

    // A2A 0.3: lowercase roles and states, the task unwrapped.
    let legacy = &out["legacy"];
    assert_eq!(legacy["id"], "legacy-1");
    let task = &legacy["result"];
    assert_eq!(task["kind"], "task", "{legacy:#}");
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(task["history"][0]["role"], "user");
    assert_eq!(task["history"][1]["role"], "agent");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "echo: old");
    assert_eq!(
        out["legacy_unknown"],
        json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32601, "message": "Method not found: tasks/resubscribe"}})
    );
    assert_eq!(
        out["stream_without_accept"],
        json!([400, {"error": "Accept header must include text/event-stream for streaming"}])
    );
    assert_eq!(out["without_key"], 403);
}

/// Where the two servers' wire answers deliberately differ, by transcript key, and why.
const DELIBERATE: &[(&str, &str)] = &[(
    "v1_stream",
    "A2A 1.0 wraps each streamed result in an object naming its kind (`statusUpdate`, \
     `artifactUpdate`); the reference sends the status and artifact updates unwrapped, which \
     A2A 1.0 clients (a2a-sdk 1.x) cannot read; stategraph wraps them",
)];

/// Plain JSON-RPC (`sdk/a2a_raw.py`) against a stategraph server and the reference server
/// (`langgraph dev`) in the same test: the same `chat` graph, the same requests, the same
/// answers — card, interrupt, resume, tasks, A2A 0.3 and the errors — but for [`DELIBERATE`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_answers_match_the_reference_server() {
    let (base, serving, _dir) = serve(|b| b.graph("chat", chat_graph())).await;
    let ours = run_sdk_script("a2a_raw.py", vec![base]).await;
    serving.abort();
    let reference = tokio::task::spawn_blocking(|| common::reference::Reference::start(&[]))
        .await
        .unwrap();
    let theirs = run_sdk_script("a2a_raw.py", vec![reference.url()]).await;
    drop(reference);

    let diffs = common::reference::transcript_diffs(&ours, &theirs, DELIBERATE);
    assert!(
        diffs.is_empty(),
        "the transcripts differ:\n{}",
        diffs.join("\n")
    );

    // The deliberate difference, on our side: each result names its kind.
    let stream = ours["v1_stream"].as_array().unwrap();
    let kinds: Vec<&str> = stream
        .iter()
        .map(|e| {
            let result = e["result"].as_object().unwrap();
            assert_eq!(result.len(), 1, "{e}");
            result.keys().next().unwrap().as_str()
        })
        .collect();
    assert_eq!(kinds[0], "task");
    assert_eq!(kinds[kinds.len() - 2], "artifactUpdate");
    assert_eq!(kinds[kinds.len() - 1], "statusUpdate");
    // The reference's, unwrapped but for the first.
    let theirs_stream = theirs["v1_stream"].as_array().unwrap();
    assert_eq!(theirs_stream.len(), stream.len(), "{theirs_stream:#?}");
}
