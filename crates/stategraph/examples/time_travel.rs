//! Run with `cargo run -p stategraph --example time_travel [-- --db URL]`.
//!
//! History, `update_state` (as a named node and as LangGraph's default), `continue_run`, replay
//! from a past checkpoint, `fork`, and the branch tree they leave: the old branch stays, the
//! new ones hang off the target.

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
async fn main() -> Result<(), stategraph::Error> {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("draft", |s, _c| async move {
        Ok(DocUpdate::default().log([format!("draft about {}", s.topic)]))
    });
    g.add_node("review", |_s, _c| async {
        Ok(DocUpdate::default().log(["reviewed"]))
    });
    g.add_edge(START, "draft")
        .add_edge("draft", "review")
        .add_edge("review", END);
    let graph = g
        .compile()?
        .with_checkpointer(stategraph::open_saver(&db()).await?);
    let config = RunConfig::thread("doc-1");

    graph
        .invoke(DocUpdate::default().topic("rust"), config.clone())
        .await?;
    let history = graph
        .get_state_history(&config, HistoryOptions::new())
        .await?;
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
        .update_state(&config, DocUpdate::default().topic("pregel"), "draft")
        .await?;
    println!(
        "after update_state(as_node=draft): next = {:?}",
        graph.get_state(&config).await?.next
    );
    graph.continue_run(config.clone()).await?;

    // Replay from the checkpoint before `review`: only `review` runs again, on a new branch.
    let before_review = history
        .iter()
        .find(|s| s.next == ["review"])
        .and_then(|s| s.config.clone());
    if let Some(target) = before_review.and_then(|c| c.checkpoint_id) {
        let out = graph
            .continue_run(config.clone().with_checkpoint_id(target.clone()))
            .await?;
        println!("replayed from {target}: log = {:?}", out.log);
        // Fork that checkpoint (LangGraph's `as_node="__copy__"`): a sibling copy to edit
        // and continue, leaving the original as it is.
        let copy = graph
            .fork(&config.clone().with_checkpoint_id(target))
            .await?;
        let at_copy = copy
            .checkpoint_id
            .map(|id| config.clone().with_checkpoint_id(id));
        if let Some(at_copy) = at_copy {
            graph
                .update_state(
                    &at_copy,
                    DocUpdate::default().topic("forks"),
                    AsNode::Inferred,
                )
                .await?;
            let out = graph.continue_run(config.clone()).await?;
            println!(
                "forked, edited and continued: topic = {}, log = {:?}",
                out.topic, out.log
            );
        }
    }
    let all = graph
        .get_state_history(&config, HistoryOptions::new())
        .await?;
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
