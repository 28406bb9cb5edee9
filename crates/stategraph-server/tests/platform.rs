//! The platform routes through `Router::oneshot`: background stateless runs and batches,
//! webhooks (to a receiver on a real socket), crons (their records, their validation, a cron
//! that fires) and thread pruning.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{Method, StatusCode};
use serde_json::{Value as Json, json};
use stategraph_checkpoint::{InMemorySaver, Map, value};
use stategraph_graph::{DynState, END, NodeError, Reducer, START, Schema, StateGraph};
use stategraph_server::{Server, WebhookPolicy};
use stategraph_store::InMemoryStore;

mod common;
use common::json_call;

/// `seed` (node_a → node_b: `foo` last value, `bar` appended) and `boom` (fails), served
/// with `policy`, started (so its cron scheduler runs).
async fn started(policy: WebhookPolicy) -> Router {
    let schema = || {
        Schema::new()
            .last_value("foo")
            .reducer("bar", Reducer::append())
    };
    let mut seed = StateGraph::<DynState>::with_schema(schema());
    for (node, tag) in [("node_a", "a"), ("node_b", "b")] {
        seed.add_node(node, move |_s, _c| async move {
            Ok(Map::from_iter([
                ("foo", value!(tag)),
                ("bar", value!([tag])),
            ]))
        });
    }
    seed.add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    let mut boom = StateGraph::<DynState>::with_schema(schema());
    boom.add_node("fail", |_s, _c| async {
        Err::<Map, _>(NodeError::new("boom"))
    });
    boom.add_edge(START, "fail").add_edge("fail", END);
    let server = Server::builder()
        .graph("seed", seed.compile().unwrap())
        .graph("boom", boom.compile().unwrap())
        .checkpointer(Arc::new(InMemorySaver::new()))
        .store(Arc::new(InMemoryStore::new()))
        .webhooks(policy)
        .cron_poll(Duration::from_millis(50))
        .build()
        .unwrap();
    server.start().await.unwrap();
    server.router()
}

async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

const INPUT: &str = r#"{"foo": "", "bar": []}"#;

fn input() -> Json {
    serde_json::from_str(INPUT).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_background_run_deletes_its_thread_when_it_ends() {
    let app = started(WebhookPolicy::new()).await;
    let (status, run) = json_call(
        &app,
        Method::POST,
        "/runs",
        Some(json!({"assistant_id": "seed", "input": input()})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["status"], "pending");
    assert_eq!(run["kwargs"]["temporary"], true);
    let thread = run["thread_id"].as_str().unwrap().to_owned();
    wait_until("the temporary thread to go", || {
        let (app, thread) = (app.clone(), thread.clone());
        async move {
            json_call(&app, Method::GET, &format!("/threads/{thread}"), None)
                .await
                .0
                == StatusCode::NOT_FOUND
        }
    })
    .await;
    // Kept with `on_completion: "keep"`: the thread and its state stay.
    let (_, run) = json_call(
        &app,
        Method::POST,
        "/runs",
        Some(json!({"assistant_id": "seed", "input": input(), "on_completion": "keep"})),
    )
    .await;
    let thread = run["thread_id"].as_str().unwrap().to_owned();
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let (status, joined) = json_call(
        &app,
        Method::GET,
        &format!("/threads/{thread}/runs/{run_id}/join"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(joined, json!({"foo": "b", "bar": ["a", "b"]}));
    // Resuming needs a thread.
    let (status, e) = json_call(
        &app,
        Method::POST,
        "/runs",
        Some(json!({"assistant_id": "seed", "command": {"resume": 1}})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(e["detail"], "You must provide a thread_id when resuming.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_starts_each_run_or_names_what_does_not_fit() {
    let app = started(WebhookPolicy::new()).await;
    let (status, runs) = json_call(
        &app,
        Method::POST,
        "/runs/batch",
        Some(json!([
            {"assistant_id": "seed", "input": input(), "metadata": {"i": 0}},
            {"assistant_id": "seed", "input": input(), "metadata": {"i": 1}},
        ])),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{runs}");
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["metadata"]["i"], 0);
    assert_eq!(runs[1]["metadata"]["i"], 1);
    assert_ne!(runs[0]["thread_id"], runs[1]["thread_id"]);

    let (status, e) = json_call(&app, Method::POST, "/runs/batch", Some(json!([]))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        e["detail"].as_str().unwrap().contains("at least one run"),
        "{e}"
    );
    let (status, e) = json_call(
        &app,
        Method::POST,
        "/runs/batch",
        Some(json!([{"assistant_id": "seed"}, {"assistant_id": "seed", "stream_resumable": 3}])),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        e["detail"]
            .as_str()
            .unwrap()
            .contains("[1].stream_resumable"),
        "{e}"
    );
    let (status, _) = json_call(
        &app,
        Method::POST,
        "/runs/batch",
        Some(json!([{"assistant_id": "3f1c0a52-9a0e-4b6e-8d3c-2f5a1b7c9d09"}])),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// A webhook receiver on loopback: the bodies it got, and how many first calls it answers
/// 503.
async fn receiver(fail_first: usize) -> (String, Arc<Mutex<Vec<Json>>>) {
    let got = Arc::new(Mutex::new(Vec::<Json>::new()));
    let calls = Arc::new(Mutex::new(0_usize));
    let app = Router::new().route(
        "/hook",
        axum::routing::post({
            let got = Arc::clone(&got);
            move |axum::Json(body): axum::Json<Json>| {
                let (got, calls) = (Arc::clone(&got), Arc::clone(&calls));
                async move {
                    let mut n = calls.lock().unwrap();
                    *n += 1;
                    if *n <= fail_first {
                        return StatusCode::SERVICE_UNAVAILABLE;
                    }
                    got.lock().unwrap().push(body);
                    StatusCode::OK
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_post_the_ended_run_retrying_server_errors() {
    let policy = WebhookPolicy::new()
        .allow_private_networks(true)
        .backoff(Duration::from_millis(20));
    let app = started(policy).await;
    let (url, got) = receiver(2).await;
    let (_, thread) = json_call(&app, Method::POST, "/threads", Some(json!({}))).await;
    let thread = thread["thread_id"].as_str().unwrap().to_owned();
    let (status, out) = json_call(
        &app,
        Method::POST,
        &format!("/threads/{thread}/runs/wait"),
        Some(json!({"assistant_id": "seed", "input": input(), "webhook": url})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    wait_until("the webhook", || {
        let got = Arc::clone(&got);
        async move { !got.lock().unwrap().is_empty() }
    })
    .await;
    let body = got.lock().unwrap()[0].clone();
    assert_eq!(body["status"], "success");
    assert_eq!(body["thread_id"], json!(thread));
    assert_eq!(body["values"], json!({"foo": "b", "bar": ["a", "b"]}));
    for key in [
        "run_id",
        "run_started_at",
        "run_ended_at",
        "webhook_sent_at",
        "kwargs",
    ] {
        assert!(body.get(key).is_some(), "{key}: {body}");
    }
    assert!(body.get("error").is_none());

    // A failed run's webhook carries its error.
    let (url, got) = receiver(0).await;
    json_call(
        &app,
        Method::POST,
        "/runs/wait",
        Some(json!({"assistant_id": "boom", "input": input(), "webhook": url})),
    )
    .await;
    wait_until("the failed run's webhook", || {
        let got = Arc::clone(&got);
        async move { !got.lock().unwrap().is_empty() }
    })
    .await;
    let body = got.lock().unwrap()[0].clone();
    assert_eq!(body["status"], "error");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("boom"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_to_private_addresses_are_refused_by_default() {
    let app = started(WebhookPolicy::new()).await;
    for (url, why) in [
        ("http://127.0.0.1:9/hook", "loopback"),
        ("http://10.0.0.8/hook", "private"),
        ("http://169.254.169.254/latest", "link-local"),
        ("http://[::1]/x", "loopback"),
    ] {
        let (status, e) = json_call(
            &app,
            Method::POST,
            "/runs",
            Some(json!({"assistant_id": "seed", "webhook": url})),
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{url}");
        let detail = e["detail"].as_str().unwrap();
        assert!(
            detail.contains("Webhook host blocked") && detail.contains(why),
            "{detail}"
        );
    }
    let (status, e) = json_call(
        &app,
        Method::POST,
        "/runs/crons",
        Some(json!({"assistant_id": "seed", "schedule": "* * * * *", "webhook": "file:///etc"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        e["detail"]
            .as_str()
            .unwrap()
            .contains("scheme 'file' not allowed"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crons_are_records_that_fire_on_schedule() {
    let app = started(WebhookPolicy::new()).await;
    let (_, thread) = json_call(&app, Method::POST, "/threads", Some(json!({}))).await;
    let thread = thread["thread_id"].as_str().unwrap().to_owned();

    // A stateless cron, far in the future: its record.
    let (status, cron) = json_call(
        &app,
        Method::POST,
        "/runs/crons",
        Some(json!({
            "assistant_id": "seed",
            "schedule": "0 9 * * MON",
            "timezone": "America/New_York",
            "input": input(),
            "metadata": {"team": "a"},
        })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{cron}");
    let cron_id = cron["cron_id"].as_str().unwrap().to_owned();
    assert_eq!(cron["thread_id"], Json::Null);
    assert_eq!(cron["on_run_completed"], "delete");
    assert_eq!(cron["enabled"], true);
    assert_eq!(
        cron["payload"]["config"]["configurable"]["cron_id"],
        json!(cron_id)
    );
    assert_eq!(cron["payload"]["schedule"], "0 9 * * MON");
    let next = cron["next_run_date"].as_str().unwrap();
    // 09:00 in New York is 13:00 or 14:00 UTC.
    assert!(
        next.contains("T13:00:00") || next.contains("T14:00:00"),
        "{next}"
    );

    // A thread cron every second: it fires, each run on the thread.
    let (status, fast) = json_call(
        &app,
        Method::POST,
        &format!("/threads/{thread}/runs/crons"),
        Some(json!({"assistant_id": "seed", "schedule": "* * * * * *", "input": input()})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{fast}");
    assert_eq!(fast["on_run_completed"], Json::Null);
    let fast_id = fast["cron_id"].as_str().unwrap().to_owned();
    wait_until("two runs of the every-second cron", || {
        let (app, thread) = (app.clone(), thread.clone());
        async move {
            let (_, runs) =
                json_call(&app, Method::GET, &format!("/threads/{thread}/runs"), None).await;
            runs.as_array()
                .is_some_and(|r| r.iter().filter(|r| r["status"] == "success").count() >= 2)
        }
    })
    .await;
    let (_, runs) = json_call(&app, Method::GET, &format!("/threads/{thread}/runs"), None).await;
    assert_eq!(
        runs[0]["kwargs"]["config"]["configurable"]["cron_id"],
        json!(fast_id)
    );

    // Search, select, count.
    let (_, found) = json_call(
        &app,
        Method::POST,
        "/runs/crons/search",
        Some(json!({"thread_id": thread, "select": ["cron_id", "schedule"]})),
    )
    .await;
    assert_eq!(
        found,
        json!([{"cron_id": fast_id, "schedule": "* * * * * *"}])
    );
    let (_, n) = json_call(&app, Method::POST, "/runs/crons/count", Some(json!({}))).await;
    assert_eq!(n, 2);
    let (_, n) = json_call(
        &app,
        Method::POST,
        "/runs/crons/count",
        Some(json!({"metadata": {"team": "a"}})),
    )
    .await;
    assert_eq!(n, 1);
    let (status, e) = json_call(
        &app,
        Method::POST,
        "/runs/crons/search",
        Some(json!({"sort_by": "schedule"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    // Worded as the reference's schema validator words it.
    assert!(
        e["detail"]
            .as_str()
            .unwrap()
            .starts_with("\"schedule\" is not one of \"cron_id\", \"assistant_id\" or 5 other"),
        "{e}"
    );

    // Disabled, it stops firing.
    let (status, patched) = json_call(
        &app,
        Method::PATCH,
        &format!("/runs/crons/{fast_id}"),
        Some(json!({"enabled": false, "metadata": {"x": 1}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["enabled"], false);
    assert_eq!(patched["metadata"], json!({"x": 1}));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let count = || async {
        let (_, runs) = json_call(
            &app,
            Method::GET,
            &format!("/threads/{thread}/runs?limit=100"),
            None,
        )
        .await;
        runs.as_array().unwrap().len()
    };
    let before = count().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(count().await, before, "a disabled cron does not fire");

    // A new schedule restarts it from now; an empty patch is 400.
    let (_, patched) = json_call(
        &app,
        Method::PATCH,
        &format!("/runs/crons/{cron_id}"),
        Some(json!({"schedule": "30 * * * *", "end_time": "2099-01-01T00:00:00+00:00"})),
    )
    .await;
    assert!(
        patched["next_run_date"]
            .as_str()
            .unwrap()
            .contains(":30:00"),
        "{patched}"
    );
    assert_eq!(patched["end_time"], "2099-01-01T00:00:00+00:00");
    let (status, e) = json_call(
        &app,
        Method::PATCH,
        &format!("/runs/crons/{cron_id}"),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(e["detail"], "Request body cannot be empty");

    // Bad schedules, zones, ids; unknown threads; delete.
    for (body, want) in [
        (
            json!({"assistant_id": "seed", "schedule": "99 * * * *"}),
            "Invalid cron schedule",
        ),
        (
            json!({"assistant_id": "seed", "schedule": "* * * * *", "timezone": "Nowhere/X"}),
            "Invalid timezone",
        ),
        (json!({"assistant_id": "seed"}), "`schedule` is required"),
        (
            json!({"schedule": "* * * * *"}),
            "`assistant_id` is required",
        ),
        (
            json!({"assistant_id": "seed", "schedule": "* * * * *", "end_time": "soon"}),
            "`end_time`",
        ),
    ] {
        let (status, e) = json_call(&app, Method::POST, "/runs/crons", Some(body)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
        assert!(e["detail"].as_str().unwrap().contains(want), "{e}");
    }
    let (status, _) = json_call(
        &app,
        Method::POST,
        "/threads/3f1c0a52-9a0e-4b6e-8d3c-2f5a1b7c9d09/runs/crons",
        Some(json!({"assistant_id": "seed", "schedule": "* * * * *"})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, e) = json_call(&app, Method::GET, "/runs/crons/nope", None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(e["detail"], "Invalid cron ID: must be a UUID");
    let uri = format!("/runs/crons/{cron_id}");
    assert_eq!(
        json_call(&app, Method::DELETE, &uri, None).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        json_call(&app, Method::GET, &uri, None).await.0,
        StatusCode::NOT_FOUND
    );
    // Deleting the thread deletes its crons.
    json_call(&app, Method::DELETE, &format!("/threads/{thread}"), None).await;
    let (_, n) = json_call(&app, Method::POST, "/runs/crons/count", Some(json!({}))).await;
    assert_eq!(n, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_deletes_threads_or_keeps_their_latest_checkpoint() {
    let app = started(WebhookPolicy::new()).await;
    let mut threads = Vec::new();
    for _ in 0..2 {
        let (_, t) = json_call(&app, Method::POST, "/threads", Some(json!({}))).await;
        let t = t["thread_id"].as_str().unwrap().to_owned();
        for _ in 0..2 {
            json_call(
                &app,
                Method::POST,
                &format!("/threads/{t}/runs/wait"),
                Some(json!({"assistant_id": "seed", "input": input()})),
            )
            .await;
        }
        threads.push(t);
    }
    let (status, out) = json_call(
        &app,
        Method::POST,
        "/threads/prune",
        Some(json!({"thread_ids": [threads[0]], "strategy": "keep_latest"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out, json!({"pruned_count": 1}));
    let (_, history) = json_call(
        &app,
        Method::POST,
        &format!("/threads/{}/history", threads[0]),
        Some(json!({})),
    )
    .await;
    assert_eq!(history.as_array().unwrap().len(), 1);
    assert_eq!(history[0]["values"]["bar"], json!(["a", "b", "a", "b"]));

    let unknown = "3f1c0a52-9a0e-4b6e-8d3c-2f5a1b7c9d09";
    let (_, out) = json_call(
        &app,
        Method::POST,
        "/threads/prune",
        Some(json!({"thread_ids": [threads[0], threads[1], unknown]})),
    )
    .await;
    assert_eq!(out, json!({"pruned_count": 2}));
    for t in &threads {
        let (status, _) = json_call(&app, Method::GET, &format!("/threads/{t}"), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
    let (status, e) = json_call(
        &app,
        Method::POST,
        "/threads/prune",
        Some(json!({"thread_ids": ["x"]})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(e["detail"], "Invalid thread ID: must be a UUID");
    let (status, e) = json_call(
        &app,
        Method::POST,
        "/threads/prune",
        Some(json!({"thread_ids": [], "strategy": "all"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        e["detail"]
            .as_str()
            .unwrap()
            .starts_with("Invalid strategy")
    );
}

/// Ended runs' events leave the run queue once the retention has passed; the runs stay
/// with their thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_runs_events_leave_the_queue_after_the_retention() {
    use stategraph_runs::{InMemoryRunQueue, RunEvents, RunQueue};
    let mut seed = StateGraph::<DynState>::with_schema(Schema::new().last_value("foo"));
    seed.add_node("a", |_s, _c| async {
        Ok(Map::from_iter([("foo", value!("a"))]))
    });
    seed.add_edge(START, "a").add_edge("a", END);
    let queue = InMemoryRunQueue::new();
    let server = Server::builder()
        .graph("seed", seed.compile().unwrap())
        .checkpointer(Arc::new(InMemorySaver::new()))
        .store(Arc::new(InMemoryStore::new()))
        .run_queue(queue.clone())
        .run_retention(Duration::from_millis(300))
        .build()
        .unwrap();
    server.start().await.unwrap();
    let app = server.router();
    let (status, thread) = json_call(&app, Method::POST, "/threads", Some(json!({}))).await;
    assert_eq!(status, StatusCode::OK);
    let thread_id = thread["thread_id"].as_str().unwrap().to_owned();
    let body = json!({"assistant_id": "seed", "input": {"foo": ""}});
    let (status, run) = json_call(
        &app,
        Method::POST,
        &format!("/threads/{thread_id}/runs"),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    wait_until("the run to finish", || async {
        queue
            .get(&run_id)
            .await
            .unwrap()
            .is_some_and(|r| r.status.is_final())
    })
    .await;
    assert!(!queue.events_after(&run_id, 0, 10).await.unwrap().is_empty());
    wait_until("the run's events to leave the queue", || async {
        queue.events_after(&run_id, 0, 10).await.unwrap().is_empty()
    })
    .await;
    let (status, record) = json_call(
        &app,
        Method::GET,
        &format!("/threads/{thread_id}/runs/{run_id}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(record["status"], "success");
}
