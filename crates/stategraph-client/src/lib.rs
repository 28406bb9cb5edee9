//! A typed client of the LangGraph Agent Server API — the routes the Python SDK uses —
//! and [`RemoteGraph`], LangGraph's way to use a deployed graph as a graph of your own or
//! as a node of a local graph. It speaks to stategraph's server and to LangGraph's alike.
//!
//! ```no_run
//! # async fn demo() -> stategraph_client::Result<()> {
//! use serde_json::json;
//! use stategraph_client::{Client, RemoteGraph};
//!
//! let client = Client::new("http://127.0.0.1:2024")?;
//! let seed = RemoteGraph::new("seed", client.clone());
//! let out = seed.invoke(json!({"foo": "", "bar": []}), None).await?;
//! assert_eq!(out.values["bar"], json!(["a", "b"]));
//! let drawing = client.assistant_graph("seed", stategraph_graph::Xray::Off).await?;
//! println!("{}", drawing.draw_mermaid());
//! # Ok(()) }
//! ```
//!
//! As a node, with the remote graph's interrupts becoming the local run's:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use stategraph_checkpoint::{InMemorySaver, Map, Value};
//! use stategraph_client::{Client, RemoteGraph};
//! use stategraph_graph::{DynState, END, Reducer, Resume, RunConfig, START, Schema, StateGraph};
//!
//! let remote = RemoteGraph::new("chat", Client::new("http://127.0.0.1:2024")?);
//! let mut graph =
//!     StateGraph::<DynState>::with_schema(Schema::new().reducer("messages", Reducer::add_messages()));
//! graph.add_node("remote", remote.node::<DynState>());
//! graph.add_edge(START, "remote").add_edge("remote", END);
//! let graph = graph.compile()?.with_checkpointer(Arc::new(InMemorySaver::new()));
//! let config = RunConfig::thread("t1");
//! let input = Map::from_iter([("messages", Value::from("hi"))]);
//! graph.invoke_values(input, config.clone()).await?; // stops on the remote's interrupt
//! graph.resume(Resume::Value(Value::from("yes")), config).await?; // the remote goes on
//! # Ok(()) }
//! ```

mod client;
mod error;
mod forward;
mod remote;
mod sse;
mod types;

pub use client::{Client, RunEvents};
pub use error::{ClientError, Result};
pub use remote::{RemoteGraph, RemoteOutput};
pub use types::{
    Assistant, RemoteInterrupt, RunRequest, StateTask, StreamPart, Thread, ThreadState,
};
