//! The graph engine of stategraph: [`StateGraph`] to declare nodes and edges over a state of
//! channels, and [`CompiledGraph`] to run it as Pregel super-steps, checkpointing every step
//! into a thread exactly as LangGraph does (same channels, versions, task ids, checkpoints and
//! pending writes), so that Python LangGraph can read and continue the same threads. The
//! [`functional`] module is LangGraph's other way to write a workflow: plain async functions
//! (an entrypoint) calling durable units of work (tasks) whose results are saved.
//!
//! ```
//! use std::sync::Arc;
//! use stategraph_checkpoint::{InMemorySaver, Map, Value, value};
//! use stategraph_graph::{DynState, END, Reducer, RunConfig, START, Schema, StateGraph};
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let schema = Schema::new().last_value("foo").reducer("bar", Reducer::append());
//! let mut graph = StateGraph::<DynState>::with_schema(schema);
//! graph.add_node("node_a", |_s, _ctx| async {
//!     Ok(Map::from_iter([("foo", value!("a")), ("bar", value!(["a"]))]))
//! });
//! graph.add_node("node_b", |_s, _ctx| async {
//!     Ok(Map::from_iter([("foo", value!("b")), ("bar", value!(["b"]))]))
//! });
//! graph.add_edge(START, "node_a").add_edge("node_a", "node_b").add_edge("node_b", END);
//! let graph = graph.compile()?.with_checkpointer(Arc::new(InMemorySaver::new()));
//!
//! let config = RunConfig::thread("1");
//! let input = Map::from_iter([("foo", value!("")), ("bar", value!([]))]);
//! let out = graph.invoke(input, config.clone()).await?;
//! assert_eq!(out["bar"], value!(["a", "b"]));
//! let history = graph.get_state_history(&config, Default::default()).await?;
//! assert_eq!(history.len(), 4); // input, then one checkpoint per super-step
//! # Ok::<(), stategraph_graph::GraphError>(()) }).unwrap();
//! ```

#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::string_slice, clippy::panic)
)]

mod attempts;
mod cache;
mod call;
mod channel;
mod compiled;
mod config;
mod delta;
mod error;
pub mod functional;
mod graph;
mod handler;
mod head;
pub mod inspect;
mod interrupt;
mod messages;
mod node;
mod overwrite;
mod repair;
mod retry;
mod run;
mod state;
mod step;
pub mod stream;
mod timeout;
mod topology;
mod trace;
mod trace_store;
mod update;

pub use cache::{CACHE_NS_WRITES, CachePolicy, default_key};
pub use channel::{ChannelSpec, Reducer, ReducerFn};
pub use compiled::{CompiledGraph, DEFAULT_STATE_CACHE, SubgraphPersistence};
pub use config::{
    Context, DEFAULT_RECURSION_LIMIT, Durability, HistoryOptions, PregelTask, RunConfig,
    StateSnapshot,
};
pub use error::{GraphError, NodeError, NodeErrorSource};
pub use graph::{ConditionalEdges, END, IoSchema, NodeDefaults, PathMapEntry, START, StateGraph};
pub use handler::{DEFAULT_ERROR_HANDLER, NodeFailure, error_handler_node};
pub use interrupt::{Interrupt, Resume};
pub use messages::REMOVE_ALL_MESSAGES;
pub use node::{Command, Goto, NodeContext, NodeFuture, NodeOutput, RunCommand, SEND_ARG, Send};
pub use overwrite::Overwrite;
pub use repair::{ChannelRepair, RepairPlan};
pub use retry::{RetryOn, RetryPolicies, RetryPolicy, default_retry_on};
pub use run::GraphOutput;
#[doc(hidden)]
pub use state::__schema;
pub use state::{DynState, Managed, Schema, State, Values, from_value, to_value};
#[doc(hidden)]
pub use state::{read_field, reuse_field, reuse_vec_field, write_field};
pub use stream::{
    CheckpointEvent, DebugEvent, DebugPayload, MessageEvent, RunStream, STREAM_CAPACITY,
    StreamEvent, StreamMode, SubgraphEvent, TaskEvent, TaskResult, TaskStart, UpdatesEvent,
    ValuesEvent,
};
pub use timeout::{NodeTimeoutError, RefreshOn, TimeoutKind, TimeoutPolicy};
pub use topology::{DrawAsciiError, DrawingJsonError, DrawnEdge, NodeNotes, Topology, Xray};
pub use update::{AsNode, StateUpdate};
