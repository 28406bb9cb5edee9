//! Run with `cargo run -p stategraph --example time_travel [-- --db URL]`.
//!
//! History, `update_state` (as the default node and `as_node`), replay from a past checkpoint
//! and the branch tree it leaves: the old branch stays, the new one hangs off the target.

use std::sync::Arc;

use stategraph::prelude::*;

#[derive(State, Clone, Debug, Default)]
struct Doc {
    topic: String,
    #[reducer(append)]
    log: Vec<String>,
}

fn db() -> String {
    let mut args = std::env::args().skip_while(|a| a != "--db").skip(1);
    args.next().unwrap_or_else(|| "sqlite::memory:".to_owned())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("draft", |s: Arc<Doc>, _c| async move {
        Ok(DocUpdate::default().log(vec![format!("draft about {}", s.topic)]))
    });
    g.add_node("review", |_s: Arc<Doc>, _c| async {
        Ok(DocUpdate::default().log(vec!["reviewed".to_owned()]))
    });
    g.add_edge(START, "draft")
        .add_edge("draft", "review")
        .add_edge("review", END);
    let graph = g
        .compile()?
        .with_checkpointer(stategraph::open_saver(&db()).await?);
    let config = RunConfig::thread("doc-1");

    graph
        .invoke(Some(DocUpdate::default().topic("rust")), config.clone())
        .await?;
    let history = graph.get_state_history(&config, Default::default()).await?;
    println!("history (newest first):");
    for s in &history {
        let m = s.metadata.clone().unwrap_or_default();
        println!(
            "  step {:>2} {:<6} next={:?} log={}",
            m.step.unwrap_or(0),
            m.source.map_or("?", |s| s.as_str()),
            s.next,
            s.values
                .get("log")
                .map(ToString::to_string)
                .unwrap_or_default()
        );
    }

    // Edit the state as if `draft` had written it: `review` runs next.
    graph
        .update_state(
            &config,
            Some(DocUpdate::default().topic("pregel")),
            Some("draft"),
        )
        .await?;
    println!(
        "after update_state(as_node=draft): next = {:?}",
        graph.get_state(&config).await?.next
    );
    graph.invoke(None, config.clone()).await?;

    // Replay from the checkpoint before `review`: only `review` runs again, on a new branch.
    let before_review = history
        .iter()
        .find(|s| s.next == ["review"])
        .and_then(|s| s.config.clone());
    if let Some(target) = before_review.and_then(|c| c.checkpoint_id) {
        let out = graph
            .invoke(None, config.clone().with_checkpoint_id(target.clone()))
            .await?;
        println!("replayed from {target}: log = {:?}", out.log);
    }
    let all = graph.get_state_history(&config, Default::default()).await?;
    println!("{} checkpoints; branch points:", all.len());
    for s in &all {
        let id = s
            .config
            .as_ref()
            .and_then(|c| c.checkpoint_id.clone())
            .unwrap_or_default();
        let children = all
            .iter()
            .filter(|c| {
                c.parent_config
                    .as_ref()
                    .and_then(|p| p.checkpoint_id.as_ref())
                    == Some(&id)
            })
            .count();
        if children > 1 {
            println!("  {id} has {children} children");
        }
    }
    Ok(())
}
