//! LangGraph's Agent Server HTTP API over stategraph graphs, in [axum]: assistants, threads,
//! runs (waited, streamed as server-sent events, or in the background) and thread state, so
//! that LangGraph's own client SDK works against a stategraph process unchanged.
//!
//! Register compiled graphs by name; each gets a default assistant (its id derived from the
//! graph name as LangGraph's server derives it). Assistants, threads' metadata and crons are
//! kept as documents of the [`Store`](stategraph_store::Store) you give, under
//! the namespace root [`NAMESPACE_ROOT`]; runs, and the states they leave their threads
//! with, in the run queue: all of it in the same database as the checkpoints.
//!
//! Runs in flight can be cancelled (`POST /threads/{id}/runs/{run}/cancel`, or a new run with
//! `multitask_strategy` `interrupt` / `rollback`): the run stops at its next await, and is
//! marked `interrupted` with its checkpoints kept, or rolled back (deleted with the
//! checkpoints it wrote), also in bulk (`POST /runs/cancel`) or with their assistant
//! (`DELETE /assistants/{id}`, `?delete_threads=true` deleting its threads too). Any number
//! of clients may join a run's stream (`GET /threads/{id}/runs/{run}/stream`), from any
//! process: a run's events are kept in the run queue for [`DEFAULT_RESUMABLE_TTL`] after it
//! ended ([`ServerBuilder::run_retention`]), and those of a run created with
//! `stream_resumable: true` carry ids (SSE `id`), so a client that lost its connection resumes
//! after its `Last-Event-ID`. Browsers may call the API from any origin unless
//! [`ServerBuilder::cors`] lists them; [`ServerBuilder::api_key`] requires an `x-api-key`.
//!
//! Requests are read as LangGraph's server reads them: a request its schema admits is
//! accepted (an integer field takes `196.0` as `196`; `stream_mode: "events"` streams
//! LangChain-style `on_chain_*` events of the graph and its tasks), one that does not fit is
//! answered 4xx with `{"detail": …}` naming the field. A handler that panics is answered 500
//! with the request's id (its `x-request-id`, or a new one) in the body and the server's
//! standard error, never with a dropped connection.
//!
//! Background runs (`POST /threads/{id}/runs`, stateless ones with `POST /runs` and
//! `POST /runs/batch`), crons (`/runs/crons`: runs on a schedule, fired once per tick across
//! every process sharing the database) and webhooks (a POST of the run to the run's `webhook`
//! when it ends, under a [`WebhookPolicy`] that refuses private addresses by default) are
//! served as LangGraph's server serves them.
//!
//! `GET /openapi.json` is the API's OpenAPI 3.1 document, generated from the handlers' and
//! request types' annotations by the router that serves them; `GET /docs` shows it. `/mcp/`
//! serves every assistant as a tool of an MCP server (streamable HTTP): its input schema is
//! the graph's (the state type's JSON Schema when it derives `schemars::JsonSchema`), and a
//! call is a stateless run answering its output. `/a2a/{assistant_id}` serves every
//! assistant as an agent of the Agent2Agent protocol (JSON-RPC, A2A 1.0 and 0.3): its agent
//! card, messages as runs on a thread (the context), the run's answer as the task's artifact,
//! interrupts as `input-required` tasks that the next message resumes.
//!
//! Every run — on a thread or stateless, waited for, streamed or in the background — goes
//! through one [`RunQueue`](stategraph_runs::RunQueue)
//! ([`ServerBuilder::run_queue`]), the one owner of runs and of the states they leave their
//! threads with (the store keeps assistants, threads' metadata and crons): FIFO per thread,
//! one running run per thread, LangGraph's multitask strategies, leases kept alive by
//! heartbeats, and a log of each run's events that every stream and join reads. A waited or
//! streamed run is claimed at once by the process that received it when it may start;
//! background runs are claimed by worker loops. With a queue on a database
//! (`stategraph_sqlite::SqliteRunQueue`, `stategraph_postgres::PostgresRunQueue`), several
//! server processes share it: a run whose process died is taken over by another worker from
//! its last checkpoint, a process that shuts down gives its runs back
//! ([`ServerBuilder::shutdown_grace`]), and cancels and joins work from any process. A
//! server over a database but without a queue refuses to build ([`BuildError::NoRunQueue`]):
//! runs kept in one process's memory would be invisible to the others on that database.
//!
//! ```
//! use std::sync::Arc;
//! use stategraph_checkpoint::{InMemorySaver, Map, value};
//! use stategraph_graph::{DynState, END, Reducer, START, Schema, StateGraph};
//! use stategraph_server::Server;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let schema = Schema::new().last_value("foo").reducer("bar", Reducer::append());
//! let mut graph = StateGraph::<DynState>::with_schema(schema);
//! graph.add_node("node_a", |_s, _ctx| async {
//!     Ok(Map::from_iter([("foo", value!("a")), ("bar", value!(["a"]))]))
//! });
//! graph.add_edge(START, "node_a").add_edge("node_a", END);
//!
//! // One process, everything in memory (give a database's saver, store and run queue to
//! // share threads and runs with other processes).
//! let server = Server::builder()
//!     .graph("seed", graph.compile()?)
//!     .checkpointer(Arc::new(InMemorySaver::new()))
//!     .build()?;
//! let router: axum::Router = server.router();
//! # drop(router);
//! // server.serve(tokio::net::TcpListener::bind("127.0.0.1:2024").await?).await?;
//! # Ok(()) }
//! ```

#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::string_slice, clippy::panic)
)]
// On docs.rs (`--cfg docsrs`, nightly), items behind a feature say which.
#![cfg_attr(docsrs, feature(doc_cfg))]
// The features and their `##` comments in the manifest, listed.
#![doc = "\n# Feature flags\n"]
#![doc = document_features::document_features!()]

mod a2a;
mod app;
mod assistants;
mod crons;
mod error;
mod graph;
mod http;
mod input;
mod mcp;
mod messages;
mod panics;
mod prometheus;
mod records;
mod request;
mod run;
mod run_options;
mod stream_event;
#[cfg(feature = "telemetry")]
pub mod telemetry;
mod threads;
mod wanted;
mod webhook;
mod wire;

pub use app::{
    BuildError, DEFAULT_KEEP_ALIVE, MAX_KEEP_ALIVE, MIN_KEEP_ALIVE, Server, ServerBuilder,
};
pub use crons::DEFAULT_CRON_POLL;
pub use error::ApiError;
pub use http::MAX_STORE_TTL_MINUTES;
pub use records::NAMESPACE_ROOT;
pub use run::{DEFAULT_SHUTDOWN_GRACE, DEFAULT_WORKERS};
pub use stream_event::DEFAULT_RESUMABLE_TTL;
pub use threads::DEFAULT_THREAD_TTL_SWEEP;
pub use webhook::WebhookPolicy;
