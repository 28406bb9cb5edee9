//! Run with `cargo run -p stategraph --example streaming`.
//!
//! Streams a run with several modes at once: per-node `updates`, the full state (`values`),
//! and `custom` progress events that a node writes through its context.

use stategraph::graph::StreamMode;
use stategraph::prelude::*;

#[derive(State, Clone, Debug, Default)]
struct Job {
    #[reducer(add)]
    done: i64,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut g = StateGraph::<Job>::new();
    g.add_node("work", |_s, ctx| async move {
        for pct in [25, 50, 75, 100] {
            ctx.write_custom(value!({"progress": pct}));
        }
        Ok(JobUpdate::default().done(1))
    });
    g.add_node("report", |s, _c| async move {
        Ok(JobUpdate::default().done(s.done * 10))
    });
    g.add_edge(START, "work").add_edge("work", "report");
    let graph = g.compile()?;

    let modes = [StreamMode::Updates, StreamMode::Values, StreamMode::Custom];
    let mut stream = graph.stream(Some(JobUpdate::default()), RunConfig::default(), &modes);
    while let Some(part) = stream.next().await {
        println!("{:<8} {}", part.mode.as_str(), part.data);
    }
    println!("final: {:?}", stream.result().await?);
    Ok(())
}
