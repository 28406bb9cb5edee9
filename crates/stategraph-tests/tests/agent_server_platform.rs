//! The platform routes — webhooks, background stateless runs (`POST /runs`), batches
//! (`POST /runs/batch`), crons, `POST /threads/prune` and `GET /threads/{thread_id}/stream`
//! — driven by LangGraph's Python SDK (`sdk/platform_flow.py`) against a stategraph server
//! and against the reference server (`langgraph dev`, started here by
//! `scripts/reference-server.sh`) in the same test: the two transcripts must be equal but for
//! the differences listed in [`DELIBERATE`].
//!
//! Needs the pinned Python environment and the reference server's (`scripts/test.sh` sets
//! both up). Fails, never skips, without them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::time::Duration;

use common::reference::{Reference, transcript_diffs};
use common::seed_server::{run_sdk_script, seed_graph, serve};
use stategraph::server::WebhookPolicy;

/// Where the two servers deliberately differ, by transcript key: what the reference answers,
/// what stategraph answers, and why.
const DELIBERATE: &[(&str, &str)] = &[
    (
        "stateless_webhook",
        "the reference sends `values: null` for a stateless run (its temporary thread is gone \
         when it calls); stategraph sends the values the run ended with",
    ),
    (
        "prune_bad_strategy",
        "the reference's request validator words it as a JSON Schema error; stategraph names \
         the strategy and the two it takes (both 422)",
    ),
    (
        "prune_keep_latest",
        "the reference's in-memory server refuses `keep_latest` (422); stategraph keeps each \
         thread's latest checkpoint, as the reference's Postgres server does",
    ),
    (
        "prune_keep_latest_history",
        "follows from `prune_keep_latest`",
    ),
    (
        "prune_keep_latest_values",
        "follows from `prune_keep_latest`",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn platform_routes_through_the_sdk_match_the_reference_server() {
    let (base, serving, _dir) = serve(|b| {
        b.graph("seed", seed_graph())
            // The SDK script's webhook receiver is on loopback.
            .webhooks(WebhookPolicy::new().allow_private_networks(true))
            .cron_poll(Duration::from_millis(200))
    })
    .await;
    let ours = run_sdk_script("platform_flow.py", vec![base]).await;
    serving.abort();

    let reference = tokio::task::spawn_blocking(|| {
        // Its scheduler looks for due crons every second (5 by default), and its webhooks may
        // call loopback (refused by default), as ours are configured above.
        Reference::start(&[
            ("CRON_SCHEDULER_SLEEP_TIME", "1"),
            (
                "LANGGRAPH_WEBHOOKS",
                r#"{"url": {"disable_loopback": false}}"#,
            ),
        ])
    })
    .await
    .unwrap();
    let theirs = run_sdk_script(
        "platform_flow.py",
        vec![format!("http://127.0.0.1:{}", reference.port)],
    )
    .await;
    drop(reference);

    let diffs = transcript_diffs(&ours, &theirs, DELIBERATE);
    assert!(
        diffs.is_empty(),
        "the transcripts differ:\n{}\n\nours: {ours:#}\n\nreference: {theirs:#}",
        diffs.join("\n")
    );
    // What the deliberate differences are on our side.
    assert_eq!(ours["prune_keep_latest"], "ok");
    assert_eq!(ours["prune_keep_latest_history"], 1);
    assert_eq!(
        ours["prune_keep_latest_values"]["bar"],
        serde_json::json!(["a", "b", "a", "b"])
    );
    // And what both say, spelled out.
    assert_eq!(
        ours["stateless_webhook"]["values"],
        serde_json::json!({"foo": "b", "bar": ["a", "b"]})
    );
    assert_eq!(ours["prune_bad_strategy"]["status"], 422);
    assert_eq!(ours["webhook"]["status"], "success");
    assert_eq!(ours["cron_run"]["metadata_from"], "cron");
    assert_eq!(ours["prune"]["pruned_count"], 2);
}
