//! Run with `cargo run -p stategraph --example seed_tour -- [--db URL] [--thread ID]`.
//!
//! The seeds' 2-node graph: `foo: String` (last value) and `bar: Vec<String>` (append);
//! `node_a` returns `{foo: "a", bar: ["a"]}`, `node_b` `{foo: "b", bar: ["b"]}`; edges
//! START → node_a → node_b → END. It invokes the graph with `{foo: "", bar: []}` on the
//! thread, then prints one JSON object: `{"state": Snapshot, "history": [Snapshot, …]}`
//! (history newest first), with LangGraph's field names. The default database is the SQLite
//! file `seed_tour.sqlite` in the working directory.

use stategraph::StateSnapshot;
use stategraph::prelude::*;
use std::process::ExitCode;

/// The example's state. (Its nodes never read it.)
#[derive(State, Clone, Debug, Default)]
struct SeedState {
    foo: String,
    #[reducer(append)]
    bar: Vec<String>,
}

struct Args {
    db: String,
    thread: String,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        db: "sqlite:seed_tour.sqlite".to_owned(),
        thread: "1".to_owned(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--db" => args.db = value,
            "--thread" => args.thread = value,
            other => {
                return Err(format!(
                    "unknown argument `{other}` (expected --db, --thread)"
                ));
            }
        }
    }
    Ok(args)
}

async fn run(args: Args) -> Result<serde_json::Value, stategraph::Error> {
    let saver = stategraph::open_saver(&args.db).await?;
    let mut graph = StateGraph::<SeedState>::new();
    graph.add_node("node_a", |_state, _ctx| async {
        Ok(SeedStateUpdate::default().foo("a").bar(["a"]))
    });
    graph.add_node("node_b", |_state, _ctx| async {
        Ok(SeedStateUpdate::default().foo("b").bar(["b"]))
    });
    graph
        .add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    let graph = graph.compile()?.with_checkpointer(saver);

    let config = RunConfig::thread(args.thread);
    let input = SeedStateUpdate::default().foo("").bar(Vec::<String>::new());
    graph.invoke(input, config.clone()).await?;
    let state = graph.get_state(&config).await?;
    let history = graph.get_state_history(&config, Default::default()).await?;
    Ok(serde_json::json!({
        "state": state.to_json(),
        "history": history.iter().map(StateSnapshot::to_json).collect::<Vec<_>>(),
    }))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(json) => {
            println!("{json:#}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
