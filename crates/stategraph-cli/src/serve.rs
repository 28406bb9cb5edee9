//! `stategraph serve`: LangGraph's Agent Server HTTP API over the database.

use stategraph::OpenOptions;
use stategraph::server::{Database, Server};
use stategraph::{DynState, END, Map, Reducer, START, Schema, StateGraph, value};

use crate::{Failure, fail};

/// What `serve` listens on and guards with.
pub(crate) struct ServeArgs {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) api_key: Option<String>,
    pub(crate) cors: Vec<String>,
    pub(crate) allow_private_webhooks: bool,
    /// Worker loops (`None`: the server's default).
    pub(crate) workers: Option<u16>,
    /// How long the runs executing here go on once stopped.
    pub(crate) shutdown_grace: std::time::Duration,
}

/// The example two-node graph, as the `agent_server` example serves it: `foo` (last value),
/// `bar` (appended); START → node_a → node_b → END.
fn seed_graph() -> Result<stategraph::CompiledGraph<DynState>, Failure> {
    let mut g = StateGraph::<DynState>::with_schema(
        Schema::new()
            .last_value("foo")
            .reducer("bar", Reducer::append()),
    );
    for (node, tag) in [("node_a", "a"), ("node_b", "b")] {
        g.add_node(node, move |_s, _c| async move {
            Ok(Map::from_iter([
                ("foo", value!(tag)),
                ("bar", value!([tag])),
            ]))
        });
    }
    g.add_edge(START, "node_a")
        .add_edge("node_a", "node_b")
        .add_edge("node_b", END);
    g.compile().map_err(fail)
}

/// `sleep`: START → sleep (waits the `seconds` of its input, 1 by default, 0 to 60) →
/// END; `seconds` last value, `done` the ids of the runs that slept (appended).
fn sleep_graph() -> Result<stategraph::CompiledGraph<DynState>, Failure> {
    let mut g = StateGraph::<DynState>::with_schema(
        Schema::new()
            .last_value("seconds")
            .reducer("done", Reducer::append()),
    );
    g.add_node("sleep", |s, c| async move {
        let seconds: f64 = match s.get("seconds") {
            Some(stategraph::Value::Float(f)) => *f,
            Some(stategraph::Value::Int(i)) => *i as f64,
            Some(stategraph::Value::UInt(u)) => *u as f64,
            _ => 1.0,
        };
        let seconds = if seconds.is_finite() {
            seconds.clamp(0.0, 60.0)
        } else {
            1.0
        };
        tokio::time::sleep(std::time::Duration::from_secs_f64(seconds)).await;
        let run = c
            .configurable("run_id")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Ok(Map::from_iter([("done", value!([run]))]))
    });
    g.add_edge(START, "sleep").add_edge("sleep", END);
    g.compile().map_err(fail)
}

/// The graph `serve` serves as `name`.
pub(crate) fn served_graph(name: &str) -> Result<stategraph::CompiledGraph<DynState>, Failure> {
    match name {
        "seed" => seed_graph(),
        "sleep" => sleep_graph(),
        other => Err(format!(
            "`serve` serves no graph `{other}` (it serves seed and sleep; pass --url to ask a server)"
        )),
    }
}

/// Serves until the process is stopped.
pub(crate) async fn run(url: &str, options: OpenOptions, args: ServeArgs) -> Result<(), Failure> {
    // The checkpointer, store and run queue of the database: every process serving it shares
    // its runs, and each run's checkpoint writes are fenced by its lease.
    let builder = Server::builder()
        .database_with(url, options)
        .await
        .map_err(|e| format!("cannot open {}: {}", stategraph::redact_url(url), fail(e)))?;
    let mut builder = builder
        .graph("seed", seed_graph()?)
        .graph("sleep", sleep_graph()?)
        .shutdown_grace(args.shutdown_grace)
        .webhooks(
            stategraph::server::WebhookPolicy::new()
                .allow_private_networks(args.allow_private_webhooks),
        );
    if let Some(key) = args.api_key {
        builder = builder.api_key(key);
    }
    if let Some(n) = args.workers {
        builder = builder.workers(usize::from(n));
    }
    if !args.cors.is_empty() {
        builder = builder.cors(args.cors);
    }
    let server = builder.build().map_err(fail)?;
    let addr = format!("{}:{}", args.host, args.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(fail)?;
    eprintln!(
        "stategraph: serving the Agent Server API on http://{local} (graphs `seed` and `sleep`, database {})",
        stategraph::redact_url(url)
    );
    server
        .serve_until(listener, stopped())
        .await
        .map_err(|e| format!("the server stopped: {}", fail(e)))?;
    tracing::info!("stopped: the requests in flight were answered");
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM (then the server finishes the requests in flight, and the
/// traces still buffered are sent).
async fn stopped() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
