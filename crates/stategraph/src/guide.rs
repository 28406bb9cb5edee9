//! # The stategraph guide
//!
//! A guide for a Rust developer who knows neither LangGraph nor this project, to be read in
//! order: each chapter builds on the one before. Every Rust snippet in it is compiled and run
//! as a doc test, and every shell snippet is run by the test suite, so what you read here
//! works as written. (The chapters use SQLite, the default feature; one that needs another
//! cargo feature is marked with it, and docs.rs shows them all.)
//!
//! 1. [Your first graph](first_graph/index.html): state, nodes and edges, reducers, conditional edges.
//! 2. [Persistence](persistence/index.html): checkpoints and threads, the backends, conversation memory.
//! 3. [Human-in-the-loop](human_in_the_loop/index.html): interrupt, inspect, approve or edit, resume.
//! 4. [Time travel](time_travel/index.html): history, replay, fork, `update_state`.
//! 5. [The memory store](memory_store/index.html): memories shared across threads, semantic search.
//! 6. [Agents and tools](agents/index.html): chat models, tools, `create_agent` and its middleware, MCP.
//! 7. [The Functional API](functional_api/index.html): entrypoints and tasks instead of a graph.
//! 8. [Serving with the Agent Server](agent_server/index.html): LangGraph's HTTP API, Agent Chat UI, the
//!    SDKs.
//! 9. [Running several processes](scaling_out/index.html): one database, many servers.
//! 10. [Observability](observability/index.html): traces, metrics, logs.
//! 11. [Compatibility with Python LangGraph](python_compatibility/index.html): sharing a database, what
//!     differs and why.
//! 12. [Operating it](operations/index.html): the command line, pruning, encryption.
//!
//! The chapters are Markdown files in the crate's `guide/` directory; they read as well on
//! GitHub as here.

#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
#[doc = include_str!("../guide/01-first-graph.md")]
pub mod first_graph {}

#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
#[doc = include_str!("../guide/02-persistence.md")]
pub mod persistence {}

#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
#[doc = include_str!("../guide/03-human-in-the-loop.md")]
pub mod human_in_the_loop {}

#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
#[doc = include_str!("../guide/04-time-travel.md")]
pub mod time_travel {}

#[cfg(all(feature = "minilm", feature = "openai"))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "minilm", feature = "openai"))))]
#[doc = include_str!("../guide/05-memory-store.md")]
pub mod memory_store {}

#[cfg(all(feature = "agent", feature = "mcp"))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "agent", feature = "mcp"))))]
#[doc = include_str!("../guide/06-agents.md")]
pub mod agents {}

#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
#[doc = include_str!("../guide/07-functional-api.md")]
pub mod functional_api {}

#[cfg(all(feature = "server", feature = "agent", feature = "client"))]
#[cfg_attr(
    docsrs,
    doc(cfg(all(feature = "server", feature = "agent", feature = "client")))
)]
#[doc = include_str!("../guide/08-agent-server.md")]
pub mod agent_server {}

#[cfg(all(feature = "server", feature = "postgres"))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "server", feature = "postgres"))))]
#[doc = include_str!("../guide/09-scaling-out.md")]
pub mod scaling_out {}

#[cfg(all(feature = "server", feature = "otel"))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "server", feature = "otel"))))]
#[doc = include_str!("../guide/10-observability.md")]
pub mod observability {}

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
#[doc = include_str!("../guide/11-python-compatibility.md")]
pub mod python_compatibility {}

#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
#[doc = include_str!("../guide/12-operations.md")]
pub mod operations {}
