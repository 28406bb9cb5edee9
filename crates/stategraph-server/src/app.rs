//! The server: its builder, shared state and routes.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use stategraph_checkpoint::CheckpointSaver;
use stategraph_checkpoint::store::{InMemoryStore, Store};
use stategraph_graph::{CompiledGraph, State};
use tokio::net::TcpListener;
use tokio::sync::OnceCell;

use crate::graph::ServedGraph;
use crate::records::Records;
use crate::{assistants, meta, runs, store_api, threads};

/// Why a [`ServerBuilder`] could not build.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No graph was registered.
    #[error("the server has no graph: register one with `ServerBuilder::graph`")]
    NoGraph,
    /// Neither the server nor a graph has a checkpointer.
    #[error("graph `{0}` has no checkpointer: give one with `ServerBuilder::checkpointer`")]
    NoCheckpointer(String),
}

/// Builds a [`Server`]: graphs by name, the checkpointer and the store they share.
#[derive(Default)]
pub struct ServerBuilder {
    graphs: Vec<(String, Registered)>,
    saver: Option<Arc<dyn CheckpointSaver>>,
    store: Option<Arc<dyn Store>>,
}

/// A graph before the shared checkpointer and store are attached.
type Registered = Box<
    dyn FnOnce(Option<Arc<dyn CheckpointSaver>>, Option<Arc<dyn Store>>) -> Arc<dyn ServedGraph>
        + Send,
>;

impl ServerBuilder {
    /// Serves `graph` as graph `graph_id`, with a default assistant of the same name.
    pub fn graph<S: State>(mut self, graph_id: impl Into<String>, graph: CompiledGraph<S>) -> Self {
        let attach: Registered = Box::new(move |saver, store| {
            let mut g = graph;
            if let Some(s) = saver {
                g = g.with_checkpointer(s);
            }
            if let Some(s) = store {
                g = g.with_store(s);
            }
            Arc::new(g)
        });
        let id = graph_id.into();
        self.graphs.retain(|(g, _)| *g != id);
        self.graphs.push((id, attach));
        self
    }

    /// The checkpointer every graph saves its threads with.
    pub fn checkpointer(mut self, saver: Arc<dyn CheckpointSaver>) -> Self {
        self.saver = Some(saver);
        self
    }

    /// The store that keeps the server's threads, assistants and runs, also handed to the
    /// graphs' nodes (default: an in-memory store).
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The server.
    ///
    /// # Errors
    /// [`BuildError::NoGraph`] without graphs; [`BuildError::NoCheckpointer`] when no
    /// checkpointer was given.
    pub fn build(self) -> Result<Server, BuildError> {
        if self.graphs.is_empty() {
            return Err(BuildError::NoGraph);
        }
        let Some(saver) = self.saver else {
            let first = self.graphs.into_iter().next().map(|g| g.0);
            return Err(BuildError::NoCheckpointer(first.unwrap_or_default()));
        };
        let store: Arc<dyn Store> = match self.store {
            Some(s) => s,
            None => Arc::new(InMemoryStore::new()),
        };
        let graphs = self
            .graphs
            .into_iter()
            .map(|(id, attach)| {
                (
                    id,
                    attach(Some(Arc::clone(&saver)), Some(Arc::clone(&store))),
                )
            })
            .collect();
        Ok(Server {
            state: Arc::new(AppState {
                graphs,
                records: Records::new(store),
                saver,
                assistants_ready: OnceCell::new(),
                thread_records: tokio::sync::Mutex::new(()),
                thread_runs: std::sync::Mutex::new(BTreeMap::new()),
            }),
        })
    }
}

/// An Agent Server over registered graphs; see the [crate] docs.
#[derive(Clone)]
pub struct Server {
    state: Arc<AppState>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("graphs", &self.state.graphs.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// What every handler shares.
pub(crate) struct AppState {
    pub(crate) graphs: BTreeMap<String, Arc<dyn ServedGraph>>,
    pub(crate) records: Records,
    pub(crate) saver: Arc<dyn CheckpointSaver>,
    pub(crate) assistants_ready: OnceCell<()>,
    /// Held while a run reads and rewrites a thread's record (its status, values, config).
    pub(crate) thread_records: tokio::sync::Mutex<()>,
    /// Per thread with runs in flight: the lock its runs take in turn (one run per thread at
    /// a time), and how many runs are pending or running.
    thread_runs: std::sync::Mutex<BTreeMap<String, ThreadTurns>>,
}

/// A thread's run lock and how many of its runs are pending or running.
type ThreadTurns = (Arc<tokio::sync::Mutex<()>>, usize);

impl AppState {
    /// Counts a new run on `thread_id`; the lock it takes before it starts.
    pub(crate) fn enter_thread(&self, thread_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut runs = self.thread_runs.lock().unwrap_or_else(|e| e.into_inner());
        let slot = runs
            .entry(thread_id.to_owned())
            .or_insert_with(|| (Arc::new(tokio::sync::Mutex::new(())), 0));
        slot.1 += 1;
        Arc::clone(&slot.0)
    }

    /// Counts a run on `thread_id` as finished; how many are still pending or running.
    pub(crate) fn leave_thread(&self, thread_id: &str) -> usize {
        let mut runs = self.thread_runs.lock().unwrap_or_else(|e| e.into_inner());
        let left = match runs.get_mut(thread_id) {
            Some(slot) => {
                slot.1 = slot.1.saturating_sub(1);
                slot.1
            }
            None => 0,
        };
        if left == 0 {
            runs.remove(thread_id);
        }
        left
    }
}

/// The shared state as handlers extract it.
pub(crate) type Shared = axum::extract::State<Arc<AppState>>;

impl Server {
    /// A builder.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// The API's routes, to serve or to nest in a larger application.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/ok", get(meta::ok))
            .route("/info", get(meta::info))
            .route("/assistants/search", post(assistants::search))
            .route("/assistants/count", post(assistants::count))
            .route("/assistants/{assistant_id}", get(assistants::get_one))
            .route("/assistants/{assistant_id}/graph", get(assistants::graph))
            .route("/threads", post(threads::create))
            .route("/threads/search", post(threads::search))
            .route("/threads/count", post(threads::count))
            .route("/threads/{thread_id}/copy", post(threads::copy))
            .route(
                "/threads/{thread_id}",
                get(threads::get_one)
                    .patch(threads::patch)
                    .delete(threads::delete),
            )
            .route(
                "/threads/{thread_id}/state",
                get(threads::get_state).post(threads::update_state),
            )
            .route(
                "/threads/{thread_id}/state/checkpoint",
                post(threads::post_state_at),
            )
            .route(
                "/threads/{thread_id}/state/{checkpoint_id}",
                get(threads::get_state_at),
            )
            .route("/threads/{thread_id}/history", post(threads::history))
            .route(
                "/threads/{thread_id}/runs",
                get(runs::list).post(runs::create_background),
            )
            .route("/threads/{thread_id}/runs/wait", post(runs::wait_thread))
            .route(
                "/threads/{thread_id}/runs/stream",
                post(runs::stream_thread),
            )
            .route("/threads/{thread_id}/runs/{run_id}", get(runs::get_one))
            .route("/threads/{thread_id}/runs/{run_id}/join", get(runs::join))
            .route(
                "/store/items",
                get(store_api::get_item)
                    .put(store_api::put_item)
                    .delete(store_api::delete_item),
            )
            .route("/store/items/search", post(store_api::search_items))
            .route("/store/namespaces", post(store_api::list_namespaces))
            .route("/runs/wait", post(runs::wait_stateless))
            .route("/runs/stream", post(runs::stream_stateless))
            .fallback(not_found)
            .with_state(Arc::clone(&self.state))
    }

    /// Serves the API on `listener` until the process ends (or the listener fails).
    ///
    /// # Errors
    /// The listener's I/O error.
    pub async fn serve(self, listener: TcpListener) -> std::io::Result<()> {
        axum::serve(listener, self.router()).await
    }
}

/// Unknown paths, answered as the reference server does.
async fn not_found() -> crate::error::ApiError {
    crate::error::ApiError::not_found("Not Found")
}
