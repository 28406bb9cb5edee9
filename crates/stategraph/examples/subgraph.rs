//! Run with `cargo run -p stategraph --example subgraph [-- --db URL]`.
//!
//! A compiled graph used as a node: it checkpoints under its own namespace
//! (`research:<task id>`) in the parent's thread, and `get_state_with_subgraphs` shows its
//! state inside the parent's.

use stategraph::prelude::*;

#[derive(State, Clone, Debug, Default)]
struct Report {
    question: String,
    #[reducer(append)]
    notes: Vec<String>,
}

fn db() -> String {
    let mut args = std::env::args().skip_while(|a| a != "--db").skip(1);
    args.next().unwrap_or_else(|| "sqlite::memory:".to_owned())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), stategraph::Error> {
    let mut research = StateGraph::<Report>::new();
    research.add_node("search", |s, _c| async move {
        Ok(ReportUpdate::default().notes([format!("searched: {}", s.question)]))
    });
    research.add_node("read", |_s, _c| async {
        Ok(ReportUpdate::default().notes(["read 3 sources"]))
    });
    research
        .add_edge(START, "search")
        .add_edge("search", "read");

    let mut g = StateGraph::<Report>::new();
    g.add_subgraph("research", research.compile()?);
    g.add_node("write", |s, _c| async move {
        Ok(ReportUpdate::default().notes([format!("wrote from {} notes", s.notes.len())]))
    });
    g.add_edge(START, "research").add_edge("research", "write");
    let graph = g
        .compile()?
        .with_checkpointer(stategraph::open_saver(&db()).await?);

    let config = RunConfig::thread("report-1");
    let out = graph
        .invoke(
            ReportUpdate::default().question("what is Pregel?"),
            config.clone(),
        )
        .await?;
    println!("notes: {:?}", out.notes);
    let history = graph.get_state_history(&config, Default::default()).await?;
    if let Some(before) = history.iter().find(|s| s.next == ["research"]) {
        let at = config.clone().with_checkpoint_id(
            before
                .config
                .clone()
                .and_then(|c| c.checkpoint_id)
                .unwrap_or_default(),
        );
        let nested = graph.get_state_with_subgraphs(&at).await?;
        for task in &nested.tasks {
            if let Some(sub) = &task.state {
                let ns = sub
                    .config
                    .as_ref()
                    .map(|c| c.checkpoint_ns.clone())
                    .unwrap_or_default();
                println!(
                    "subgraph {ns}: {}",
                    sub.values
                        .get("notes")
                        .map(ToString::to_string)
                        .unwrap_or_default()
                );
            }
        }
    }
    Ok(())
}
