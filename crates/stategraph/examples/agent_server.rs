//! Run with `cargo run -p stategraph --example agent_server --features server -- [--db URL]
//! [--port PORT] [--api-key KEY]`.
//!
//! Serves the 2-node graph of the `seed_tour` example (`foo: String` last value, `bar:
//! Vec<String>` append; START → node_a → node_b → END) as graph and assistant `seed` over
//! LangGraph's Agent Server API on `127.0.0.1:PORT` (default 2024), until killed. Threads,
//! assistants and runs are kept in the same database as the checkpoints (default: the SQLite
//! file `agent_server.sqlite` in the working directory). LangGraph's Python client works
//! against it unchanged:
//!
//! ```text
//! from langgraph_sdk import get_sync_client
//! client = get_sync_client(url="http://127.0.0.1:2024")
//! thread = client.threads.create()
//! client.runs.wait(thread["thread_id"], "seed", input={"foo": "", "bar": []})
//! ```
//!
//! With `--api-key KEY` (or the environment variable `STATEGRAPH_API_KEY`) every request but
//! `GET /ok` and `GET /info` needs header `x-api-key: KEY` (the SDK's `api_key=` argument or
//! `LANGGRAPH_API_KEY`), else it is answered 403.

use std::process::ExitCode;

use stategraph::prelude::*;
use stategraph::server::{Database, Server};

/// The example's state. (Its nodes never read it.)
#[derive(State, Clone, Debug, Default)]
struct SeedState {
    foo: String,
    #[reducer(append)]
    bar: Vec<String>,
}

struct Args {
    db: String,
    port: u16,
    api_key: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        db: "sqlite:agent_server.sqlite".to_owned(),
        port: 2024,
        api_key: std::env::var("STATEGRAPH_API_KEY")
            .ok()
            .filter(|k| !k.is_empty()),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--db" => args.db = value,
            "--api-key" => args.api_key = Some(value),
            "--port" => {
                args.port = value
                    .parse()
                    .map_err(|_| format!("--port needs a port number, got `{value}`"))?;
            }
            other => {
                return Err(format!(
                    "unknown argument `{other}` (expected --db, --port, --api-key)"
                ));
            }
        }
    }
    Ok(args)
}

/// The seed graph, uncompiled into a checkpointer (the server attaches its own).
fn seed_graph() -> Result<CompiledGraph<SeedState>, GraphError> {
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
    graph.compile()
}

async fn run(args: Args) -> Result<(), stategraph::Error> {
    // The checkpointer, the store and the run queue of one database: several processes
    // serving the same file or Postgres database share threads and runs.
    let mut builder = Server::builder()
        .graph("seed", seed_graph()?)
        .database(&args.db)
        .await?;
    if let Some(key) = args.api_key {
        builder = builder.api_key(key);
    }
    let server = builder.build()?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await?;
    eprintln!("serving graph `seed` on http://{}", listener.local_addr()?);
    server.serve(listener).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
