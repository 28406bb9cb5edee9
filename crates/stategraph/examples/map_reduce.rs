//! Run with `cargo run -p stategraph --example map_reduce [-- --db URL]`.
//!
//! A `Send` fan-out: a conditional edge sends one task per subject, the tasks run in parallel
//! in one super-step, and an append reducer collects their results.

use stategraph::graph::Send;
use stategraph::prelude::*;

#[derive(State, Clone, Debug, Default)]
struct Jokes {
    subjects: Vec<String>,
    subject: String,
    #[reducer(append)]
    jokes: Vec<String>,
}

fn db() -> String {
    let mut args = std::env::args().skip_while(|a| a != "--db").skip(1);
    args.next().unwrap_or_else(|| "sqlite::memory:".to_owned())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), stategraph::Error> {
    let mut g = StateGraph::<Jokes>::new();
    // A `Send`'s task sees only its argument.
    g.add_node("joke", |s, _c| async move {
        Ok(JokesUpdate::default().jokes([format!("why did the {} cross the road?", s.subject)]))
    });
    g.add_conditional_edges(START, |s: &Jokes| {
        Ok(s.subjects
            .iter()
            .map(|subject| {
                Send::new("joke", JokesUpdate::default().subject(subject.clone())).into()
            })
            .collect())
    });
    let graph = g
        .compile()?
        .with_checkpointer(stategraph::open_saver(&db()).await?);
    let out = graph
        .invoke(
            JokesUpdate::default().subjects(["cat", "dog", "crab"]),
            RunConfig::thread("jokes"),
        )
        .await?;
    println!("{:?}", out.jokes);
    Ok(())
}
