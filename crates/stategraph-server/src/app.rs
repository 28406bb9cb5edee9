//! The server: its builder, shared state and routes.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use stategraph_checkpoint::CheckpointSaver;
use stategraph_graph::{CompiledGraph, State};
use stategraph_runs::{FencingSaver, InMemoryRunQueue, RunQueue};
use stategraph_store::{InMemoryStore, Store};
use tokio::net::TcpListener;
use tokio::sync::OnceCell;

use crate::error::ApiError;
use crate::graph::ServedGraph;
use crate::records::Records;
use crate::run::{DEFAULT_SHUTDOWN_GRACE, DEFAULT_WORKERS, Runs};
use crate::stream_event::DEFAULT_RESUMABLE_TTL;

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
    /// The checkpointer or the store keeps its data where other processes may open it, and
    /// no run queue was given: runs would be kept in this process's memory, where another
    /// process sharing the database cannot see them (it would run a second run on a busy
    /// thread, and fire each cron tick again).
    #[error(
        "the server's checkpointer or store is a database other processes may open, but it \
         has no run queue: give it the run queue of the same database \
         (`ServerBuilder::run_queue`; with the `stategraph` crate, `stategraph::open_run_queue(url)`), \
         or, to run as one process only, an in-memory queue explicitly \
         (`.run_queue(InMemoryRunQueue::new())`)"
    )]
    NoRunQueue,
}

/// Builds a [`Server`]: graphs by name, the checkpointer and the store they share.
#[derive(Default)]
pub struct ServerBuilder {
    graphs: Vec<(String, Registered)>,
    saver: Option<Arc<dyn CheckpointSaver>>,
    fencing: Option<Arc<dyn FencingSaver>>,
    store: Option<Arc<dyn Store>>,
    cors: Cors,
    api_key: Option<String>,
    keep_alive: Option<std::time::Duration>,
    resumable_ttl: Option<std::time::Duration>,
    queue: Option<Arc<dyn RunQueue>>,
    workers: Option<usize>,
    webhooks: Option<crate::webhook::WebhookPolicy>,
    cron_poll: Option<std::time::Duration>,
    run_retention: Option<std::time::Duration>,
    shutdown_grace: Option<std::time::Duration>,
    thread_ttl_sweep: Option<std::time::Duration>,
}

/// How often, by default, a quiet run stream sends a `: heartbeat` comment and `runs/wait` a
/// newline (LangGraph's server: every 5 seconds).
pub const DEFAULT_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(5);

/// The shortest keep-alive interval [`ServerBuilder::keep_alive`] takes (a zero interval
/// would send keep-alives without end).
pub const MIN_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_millis(10);

/// The longest keep-alive interval [`ServerBuilder::keep_alive`] takes (one day: a longer
/// one keeps nothing alive, and timers cannot reach past some point).
pub const MAX_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// Which origins browsers may call the API from.
#[derive(Clone, Debug, Default)]
pub(crate) enum Cors {
    /// Any origin, without credentials (the default, as `langgraph dev`).
    #[default]
    Any,
    /// These origins, with credentials.
    Origins(Vec<String>),
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

    /// Serves the Functional API workflow `workflow` as graph `graph_id`, with a default
    /// assistant of the same name, as LangGraph's server serves an `@entrypoint`: a run's
    /// `input` is the workflow's argument (any JSON value), and its thread's values, its
    /// `values` stream and its `runs/wait` answer are what the workflow returned (`null`
    /// before it returned); `command.resume` answers its interrupts.
    ///
    /// ```
    /// use stategraph_graph::functional::entrypoint;
    /// use stategraph_graph::NodeError;
    /// let greet = entrypoint("greet", |name: String, _ctx| async move {
    ///     Ok::<_, NodeError>(format!("hello, {name}"))
    /// });
    /// let server = stategraph_server::Server::builder().entrypoint("greet", greet);
    /// # drop(server);
    /// ```
    pub fn entrypoint<I, O>(
        self,
        graph_id: impl Into<String>,
        workflow: stategraph_graph::functional::Entrypoint<I, O>,
    ) -> Self {
        self.graph(graph_id, CompiledGraph::from(workflow))
    }

    /// The checkpointer every graph saves its threads with. A run's checkpoint writes are
    /// not conditioned on its lease (fencing) unless the checkpointer is given with
    /// [`fencing_checkpointer`](Self::fencing_checkpointer).
    pub fn checkpointer(mut self, saver: Arc<dyn CheckpointSaver>) -> Self {
        self.saver = Some(saver);
        self.fencing = None;
        self
    }

    /// The checkpointer every graph saves its threads with, one that can condition a run's
    /// writes on the run's lease in the queue ([`FencingSaver`]: `SqliteSaver`,
    /// `PostgresSaver` on the run queue's database). Each run then writes through
    /// [`FencingSaver::fenced`], so a worker that stalled past its lease (a pause, a frozen
    /// VM) writes nothing once another took its run over.
    pub fn fencing_checkpointer(mut self, saver: Arc<dyn FencingSaver>) -> Self {
        self.saver = Some(Arc::clone(&saver) as Arc<dyn CheckpointSaver>);
        self.fencing = Some(saver);
        self
    }

    /// The store that keeps the server's threads, assistants and runs, also handed to the
    /// graphs' nodes (default: an in-memory store).
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Lets browsers call the API from these origins only (e.g. `https://app.example.com`),
    /// with credentials. By default any origin may, without credentials, as `langgraph dev`
    /// allows. Either way preflight `OPTIONS` requests are answered, every method and request
    /// header is allowed, and `x-pagination-total`, `x-pagination-next` and `content-location`
    /// are exposed.
    pub fn cors<I, O>(mut self, origins: I) -> Self
    where
        I: IntoIterator<Item = O>,
        O: Into<String>,
    {
        let origins: Vec<String> = origins.into_iter().map(Into::into).collect();
        self.cors = if origins.iter().any(|o| o == "*") {
            Cors::Any
        } else {
            Cors::Origins(origins)
        };
        self
    }

    /// Requires header `x-api-key` equal to `key` (compared in constant time) on every route
    /// but `GET /ok` and `GET /info`; other requests are answered 403 `{"detail": …}`, as
    /// LangGraph's server answers failed authentication. LangGraph's SDK sends the header
    /// from its `api_key` argument or `LANGGRAPH_API_KEY`.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// How often a run stream with nothing to send sends a `: heartbeat` comment, and
    /// `runs/wait` a newline before its JSON answer, so that proxies and clients keep the
    /// connection open (default [`DEFAULT_KEEP_ALIVE`], as LangGraph's server). Taken
    /// between [`MIN_KEEP_ALIVE`] and [`MAX_KEEP_ALIVE`]: a shorter or longer interval is
    /// clamped to them.
    pub fn keep_alive(mut self, every: std::time::Duration) -> Self {
        self.keep_alive = Some(every.clamp(MIN_KEEP_ALIVE, MAX_KEEP_ALIVE));
        self
    }

    /// How long an ended run's events stay readable in the run queue, for clients that join
    /// or reconnect (`GET /threads/{thread_id}/runs/{run_id}/stream` with `Last-Event-ID`),
    /// from any process; default [`DEFAULT_RESUMABLE_TTL`], the reference's
    /// `RESUMABLE_STREAM_TTL_SECONDS` (the default of [`run_retention`](Self::run_retention)).
    pub fn resumable_stream_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.resumable_ttl = Some(ttl);
        self
    }

    /// Runs every run through `queue`, the one owner of the server's runs: their records
    /// (what `GET /threads/{thread_id}/runs` lists), their order (FIFO per thread, one
    /// running run per thread, LangGraph's multitask strategies), their events (what every
    /// stream and join reads, from any process), how they are stopped and how they end, and
    /// what they leave their threads with (status, values, interrupts, error). A waited or
    /// streamed run is claimed at once by the process that received it when it may start;
    /// background runs (`POST /threads/{thread_id}/runs`, `POST /runs`, crons) and runs that
    /// waited their turn are claimed by the worker loops of whichever process
    /// ([`workers`](Self::workers) each). A claim is a lease kept alive by heartbeats: with a
    /// queue shared by several processes (`stategraph_sqlite::SqliteRunQueue` on one file,
    /// `stategraph_postgres::PostgresRunQueue` on one database), a run whose process died is
    /// taken over by another worker once its lease ran out, from the run's last checkpoint
    /// (the tasks of the interrupted step that finished are not run again), and cancels and
    /// joins reach a run wherever it runs. Give every process the checkpointer, store and
    /// queue of the same database.
    ///
    /// Without a queue, a server whose checkpointer and store keep everything in this
    /// process's memory keeps its runs in an [`InMemoryRunQueue`]; one over a database other
    /// processes may open refuses to build ([`BuildError::NoRunQueue`]): give it the queue of
    /// that database, or an `InMemoryRunQueue` explicitly to run as one process only.
    ///
    /// The queue also claims each due tick of a cron
    /// ([`OnceKeys::claim_once`](stategraph_runs::OnceKeys::claim_once)), so that
    /// with a queue shared by several processes each tick makes one run.
    pub fn run_queue(mut self, queue: impl RunQueue + 'static) -> Self {
        self.queue = Some(Arc::new(queue));
        self
    }

    /// [`run_queue`](Self::run_queue), shared.
    pub fn run_queue_arc(mut self, queue: Arc<dyn RunQueue>) -> Self {
        self.queue = Some(queue);
        self
    }

    /// How many runs of the [`run_queue`](Self::run_queue) this process's worker loops
    /// execute at once (default [`DEFAULT_WORKERS`], 10, as the
    /// reference server's `N_JOBS_PER_WORKER`; at least 1); runs a caller follows that this
    /// process claimed at once are not counted.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = Some(n.max(1));
        self
    }

    /// Which `webhook` URLs runs and crons may give, and how they are called when a run
    /// ends (default [`WebhookPolicy::new`](crate::WebhookPolicy::new): public addresses
    /// only, 3 tries).
    pub fn webhooks(mut self, policy: crate::webhook::WebhookPolicy) -> Self {
        self.webhooks = Some(policy);
        self
    }

    /// How often, at most, the cron scheduler of this process looks for due crons (default
    /// [`DEFAULT_CRON_POLL`](crate::DEFAULT_CRON_POLL); at least 10 ms). A cron created or
    /// changed through this process is looked at at once; one changed through another
    /// process within this interval.
    pub fn cron_poll(mut self, every: std::time::Duration) -> Self {
        self.cron_poll = Some(every.max(std::time::Duration::from_millis(10)));
        self
    }

    /// How long an ended run keeps its events in the [`run_queue`](Self::run_queue), for
    /// clients that join it or resume its stream (`Last-Event-ID`) from any process; then
    /// every process that started purges them (the run, which `GET /threads/{thread_id}/runs`
    /// lists, stays with its thread). Default: the
    /// [`resumable_stream_ttl`](Self::resumable_stream_ttl) (LangGraph's server keeps a
    /// run's events that long).
    pub fn run_retention(mut self, keep: std::time::Duration) -> Self {
        self.run_retention = Some(keep);
        self
    }

    /// How long a process that shuts down ([`Server::serve_until`]'s signal) lets the runs it
    /// executes go on before it stops them and gives them back to the run queue, for another
    /// process to carry on from their last checkpoint (default [`DEFAULT_SHUTDOWN_GRACE`],
    /// 10 s). No run is claimed here once the shutdown began.
    pub fn shutdown_grace(mut self, grace: std::time::Duration) -> Self {
        self.shutdown_grace = Some(grace);
        self
    }

    /// How often this process looks for threads whose TTL ran out (given with
    /// `POST /threads` or `PATCH /threads/{thread_id}` as `ttl: {"strategy", "ttl"}`,
    /// minutes without a run, a state update or a change of the thread): `delete` deletes
    /// such a thread with its runs and checkpoints, `keep_latest` its checkpoints but the
    /// latest (LangGraph's `sweep_interval_minutes`; default
    /// [`DEFAULT_THREAD_TTL_SWEEP`](crate::DEFAULT_THREAD_TTL_SWEEP), at least 10 ms).
    pub fn thread_ttl_sweep(mut self, every: std::time::Duration) -> Self {
        self.thread_ttl_sweep = Some(every.max(std::time::Duration::from_millis(10)));
        self
    }

    /// The server.
    ///
    /// # Errors
    /// [`BuildError::NoGraph`] without graphs; [`BuildError::NoCheckpointer`] when no
    /// checkpointer was given; [`BuildError::NoRunQueue`] when a store was given without a
    /// run queue.
    pub fn build(self) -> Result<Server, BuildError> {
        if self.graphs.is_empty() {
            return Err(BuildError::NoGraph);
        }
        let Some(saver) = self.saver else {
            let first = self.graphs.into_iter().next().map(|g| g.0);
            return Err(BuildError::NoCheckpointer(first.unwrap_or_default()));
        };
        // Runs may stay in this process's memory only where nothing else does not: another
        // process opening the same threads would not see them.
        let local = saver.process_local() && self.store.as_ref().is_none_or(|s| s.process_local());
        let queue: Arc<dyn RunQueue> = match self.queue {
            Some(q) => q,
            None if local => Arc::new(InMemoryRunQueue::new()),
            None => return Err(BuildError::NoRunQueue),
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
        let resumable_ttl = self.resumable_ttl.unwrap_or(DEFAULT_RESUMABLE_TTL);
        Ok(Server {
            state: Arc::new(AppState {
                graphs,
                records: Records::new(store),
                saver,
                fencing: self.fencing,
                assistants_ready: OnceCell::new(),
                keep_alive: self.keep_alive.unwrap_or(DEFAULT_KEEP_ALIVE),
                runs: Runs::new(
                    queue,
                    self.workers.unwrap_or(DEFAULT_WORKERS),
                    self.shutdown_grace.unwrap_or(DEFAULT_SHUTDOWN_GRACE),
                    self.run_retention.unwrap_or(resumable_ttl),
                ),
                webhooks: Arc::new(crate::webhook::Webhooks::new(
                    self.webhooks.unwrap_or_default(),
                )),
                crons: crate::crons::Scheduler::new(
                    self.cron_poll.unwrap_or(crate::crons::DEFAULT_CRON_POLL),
                ),
                thread_ttl: crate::threads::TtlSweeper::new(
                    self.thread_ttl_sweep
                        .unwrap_or(crate::threads::DEFAULT_THREAD_TTL_SWEEP),
                ),
            }),
            cors: self.cors,
            api_key: self.api_key,
        })
    }
}

/// An Agent Server over registered graphs; see the [crate] docs.
#[derive(Clone)]
pub struct Server {
    state: Arc<AppState>,
    cors: Cors,
    api_key: Option<String>,
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
    /// The same checkpointer, when it can fence a run's writes by the run's lease.
    pub(crate) fencing: Option<Arc<dyn FencingSaver>>,
    pub(crate) assistants_ready: OnceCell<()>,
    /// How often quiet streams and waits send keep-alives.
    pub(crate) keep_alive: std::time::Duration,
    /// The run queue every run goes through, and this process's side of it.
    pub(crate) runs: Runs,
    /// Where and how runs' webhooks are called.
    pub(crate) webhooks: Arc<crate::webhook::Webhooks>,
    /// This process's cron scheduler.
    pub(crate) crons: crate::crons::Scheduler,
    /// This process's sweeper of threads past their TTL.
    pub(crate) thread_ttl: crate::threads::TtlSweeper,
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
        crate::http::router(&self.state, &self.cors, self.api_key.as_deref())
    }

    /// Starts this process's worker loops on the [run queue](ServerBuilder::run_queue), its
    /// subscription to it and its upkeep (once; [`start`](Self::start) and the first request
    /// do it).
    pub fn spawn_workers(&self) {
        crate::run::workers::spawn(&self.state);
    }

    /// Gets this process ready to serve, once, before it answers requests: the default
    /// assistants exist, thread states kept by an earlier version in the store are moved to
    /// the run queue, the worker loops run ([`spawn_workers`](Self::spawn_workers)), and so
    /// do the cron scheduler (crons fire only in processes that started), the sweeper of
    /// ended runs' events past the [retention](ServerBuilder::run_retention) and the sweeper
    /// of threads past their TTL. Nothing of another process's runs is touched: the run
    /// queue is their one owner. [`serve`](Self::serve) calls it; call it yourself (within a
    /// Tokio runtime) when serving [`router`](Self::router) another way.
    ///
    /// # Errors
    /// The store's or the run queue's error.
    pub async fn start(&self) -> Result<(), ApiError> {
        crate::assistants::ensure(&self.state).await?;
        crate::threads::import_legacy_states(&self.state).await?;
        self.spawn_workers();
        crate::crons::spawn_scheduler(&self.state);
        crate::threads::spawn_ttl_sweeper(&self.state);
        Ok(())
    }

    /// Drains this process (what [`serve_until`](Self::serve_until) does once its signal
    /// came): no run is claimed here any more; the runs executing here get the
    /// [grace](ServerBuilder::shutdown_grace) to end, then the rest are stopped and given
    /// back to the run queue, for another process to carry on from their last checkpoint.
    /// Returns once no run executes here.
    pub async fn drain(&self) {
        crate::run::workers::drain(&self.state).await;
    }

    /// Serves the API on `listener` until the process ends (or the listener fails), after
    /// [`start`](Self::start); as [`serve_until`](Self::serve_until) with a signal that never
    /// comes.
    ///
    /// # Errors
    /// The listener's I/O error, or [`start`](Self::start)'s as an I/O error.
    pub async fn serve(self, listener: TcpListener) -> std::io::Result<()> {
        self.serve_until(listener, std::future::pending()).await
    }

    /// Serves the API on `listener` after [`start`](Self::start), until `shutdown` resolves
    /// (then the requests in flight are answered and it returns) or the listener fails.
    ///
    /// With feature `otel`, when `OTEL_EXPORTER_OTLP_ENDPOINT` is set and the process has no
    /// `tracing` subscriber yet, it installs [`telemetry`](crate::telemetry) (logs and trace
    /// export) for the time it serves, and sends the traces still buffered when it returns.
    ///
    /// # Errors
    /// The listener's I/O error, or [`start`](Self::start)'s as an I/O error.
    pub async fn serve_until(
        self,
        listener: TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        #[cfg(feature = "otel")]
        let telemetry = match crate::telemetry::otlp_endpoint_from_env() {
            Some(_) if !tracing::dispatcher::has_been_set() => {
                crate::telemetry::init(crate::telemetry::TelemetryOptions::new()).ok()
            }
            _ => None,
        };
        self.start()
            .await
            .map_err(|e| std::io::Error::other(format!("cannot start the server: {}", e.detail)))?;
        use axum::serve::ListenerExt;
        // Responses go out in several writes (SSE events, `runs/wait`'s keep-alive newline
        // before its JSON): without TCP_NODELAY, Nagle's algorithm holds the last write back
        // until the client's delayed ACK, ~40 ms per request.
        let listener = listener.tap_io(|tcp| {
            // Best effort: a socket that refuses it still works, only slower.
            let _ = tcp.set_nodelay(true);
        });
        // Once the signal comes: no more connections, and the runs executing here end (or go
        // back to the queue) while the answers in flight (which follow runs wherever they
        // execute) are finished.
        let state = Arc::clone(&self.state);
        let (drained_tx, drained) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async move {
            shutdown.await;
            tokio::spawn(async move {
                crate::run::workers::drain(&state).await;
                let _ = drained_tx.send(());
            });
        };
        let served = axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await;
        // The runs executing here have ended or gone back to the queue (at once when the
        // signal never came: the sender is gone).
        let _ = drained.await;
        #[cfg(feature = "otel")]
        if let Some(t) = telemetry {
            t.shutdown();
        }
        served
    }
}
