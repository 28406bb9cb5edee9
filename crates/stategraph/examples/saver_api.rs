//! Run with `cargo run -p stategraph --example saver_api [-- --db URL]`.
//!
//! Walks through the persistence layer on the embedded SQLite default: writes the four
//! checkpoints LangGraph's 2-node docs example produces (input, then one per super-step, each
//! with the task writes that led to the next), then reads the thread back — latest state,
//! history newest first, and the writes stored against each checkpoint.

use std::process::ExitCode;

use stategraph::ChannelVersions;
use stategraph::prelude::*;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> stategraph::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut url = "sqlite:saver_api.sqlite".to_owned();
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--db", Some(u)) => url = u,
            _ => {
                return Err(stategraph::CheckpointError::invalid(
                    "arguments",
                    "usage: saver_api [--db URL]",
                )
                .into());
            }
        }
    }
    let saver = stategraph::open_saver(&url).await?;
    let thread = format!("saver-api-{}", stategraph::uuid6(None));

    // Step -1: the input checkpoint, then steps 0..2 as node_a and node_b run.
    // (source, step, channel values, the task that runs next and what it writes)
    type Step<'a> = (&'a str, i64, Value, Option<(&'a str, Value)>);
    let steps: [Step<'_>; 4] = [
        (
            "input",
            -1,
            value!({"__start__": {"foo": ""}}),
            Some(("__start__", value!({"foo": ""}))),
        ),
        (
            "loop",
            0,
            value!({"foo": ""}),
            Some(("node_a", value!({"foo": "a", "bar": ["a"]}))),
        ),
        (
            "loop",
            1,
            value!({"foo": "a", "bar": ["a"]}),
            Some(("node_b", value!({"foo": "b", "bar": ["b"]}))),
        ),
        ("loop", 2, value!({"foo": "b", "bar": ["a", "b"]}), None),
    ];
    let mut at = CheckpointConfig::new(&thread);
    let mut versions = ChannelVersions::new();
    for (source, step, values, task) in steps {
        let mut cp = Checkpoint::empty();
        cp.id = CheckpointId::for_step(step);
        let next = saver.get_next_version(versions.values().max());
        if let Value::Map(m) = values {
            for (k, v) in m {
                let k = k.as_str().unwrap_or_default().to_owned();
                versions.insert(k.clone(), next.clone());
                cp.channel_values.insert(k, v);
            }
        }
        cp.channel_versions = versions.clone();
        let source = if source == "input" {
            CheckpointSource::Input
        } else {
            CheckpointSource::Loop
        };
        at = saver
            .put(
                &at,
                &cp,
                &CheckpointMetadata::new(source, step),
                &cp.channel_versions,
            )
            .await?;
        if let Some((node, Value::Map(out))) = task {
            let writes: Vec<(String, Value)> = out
                .into_iter()
                .map(|(k, v)| (k.as_str().unwrap_or_default().to_owned(), v))
                .collect();
            let path = format!("~__pregel_pull, {node}");
            saver
                .put_writes(&at, &writes, &format!("task-{node}"), &path)
                .await?;
        }
    }

    let latest = saver.get_tuple(&CheckpointConfig::new(&thread)).await?;
    if let Some(t) = latest {
        println!("thread {thread} on {url}");
        println!(
            "latest: {}",
            Value::Map(t.checkpoint.channel_values.clone().into_iter().collect())
        );
    }
    println!("history, newest first:");
    for t in saver.list(&ListOptions::thread(&thread)).await? {
        let m = &t.metadata;
        let writes: Vec<String> = t
            .pending_writes
            .iter()
            .map(|w| format!("{}={}", w.channel, w.value))
            .collect();
        println!(
            "  step {:>2} {:<6} {}  writes: [{}]",
            m.step.unwrap_or_default(),
            m.source.map(|s| s.as_str()).unwrap_or("?"),
            t.checkpoint.id,
            writes.join(", ")
        );
    }
    Ok(())
}
