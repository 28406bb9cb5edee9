//! Run with `cargo run -p stategraph --example streaming`.
//!
//! Streams a run with several modes at once: per-node `updates`, the full state (`values`),
//! and `custom` progress events that a node writes through its context. The stream is an
//! owned `futures::Stream` of typed events, read here from a spawned task (as a web server
//! would read it into a response body), with each event also shown as LangGraph's JSON.

use futures_util::StreamExt;
use stategraph::prelude::*;
use stategraph::stream::UpdatesEvent;

#[derive(State, Clone, Debug, Default)]
struct Job {
    #[reducer(add)]
    done: i64,
}

#[tokio::main]
async fn main() -> Result<(), stategraph::Error> {
    let mut g = StateGraph::<Job>::new();
    g.add_node("work", |_s, ctx| async move {
        for pct in [25, 50, 75, 100] {
            ctx.write_custom(value!({"progress": pct})).await;
        }
        Ok(JobUpdate::default().done(1))
    });
    g.add_node("report", |s, _c| async move {
        Ok(JobUpdate::default().done(s.done * 10))
    });
    g.add_edge(START, "work").add_edge("work", "report");
    let graph = g.compile()?;

    let modes = [StreamMode::Updates, StreamMode::Values, StreamMode::Custom];
    let mut stream = graph.stream(JobUpdate::default(), RunConfig::default(), &modes);
    let reader = tokio::spawn(async move {
        let mut last = None;
        while let Some(event) = stream.next().await {
            let event = event?;
            match &event {
                StreamEvent::Updates(UpdatesEvent::Node { node, .. }) => println!("ran {node}"),
                StreamEvent::Values(values) => last = Some(values.state()?),
                _ => {}
            }
            println!("  {:<8} {}", event.mode().as_str(), event.to_json());
        }
        Ok::<_, GraphError>(last)
    });
    let last = match reader.await {
        Ok(last) => last?,
        Err(e) => std::panic::resume_unwind(e.into_panic()), // the reader panicked
    };
    println!("final: {last:?}");
    Ok(())
}
